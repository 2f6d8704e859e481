/* SPDX-License-Identifier: MIT */
/*
 * pool.h - typed pools (pool.c): a SLAB context per pool (or per thread of
 * a thread-safe pool) behind the inline front of memkit.h.
 */
#ifndef MKI_POOL_H
#define MKI_POOL_H

#include "../ctx/general.h"
#include "../ctx/slab.h"

#pragma GCC visibility push(hidden)

/* fork(): 0 before (take the shard lock), 1 in the parent and 2 in the
 * child after (release it). */
void mki_pool_fork(int phase);

#pragma GCC visibility pop

#endif /* MKI_POOL_H */
