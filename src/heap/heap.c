/* SPDX-License-Identifier: MIT */
/*
 * heap.c - thread heaps: each thread's default context (its *heap*), the
 * calling thread's current context, the context malloc allocates from, and
 * what becomes of heaps when threads exit and processes fork.
 *
 * A heap is a top-level GENERAL context named "thread", created on the
 * thread's first need for one (mk_ctx_current, or its first malloc) and
 * owned by the thread.  Nothing in its set-up calls malloc: contexts and
 * descriptors are memkit's own bookkeeping (page/meta.c), the thread-local
 * variables are initial-exec (no __tls_get_addr, which may allocate), and a
 * call that re-enters the set-up on the same thread (a malloc from inside
 * pthread_key_create, say) gets NULL instead of recursing.
 *
 * malloc's inline path reads one thread-local pointer, mki_tls_fast: the
 * current context when malloc may use it without any check (GENERAL, owned
 * by the thread, not instrumented), else &mki_heap_boot, an empty context
 * whose every class points at mki_page_empty, so that the first request of
 * each size takes the slow path, which creates the heap or serves the
 * request through mk_alloc.  So the inline path has no test for "no heap
 * yet" and none for "instrumented".
 *
 * Thread exit (a pthread key destructor): the heap takes in the chunks other
 * threads freed into it; if it then holds nothing, it is deleted; otherwise
 * it becomes an *orphan*: owner 0, every page's fast_tid 0, so every free
 * into it is a remote free and the chunks it holds stay valid for the
 * threads that hold them.  The next thread that needs a heap adopts the
 * newest orphan (its pages and its pending frees become that thread's), so
 * thread churn neither leaks nor grows memory; and every exiting thread
 * first sweeps a few orphans (takes in their remote frees, deletes the ones
 * that emptied), and a free into an orphan has the purge thread sweep them
 * all soon (mki_purge_collect, this file's collect_orphans), so orphans
 * also go back when no new thread comes.  An orphan found empty is kept
 * for the next thread while threads keep attaching (thread churn then
 * reuses a few heaps and their pages instead of making and deleting one
 * per thread), and deleted once none has attached for a quarter of the
 * purge delay.  A heap attached by a thread in its last destructors (after
 * this file's own) is listed as *late*, and orphaned once its thread is
 * found gone.
 *
 * fork(): the forking thread takes every global lock of the library before
 * the fork (heap list, page pool, bookkeeping) and both processes release
 * them after, so the child never inherits a lock held by a thread it does
 * not have.  The handlers are registered at load time, and between them the
 * forking thread may still allocate (os.h, mki_os_forking): a program's own
 * fork handlers may call malloc whichever order they were registered in,
 * as on glibc.  Heaps of the parent's other threads stay in the child as they
 * were (their chunks stay valid; frees into them are remote frees): they
 * may have been in the middle of an allocation, so the child does not
 * reuse them.
 */

#include "heap.h"
#include "../page/purge.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>

#define TLS_IE __attribute__((tls_model("initial-exec")))

#define E8 &mki_page_empty, &mki_page_empty, &mki_page_empty, &mki_page_empty, \
           &mki_page_empty, &mki_page_empty, &mki_page_empty, &mki_page_empty
mki_general mki_heap_boot = {
    .base = {.kind = MK_GENERAL, .fast_kind = MKI_KIND_SLOW, .name = "boot"},
    .cls = {E8, E8, &mki_page_empty, &mki_page_empty, &mki_page_empty,
            &mki_page_empty, &mki_page_empty},
    .cls_hi = mki_general_hi_empty,
};
#undef E8
_Static_assert(MKI_NCLASS_DIRECT == 21, "mki_heap_boot lists 21 classes");

_Thread_local mki_general *mki_tls_fast TLS_IE = &mki_heap_boot;
static _Thread_local mk_ctx *tls_current TLS_IE; /* NULL: the heap */
static _Thread_local mk_ctx *tls_heap TLS_IE;
/* secure mode: the malloc context when it is a secure GENERAL context the
 * thread owns (mki_tls_fast is then the boot context), else NULL */
static _Thread_local mki_general *tls_secure TLS_IE;
/* a profiled process: the same, for a profiled GENERAL context the thread
 * owns (its every malloc passes the sampler's countdown, ctx.h) */
static _Thread_local mki_general *tls_prof TLS_IE;
/* libmemkit-malloc-prof: the countdown of a thread whose malloc context is
 * not profiled, far from zero (mki_heap_alloc_sampled) */
#define PROF_PARKED (INT64_MAX / 2)
static _Thread_local int tls_busy TLS_IE; /* setting up the heap */
static _Thread_local int tls_exited TLS_IE; /* heap_exit ran: the thread is
                                                in its last destructors */

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t heap_key;
static pthread_mutex_t heap_lock = PTHREAD_MUTEX_INITIALIZER;
static mk_ctx *orphans; /* linked through next_sibling (heaps are top-level) */

/* A heap attached after the thread's heap destructor ran (a malloc in a
 * later destructor: glibc runs pthread key destructors in up to four
 * rounds, in key order, and C11 tss_t is a key): glibc may call the
 * destructor again, or may not (the last round).  Such a *late* heap is
 * listed with a token of its thread (os.h); a sweep that finds the thread
 * gone makes the heap an orphan, so it goes back (or is adopted) as any
 * exited thread's heap does. */
typedef struct late_heap {
    mk_ctx *heap;
    long token;
    struct late_heap *next;
} late_heap;
static late_heap *lates; /* heap_lock */
static _Thread_local late_heap *tls_late TLS_IE;

enum { SWEEP_AT_EXIT = 8 };

/* ---- the context malloc uses ---------------------------------------------- */

/* The context malloc allocates from, without creating anything: the
 * current context if it is GENERAL, else the heap (NULL if none yet). */
static mk_ctx *malloc_ctx_now(void)
{
    mk_ctx *c = tls_current;
    if (c && c->kind == MK_GENERAL)
        return c;
    return tls_heap;
}

/* Point malloc's inline path at the context it may use without checks. */
static void update_fast(void)
{
    mk_ctx *c = malloc_ctx_now();
    /* (libmemkit-malloc-prof counts on the inline path: a profiled
     * GENERAL context may take it) */
    int inline_ok = c && (c->fast_kind == MK_GENERAL ||
                          (MKI_PROF_BUILD && c->fast_kind == MKI_KIND_PROF &&
                           c->kind == MK_GENERAL));
    mki_tls_fast = inline_ok && c->fast_tid == mki_tid() ? (mki_general *)c
                                                         : &mki_heap_boot;
    tls_secure = c && c->fast_kind == MKI_KIND_SECURE && c->kind == MK_GENERAL &&
                         c->fast_tid == (mki_tid() | MKI_TID_SECURE)
                     ? (mki_general *)c
                     : NULL;
    tls_prof = c && c->fast_kind == MKI_KIND_PROF && c->kind == MK_GENERAL &&
                       c->fast_tid == mki_tid()
                   ? (mki_general *)c
                   : NULL;
    if (tls_prof && mki_prof_left >= PROF_PARKED / 2)
        mki_prof_left = 0; /* a profiled context again: count from here */
}

/* ---- orphans ---------------------------------------------------------------- */

static void orphan_push(mk_ctx *h)
{
    h->next_sibling = orphans;
    orphans = h;
}

static mk_ctx *orphan_pop(void)
{
    mk_ctx *h = orphans;
    if (h) {
        orphans = h->next_sibling;
        h->next_sibling = NULL;
    }
    return h;
}

/* Does heap @h hold anything (after taking in other threads' frees)?
 * Pre: the caller is @h's only user.  An orphan's countdown (ctx.h,
 * orphan_left) is set from what it holds: the free that could be its last
 * has the heap looked at again (mki_heap_orphan_freed), and each look at
 * least halves the count, so a heap of n chunks is looked at about log2 n
 * times. */
static int holds_anything(mk_ctx *h)
{
    /* the countdown starts far from zero before the frees are taken in,
     * and is brought down to half the count after: a free that comes in
     * between is counted off it, taken in or not, so the countdown may
     * reach zero early (a look too many), never late */
    const long far = LONG_MAX / 4;
    atomic_store_explicit(&h->orphan_left, far, memory_order_relaxed);
    mk_stats st;
    mk_ctx_stats(h, &st, 0); /* takes in the remote frees first */
    long left = (long)(st.chunks / 2);
    atomic_fetch_add_explicit(&h->orphan_left, (left > 0 ? left : 1) - far,
                              memory_order_relaxed);
    return h->first_child != NULL || st.chunks != 0;
}

/* Late heaps whose thread is gone become orphans (heap_lock held); up to
 * @max are looked at (-1: all).  Returns the list entries to free. */
static late_heap *lates_gone(int max)
{
    late_heap *done = NULL, **at = &lates;
    for (int i = 0; *at && (max < 0 || i < max); i++) {
        late_heap *e = *at;
        if (!mki_os_thread_gone(e->token)) {
            at = &e->next;
            continue;
        }
        *at = e->next;
        mki_ctx_set_owner_tid(e->heap, 0); /* every free into it is remote */
        atomic_store_explicit(&e->heap->orphan_left, 1, memory_order_relaxed);
        orphan_push(e->heap);
        e->next = done;
        done = e;
    }
    return done;
}

/* Milliseconds of the monotonic clock (differences are what count). */
static uint32_t now_ms(void) { return (uint32_t)(mki_os_now_ns() / 1000000u); }

/* When a thread last attached a heap, the first one aside (ms; heap_lock). */
static uint32_t last_attach_ms;
static int attached_any;

/* Keep an orphan that holds nothing for the next thread to adopt (its
 * pages are laid out and warm: under thread churn, adopting it costs no
 * page, and deleting it would cost a new heap and its pages), or delete
 * it: when no thread has attached a heap for a quarter of the purge delay
 * (threads have stopped coming: the memory goes back at the pace of the
 * purge policy), when @force (mk_trim), or when no later collect will
 * come to delete it (no background thread).  Returns 1 to keep it.
 * heap_lock held. */
static int threads_coming(void)
{
    long delay = mki_option(MKI_OPT_PURGE_DELAY_MS);
    return delay >= 0 && now_ms() - last_attach_ms < (uint32_t)delay / 4;
}

static int keep_empty(int force)
{
    return !force && threads_coming() && mki_purge_collect();
}

/* Delete the heaps of list @dead (through next_sibling), without the heap
 * lock: a deletion runs the program's reset callbacks (mk_ctx_on_reset)
 * and may report leaks to its error handler, either of which may call
 * malloc, which may need the lock to attach a heap. */
static void delete_all(mk_ctx *dead)
{
    while (dead) {
        mk_ctx *next = dead->next_sibling;
        dead->next_sibling = NULL;
        mk_ctx_delete(dead);
        dead = next;
    }
}

/* Take in the frees of up to @max orphans (all: -1), under the lock (a
 * thread that attaches meanwhile waits and then adopts one, rather than
 * find the list empty and make a new heap); delete those that have stayed
 * empty (keep_empty), after it.  Late heaps whose thread is gone join them
 * first. */
static void sweep_orphans(int max, int force)
{
    mki_os_lock(&heap_lock);
    late_heap *gone = lates ? lates_gone(max) : NULL;
    mk_ctx *keep = NULL, **tail = &keep, *dead = NULL;
    for (int i = 0; (max < 0 || i < max) && orphans; i++) {
        mk_ctx *h = orphan_pop();
        if (!holds_anything(h) && !keep_empty(force)) {
            h->next_sibling = dead; /* (no thread can adopt it now) */
            dead = h;
            continue;
        }
        *tail = h;
        tail = &h->next_sibling;
    }
    *tail = orphans; /* the swept ones first, in their order */
    orphans = keep;
    mki_os_unlock(&heap_lock);
    delete_all(dead);
    while (gone) {
        late_heap *next = gone->next;
        mki_meta_free(gone, sizeof *gone);
        gone = next;
    }
}

/* An exiting thread's sweep of a few orphans, skipped while another
 * exiting thread is sweeping: the sweep is opportunistic (the next exit or
 * the purge thread's collect comes).  On 16 cores thread churn's 16
 * threads waited on the heap lock for up to a tenth of their time (31 -
 * 187 ms in runs of about 100 ms), as exits queued for each other's
 * sweeps; with the skip, 18 - 30 ms (docs/DESIGN.md, "Threads"). */
static atomic_int exit_sweeping;

static void exit_sweep(void)
{
    if (atomic_exchange_explicit(&exit_sweeping, 1, memory_order_acquire))
        return;
    sweep_orphans(SWEEP_AT_EXIT, 0);
    atomic_store_explicit(&exit_sweeping, 0, memory_order_release);
}

/* The calling thread is done with its heap @h: it becomes an orphan (owner
 * 0: every free into it is remote), for another thread to adopt, or is
 * deleted if it holds nothing and may not be kept (keep_empty). */
static void heap_release(mk_ctx *h)
{
    mki_ctx_set_owner_tid(h, 0);
    /* (outside the lock: a walk of the heap's pages, and the heap is still
     * this thread's alone; a chunk freed into it later was counted here) */
    int any = holds_anything(h);
    mki_os_lock(&heap_lock);
    int keep = any || keep_empty(0);
    if (keep)
        orphan_push(h);
    mki_os_unlock(&heap_lock);
    if (!keep)
        mk_ctx_delete(h); /* (without the lock: delete_all) */
}

/* pthread key destructor: the thread is exiting. */
static void heap_exit(void *arg)
{
    mk_ctx *h = arg;
    tls_exited = 1;
    late_heap *e = tls_late;
    if (e && e->heap == h) { /* a late heap, released in time after all */
        tls_late = NULL;
        mki_os_lock(&heap_lock);
        for (late_heap **at = &lates; *at; at = &(*at)->next)
            if (*at == e) {
                *at = e->next;
                break;
            }
        mki_os_unlock(&heap_lock);
        mki_meta_free(e, sizeof *e);
    }
    if (tls_heap == h)
        tls_heap = NULL;
    tls_current = NULL;
    update_fast(); /* the boot context: a later malloc here makes a new heap */
    exit_sweep();
    if (h)
        heap_release(h);
}

/* ---- fork --------------------------------------------------------------------- */

/* The heap list's part of the fork handlers, which the top (bind.c)
 * registers and orders among the other layers' (0 prepare, 1 parent,
 * 2 child, as mki_meta_fork). */
void mki_heap_fork(int phase)
{
    if (phase == 0) {
        pthread_mutex_lock(&heap_lock);
        return;
    }
    if (phase == 2) {
        /* the late heaps are other threads' (they may have been in the
         * middle of an allocation): left as they are, as their other
         * heaps are */
        lates = NULL;
        tls_late = NULL;
        /* (a sweeping thread of the parent's is not in the child) */
        atomic_store_explicit(&exit_sweeping, 0, memory_order_relaxed);
    }
    pthread_mutex_unlock(&heap_lock);
}

static void key_init(void) { pthread_key_create(&heap_key, heap_exit); }

/* What the purge thread runs when chunks were freed into heaps of exited
 * threads, or heaps emptied (mki_purge_collect): take them in, and give
 * back the heaps that have stayed empty, without waiting for another
 * thread to exit; mk_trim gives back every empty one (@force). */
int mki_heap_collect(int force)
{
    sweep_orphans(-1, force);
    mki_os_lock(&heap_lock);
    int waiting = lates != NULL; /* late heaps of threads still exiting */
    mki_os_unlock(&heap_lock);
    return waiting;
}

/* Frees into orphan @c brought its countdown to zero: if it is still an
 * orphan (not adopted meanwhile, nor a context of the program's that no
 * thread owns), take in its frees and give it back if it is empty. */
void mki_heap_orphan_freed(mk_ctx *c)
{
    mki_os_lock(&heap_lock);
    mk_ctx **at = &orphans;
    while (*at && *at != c)
        at = &(*at)->next_sibling;
    if (!*at) { /* (being adopted, or made an orphan: its countdown is
                    set once it is one) */
        mki_os_unlock(&heap_lock);
        return;
    }
    int dead = !holds_anything(c) && !keep_empty(0);
    if (dead) {
        *at = c->next_sibling;
        c->next_sibling = NULL;
    }
    mki_os_unlock(&heap_lock);
    if (dead)
        mk_ctx_delete(c);
}

/* ---- the heap ------------------------------------------------------------------ */

static void late_attach(mk_ctx *h)
{
    late_heap *e = mki_meta_alloc(sizeof *e);
    if (!e)
        return; /* (the heap goes back only if a destructor round comes) */
    e->heap = h;
    e->token = mki_os_thread_token();
    mki_os_lock(&heap_lock);
    e->next = lates;
    lates = e;
    mki_os_unlock(&heap_lock);
    tls_late = e;
    /* no destructor of ours will run for it: a collect finds the thread
     * gone, however long after the last thread exit */
    (void)mki_purge_collect();
}

/* A heap's pages of chunks up to 1 KiB are 64 KiB once it holds 32 KiB of
 * pages: the page floor (page/sizeclass.c says why, and why not sooner). */
static const mk_ctx_opts heap_opts = {.block_size = MKI_PAGE_MAX};

/* The calling thread's heap: adopt an orphan or create one.  NULL (errno
 * ENOMEM) when memory is exhausted or when called again from inside its
 * own set-up. */
static MKI_NOINLINE mk_ctx *heap_attach(void)
{
    if (tls_busy) {
        errno = ENOMEM;
        return NULL;
    }
    tls_busy = 1;
    pthread_once(&key_once, key_init);
    mki_os_lock(&heap_lock);
    mk_ctx *h = orphan_pop();
    /* (not the first: no orphan can wait yet, and a program that never
     * starts a thread then never calls into the clock's code: a fault of
     * 64 KiB of libc's text, in hello's fixed cost) */
    if (attached_any)
        last_attach_ms = now_ms();
    attached_any = 1;
    mki_os_unlock(&heap_lock);
    if (h)
        mki_ctx_set_owner_tid(h, mki_tid());
    else if ((h = mk_ctx_new(NULL, "thread", MK_GENERAL, &heap_opts)))
        h->flags |= MKI_CTX_OWN; /* (not the program's: ctx/record.c) */
    if (h) {
        tls_heap = h;
        update_fast();
        if (tls_exited) /* a destructor after ours: listed until it runs */
            late_attach(h); /* again, or the thread is found gone */
        pthread_setspecific(heap_key, h); /* may allocate: the heap is set */
    }
    tls_busy = 0;
    if (h)
        mki_heap_up.fork_handlers(); /* (bind.c; may allocate too) */
    return h;
}

static mk_ctx *heap_get(void)
{
    mk_ctx *h = tls_heap;
    return MKI_LIKELY(h != NULL) ? h : heap_attach();
}

mk_ctx *mki_heap_malloc_ctx(void)
{
    mk_ctx *c = tls_current;
    if (c && c->kind == MK_GENERAL)
        return c;
    return heap_get();
}

/* malloc's results are 16-aligned for every size (sizeclass.c): a request
 * of 17..24 bytes, which mk_alloc would serve from the 8-aligned 24-byte
 * class, is asked as 32 bytes of an uninstrumented context, and with
 * 16-byte alignment of an instrumented one (which then keeps the requested
 * size for its checks). */
void *mki_heap_alloc(size_t n)
{
    mki_purge_safe_point(); /* before anything is touched (purge.c) */
    mk_ctx *c = mki_heap_malloc_ctx();
    if (MKI_UNLIKELY(!c)) {
        errno = ENOMEM;
        return NULL;
    }
    if (c->fast_kind == MKI_KIND_SLOW)
        return n - 17 < 8 ? mk_alloc_aligned(c, n, 16) : mk_alloc(c, n);
    if (c->fast_kind == MKI_KIND_SECURE && c->kind == MK_GENERAL)
        return mki_general_alloc_secure((mki_general *)c, n); /* (16-aligned) */
    return mk_alloc(c, mki_class_malloc_size(n));
}

/* malloc of @n <= 32 KiB in GENERAL context @g, as the inline path does
 * it (its lookup and pop, in the real table), refill included. */
MKI_INLINE void *heap_pop(mki_general *g, size_t n)
{
    mki_page *pg = n <= MKI_DIRECT_MAX ? g->cls[mki_class_of_a16(n)]
                                       : mki_general_page_for(g, n);
    void *b = mki_general_pop(pg);
    if (MKI_UNLIKELY(!b))
        b = mki_general_refill(g, pg, mki_class_malloc_size(n));
    return b;
}

/* A profiled process's malloc of @n <= 32 KiB in its heap @pf: the pop,
 * then the countdown.  (Its slow paths take their own purge safe points.) */
static MKI_NOINLINE void *prof_malloc(mki_general *pf, size_t n)
{
    return mki_prof_count(&pf->base, heap_pop(pf, n), n);
}

void *mki_heap_alloc_sampled(size_t n)
{
    mk_ctx *c = mki_heap_malloc_ctx();
    if (MKI_UNLIKELY(!c)) {
        errno = ENOMEM;
        return NULL;
    }
    if (c->fast_kind != MKI_KIND_PROF) {
        /* malloc's context is not profiled: the countdown is parked until
         * it is (update_fast, mki_heap_profile_changed) */
        mki_prof_left = PROF_PARKED;
        return mki_heap_alloc(n);
    }
    void *p = heap_pop((mki_general *)c, n);
    if (p)
        mki_ctx_up.sample(c, p, n); /* (it draws the next interval) */
    return p;
}

void *mki_heap_refill(mki_general *g, mki_page *pg, size_t n)
{
    if (MKI_LIKELY(g != &mki_heap_boot))
        return mki_general_refill(g, pg, mki_class_malloc_size(n));
    mki_general *s = tls_secure; /* secure mode's every malloc */
    if (MKI_LIKELY(s != NULL) &&
        !atomic_load_explicit(&mki_purge_want, memory_order_relaxed))
        return mki_general_alloc_secure(s, n);
    mki_general *pf = tls_prof; /* a profiled process's every malloc */
    if (MKI_LIKELY(pf != NULL))
        return prof_malloc(pf, n);
    return mki_heap_alloc(n);
}

void mki_heap_profile_changed(int on)
{
    mki_prof_left = 0; /* (a countdown parked while the profile was off:
                          update_fast below unparks only a profiled one) */
    mki_ctx_set_profiled(tls_heap, on);
    mki_ctx_set_profiled(tls_current, on);
    update_fast();
}

void mki_heap_ctx_deleted(mk_ctx *c)
{
    if (tls_current == c)
        tls_current = NULL;
    if (tls_heap == c) {
        tls_heap = NULL;
        pthread_setspecific(heap_key, NULL);
    }
    update_fast();
}

/* ---- the current context ------------------------------------------------------ */

mk_ctx *mk_ctx_current(void)
{
    mk_ctx *c = tls_current;
    return c ? c : heap_get();
}

/* A switch to a deleted context is reported in every build (its record
 * says so: ctx/record.c); the checking build also reports a switch to a
 * context another thread owns (memkit.h: the contract of mk_ctx_switch),
 * and the switch is then not made. */
mk_ctx *mk_ctx_switch(mk_ctx *ctx)
{
    if (ctx && mki_ctx_dead(ctx, "mk_ctx_switch"))
        return mk_ctx_current();
    if (MK_CONFIG_CHECK && ctx && mki_ctx_owner(ctx) != mki_tid()) {
        mki_error_ctx_owner("mk_ctx_switch", ctx->name, mki_ctx_self());
        return mk_ctx_current();
    }
    mk_ctx *prev = mk_ctx_current();
    tls_current = ctx;
    update_fast();
    return prev;
}
