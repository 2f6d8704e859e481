/* SPDX-License-Identifier: MIT */
/*
 * bench.h - what the driver (main.c) and the workloads share: the options
 * and the workloads' entry points.
 *
 * A workload is one function that runs its cells, alternating the
 * allocators run by run, and records one row per cell in the report
 * (report.h).  It prints progress on stderr and nothing on stdout: the
 * driver prints the tables.  Adding a workload is one file and one line in
 * main.c's table of workloads.
 */
#ifndef BENCH_H
#define BENCH_H

#include <stddef.h>
#include <stdint.h>

/* W6's --threads list: at most this many counts, each 1..BENCH_MAX_THREADS */
#define BENCH_MAX_THREAD_COUNTS 8
#define BENCH_MAX_THREADS 256

typedef struct bench_opts {
    int full;            /* --full: the whole grid and more runs */
    int runs;            /* runs per figure (the median of them is shown) */
    uint64_t w1_min_ops; /* least allocations timed in one W1 measurement */
    const char *csv_dir; /* where the CSV files go */
    int nthreads;        /* W6's thread counts (--threads; 1, 2, 4 by default) */
    int threads[BENCH_MAX_THREAD_COUNTS];
} bench_opts;

/** W1: PostgreSQL's palloc test (w1_palloc.c). */
void bench_w1(const bench_opts *o);

/** W1's cells: the bytes a cell of @p n chunks of @p chunk bytes may need
 *  at worst (its pointer array and glibc's footprint), to skip the cells
 *  that would not fit in memory (w1_palloc.c). */
size_t bench_w1_cell_need(size_t chunk, size_t n);

/** W2: Godot's Variant pool test (w2_pool.c). */
void bench_w2(const bench_opts *o);

/** RSS: resident memory for 1,000,000 live 24- and 48-byte chunks (rss.c). */
void bench_rss(const bench_opts *o);

/** W5: 10,000 contexts each holding ten 64-byte chunks (w5_contexts.c). */
void bench_w5(const bench_opts *o);

/* ---- the malloc drop-ins, a child process per figure (dropin.h) ---- */

/** W1M: W1 free-oldest through malloc/free (w1m_malloc.c). */
void bench_w1m(const bench_opts *o);

/** W2M: W2 through malloc/free (w2m_malloc.c). */
void bench_w2m(const bench_opts *o);

/** W6: multi-threaded malloc: Larson server, producer/consumer, thread
 *  churn, at 1, 2 and 4 threads (w6_threads.c). */
void bench_w6(const bench_opts *o);

/** W7: real programs (perl, python3, ruby, sqlite3, gcc, clang) on each drop-in (w7_programs.c). */
void bench_w7(const bench_opts *o);

/** W8: large blocks, 64 KiB..32 MiB (w8_large.c). */
void bench_w8(const bench_opts *o);

/** W3: FORM's sort buffers - a 512 MiB peak, then 64-byte churn, then a
 *  quiet phase: RSS over time, and the churn's time (w3_peak.c). */
void bench_w3(const bench_opts *o);

/* ---- fresh processes for RSS figures (rss.c) ---- */
struct bench_alloc;

/** The body of `memkit-bench --child WHAT ALLOCATOR [SIZE]`, the fresh
 *  process bench_child_spawn() starts; returns the exit status. */
int bench_child_main(int argc, char **argv);

/** Run measurement @p what ("rss", "w5") of allocator @p a in a fresh
 *  process; its VmRSS before and after in bytes.  0, or -1 on failure. */
int bench_child_spawn(const char *what, const struct bench_alloc *a, size_t size,
                      size_t *before, size_t *after);

/** W5's child body: build the tree, print "before after check". */
int bench_w5_child(const struct bench_alloc *a);

/** W3's in-process child body (`--child w3 ALLOCATOR [OPS]`): the W3
 *  kernel on a context of allocator @p id, @p ops churn operations (0: the
 *  default); prints the line memkit-bench-malloc prints (w3_peak.c). */
int bench_w3_child(int id, unsigned long long ops);

#endif /* BENCH_H */
