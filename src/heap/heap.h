/* SPDX-License-Identifier: MIT */
/*
 * heap.h - thread heaps and the current context (heap.c): the layer the
 * malloc drop-in stands on.
 */
#ifndef MKI_HEAP_H
#define MKI_HEAP_H

#include "../ctx/general.h"

#ifndef MKI_PROF_BUILD
#define MKI_PROF_BUILD 0 /* 1: libmemkit-malloc-prof (heap.c, override.h) */
#endif

#pragma GCC visibility push(hidden)

/* ---- heap/heap.c: thread heaps and the current context ------------------- */
/* What malloc's inline path allocates from: the calling thread's current
 * context when it is a GENERAL, owned, uninstrumented one, else
 * &mki_heap_boot, whose empty class tables send every request to the slow
 * path (mki_heap_refill, mki_heap_alloc), which sets things up. */
extern _Thread_local mki_general *mki_tls_fast
    __attribute__((tls_model("initial-exec")));
extern mki_general mki_heap_boot;
/* A chunk of @n bytes for malloc, off the inline path: the slow path of
 * the calling thread's malloc context (created on first use).  NULL with
 * errno ENOMEM. */
void *mki_heap_alloc(size_t n);
/* malloc's inline path found @pg (of context @g) without a free chunk. */
void *mki_heap_refill(mki_general *g, mki_page *pg, size_t n);
/* libmemkit-malloc-prof (MKI_PROF_BUILD): the countdown crossed zero on
 * malloc's inline path: allocate @n (<= 32 KiB) and record the chunk as a sample if
 * the profile is on (if it is off, the countdown is parked for good). */
void *mki_heap_alloc_sampled(size_t n);
/* The context malloc allocates from (created on first use), or NULL. */
mk_ctx *mki_heap_malloc_ctx(void);
/* Context @c is being deleted: forget it if the calling thread has it as
 * its current context or heap. */
void mki_heap_ctx_deleted(mk_ctx *c);
/* The profile was switched on or off (mk_option_set): the calling
 * thread's heap and current context follow (others keep their paths). */
void mki_heap_profile_changed(int on);
/* The heap list's part of the fork handlers (0 prepare, 1 parent, 2
 * child; the top orders the layers' parts). */
void mki_heap_fork(int phase);
/* The collect hook of the page layer (mki_page_up.collect): take in
 * what was freed into heaps of exited threads; 1 to run again later. */
int mki_heap_collect(int force);
/* The ctx layer's hook (mki_ctx_up.orphan_freed): frees came into @c, a
 * context no thread owns, as many as its countdown: if it is an exited
 * thread's heap, take them in, and give the heap back if it emptied. */
void mki_heap_orphan_freed(mk_ctx *c);

/* What the heap layer asks of the layers above (bound at the top, bind.c):
 * register the library's fork handlers if the load did not (a static link
 * whose constructors were dropped; a thread's first heap calls it). */
struct mki_heap_up {
    void (*fork_handlers)(void);
};
extern const struct mki_heap_up mki_heap_up;

#pragma GCC visibility pop

#endif /* MKI_HEAP_H */
