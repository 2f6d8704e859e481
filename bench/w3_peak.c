/* SPDX-License-Identifier: MIT */
/*
 * w3_peak.c - W3, FORM's sort buffers, under each drop-in and each of
 * memkit's purge modes: does resident memory come back down after a peak,
 * how soon, and what does giving it back cost?  The kernel is
 * malloc/peak.h's (memkit-bench-malloc's `w3`):
 *
 *   peak   512 MiB of 1 MiB buffers, malloc'ed and touched (every page);
 *   free   all of them;
 *   churn  8 MiB of 64-byte objects in a ring (131,072 live), then 40M
 *          times: free the oldest, malloc a new one (~0.3 s);
 *   quiet  no allocation: sleep 0.5 s, and at least until 1 s after the
 *          peak; then exit.
 *
 * The child samples its own RSS every 10 ms (a thread reading
 * /proc/self/statm, allocating nothing) and reads it itself at the end of
 * the churn and of the quiet phase.  Figures, each the median of the runs:
 *   rss  (MiB, ratio allocator / glibc, < 1: less):
 *        peak       the child's VmHWM (the 512 MiB are all resident);
 *        peak+1s    the first sample 1 s or more after the peak (the
 *                   moment the last buffer was touched): the
 *                   claim's "1 s after the peak", during the quiet phase
 *                   for every allocator here;
 *        churn end  at the end of the churn (what is left while working);
 *        quiet end  at the end of the quiet phase (what a program that
 *                   went quiet after its peak keeps);
 *   time (ms, ratio glibc / allocator, > 1: faster):
 *        churn      the churn phase (fill + 40M free/malloc), wall time;
 *        churn, 1M steady  the median of the churn's 40 slices of 1M
 *                   free+malloc: the steady pace, without the one-time
 *                   cost of giving memory back (a purge pass on the same
 *                   CPU) and robust to bursts of noise - does purging make
 *                   the work itself slower (pages purged and faulted in
 *                   again, again and again)?
 *        free       the free phase (glibc unmaps its mmap'ed buffers here).
 * Under the tables: memkit's own account (MEMKIT_STATS=json at the child's
 * exit: MiB purged, passes) and the CPU time of the child's other threads
 * during the churn (memkit's purge thread; glibc's figure, a few ms at
 * most, is the RSS sampler's own).
 *
 * The child stays on the bench's CPU (as the other single-threaded
 * drop-in children), so a background thread of the allocator - memkit's
 * purge thread - shares that CPU with the churn: what purging costs is in
 * the churn time.  The columns memkit:off, memkit:dontneed, memkit:free and
 * memkit:unmap are memkit with MEMKIT_PURGE set; `memkit` is its default
 * policy (dontneed, 100 ms delay, background thread), so memkit and
 * memkit:dontneed differ only by noise - a measure of it.
 *
 * Then the same kernel in-process (workload "W3-ctx"): a fresh
 * memkit-bench per figure (`--child w3 ALLOCATOR`, not preloaded) runs it
 * on one context of each allocator that joins BJ_W3 - a GENERAL context
 * (its 1 MiB chunks, freed, then the 64-byte churn in the same context) -
 * and on malloc, the in-process baseline (ratios malloc / X, > 1: better).
 * Do a program's contexts give memory back as the drop-in does?
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_iface.h"
#include "bench.h"
#include "dropin.h"
#include "malloc/peak.h"
#include "measure.h"
#include "report.h"
#include "spawn.h"

#define W3_OPS 40000000ull

/* ---- the in-process child ------------------------------------------------ */

/* One copy of the kernel per allocator, its alloc and free constants. */
#define W3_COPY_(n, arg)                                                      \
    static __attribute__((noinline)) void w3c__##n(const wl_params *p, wl_result *r, \
                                                     void *ctx)                \
    {                                                                         \
        w3_kernel(p, r, ba_##n.alloc, ba_##n.free, ctx);                      \
    }
#define W3_ENTRY_(n, arg) [BA_##n] = w3c__##n,
BENCH_ALLOCATORS(W3_COPY_, _)
static void (*const w3c_for[BA_COUNT])(const wl_params *, wl_result *, void *) = {
    BENCH_ALLOCATORS(W3_ENTRY_, _)};

int bench_w3_child(int id, unsigned long long ops)
{
    const bench_alloc *a = bench_alloc_get(id);
    if (!(a->joins & BJ_W3)) {
        fprintf(stderr, "memkit-bench: --child w3: %s does not join W3\n", a->name);
        return 2;
    }
    wl_params p = {.live = (uint64_t)512 << 20, .ring = (uint64_t)8 << 20,
                   .ops = ops ? ops : W3_OPS, .quiet_ms = 500, .seed = 42};
    wl_result r = {0};
    void *ctx = a->ctx_new(W3_OBJ);
    if (!ctx) {
        fprintf(stderr, "memkit-bench: --child w3: %s: no context\n", a->name);
        return 1;
    }
    w3c_for[id](&p, &r, ctx);
    if (!r.error && r.bad)
        r.error = "objects read back wrong (overlapping or overwritten memory)";
    if (r.error) {
        fprintf(stderr, "memkit-bench: --child w3 %s: %s\n", a->name, r.error);
        return 1;
    }
    printf("ns=%llu ops=%llu check=%llu bad=%llu hwm_kib=%u%s\n", (unsigned long long)r.ns,
           (unsigned long long)r.ops, (unsigned long long)r.check, (unsigned long long)r.bad,
           bench_sampler_hwm_kib(), r.extra);
    fflush(stdout);
    return 0; /* the context dies with the process */
}

/* ---- in-process: the kernel on contexts (W3-ctx) -------------------------- */

/* The line's figures the in-process tables show, and where (a row, or NULL:
 * the footer only). */
enum { F_NS, F_HWM, F_RSS1S, F_CHURN, F_QUIET, F_SLICE, F_FREE, F_OTHER, NF };
static const struct {
    const char *key;
    double scale;
} w3_keys[NF] = {
    [F_NS] = {"ns", 1e-6},           [F_HWM] = {"hwm_kib", 1.0 / 1024},
    [F_RSS1S] = {"rss1s_kib", 1.0 / 1024}, [F_CHURN] = {"churn_kib", 1.0 / 1024},
    [F_QUIET] = {"quiet_kib", 1.0 / 1024}, [F_SLICE] = {"slice_med_us", 1e-3},
    [F_FREE] = {"free_us", 1e-3},    [F_OTHER] = {"other_cpu_us", 1e-3},
};

static void w3_in_process(const bench_opts *o)
{
    static double v[NF][BA_COUNT][BENCH_MAX_RUNS];
    int runs = o->runs > BENCH_MAX_RUNS ? BENCH_MAX_RUNS : o->runs;
    int rsec = report_section("W3-ctx", "rss", "MiB", 0,
                              "W3 in-process, on one context of each allocator (mk-general: a "
                              "GENERAL context holds the 1 MiB chunks, then the 64-byte churn; "
                              "malloc: glibc), each figure from a fresh memkit-bench; the same "
                              "phases and samples as W3");
    int tsec = report_section("W3-ctx", "time", "ms", 0,
                              "wall time of the churn phase, its steady pace (median 1M slice) "
                              "and the free phase, from the same runs");
    bench_row *rows[NF] = {NULL}; /* made in table order */
    rows[F_HWM] = report_row(rsec, "peak", 0, 0, W3_OPS);
    rows[F_RSS1S] = report_row(rsec, "peak+1s", 0, 0, W3_OPS);
    rows[F_CHURN] = report_row(rsec, "churn end", 0, 0, W3_OPS);
    rows[F_QUIET] = report_row(rsec, "quiet end", 0, 0, W3_OPS);
    rows[F_NS] = report_row(tsec, "churn", 0, 0, W3_OPS);
    rows[F_SLICE] = report_row(tsec, "churn, 1M steady", 0, 0, 1000000);
    rows[F_FREE] = report_row(tsec, "free", 0, 0, W3_OPS);
    int failed[BA_COUNT] = {0};
    char a_ops[32];
    snprintf(a_ops, sizeof a_ops, "%llu", W3_OPS);
    for (int r = 0; r < runs; r++) {
        report_progress("W3-ctx in-process: run %d of %d", r + 1, runs);
        for (int a = 0; a < BA_COUNT; a++) {
            if (failed[a] || !bench_alloc_joins(a, BJ_W3))
                continue;
            const char *argv[] = {"/proc/self/exe", "--child", "w3", bench_alloc_get(a)->name,
                                  a_ops, NULL};
            bench_proc p = {.argv = argv, .timeout_s = 60};
            const char *what = bench_proc_run(&p) != 0 ? p.why : NULL;
            for (int k = 0; k < NF && !what; k++) {
                if (bench_proc_figure(p.out, w3_keys[k].key, &v[k][a][r]) != 0)
                    what = "no measurement in its output";
                v[k][a][r] *= w3_keys[k].scale;
            }
            if (what) {
                failed[a] = 1;
                report_note(rows[F_HWM], "%s FAILED (run %d of %d): %s",
                            bench_alloc_get(a)->name, r + 1, runs, what);
                report_note(rows[F_NS], "%s FAILED (run %d of %d): %s",
                            bench_alloc_get(a)->name, r + 1, runs, what);
            }
        }
    }
    report_progress_end();
    int any_other = 0;
    for (int a = 0; a < BA_COUNT; a++) {
        if (failed[a] || !bench_alloc_joins(a, BJ_W3))
            continue;
        for (int k = 0; k < NF; k++)
            if (rows[k])
                report_set(rows[k], a, v[k][a], runs);
        if (!any_other++)
            report_footer(tsec, "CPU ms of the child's threads other than the main one during "
                                "the churn (medians):");
        report_footer(tsec, "  %-16s %7.1f ms", bench_alloc_get(a)->name,
                      bench_median(v[F_OTHER][a], runs));
    }
}

/* ---- W3 ------------------------------------------------------------------ */

void bench_w3(const bench_opts *o)
{
    const char *why = "";
    const char *prog = bench_dropin_program(&why);
    const unsigned long long ops = W3_OPS;
    char about[512];
    snprintf(about, sizeof about,
             "RSS of the whole child: 512 MiB of 1 MiB buffers malloc'ed and touched (peak), "
             "all freed, then 8 MiB of 64-byte objects churned in a ring (%lluM free+malloc), "
             "then 0.5 s with no allocation (at least until 1 s after the peak); sampled every "
             "10 ms from inside the child; memkit:<mode> = memkit with MEMKIT_PURGE=<mode>",
             ops / 1000000);
    int rsec = report_section_vs("W3", "rss", "MiB", BD_COL(BD_glibc), REPORT_LOWER_BETTER,
                                 REPORT_DROPIN | REPORT_MEMORY, about);
    int tsec = report_section_vs("W3", "time", "ms", BD_COL(BD_glibc), REPORT_LOWER_BETTER,
                                 REPORT_DROPIN | REPORT_SPEED,
                                 "wall time of the churn phase (fill + 40M free/malloc; an "
                                 "allocator's background purging runs on the same CPU and is "
                                 "in it), its steady pace (the median of its slices of 1M "
                                 "free+malloc: one-time costs and bursts of noise left out) and "
                                 "the free phase, from the same runs");
    bench_row *peak = report_row(rsec, "peak", 0, 0, ops);
    bench_dropin_figure figs[] = {
        {"rss1s_kib", 1.0 / 1024, NULL, {0}},
        {"churn_kib", 1.0 / 1024, NULL, {0}},
        {"quiet_kib", 1.0 / 1024, NULL, {0}},
        {"slice_med_us", 1.0 / 1000, NULL, {0}},
        {"free_us", 1.0 / 1000, NULL, {0}},
        {"other_cpu_us", 1.0 / 1000, NULL, {0}},
    };
    /* the rows, in table order (other_cpu_us: the footer only) */
    figs[0].row = report_row(rsec, "peak+1s", 0, 0, ops);
    figs[1].row = report_row(rsec, "churn end", 0, 0, ops);
    figs[2].row = report_row(rsec, "quiet end", 0, 0, ops);
    bench_row *churn = report_row(tsec, "churn", 0, 0, ops);
    figs[3].row = report_row(tsec, "churn, 1M steady", 0, 0, 1000000);
    figs[4].row = report_row(tsec, "free", 0, 0, ops);
    if (!prog) {
        report_note(peak, "%s", why);
        report_note(churn, "%s", why);
        w3_in_process(o);
        return;
    }
    report_progress("W3 512 MiB peak, 64-byte churn, quiet (%d runs)", o->runs);
    char a_ops[32];
    snprintf(a_ops, sizeof a_ops, "ops=%llu", ops);
    const char *argv[] = {prog, "w3", "live=536870912", "ring=8388608", a_ops, "quiet_ms=500",
                          NULL};
    bench_dropin_mkstats mk;
    bench_dropin_job job = {.argv = argv, .speed = BS_MS, .purge_modes = 1, .figures = figs,
                            .nfigures = (int)(sizeof figs / sizeof figs[0]), .mkstats = &mk};
    bench_dropin_measure(churn, peak, &job, o->runs);
    report_progress_end();

    /* the background work, and memkit's own account, under the tables */
    report_footer(tsec, "background work during the churn (medians): CPU ms of the child's "
                        "threads other");
    report_footer(tsec, "than the main one (glibc's figure: the RSS sampler's own) and memkit's "
                        "own");
    report_footer(tsec, "account of its purging (MEMKIT_STATS=json at the child's exit):");
    for (int d = 0; d < BD_COUNT; d++) {
        if (!(figs[5].median[d] > 0) && !mk.have[d])
            continue;
        char acct[64] = "";
        if (mk.have[d])
            snprintf(acct, sizeof acct, "  purged %.0f MiB in %.0f passes", mk.purged_mib[d],
                     mk.passes[d]);
        report_footer(tsec, "  %-16s %7.1f ms%s", bench_col_name(BD_COL(d)), figs[5].median[d],
                      acct);
    }

    w3_in_process(o);
}
