/* SPDX-License-Identifier: MIT */
/*
 * w6_threads.c - W6, malloc under threads, each drop-in at 1, 2 and 4
 * threads (--threads sets other counts), three patterns (the kernels are
 * in malloc/):
 *
 *  larson    a Larson-style server: each thread holds 8,192 live objects
 *            of random sizes (16..1024 B; ~4 MiB per thread), frees a
 *            random one and allocates a replacement, and every 256
 *            operations hands a batch of 32 of its objects to the next
 *            thread, which frees them (malloc/larson.c).
 *  prodcons  producer/consumer pairs (threads / 2 of them; one thread
 *            alone plays both parts): the producer mallocs objects of
 *            random sizes and passes them through a bounded lock-free ring
 *            to the consumer, which frees them (malloc/prodcons.c).
 *  churn     threads created and joined in a loop, `threads` at a time;
 *            each frees what the previous round's neighbour left it,
 *            allocates 256 objects, frees 3 in 4 and leaves the rest to
 *            the next round's neighbour (malloc/churn.c).
 *
 * Figures: throughput in millions of mallocs per second (each matched by
 * a free), ratio allocator / glibc (> 1: faster); and the peak RSS of the
 * child process, ratio allocator / glibc (< 1: smaller), both from the
 * same runs.  The work is fixed (the same operations, sizes and hand-offs
 * for every allocator, seeded), not the time, so that the RSS figures
 * compare the same work too.  The children are not pinned to the bench's
 * CPU: they get every CPU the bench had at start.  With more threads than
 * cores (4 threads on a 2-core machine) the figures include the
 * scheduler's doing - the same for every allocator, but noisier.
 */
#include <stdio.h>

#include "bench.h"
#include "dropin.h"
#include "report.h"

static const struct pattern {
    const char *name, *arg, *extra; /* extra: another parameter, or NULL */
    unsigned long long ops_quick, ops_full; /* mallocs per run, all threads */
    const char *about;
} patterns[] = {
    {"larson", "w6-larson", "live=8192", 2000000, 8000000,
     "Larson-style server: per thread 8,192 live objects of 16..1024 B, free a random one "
     "and malloc a replacement; every 256 operations 32 objects go to the next thread, "
     "which frees them"},
    {"prodcons", "w6-prodcons", NULL, 1000000, 4000000,
     "producer/consumer pairs (1 thread: both parts in turn): malloc objects of 16..1024 B, "
     "pass them through a bounded ring, free them in the other thread"},
    {"churn", "w6-churn", NULL, 200000, 800000,
     "threads created and joined in a loop, N at a time: each frees what the previous "
     "round left it, mallocs 256 objects of 16..1024 B, frees 3 in 4, leaves the rest to "
     "the next round"},
};
#define NPATTERN (sizeof patterns / sizeof patterns[0])

void bench_w6(const bench_opts *o)
{
    const char *why = "";
    const char *prog = bench_dropin_program(&why);
    int cell = 0, total = (int)NPATTERN * o->nthreads;
    for (size_t pi = 0; pi < NPATTERN; pi++) {
        const struct pattern *pat = &patterns[pi];
        unsigned long long ops = o->full ? pat->ops_full : pat->ops_quick;
        char about[320], rname[32];
        snprintf(about, sizeof about, "%s; %llu mallocs per run; millions of mallocs (each "
                 "with its free) per second", pat->about, ops);
        int sec = report_section_vs("W6", pat->name, "Mops/s", BD_COL(BD_glibc),
                                    REPORT_HIGHER_BETTER, REPORT_DROPIN | REPORT_SPEED, about);
        snprintf(rname, sizeof rname, "%s-rss", pat->name);
        int rsec = report_section_vs("W6", rname, "MiB", BD_COL(BD_glibc),
                                     REPORT_LOWER_BETTER, REPORT_DROPIN | REPORT_MEMORY,
                                     "peak RSS of the whole child process (its VmHWM), "
                                     "from the same runs");
        for (int ti = 0; ti < o->nthreads; ti++) {
            int n = o->threads[ti];
            char name[40], a_threads[32], a_ops[32];
            snprintf(name, sizeof name, "%d thread%s", n, n > 1 ? "s" : "");
            report_progress("W6 %s %s: cell %d of %d", pat->name, name, ++cell, total);
            bench_row *row = report_row(sec, name, 0, 0, ops);
            bench_row *rrow = report_row(rsec, name, 0, 0, ops);
            row->threads = rrow->threads = n;
            if (!prog) {
                report_note(row, "%s", why);
                report_note(rrow, "%s", why);
                continue;
            }
            snprintf(a_threads, sizeof a_threads, "threads=%d", n);
            snprintf(a_ops, sizeof a_ops, "ops=%llu", ops);
            const char *argv[] = {prog, pat->arg, a_threads, a_ops, pat->extra, NULL};
            bench_dropin_job job = {.argv = argv, .unpin = 1, .speed = BS_MOPS,
                                    .profile_mode = 1};
            bench_dropin_measure(row, rrow, &job, o->runs);
        }
    }
    report_progress_end();
}
