/* SPDX-License-Identifier: MIT */
/*
 * peak.c - W3, FORM's sort buffers, through malloc/free: a 512 MiB peak of
 * 1 MiB buffers, free, 8 MiB of 64-byte churn, a quiet phase, with the
 * process's RSS sampled every 10 ms.  The kernel is in peak.h (shared with
 * memkit-bench's in-process child); here it gets malloc and free - the
 * dynamic symbols LD_PRELOAD replaces - as its allocator.
 *
 * A background thread of the allocator (memkit's purge thread) runs on the
 * same CPU as the workload when memkit-bench pins the child: what it costs
 * is in the churn time - the price of giving memory back.
 */
#include <stdlib.h>

#include "peak.h"

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

void wl_w3(const wl_params *p, wl_result *r)
{
    w3_kernel(p, r, sys_alloc, sys_free, NULL);
}
