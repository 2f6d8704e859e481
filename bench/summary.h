/* SPDX-License-Identifier: MIT */
/*
 * summary.h - the few lines that open and close a bench report: for each
 * family (contexts, pools, the malloc drop-in), memkit against the system
 * malloc and the best installed peer, and the cells where memkit loses.
 */
#ifndef BENCH_SUMMARY_H
#define BENCH_SUMMARY_H

#include <stdio.h>

/** Print the summary of every row recorded so far to @p out. */
void summary_print(FILE *out);

#endif /* BENCH_SUMMARY_H */
