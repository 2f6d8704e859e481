/*
 * alloc_memkit.h - memkit's GENERAL context as a bench allocator.
 * Included by alloc_iface.h only (see there for why these are inline).
 *
 * One mk_ctx per measurement, created outside the timed phase.  Reset is
 * mk_ctx_reset (one call, whatever the number of chunks); destroy is
 * mk_ctx_delete.  Neither needs the workload's array of live pointers.
 */
#ifndef BENCH_ALLOC_MEMKIT_H
#define BENCH_ALLOC_MEMKIT_H

#include "memkit.h"

static inline void *mkg_ctx_new(size_t chunk)
{
    (void)chunk;
    return mk_ctx_new(NULL, "bench", MK_GENERAL, NULL);
}

static inline void *mkg_alloc(void *ctx, size_t size)
{
    return mk_alloc((mk_ctx *)ctx, size);
}

static inline void mkg_free(void *ctx, void *p)
{
    (void)ctx;
    mk_free(p);
}

static inline void mkg_reset(void *ctx, void **live, size_t n)
{
    (void)live;
    (void)n;
    mk_ctx_reset((mk_ctx *)ctx);
}

static inline void mkg_destroy(void *ctx, void **live, size_t n)
{
    (void)live;
    (void)n;
    mk_ctx_delete((mk_ctx *)ctx);
}

static const bench_alloc ba_mk_general BENCH_UNUSED = {
    .name = "memkit",
    .desc = "memkit " MK_VERSION_STRING " GENERAL context (mk_alloc/mk_free/mk_ctx_reset)",
    .caps = BA_CAN_FREE | BA_CAN_RESET,
    .ctx_new = mkg_ctx_new,
    .alloc = mkg_alloc,
    .free = mkg_free,
    .reset = mkg_reset,
    .destroy = mkg_destroy,
};

#endif /* BENCH_ALLOC_MEMKIT_H */
