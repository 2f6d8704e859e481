/* SPDX-License-Identifier: MIT */
/*
 * w5_contexts.c - W5: 10,000 contexts, each holding ten 64-byte chunks.
 *
 * The question: what does a context cost when it holds a few chunks?  A
 * program with one context per request, per query or per object creates
 * many of them.  Each allocator builds the same tree: a root, 10,000
 * children of it, ten 64-byte chunks in each child, every chunk written in
 * full; then drops it all, the way a program on that allocator would:
 *   memkit    root: a GENERAL context; children: contexts of the column's
 *             kind (mk-general: GENERAL, mk-slab: SLAB of 64-byte chunks,
 *             ...); mk_ctx_delete(root) deletes everything.
 *   talloc    talloc_new(root) children; talloc_free(root).
 *   apr       apr_pool_create(&c, root) children; apr_pool_destroy(root).
 *   mimalloc  10,000 independent heaps (no hierarchy); mi_heap_destroy each.
 *   malloc    no contexts at all: 100,000 malloc(64), then free each - the
 *             floor, what the data costs with no per-context structure.
 *
 * Two measurements:
 *  time  in this process, alternating allocators, median of the runs: the
 *        create+fill phase, the delete phase, and their sum, in ms for the
 *        whole tree, all three from the same runs.  Each run first builds
 *        and deletes the same tree untimed, then does it again timed: the
 *        figures are those of a program that makes such trees back to back
 *        (reusing the memory it just freed), neither the first touch of
 *        fresh memory nor memory given back to the OS since.  The warm-up
 *        matters for memkit: its kinds share one page pool, and pages that
 *        another kind's run left empty are given back to the OS
 *        (purge_delay_ms) at the next page release - without the warm-up,
 *        mk-general's timed delete would pay for mk-slab's pages.
 *  RSS   in a fresh process per figure (as the RSS workload): VmRSS before
 *        (the bench's own baseline: binary, libraries, the pre-faulted
 *        pointer arrays), the growth while the tree is built, and the total
 *        VmRSS with the tree live ("W5 total RSS", a target's figure), in
 *        MiB; the summary, the verdict and the chart count the growth only
 *        (the baseline is the bench's, the total their sum: ROW_INFO).
 * The pointers to the children and chunks are kept in mmap'ed arrays for
 * every allocator (malloc and mimalloc need them to free; the others get
 * them and ignore them, so the work is the same).
 */
#include <stdio.h>
#include <string.h>

#include "alloc_iface.h"
#include "bench.h"
#include "measure.h"
#include "report.h"
#include "sys.h"
#include "timing.h"

#define W5_CTX 10000u
#define W5_PER 10u
#define W5_SIZE 64u
#define W5_CHUNKS (W5_CTX * W5_PER)
#define MiB (1024.0 * 1024.0)

typedef struct w5_job {
    void **kids;   /* W5_CTX slots */
    void **chunks; /* W5_CHUNKS slots */
} w5_job;

/* Build the tree: root, W5_CTX children, W5_PER written chunks in each.
 * Returns the root, or NULL (what was made is then dropped). */
static inline __attribute__((always_inline)) void *
w5_build(const bench_alloc *a, void **kids, void **chunks)
{
    void *root = a->tree_new();
    if (!root)
        return NULL;
    size_t nk = 0, nc = 0;
    for (size_t c = 0; c < W5_CTX; c++) {
        void *k = a->child_new(root, W5_SIZE);
        if (BENCH_UNLIKELY(!k))
            goto fail;
        kids[nk++] = k;
        for (size_t i = 0; i < W5_PER; i++) {
            unsigned char *p = a->alloc(k, W5_SIZE);
            if (BENCH_UNLIKELY(!p))
                goto fail;
            memset(p, (int)((c + i) & 0xff), W5_SIZE);
            chunks[nc++] = p;
        }
    }
    return root;
fail:
    a->tree_delete(root, kids, nk, chunks, nc);
    return NULL;
}

/* A checksum of the chunks (one byte of each): the data is read back. */
static uint64_t w5_check(void **chunks)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < W5_CHUNKS; i++)
        sum += ((const unsigned char *)chunks[i])[W5_SIZE - 1 - i % W5_SIZE];
    return sum;
}

BENCH_KERNEL w5_kernel(const bench_alloc *a, const void *jp, bench_sample *out)
{
    const w5_job *j = jp;
    /* the warm-up: the same tree, built and deleted untimed */
    void *warm = w5_build(a, j->kids, j->chunks);
    if (!warm) {
        out->failed = 1;
        return;
    }
    a->tree_delete(warm, j->kids, W5_CTX, j->chunks, W5_CHUNKS);

    uint64_t t0 = bench_now_ns();
    void *root = w5_build(a, j->kids, j->chunks);
    uint64_t t1 = bench_now_ns();
    if (!root) {
        out->failed = 1;
        return;
    }
    out->check = w5_check(j->chunks); /* untimed */
    uint64_t t2 = bench_now_ns();
    a->tree_delete(root, j->kids, W5_CTX, j->chunks, W5_CHUNKS);
    uint64_t t3 = bench_now_ns();

    out->part_ns[0] = t1 - t0;
    out->part_ns[1] = t3 - t2;
    out->ns = (t1 - t0) + (t3 - t2);
    out->ops = 1000000; /* ns / 10^6: the figures are in ms */
}
BENCH_SPECIALIZE(w5_kernel);

int bench_w5_child(const bench_alloc *a)
{
    void **kids = bench_buf_new(W5_CTX * sizeof(void *));
    void **chunks = bench_buf_new(W5_CHUNKS * sizeof(void *));
    size_t before = bench_sys_rss();
    void *root = w5_build(a, kids, chunks);
    size_t after = bench_sys_rss();
    if (!root)
        return 3;
    printf("%zu %zu %llu\n", before, after, (unsigned long long)w5_check(chunks));
    fflush(stdout);
    return 0; /* the tree dies with the process */
}

static void w5_time(const bench_opts *o)
{
    int sec = report_section("W5", "time", "ms", 0,
                             "ms for the whole tree: create 10,000 contexts (children of "
                             "one root; mimalloc: heaps) and write ten 64-byte chunks in "
                             "each, then delete them all (malloc: 100,000 malloc(64), then "
                             "free each); each run first builds and deletes the tree once "
                             "untimed");
    w5_job job = {.kids = bench_buf_new(W5_CTX * sizeof(void *)),
                  .chunks = bench_buf_new(W5_CHUNKS * sizeof(void *))};
    report_progress("W5 time: %d runs", o->runs);
    bench_row *build = report_row(sec, "create+fill", W5_SIZE, 0, W5_CHUNKS);
    bench_row *del = report_row(sec, "delete all", W5_SIZE, 0, W5_CHUNKS);
    bench_row *total = report_row(sec, "total", W5_SIZE, 0, W5_CHUNKS);
    bench_row *rows[3] = {total, build, del}; /* ns, part_ns[0], part_ns[1] */
    bench_measure_parts(rows, 2, BJ_W5, w5_kernel_for, &job, o->runs);
    bench_buf_free(job.kids, W5_CTX * sizeof(void *));
    bench_buf_free(job.chunks, W5_CHUNKS * sizeof(void *));
}

static void w5_rss(const bench_opts *o)
{
    static double fig[3][BA_COUNT][BENCH_MAX_RUNS];
    int runs = o->runs > BENCH_MAX_RUNS ? BENCH_MAX_RUNS : o->runs;
    int sec = report_section("W5", "rss", "MiB", 0,
                             "VmRSS of a fresh process holding the tree (10,000 contexts x "
                             "ten 64-byte chunks; malloc: 100,000 chunks, no contexts): "
                             "baseline before (binary, libraries, pointer arrays), growth, "
                             "total (MiB = 2^20 bytes)");
    int failed[BA_COUNT] = {0};
    for (int r = 0; r < runs; r++) {
        report_progress("W5 rss: run %d of %d", r + 1, runs);
        for (int a = 0; a < BA_COUNT; a++) {
            size_t before, after;
            if (failed[a] || !bench_alloc_joins(a, BJ_W5))
                continue;
            if (bench_child_spawn("w5", bench_alloc_get(a), 0, &before, &after) != 0) {
                failed[a] = 1;
                continue;
            }
            fig[0][a][r] = (double)before / MiB;
            fig[1][a][r] = (after > before ? (double)(after - before) : 0) / MiB;
            fig[2][a][r] = (double)after / MiB;
        }
    }
    static const char *cells[3] = {"baseline", "growth", "total"};
    for (int k = 0; k < 3; k++) {
        bench_row *row = report_row(sec, cells[k], W5_SIZE, 0, W5_CHUNKS);
        if (k != 1) /* the process's own baseline, and the sum: the growth is the tree's */
            row->flags |= ROW_INFO;
        for (int a = 0; a < BA_COUNT; a++) {
            if (!bench_alloc_joins(a, BJ_W5))
                continue;
            if (failed[a])
                report_note(row, "%s: child failed", bench_alloc_get(a)->name);
            else
                report_set(row, a, fig[k][a], runs);
        }
    }
}

void bench_w5(const bench_opts *o)
{
    w5_time(o);
    w5_rss(o);
    report_progress_end();
}
