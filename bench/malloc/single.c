/* SPDX-License-Identifier: MIT */
/*
 * single.c - the single-thread workloads of memkit-bench-malloc, W2 and W1
 * of the in-process suite (w2_pool.c, w1_palloc.c) through malloc/free:
 *
 *  w2m  Godot's Variant pool test: `ops` x (malloc an object of `size`
 *       bytes - 24 or 48 - write every 64-bit word, read them back, free
 *       it); with ring=N, N objects stay live in a ring and each new object
 *       frees the oldest after reading it.  The ring is filled untimed.
 *  w1m  PostgreSQL's palloc test, pattern free-oldest: `live` / `size`
 *       chunks of `size` bytes live in a ring; each new chunk (first and
 *       last byte written) frees the oldest; the fill is untimed, then
 *       max(ops, n) allocations are timed.
 *
 * The kernels are the in-process ones, word for word, with a->alloc/a->free
 * replaced by malloc/free, so a ratio here can be set beside the one there
 * (mk-general and malloc columns of W1/W2): the difference is what the
 * drop-in's entry path costs (a thread-local load, no context argument).
 * The ring of pointers comes from mmap, outside every allocator, as in the
 * in-process suite.  The object size is a compile-time constant in each W2
 * loop (one instantiation per size), as it is in a real program; malloc
 * and free stay real calls through the PLT (the function the dynamic linker
 * bound: glibc's or the LD_PRELOAD'ed one), and bench_escape() keeps the
 * compiler from eliding an unobserved malloc/free pair.
 */
#include <stdlib.h>
#include <sys/mman.h>

#include "wl.h"

static void *ring_new(size_t n)
{
    void *p = mmap(NULL, n * sizeof(void *) + 1, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static inline __attribute__((always_inline)) void
w2m_body(const wl_params *p, wl_result *r, const size_t size)
{
    const size_t words = size / 8;
    const size_t n = (size_t)p->ring;
    uint64_t sum = 0;
    void **ring = n ? ring_new(n) : NULL;
    if (n && !ring) {
        r->error = "mmap of the ring failed";
        return;
    }
    for (size_t k = 0; k < n; k++) {
        uint64_t *o = malloc(size);
        if (!o) {
            r->error = "malloc returned NULL";
            return;
        }
#pragma GCC unroll 8
        for (size_t w = 0; w < words; w++)
            o[w] = k + w;
        ring[k] = o;
    }

    uint64_t t0 = bench_now_ns();
    if (n == 0) {
        for (uint64_t i = 0; i < p->ops; i++) {
            uint64_t *o = malloc(size);
            if (BENCH_UNLIKELY(!o))
                goto fail;
#pragma GCC unroll 8
            for (size_t w = 0; w < words; w++)
                o[w] = i + w;
            bench_escape(o);
#pragma GCC unroll 8
            for (size_t w = 0; w < words; w++)
                sum += o[w];
            free(o);
        }
    } else {
        size_t head = 0; /* the oldest object */
        for (uint64_t i = 0; i < p->ops; i++) {
            uint64_t *o = malloc(size);
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
            free(old);
            if (++head == n)
                head = 0;
        }
    }
    r->ns = bench_now_ns() - t0;
    r->ops = p->ops;
    r->check = sum;
    for (size_t k = 0; k < n; k++)
        free(ring[k]);
    return;
fail:
    r->error = "malloc returned NULL";
}

void wl_w2m(const wl_params *p, wl_result *r)
{
    if (p->size == 24)
        w2m_body(p, r, 24);
    else if (p->size == 48)
        w2m_body(p, r, 48);
    else
        r->error = "w2m: size must be 24 or 48";
}

static inline void touch(void *p, size_t size, uint64_t k)
{
    unsigned char *c = p;
    c[0] = (unsigned char)k;
    c[size - 1] = (unsigned char)(k >> 8);
}

void wl_w1m(const wl_params *p, wl_result *r)
{
    const size_t size = (size_t)p->size;
    size_t n = size ? (size_t)(p->live / size) : 0;
    if (size == 0) {
        r->error = "w1m: size=0";
        return;
    }
    if (n == 0)
        n = 1;
    void **ring = ring_new(n);
    if (!ring) {
        r->error = "mmap of the ring failed";
        return;
    }
    for (size_t k = 0; k < n; k++) {
        void *c = malloc(size);
        if (!c) {
            r->error = "malloc returned NULL";
            return;
        }
        touch(c, size, k);
        ring[k] = c;
    }

    const uint64_t ops = p->ops > n ? p->ops : n;
    uint64_t t0 = bench_now_ns();
    size_t head = 0; /* the oldest chunk */
    for (uint64_t k = 0; k < ops; k++) {
        void *c = malloc(size);
        if (BENCH_UNLIKELY(!c)) {
            r->error = "malloc returned NULL";
            return;
        }
        touch(c, size, k);
        void *old = ring[head];
        ring[head] = c;
        free(old);
        if (++head == n)
            head = 0;
    }
    r->ns = bench_now_ns() - t0;
    r->ops = ops;
    r->check = ops; /* nothing is read back: the in-process W1 reads nothing */
    /* the live chunks die with the process: freeing 8M of them would add
     * a tenth of a second per run to the suite and measure nothing */
}
