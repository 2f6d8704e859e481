/* SPDX-License-Identifier: MIT */
/*
 * measure.c - the alternating run loop (see measure.h), and the allocators'
 * one-time initialisation.
 *
 * Run r of every allocator happens before run r + 1 of any, so a slow
 * minute of the machine spreads over all columns instead of landing on
 * one.  Nothing is allocated inside the loop: the samples live in a static
 * table, so the bench's own bookkeeping never runs between an allocator's
 * runs.
 */
#include "measure.h"

#include <stdio.h>

static double samples[1 + BENCH_MAX_PARTS][BA_COUNT][BENCH_MAX_RUNS];

static signed char state[BA_COUNT]; /* 0 unknown, 1 ready, -1 not */
static const char *reason[BA_COUNT];

void bench_alloc_leave_out(int id, const char *why)
{
    state[id] = -1;
    reason[id] = why;
}

int bench_alloc_ready(int id, const char **why)
{
    if (!state[id]) {
        const bench_alloc *a = bench_alloc_get(id);
        reason[id] = "";
        state[id] = !a->init || a->init(&reason[id]) == 0 ? 1 : -1;
        if (!reason[id])
            reason[id] = "?";
    }
    if (why)
        *why = reason[id];
    return state[id] > 0;
}

int bench_measure_parts(bench_row **rows, int nparts, unsigned needs,
                        const bench_kernel_fn *kernel_for, const void *job, int runs)
{
    int failed[BA_COUNT] = {0}, mismatch = 0, have_check = 0;
    uint64_t check = 0;
    if (runs > BENCH_MAX_RUNS)
        runs = BENCH_MAX_RUNS;
    if (nparts > BENCH_MAX_PARTS)
        nparts = BENCH_MAX_PARTS;

    for (int r = 0; r < runs; r++) {
        for (int a = 0; a < BA_COUNT; a++) {
            if (!bench_alloc_joins(a, needs) || failed[a])
                continue;
            bench_sample s = {0};
            kernel_for[a](job, &s);
            if (s.failed || !s.ops) {
                failed[a] = 1;
                continue;
            }
            samples[0][a][r] = (double)s.ns / (double)s.ops;
            for (int k = 0; k < nparts; k++)
                samples[1 + k][a][r] = (double)s.part_ns[k] / (double)s.ops;
            if (!have_check) {
                check = s.check;
                have_check = 1;
            } else if (s.check != check) {
                mismatch = 1;
            }
        }
    }

    int rc = 0;
    for (int a = 0; a < BA_COUNT; a++) {
        if (!bench_alloc_joins(a, needs))
            continue;
        for (int k = 0; k <= nparts; k++) {
            if (failed[a])
                report_note(rows[k], "%s: allocation failed", bench_alloc_get(a)->name);
            else
                report_set(rows[k], a, samples[k][a], runs);
        }
        if (failed[a])
            rc = -1;
    }
    if (mismatch) {
        for (int k = 0; k <= nparts; k++)
            report_note(rows[k], "CHECKSUM MISMATCH: data read back differs");
        rc = -1;
    }
    return rc;
}

int bench_measure(bench_row *row, unsigned needs, const bench_kernel_fn *kernel_for,
                  const void *job, int runs)
{
    return bench_measure_parts(&row, 0, needs, kernel_for, job, runs);
}
