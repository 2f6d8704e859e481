/*
 * bench.h - what the driver (main.c) and the workloads share: the options
 * and the workloads' entry points.
 *
 * A workload is one function that runs its cells, alternating the
 * allocators run by run, and records one row per cell in the report
 * (report.h).  It prints progress on stderr and nothing on stdout: the
 * driver prints the tables.  Adding a workload (W5 in issue 3) is one file
 * and one line in main.c's table of workloads.
 */
#ifndef BENCH_H
#define BENCH_H

#include <stdint.h>

typedef struct bench_opts {
    int full;            /* --full: the whole grid and more runs */
    int runs;            /* runs per figure (the median of them is shown) */
    uint64_t w1_min_ops; /* least allocations timed in one W1 measurement */
    const char *csv_dir; /* where the CSV files go */
} bench_opts;

/** W1: PostgreSQL's palloc test (w1_palloc.c). */
void bench_w1(const bench_opts *o);

/** W2: Godot's Variant pool test (w2_pool.c). */
void bench_w2(const bench_opts *o);

/** RSS: resident memory for 1,000,000 live 24-byte chunks (rss.c). */
void bench_rss(const bench_opts *o);

/** The body of the fresh process bench_rss() starts for one measurement
 *  (`memkit-bench --rss-child NAME`); returns the exit status. */
int bench_rss_child(const char *alloc_name);

#endif /* BENCH_H */
