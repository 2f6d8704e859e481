/* SPDX-License-Identifier: MIT */
/*
 * alloc_peers.c - the one piece of state the peer allocators have: the
 * mimalloc functions found by dlsym (see alloc_peers.h).
 */
#include "alloc_iface.h"

#ifdef HAVE_MIMALLOC
struct bench_mib mib;
#endif
