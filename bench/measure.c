/*
 * measure.c - the alternating run loop (see measure.h).
 *
 * Run r of every allocator happens before run r + 1 of any, so a slow
 * minute of the machine spreads over all columns instead of landing on
 * one.  Nothing is allocated inside the loop: the samples live in a static
 * table, so the bench's own bookkeeping never runs between an allocator's
 * runs.
 */
#include "measure.h"

#include <stdio.h>

static double samples[BA_COUNT][BENCH_MAX_RUNS];

int bench_measure(bench_row *row, unsigned needs, const bench_kernel_fn *kernel_for,
                  const void *job, int runs)
{
    int failed[BA_COUNT] = {0}, mismatch = 0, have_check = 0;
    uint64_t check = 0;
    if (runs > BENCH_MAX_RUNS)
        runs = BENCH_MAX_RUNS;

    for (int r = 0; r < runs; r++) {
        for (int a = 0; a < BA_COUNT; a++) {
            if ((bench_alloc_get(a)->caps & needs) != needs || failed[a])
                continue;
            bench_sample s = {0};
            kernel_for[a](job, &s);
            if (s.failed || !s.ops) {
                failed[a] = 1;
                continue;
            }
            samples[a][r] = (double)s.ns / (double)s.ops;
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
        if ((bench_alloc_get(a)->caps & needs) != needs)
            continue;
        if (failed[a]) {
            snprintf(row->note, sizeof row->note, "%s: allocation failed",
                     bench_alloc_get(a)->name);
            rc = -1;
        } else {
            report_set(row, a, samples[a], runs);
        }
    }
    if (mismatch) {
        snprintf(row->note, sizeof row->note, "CHECKSUM MISMATCH: data read back differs");
        rc = -1;
    }
    return rc;
}
