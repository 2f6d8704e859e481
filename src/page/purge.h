/* SPDX-License-Identifier: MIT */
/*
 * purge.h - when free memory goes back to the OS (purge.c): the policy of
 * the page layer, beside the data it decides for (segment.c, huge.c say
 * what is free; this says when).  What it needs from above (collecting the
 * heaps of exited threads, a context for its thread's own allocations) is
 * bound at the top (bind.c).
 */
#ifndef MKI_PURGE_H
#define MKI_PURGE_H

#include "page.h"

#pragma GCC visibility push(hidden)

/* ---- purge.c: when memory goes back (the policy) ---------------------------------------- */
/* Something became free (a page, a segment, a cached huge mapping):
 * schedule a pass, or (delay 0) purge at once.  Call it with no lock held. */
void mki_purge_note(void);
/* The background thread starts at a safe point (see purge.c): the
 * allocation slow paths call this first, before they touch anything. */
void mki_purge_safe_point_slow(void);
extern _Atomic int mki_purge_want;
MKI_INLINE void mki_purge_safe_point(void)
{
    if (MKI_UNLIKELY(atomic_load_explicit(&mki_purge_want, memory_order_relaxed)))
        mki_purge_safe_point_slow();
}
void mki_purge_fork(int phase); /* as mki_meta_fork */
/* Chunks were freed into a context that no thread owns (a heap whose
 * thread exited), or such a heap emptied: have the collect hook run soon,
 * on the background thread.  Returns 1 if it will; 0 if no thread runs
 * (the next thread exit or mk_trim will collect; one is wanted for the
 * next safe point).  Cheap when a run is already wanted. */
int mki_purge_collect(void);
/* A page or huge chunk was handed out (@fresh: with memory new from the
 * OS): the peak rule (purge.c).  Call it with no lock held. */
void mki_purge_used(int fresh);
/* How many times the peak rule has walked the segments to shed (for the
 * tests: a walk that cannot take anything is not repeated). */
extern _Atomic size_t mki_purge_sheds;
/* memkit took more address space from the OS (cheap: a flag). */
void mki_purge_grew(void);
/* mk_option_set changed the purge mode or delay: wake the thread. */
void mki_purge_options_changed(void);
void mki_purge_figures(size_t *bytes, size_t *passes);
/* A mapping failed (a limit of address space or data, the commit charge):
 * give back what memkit holds idle, now (cached huge mappings, empty
 * segments, free pages, the arena's free end).  Returns 1 if there was
 * anything (the caller tries again), 0 if not.  No lock held; errno kept. */
int mki_purge_reclaim(void);
/* How many times the free rule gave memory back, and its margin now (the
 * free memory a program keeps with no thread of memkit's: purge.c); for
 * the tests. */
extern _Atomic size_t mki_purge_drops;
size_t mki_purge_margin(void);

#pragma GCC visibility pop

#endif /* MKI_PURGE_H */
