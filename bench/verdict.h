/*
 * verdict.h - the first screen of a bench report: in a dozen lines, what
 * memkit wins and loses against the system allocator and each installed
 * peer, per family (contexts, pools, drop-in), time and memory.
 */
#ifndef BENCH_VERDICT_H
#define BENCH_VERDICT_H

#include <stdio.h>

/** Print the verdict of every row recorded so far to @p out; @p warning,
 *  if not NULL, is printed with it (a busy machine). */
void verdict_print(FILE *out, const char *warning);

#endif /* BENCH_VERDICT_H */
