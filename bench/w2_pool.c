/* SPDX-License-Identifier: MIT */
/*
 * w2_pool.c - W2, Godot's Variant pool test: 10,000,000 x (allocate an
 * object, write it, read it, free it), for 24- and 48-byte objects; and the
 * same with 1,000 objects live in a ring (allocate and write the new one,
 * read the oldest and free it).  The ring is filled before the clock starts.
 *
 * Allocators: memkit's typed pool (MK_POOL_DECLARE), plain and
 * MK_POOL_THREADSAFE - the two columns side by side are the cost of thread
 * safety for a single-threaded user, printed under the table - memkit's
 * GENERAL, GENERATION and SLAB contexts through mk_alloc/mk_free, talloc
 * (talloc_size/talloc_free in one context), mimalloc (mi_heap_malloc/
 * mi_free in one heap) and malloc.  APR has no individual free and is not
 * in W2.
 *
 * An object is 3 or 6 64-bit words.  Every word written is read back into a
 * checksum; bench_escape() between the write and the read stops the
 * compiler from forwarding the values and deleting the object (it may drop
 * a malloc/free pair whose memory nobody observes).  The checksum must be
 * the same for every allocator and run, and measure.c checks that it is.
 * The object size is a compile-time constant in each loop, as it is in a
 * real program (w2_body is instantiated once per size, its word loops
 * unrolled as a struct's field assignments would be).
 */
#include <stdio.h>

#include "alloc_iface.h"
#include "bench.h"
#include "measure.h"
#include "report.h"
#include "timing.h"

#define W2_OPS 10000000u
#define W2_RING 1000u

typedef struct w2_job {
    size_t size;  /* 24 or 48 */
    size_t ring;  /* 0: one object at a time; else objects live in a ring */
    uint64_t ops;
} w2_job;

static inline __attribute__((always_inline)) void
w2_body(const bench_alloc *a, const w2_job *j, bench_sample *out, const size_t size)
{
    const size_t words = size / 8;
    void *ring[W2_RING];
    size_t held = 0;
    uint64_t sum = 0;
    void *ctx = a->ctx_new(size);
    if (!ctx) {
        out->failed = 1;
        return;
    }
    for (; held < j->ring; held++) {
        uint64_t *o = a->alloc(ctx, size);
        if (!o)
            goto fail;
#pragma GCC unroll 8
        for (size_t w = 0; w < words; w++)
            o[w] = held + w;
        ring[held] = o;
    }

    uint64_t t0 = bench_now_ns();
    if (j->ring == 0) {
        for (uint64_t i = 0; i < j->ops; i++) {
            uint64_t *o = a->alloc(ctx, size);
            if (BENCH_UNLIKELY(!o))
                goto fail;
    #pragma GCC unroll 8
        for (size_t w = 0; w < words; w++)
                o[w] = i + w;
            bench_escape(o);
    #pragma GCC unroll 8
        for (size_t w = 0; w < words; w++)
                sum += o[w];
            a->free(ctx, o, size);
        }
    } else {
        size_t head = 0; /* the oldest object */
        for (uint64_t i = 0; i < j->ops; i++) {
            uint64_t *o = a->alloc(ctx, size);
            if (BENCH_UNLIKELY(!o))
                goto fail;
    #pragma GCC unroll 8
        for (size_t w = 0; w < words; w++)
                o[w] = i + w;
            uint64_t *old = ring[head];
            ring[head] = o;
    #pragma GCC unroll 8
        for (size_t w = 0; w < words; w++)
                sum += old[w];
            a->free(ctx, old, size);
            if (++head == j->ring)
                head = 0;
        }
    }
    uint64_t t1 = bench_now_ns();

    out->ns = t1 - t0;
    out->ops = j->ops;
    out->check = sum;
    a->destroy(ctx, ring, held);
    return;
fail:
    out->failed = 1;
    a->destroy(ctx, ring, held);
}

BENCH_KERNEL w2_kernel(const bench_alloc *a, const void *jp, bench_sample *out)
{
    const w2_job *j = jp;
    if (j->size == 24)
        w2_body(a, j, out, 24);
    else
        w2_body(a, j, out, 48);
}
BENCH_SPECIALIZE(w2_kernel);

void bench_w2(const bench_opts *o)
{
    static const w2_job jobs[] = {
        {24, 0, W2_OPS}, {48, 0, W2_OPS}, {24, W2_RING, W2_OPS}, {48, W2_RING, W2_OPS}};
    const int total = (int)(sizeof jobs / sizeof jobs[0]);
    int sec = report_section("W2", "variant-pool", "ns/iter", 0,
                             "ns per iteration: allocate an object, write every word, "
                             "read it, free it (ring: read and free the oldest of 1000 live)");
    for (int k = 0; k < total; k++) {
        const w2_job *j = &jobs[k];
        char name[40];
        if (j->ring)
            snprintf(name, sizeof name, "%zuB ring of %zu", j->size, j->ring);
        else
            snprintf(name, sizeof name, "%zuB alloc/use/free", j->size);
        report_progress("W2 %s: cell %d of %d", name, k + 1, total);
        bench_row *row = report_row(sec, name, j->size, 0, j->ops);
        bench_measure(row, BJ_W2, w2_kernel_for, j, o->runs);
        const bench_fig *ts = &row->fig[BA_mk_poolts], *plain = &row->fig[BA_mk_pool];
        if (ts->runs && plain->runs && plain->median > 0)
            report_footer(sec, "MK_POOL_THREADSAFE, %s: %+.2f ns/iter (%+.0f%%) over the plain pool",
                          name, ts->median - plain->median,
                          100 * (ts->median - plain->median) / plain->median);
    }
    report_progress_end();
}
