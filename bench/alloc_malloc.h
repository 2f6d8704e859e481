/*
 * alloc_malloc.h - the system allocator (malloc/free) as a bench allocator,
 * the baseline of every ratio.  Included by alloc_iface.h only.
 *
 * malloc has no contexts, so the context is a dummy non-NULL pointer and
 * reset / destroy free the workload's live chunks one by one, in allocation
 * order: what a program on malloc does to drop a batch of objects.
 */
#ifndef BENCH_ALLOC_MALLOC_H
#define BENCH_ALLOC_MALLOC_H

#include <stdlib.h>

static inline void *sys_ctx_new(size_t chunk)
{
    static char dummy;
    (void)chunk;
    return &dummy;
}

static inline void *sys_alloc(void *ctx, size_t size)
{
    (void)ctx;
    return malloc(size);
}

static inline void sys_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

static inline void sys_reset(void *ctx, void **live, size_t n)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++)
        free(live[i]);
}

static inline void sys_destroy(void *ctx, void **live, size_t n)
{
    sys_reset(ctx, live, n);
}

static const bench_alloc ba_malloc BENCH_UNUSED = {
    .name = "malloc",
    .desc = "the system malloc/free (reset = free every chunk)",
    .caps = BA_CAN_FREE | BA_CAN_RESET,
    .ctx_new = sys_ctx_new,
    .alloc = sys_alloc,
    .free = sys_free,
    .reset = sys_reset,
    .destroy = sys_destroy,
};

#endif /* BENCH_ALLOC_MALLOC_H */
