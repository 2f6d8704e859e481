/* SPDX-License-Identifier: MIT */
/*
 * w8_large.c - W8, large blocks through malloc/free, under each drop-in:
 * random sizes from 64 KiB to 32 MiB (log-uniform), 4 live at a time,
 * each allocated, touched (one write per 4 KiB page) and, 4 iterations
 * later, read back and freed; the kernel is malloc/large.c's `w8`.
 *
 * What it shows: how an allocator gets and gives back big blocks.  glibc
 * maps and unmaps them (above its mmap threshold) and so pays a page fault
 * for every page of every block; an allocator that keeps freed pages
 * mapped saves the faults and holds more memory.  Hence two figures from
 * the same runs: microseconds per iteration (ratio glibc / allocator) and
 * the peak RSS of the process (ratio allocator / glibc).  A 4 KiB page is
 * assumed for the touch; on a larger-page system it touches every page
 * more than once, the same for every allocator.
 */
#include <stdio.h>

#include "bench.h"
#include "dropin.h"
#include "report.h"

void bench_w8(const bench_opts *o)
{
    const char *why = "";
    const char *prog = bench_dropin_program(&why);
    const unsigned iters = o->full ? 1000 : 200;
    char about[320], ops[32];
    snprintf(about, sizeof about,
             "microseconds per iteration: free the oldest of 4 live blocks, malloc one of "
             "64 KiB..32 MiB (log-uniform), write one byte per 4 KiB page; %u iterations",
             iters);
    int sec = report_section_vs("W8", "time", "us/iter", BD_COL(BD_glibc), REPORT_LOWER_BETTER,
                                REPORT_DROPIN | REPORT_SPEED, about);
    int rsec = report_section_vs("W8", "peak-rss", "MiB", BD_COL(BD_glibc),
                                 REPORT_LOWER_BETTER, REPORT_DROPIN | REPORT_MEMORY,
                                 "peak RSS of the whole child process (its VmHWM), from "
                                 "the same runs; the 4 live blocks hold ~22 MiB on average");
    const char *cell = "64KiB-32MiB, 4 live";
    bench_row *row = report_row(sec, cell, 0, 0, iters);
    bench_row *rrow = report_row(rsec, cell, 0, 0, iters);
    if (!prog) {
        report_note(row, "%s", why);
        report_note(rrow, "%s", why);
        return;
    }
    report_progress("W8 %s", cell);
    snprintf(ops, sizeof ops, "ops=%u", iters);
    const char *argv[] = {prog, "w8", "live=4", ops, NULL};
    bench_dropin_job job = {.argv = argv, .speed = BS_US_PER_OP};
    bench_dropin_measure(row, rrow, &job, o->runs);
    report_progress_end();
}
