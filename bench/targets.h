/* SPDX-License-Identifier: MIT */
/*
 * targets.h - memkit's targets, judged from the measured rows.
 */
#ifndef BENCH_TARGETS_H
#define BENCH_TARGETS_H

#include <stdio.h>

/** Print the "targets" section (MET / MISSED / not measured, with the worst
 *  measured figure) to @p out and write <dir>/targets.csv (if @p dir). */
void targets_report(FILE *out, const char *dir);

#endif /* BENCH_TARGETS_H */
