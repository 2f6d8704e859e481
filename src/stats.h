/* SPDX-License-Identifier: MIT */
/*
 * stats.h - process-wide figures and the reports built on them (stats.c):
 * the top of the library, reading every layer, called by none of them.
 */
#ifndef MKI_STATS_H
#define MKI_STATS_H

#include "ctx/ctx.h"

#pragma GCC visibility push(hidden)

/* ---- stats.c --------------------------------------------------------------- */
/* Print the process figures (malloc_stats, MEMKIT_STATS) to @fd, without
 * allocating: as "memkit: name value" lines, or as one JSON object. */
void mki_stats_print_process(int fd);
void mki_stats_json_process(int fd);

#pragma GCC visibility pop

#endif /* MKI_STATS_H */
