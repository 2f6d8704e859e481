/* SPDX-License-Identifier: MIT */
/*
 * w1_palloc.c - W1, PostgreSQL's palloc benchmark: chunk sizes 8..1024 bytes
 * x live memory 1 KiB..64 MiB (--full: up to 1 GiB), two patterns.
 *
 *  free-oldest  Allocate until `live` bytes are held (n = live / chunk
 *               chunks, in a ring of pointers), then for each new chunk free
 *               the oldest.  The fill is not timed: the figure is the steady
 *               state, ns per (allocate + touch + free the oldest), over
 *               max(min_ops, n) allocations so that every live chunk is
 *               replaced at least once.  Allocators with an individual free:
 *               memkit GENERAL, GENERATION and SLAB (a slab made for the
 *               cell's chunk size), talloc, mimalloc heaps, malloc.
 *  reset        Allocate n chunks, then reset the context, repeated: memkit
 *               mk_ctx_reset (GENERAL, GENERATION, BUMP), talloc
 *               talloc_free_children, APR apr_pool_clear, mimalloc
 *               mi_heap_destroy + mi_heap_new (a heap has no reset), malloc
 *               free every chunk.  One untimed warm-up cycle first (every
 *               allocator then starts from memory it already holds); then
 *               whole cycles are timed until at least min_ops allocations
 *               were made.  The figure is ns per allocation, the reset's
 *               cost included.
 * Every chunk is touched (its first and last byte written) as real data
 * would be; the pointers live in an mmap'ed array outside every allocator.
 *
 * Cells whose memory would not fit (1 GiB of 8-byte chunks costs glibc about
 * 4 GiB plus a 1 GiB pointer array) are skipped with a note, not run into
 * swap or the OOM killer.
 */
#include <stdio.h>
#include <stdlib.h>

#include "alloc_iface.h"
#include "bench.h"
#include "measure.h"
#include "report.h"
#include "sys.h"
#include "timing.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)
#define GiB (1024 * MiB)

typedef struct w1_job {
    size_t chunk;  /* bytes per chunk */
    size_t n;      /* live chunks */
    uint64_t ops;  /* free-oldest: timed allocations; reset: timed cycles */
    void **ring;   /* n slots */
} w1_job;

static inline void touch(void *p, size_t size, uint64_t k)
{
    unsigned char *c = p;
    c[0] = (unsigned char)k;
    c[size - 1] = (unsigned char)(k >> 8);
}

BENCH_KERNEL w1_free_oldest(const bench_alloc *a, const void *jp, bench_sample *out)
{
    const w1_job *j = jp;
    const size_t size = j->chunk, n = j->n;
    void **ring = j->ring;
    size_t held = 0;
    void *ctx = a->ctx_new(size);
    if (!ctx) {
        out->failed = 1;
        return;
    }
    for (; held < n; held++) {
        void *p = a->alloc(ctx, size);
        if (!p)
            goto fail;
        touch(p, size, held);
        ring[held] = p;
    }

    uint64_t t0 = bench_now_ns();
    size_t head = 0; /* the oldest chunk */
    for (uint64_t k = 0; k < j->ops; k++) {
        void *p = a->alloc(ctx, size);
        if (BENCH_UNLIKELY(!p))
            goto fail;
        touch(p, size, k);
        void *old = ring[head];
        ring[head] = p;
        a->free(ctx, old, size);
        if (++head == n)
            head = 0;
    }
    uint64_t t1 = bench_now_ns();

    out->ns = t1 - t0;
    out->ops = j->ops;
    a->destroy(ctx, ring, n);
    return;
fail:
    out->failed = 1;
    a->destroy(ctx, ring, held);
}
BENCH_SPECIALIZE(w1_free_oldest);

BENCH_KERNEL w1_reset(const bench_alloc *a, const void *jp, bench_sample *out)
{
    const w1_job *j = jp;
    const size_t size = j->chunk, n = j->n;
    void **ring = j->ring;
    size_t i = 0;
    void *ctx = a->ctx_new(size);
    if (!ctx) {
        out->failed = 1;
        return;
    }
    for (; i < n; i++) { /* the warm-up cycle */
        void *p = a->alloc(ctx, size);
        if (!p)
            goto fail;
        touch(p, size, i);
        ring[i] = p;
    }
    if (!(ctx = a->reset(ctx, ring, n)))
        goto lost;

    uint64_t t0 = bench_now_ns();
    for (uint64_t c = 0; c < j->ops; c++) {
        for (i = 0; i < n; i++) {
            void *p = a->alloc(ctx, size);
            if (BENCH_UNLIKELY(!p))
                goto fail;
            touch(p, size, i);
            ring[i] = p;
        }
        if (BENCH_UNLIKELY(!(ctx = a->reset(ctx, ring, n))))
            goto lost;
    }
    uint64_t t1 = bench_now_ns();

    out->ns = t1 - t0;
    out->ops = j->ops * n;
    a->destroy(ctx, ring, 0);
    return;
fail:
    out->failed = 1;
    a->destroy(ctx, ring, i);
    return;
lost: /* the reset could not make a new context (mimalloc: mi_heap_new) */
    out->failed = 1;
}
BENCH_SPECIALIZE(w1_reset);

static const size_t chunk_sizes[] = {8, 16, 32, 64, 128, 256, 512, 1024};
static const size_t lives_quick[] = {1 * KiB, 16 * KiB, 256 * KiB, 4 * MiB, 64 * MiB};
static const size_t lives_full[] = {1 * KiB,  16 * KiB,  256 * KiB, 4 * MiB,
                                    64 * MiB, 256 * MiB, 1 * GiB};
#define NCHUNK (sizeof chunk_sizes / sizeof chunk_sizes[0])

static const struct pattern {
    const char *name;
    unsigned needs; /* BJ_*: which allocators take part */
    int cycles;     /* the job's ops count whole fill+reset cycles */
    const bench_kernel_fn *kernel_for;
    const char *about;
} patterns[] = {
    {"free-oldest", BJ_W1_FREE, 0, w1_free_oldest_for,
     "ns per allocation, steady state: allocate + touch a chunk, free the oldest "
     "(ring of live/chunk pointers; the fill is not timed)"},
    {"reset", BJ_W1_RESET, 1, w1_reset_for,
     "ns per allocation, reset included: allocate live/chunk chunks, then reset "
     "(memkit: mk_ctx_reset; talloc: talloc_free_children; apr: apr_pool_clear; "
     "mimalloc: mi_heap_destroy + mi_heap_new; malloc: free each chunk); repeated"},
};
#define NPATTERN (sizeof patterns / sizeof patterns[0])

/* Bytes a cell may need at worst: the pointer array plus glibc's footprint
 * (a chunk of at least 32 bytes, 8 of header, rounded to 16) with slack. */
size_t bench_w1_cell_need(size_t chunk, size_t n)
{
    size_t per = (chunk + 8 + 15) / 16 * 16;
    if (per < 32)
        per = 32;
    return n * sizeof(void *) + n * per / 4 * 5;
}

void bench_w1(const bench_opts *o)
{
    const size_t *lives = o->full ? lives_full : lives_quick;
    size_t nlive = o->full ? sizeof lives_full / sizeof lives_full[0]
                           : sizeof lives_quick / sizeof lives_quick[0];
    int total = (int)(NPATTERN * nlive * NCHUNK), cell = 0;
    for (size_t pi = 0; pi < NPATTERN; pi++) {
        const struct pattern *pat = &patterns[pi];
        int sec = report_section("W1", pat->name, "ns/alloc", 0, pat->about);
        for (size_t li = 0; li < nlive; li++) {
            for (size_t ci = 0; ci < NCHUNK; ci++) {
                size_t chunk = chunk_sizes[ci], live = lives[li];
                size_t n = live / chunk ? live / chunk : 1;
                char cs[16], ls[16], name[40];
                snprintf(name, sizeof name, "%s x %s", report_size(chunk, cs, sizeof cs),
                         report_size(live, ls, sizeof ls));
                report_progress("W1 %s %s: cell %d of %d", pat->name, name, ++cell, total);

                w1_job job = {.chunk = chunk, .n = n};
                uint64_t allocs;
                if (pat->cycles) {
                    job.ops = (o->w1_min_ops + n - 1) / n;
                    allocs = job.ops * n;
                } else {
                    job.ops = n > o->w1_min_ops ? n : o->w1_min_ops;
                    allocs = job.ops;
                }
                bench_row *row = report_row(sec, name, chunk, live, allocs);
                size_t need = bench_w1_cell_need(chunk, n), avail = bench_sys_mem_available();
                if (avail && need > avail / 10 * 8) {
                    snprintf(row->note, sizeof row->note,
                             "skipped: needs ~%.1f GiB, %.1f GiB available",
                             need / (double)GiB, avail / (double)GiB);
                    continue;
                }
                job.ring = bench_buf_new(n * sizeof(void *));

                bench_measure(row, pat->needs, pat->kernel_for, &job, o->runs);
                bench_buf_free(job.ring, n * sizeof(void *));
            }
        }
    }
    report_progress_end();
}
