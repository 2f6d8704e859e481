/* SPDX-License-Identifier: MIT */
/*
 * bind.c - the top of the library: where the layers' upward needs are
 * bound, once, and the one place that knows every layer.
 *
 * Each layer states what it asks of the layers above in a table of its own
 * header (mki_base_up, mki_page_up, mki_ctx_up, mki_heap_up); this file
 * fills them in.  They are constants with static initialisers, not
 * pointers set by a constructor: a malloc may run before any constructor
 * of the library (another library's constructor, the dynamic loader), and
 * must find them bound.  The cost is an indirect call, on slow paths only:
 * no fast path calls up.
 *
 * It also holds what belongs to no one layer: the fork handlers, which
 * take every layer's locks in one order, and the purge thread's start
 * inside a context of memkit's own.
 */

#include "check/check.h"
#include "heap/heap.h"
#include "page/purge.h"
#include "pool/pool.h"
#include "prof/prof.h"

/* ---- the base: an option changed --------------------------------------------- */

static void options_changed(void)
{
    mki_purge_options_changed();
    mki_prof_options_changed();
    mki_heap_profile_changed(mki_prof_active());
}

const struct mki_base_up mki_base_up = {
    .options_changed = options_changed,
};

/* ---- the page layer: owners, collecting, the background thread ----------------- */

static const char *page_owner_name(const mki_page *pg) { return mki_ctx_name(pg->ctx); }

/* glibc allocates a new thread's bookkeeping with malloc, which may be
 * memkit's: it lands in a context of memkit's own, not in the calling
 * thread's heap (whose figures would count it forever). */
static int spawn_in_own_ctx(pthread_t *t, const pthread_attr_t *attr,
                            void *(*fn)(void *))
{
    static mk_ctx *own;
    if (!own) {
        if ((own = mk_ctx_new(NULL, "memkit", MK_GENERAL, NULL)))
            own->flags |= MKI_CTX_OWN;
    } else if (mki_ctx_owner(own) != mki_tid())
        mk_ctx_set_owner(own); /* a forked child, started from another
                                  thread than the parent's first start */
    mk_ctx *prev = own ? mk_ctx_switch(own) : NULL;
    int r = pthread_create(t, attr, fn, NULL);
    if (own)
        mk_ctx_switch(prev);
    return r;
}

const struct mki_page_up mki_page_up = {
    .owner_name = page_owner_name,
    .collect = mki_heap_collect,
    .spawn = spawn_in_own_ctx,
    .released = mki_ctx_page_released,
    .unsampled = mki_prof_unsample_page,
};

/* ---- the context layer: the current context, and the decorator ------------------- */

const struct mki_ctx_up mki_ctx_up = {
    .current = mk_ctx_current,
    .deleted = mki_heap_ctx_deleted,
    .instrumented = mki_instrument_active,
    .wrapper = &mki_instrument_ops,
    .page_new = mki_instrument_page_new,
    .page_reset = mki_instrument_page_reset,
    .walk_page = mki_instrument_walk_page,
    .profiled = mki_prof_active,
    .sample = mki_prof_sample,
    .unsample = mki_prof_unsample,
    .unsample_page = mki_prof_unsample_page,
    .orphan_freed = mki_heap_orphan_freed,
};

/* ---- fork ---------------------------------------------------------------------------
 * The forking thread takes every global lock of the library, in one order
 * (pools alone first, then the heap list, the profile, the purge policy,
 * context records, huge chunks, segments, bookkeeping), and both processes release them after, so the
 * child never inherits a lock held by a thread it does not have. */

static void fork_prepare(void)
{
    mki_pool_fork(0); /* (taken alone, never with another lock) */
    mki_heap_fork(0);
    mki_prof_fork(0);
    mki_purge_fork(0);
    mki_ctx_fork(0);
    mki_huge_fork(0);
    mki_segment_fork(0);
    mki_meta_fork(0);
    mki_os_forking = 1; /* this thread holds them all (os.h) */
}

static void fork_parent(void)
{
    mki_os_forking = 0;
    mki_meta_fork(1);
    mki_segment_fork(1);
    mki_huge_fork(1);
    mki_ctx_fork(1);
    mki_purge_fork(1);
    mki_prof_fork(1);
    mki_heap_fork(1);
    mki_pool_fork(1);
}

static void fork_child(void)
{
    mki_os_forking = 0;
    mki_meta_fork(2);
    mki_segment_fork(2);
    mki_huge_fork(2);
    mki_ctx_fork(2);
    mki_heap_fork(2);
    mki_prof_fork(2);
    mki_purge_fork(2);
    mki_pool_fork(2);
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static void fork_init(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }
static void fork_handlers(void) { pthread_once(&fork_once, fork_init); }

const struct mki_heap_up mki_heap_up = {
    .fork_handlers = fork_handlers,
};

/* The handlers are registered when the library is loaded, before a
 * program's constructors and its first malloc, and never from inside
 * malloc: registering takes glibc's atfork lock, which fork() holds while
 * it runs the handlers, so a first malloc made by a fork handler would
 * otherwise wait for itself.  A library whose constructor runs earlier
 * and registers handlers of its own has them run on the other side of
 * memkit's; they may allocate all the same (mki_os_forking, os.h).  A
 * thread's first heap registers them too (mki_heap_up), for a static link
 * whose constructors were dropped. */
__attribute__((constructor)) static void fork_at_load(void) { fork_handlers(); }
