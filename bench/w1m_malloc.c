/* SPDX-License-Identifier: MIT */
/*
 * w1m_malloc.c - W1M, W1's free-oldest pattern (PostgreSQL's palloc test)
 * through malloc/free, under each malloc drop-in: chunk sizes 8..1024
 * bytes x live memory 1 KiB..64 MiB (--full: ..1 GiB), live / chunk chunks
 * in a ring, each new chunk (first and last byte written) freeing the
 * oldest; the fill is untimed, then max(M, n) allocations are timed (M as
 * in W1: 2M quick, 10M full).  The kernel is malloc/main.c's `w1m`, the
 * in-process W1 kernel with malloc and free in the place of the context
 * calls; one child process per figure (dropin.h).
 *
 * This is the grid that judges "no workload more than 5% slower than
 * glibc through malloc" most finely; its large cells (4-64 MiB live x
 * 256 B-1 KiB chunks) were memkit's weakest in W1, so any subset of the
 * grid a shorter suite may take must keep them.  The peak RSS of the cells
 * from 4 MiB live up is a second table (same runs): memory per live byte
 * through malloc, the whole process included.
 *
 * Cells that would not fit in memory are skipped with a note, as in W1.
 */
#include <stdio.h>

#include "bench.h"
#include "dropin.h"
#include "report.h"
#include "sys.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)
#define GiB (1024 * MiB)

static const size_t chunk_sizes[] = {8, 16, 32, 64, 128, 256, 512, 1024};
static const size_t lives_quick[] = {1 * KiB, 16 * KiB, 256 * KiB, 4 * MiB, 64 * MiB};
static const size_t lives_full[] = {1 * KiB,  16 * KiB,  256 * KiB, 4 * MiB,
                                    64 * MiB, 256 * MiB, 1 * GiB};
#define NCHUNK (sizeof chunk_sizes / sizeof chunk_sizes[0])
#define RSS_FROM (4 * MiB) /* the RSS table: cells with at least this live */

void bench_w1m(const bench_opts *o)
{
    const size_t *lives = o->full ? lives_full : lives_quick;
    size_t nlive = o->full ? sizeof lives_full / sizeof lives_full[0]
                           : sizeof lives_quick / sizeof lives_quick[0];
    const char *why = "";
    const char *prog = bench_dropin_program(&why);
    int total = (int)(nlive * NCHUNK), cell = 0;
    int sec = report_section_vs(
        "W1M", "free-oldest", "ns/alloc", BD_COL(BD_glibc), REPORT_LOWER_BETTER,
        REPORT_DROPIN | REPORT_SPEED,
        "ns per allocation through malloc/free (a child process per figure, the drop-in "
        "preloaded), steady state: malloc + touch a chunk, free the oldest (ring of "
        "live/chunk pointers; the fill is not timed)");
    int rsec = report_section_vs(
        "W1M", "peak-rss", "MiB", BD_COL(BD_glibc), REPORT_LOWER_BETTER,
        REPORT_DROPIN | REPORT_MEMORY,
        "peak RSS of the whole child process (its VmHWM), the cells from 4 MiB live, "
        "from the same runs; the ring of pointers (live/chunk x 8 bytes) is counted too, the "
        "same for every allocator");
    for (size_t li = 0; li < nlive; li++) {
        for (size_t ci = 0; ci < NCHUNK; ci++) {
            size_t chunk = chunk_sizes[ci], live = lives[li];
            size_t n = live / chunk ? live / chunk : 1;
            uint64_t ops = n > o->w1_min_ops ? n : o->w1_min_ops;
            char cs[16], ls[16], name[40];
            snprintf(name, sizeof name, "%s x %s", report_size(chunk, cs, sizeof cs),
                     report_size(live, ls, sizeof ls));
            report_progress("W1M %s: cell %d of %d", name, ++cell, total);
            bench_row *row = report_row(sec, name, chunk, live, ops);
            bench_row *rrow = live >= RSS_FROM ? report_row(rsec, name, chunk, live, ops) : NULL;
            size_t need = bench_w1_cell_need(chunk, n), avail = bench_sys_mem_available();
            if (!prog || (avail && need > avail / 10 * 8)) {
                if (!prog)
                    snprintf(row->note, sizeof row->note, "%s", why);
                else
                    snprintf(row->note, sizeof row->note,
                             "skipped: needs ~%.1f GiB, %.1f GiB available",
                             need / (double)GiB, avail / (double)GiB);
                if (rrow)
                    snprintf(rrow->note, sizeof rrow->note, "%s", row->note);
                continue;
            }
            char a_size[32], a_live[32], a_ops[32];
            snprintf(a_size, sizeof a_size, "size=%zu", chunk);
            snprintf(a_live, sizeof a_live, "live=%zu", live);
            snprintf(a_ops, sizeof a_ops, "ops=%llu", (unsigned long long)o->w1_min_ops);
            const char *argv[] = {prog, "w1m", a_size, a_live, a_ops, NULL};
            bench_dropin_job job = {.argv = argv, .speed = BS_NS_PER_OP};
            bench_dropin_measure(row, rrow, &job, o->runs);
        }
    }
    report_progress_end();
}
