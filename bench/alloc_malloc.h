/* SPDX-License-Identifier: MIT */
/*
 * alloc_malloc.h - the system allocator (malloc/free) as a bench allocator,
 * the baseline of every ratio.  Included by alloc_iface.h only.
 *
 * malloc has no contexts, so the context is a dummy non-NULL pointer and
 * reset / destroy free the workload's live chunks one by one, in allocation
 * order: what a program on malloc does to drop a batch of objects.  In W5
 * ("100,000 malloc(64) with no contexts") a child context is the same dummy
 * and the tree delete frees every chunk.
 */
#ifndef BENCH_ALLOC_MALLOC_H
#define BENCH_ALLOC_MALLOC_H

#include <stdlib.h>

static char sys_dummy_ctx;

static inline void *sys_ctx_new(size_t chunk)
{
    (void)chunk;
    return &sys_dummy_ctx;
}

static inline void *sys_tree_new(void)
{
    return &sys_dummy_ctx;
}

static inline void *sys_child_new(void *parent, size_t chunk)
{
    (void)parent;
    (void)chunk;
    return &sys_dummy_ctx;
}

static inline void *sys_alloc(void *ctx, size_t size)
{
    (void)ctx;
    return malloc(size);
}

static inline void sys_free(void *ctx, void *p, size_t size)
{
    (void)ctx;
    (void)size;
    free(p);
}

static inline void *sys_reset(void *ctx, void **live, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(live[i]);
    return ctx;
}

static inline void sys_destroy(void *ctx, void **live, size_t n)
{
    sys_reset(ctx, live, n);
}

static inline void sys_tree_delete(void *root, void **kids, size_t nkids, void **chunks,
                                   size_t nchunks)
{
    (void)root;
    (void)kids;
    (void)nkids;
    for (size_t i = 0; i < nchunks; i++)
        free(chunks[i]);
}

static const bench_alloc ba_malloc BENCH_UNUSED = {
    .name = "malloc",
    .desc = "malloc: the system malloc/free (reset = free every chunk)",
    .joins = BJ_W1_FREE | BJ_W1_RESET | BJ_W2 | BJ_W5 | BJ_RSS | BJ_W3,
    .ctx_new = sys_ctx_new,
    .tree_new = sys_tree_new,
    .child_new = sys_child_new,
    .alloc = sys_alloc,
    .free = sys_free,
    .reset = sys_reset,
    .destroy = sys_destroy,
    .tree_delete = sys_tree_delete,
};

#endif /* BENCH_ALLOC_MALLOC_H */
