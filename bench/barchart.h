/*
 * barchart.h - the bench's charts: per family (contexts, pools, drop-in),
 * time and memory, memkit and each installed peer against the system
 * allocator, as SVG files written by the bench itself.
 */
#ifndef BENCH_BARCHART_H
#define BENCH_BARCHART_H

#include <stdio.h>

/** Write <dir>/bench-chart.svg (every family measured) and
 *  <dir>/chart-<family>.svg (each), from the rows recorded so far;
 *  @p subtitle is plain text (the run: suite, date, machine).  Returns how
 *  many files were written, or -1 after saying why on stderr. */
int barchart_write(const char *dir, const char *subtitle);

#endif /* BENCH_BARCHART_H */
