/*
 * legend.h - what each workload code (W1, W1M, W3-ctx, RSS ...) means, in
 * one place: a short label for the verdict and the chart, and a sentence
 * for the legend the report prints before any table uses the codes.
 */
#ifndef BENCH_LEGEND_H
#define BENCH_LEGEND_H

#include <stdio.h>

/** A few words for @p code ("palloc test", "10,000 small contexts"), for
 *  the verdict and the chart; "" for a code it does not know. */
const char *legend_label(const char *code);

/** One sentence for @p code, for the legend and --help; "" if unknown. */
const char *legend_what(const char *code);

/** Print the legend: every workload code with its sentence ("  W1
 *  PostgreSQL's palloc test: ..."), those of this run first, the others
 *  marked as not in it (the header and the claims may name them). */
void legend_print(FILE *out);

/** Every code with its sentence, wrapped at 80 columns (--help). */
void legend_help(FILE *out);

#endif /* BENCH_LEGEND_H */
