/* SPDX-License-Identifier: MIT */
/*
 * targets.h - memkit's performance claims and its engineering targets,
 * judged from the measured rows.
 */
#ifndef BENCH_TARGETS_H
#define BENCH_TARGETS_H

#include <stdio.h>

/** Print the claims (MET / MISSED / not measured, with the worst measured
 *  figure) to @p out, then, if @p show_targets, the engineering targets in
 *  a section of their own (else one line saying how to see them); write
 *  both to <dir>/targets.csv (if @p dir). */
void targets_report(FILE *out, const char *dir, int show_targets);

#endif /* BENCH_TARGETS_H */
