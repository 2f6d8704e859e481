/* SPDX-License-Identifier: MIT */
/*
 * alloc_memkit.h - memkit as bench allocators: one per context kind
 * (GENERAL, GENERATION, SLAB, BUMP) and the typed pool, plain and
 * MK_POOL_THREADSAFE.  Included by alloc_iface.h only (see there for why
 * these are inline).
 *
 * One mk_ctx (or mk_pool) per measurement, created outside the timed phase.
 * Reset is mk_ctx_reset (one call, whatever the number of chunks); destroy
 * is mk_ctx_delete.  Neither needs the workload's array of live pointers.
 * A SLAB context is created for the workload's chunk size
 * (opts.chunk_size), so every W1 chunk size is its own slab.  In W5 the root
 * is always a GENERAL context and the 10,000 children are of the column's
 * kind; deleting the root deletes them all.
 *
 * A pool has no reset; its destroy frees the objects the workload still
 * holds before mk_pool_delete (a pool deleted with live objects reports a
 * leak), outside the timed phase.
 */
#ifndef BENCH_ALLOC_MEMKIT_H
#define BENCH_ALLOC_MEMKIT_H

#include "memkit.h"

static inline void *mk_bench_ctx(mk_ctx *parent, mk_kind kind, size_t chunk)
{
    mk_ctx_opts opts = {0};
    if (kind == MK_SLAB)
        opts.chunk_size = chunk;
    return mk_ctx_new(parent, "bench", kind, &opts);
}

static inline void *mkg_ctx_new(size_t chunk) { return mk_bench_ctx(NULL, MK_GENERAL, chunk); }
static inline void *mkgen_ctx_new(size_t chunk) { return mk_bench_ctx(NULL, MK_GENERATION, chunk); }
static inline void *mkslab_ctx_new(size_t chunk) { return mk_bench_ctx(NULL, MK_SLAB, chunk); }
static inline void *mkbump_ctx_new(size_t chunk) { return mk_bench_ctx(NULL, MK_BUMP, chunk); }

static inline void *mkg_child_new(void *p, size_t chunk) { return mk_bench_ctx(p, MK_GENERAL, chunk); }
static inline void *mkgen_child_new(void *p, size_t chunk) { return mk_bench_ctx(p, MK_GENERATION, chunk); }
static inline void *mkslab_child_new(void *p, size_t chunk) { return mk_bench_ctx(p, MK_SLAB, chunk); }
static inline void *mkbump_child_new(void *p, size_t chunk) { return mk_bench_ctx(p, MK_BUMP, chunk); }

static inline void *mkc_tree_new(void)
{
    return mk_ctx_new(NULL, "w5", MK_GENERAL, NULL);
}

static inline void *mkc_alloc(void *ctx, size_t size)
{
    return mk_alloc((mk_ctx *)ctx, size);
}

static inline void mkc_free(void *ctx, void *p, size_t size)
{
    (void)ctx;
    (void)size;
    mk_free(p);
}

static inline void *mkc_reset(void *ctx, void **live, size_t n)
{
    (void)live;
    (void)n;
    mk_ctx_reset((mk_ctx *)ctx);
    return ctx;
}

static inline void mkc_destroy(void *ctx, void **live, size_t n)
{
    (void)live;
    (void)n;
    mk_ctx_delete((mk_ctx *)ctx);
}

static inline void mkc_tree_delete(void *root, void **kids, size_t nkids, void **chunks,
                                   size_t nchunks)
{
    (void)kids;
    (void)nkids;
    (void)chunks;
    (void)nchunks;
    mk_ctx_delete((mk_ctx *)root); /* the children go with it */
}

#define MK_BENCH_CTX(id, col, kindname, fn, js)                              \
    static const bench_alloc ba_##id BENCH_UNUSED = {                        \
        .name = col,                                                         \
        .desc = col ": memkit " MK_VERSION_STRING " " kindname " context",   \
        .joins = js,                                                         \
        .ctx_new = fn##_ctx_new,                                             \
        .tree_new = mkc_tree_new,                                            \
        .child_new = fn##_child_new,                                         \
        .alloc = mkc_alloc,                                                  \
        .free = mkc_free,                                                    \
        .reset = mkc_reset,                                                  \
        .destroy = mkc_destroy,                                              \
        .tree_delete = mkc_tree_delete,                                      \
    };

MK_BENCH_CTX(mk_general, "mk-general", "MK_GENERAL", mkg,
             BJ_W1_FREE | BJ_W1_RESET | BJ_W2 | BJ_W5 | BJ_RSS | BJ_W3)
MK_BENCH_CTX(mk_gen, "mk-gen", "MK_GENERATION", mkgen,
             BJ_W1_FREE | BJ_W1_RESET | BJ_W2 | BJ_W5 | BJ_RSS)
MK_BENCH_CTX(mk_slab, "mk-slab", "MK_SLAB (one per chunk size, opts.chunk_size)", mkslab,
             BJ_W1_FREE | BJ_W2 | BJ_W5 | BJ_RSS)
MK_BENCH_CTX(mk_bump, "mk-bump", "MK_BUMP (no individual free)", mkbump,
             BJ_W1_RESET | BJ_W5 | BJ_RSS)

/* ---- typed pools ----------------------------------------------------------
 * Through MK_POOL_DECLARE, as a program declares a typed pool: the W2
 * objects are structs of 3 or 6 words.  The typed functions are memkit's
 * (inline wrappers today; whatever fast path memkit.h gives them later is
 * measured as is).  W2's size is a constant in each loop, so the choice
 * between the two pool types folds away. */
typedef struct mkb_obj24 { uint64_t w[3]; } mkb_obj24;
typedef struct mkb_obj48 { uint64_t w[6]; } mkb_obj48;
MK_POOL_DECLARE(mkb_obj24, mkb_obj24)
MK_POOL_DECLARE(mkb_obj48, mkb_obj48)

static inline void *mkpool_make(size_t chunk, unsigned flags)
{
    if (chunk == sizeof(mkb_obj24))
        return mkb_obj24_pool_new("bench", flags);
    if (chunk == sizeof(mkb_obj48))
        return mkb_obj48_pool_new("bench", flags);
    return mk_pool_new("bench", chunk, 0, flags); /* not used by W2 */
}

static inline void *mkpool_new(size_t chunk) { return mkpool_make(chunk, 0); }
static inline void *mkpoolts_new(size_t chunk) { return mkpool_make(chunk, MK_POOL_THREADSAFE); }

static inline void *mkpool_alloc(void *pool, size_t size)
{
    if (size == sizeof(mkb_obj24))
        return mkb_obj24_alloc((mkb_obj24_pool *)pool);
    if (size == sizeof(mkb_obj48))
        return mkb_obj48_alloc((mkb_obj48_pool *)pool);
    return mk_pool_alloc((mk_pool *)pool);
}

static inline void mkpool_free(void *pool, void *p, size_t size)
{
    if (size == sizeof(mkb_obj24))
        mkb_obj24_free((mkb_obj24_pool *)pool, p);
    else if (size == sizeof(mkb_obj48))
        mkb_obj48_free((mkb_obj48_pool *)pool, p);
    else
        mk_pool_free((mk_pool *)pool, p);
}

static inline void mkpool_destroy(void *pool, void **live, size_t n)
{
    for (size_t i = 0; i < n; i++)
        mk_pool_free((mk_pool *)pool, live[i]);
    mk_pool_delete((mk_pool *)pool);
}

#define MK_BENCH_POOL(id, col, what, fn)                                     \
    static const bench_alloc ba_##id BENCH_UNUSED = {                        \
        .name = col,                                                         \
        .desc = col ": memkit " MK_VERSION_STRING " typed pool" what,        \
        .joins = BJ_W2,                                                      \
        .ctx_new = fn##_new,                                                 \
        .tree_new = ba_no_tree_new,                                          \
        .child_new = ba_no_child,                                            \
        .alloc = mkpool_alloc,                                               \
        .free = mkpool_free,                                                 \
        .reset = ba_no_reset,                                                \
        .destroy = mkpool_destroy,                                           \
        .tree_delete = ba_no_tree,                                           \
    };

MK_BENCH_POOL(mk_pool, "mk-pool", " (MK_POOL_DECLARE: NAME_alloc/NAME_free)", mkpool)
MK_BENCH_POOL(mk_poolts, "mk-poolts", ", the same with MK_POOL_THREADSAFE (one thread uses it)",
              mkpoolts)

#endif /* BENCH_ALLOC_MEMKIT_H */
