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
 * that emptied), so orphans also go back when no new thread comes.
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
#include "../ctx/general.h"

#include <errno.h>
#include <pthread.h>

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
static _Thread_local int tls_busy TLS_IE; /* setting up the heap */

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static pthread_key_t heap_key;
static pthread_mutex_t heap_lock = PTHREAD_MUTEX_INITIALIZER;
static mk_ctx *orphans; /* linked through next_sibling (heaps are top-level) */

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
    mki_tls_fast = c && c->fast_kind == MK_GENERAL && c->fast_tid == mki_tid()
                       ? (mki_general *)c
                       : &mki_heap_boot;
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
 * Pre: the caller is @h's only user. */
static int holds_anything(mk_ctx *h)
{
    mk_stats st;
    mk_ctx_stats(h, &st, 0); /* takes in the remote frees first */
    return h->first_child != NULL || st.chunks != 0;
}

/* Take in the frees of up to @max orphans (all: -1); delete those that
 * emptied. */
void mki_heap_sweep_orphans(int max)
{
    mk_ctx *taken = NULL;
    mki_lock(&heap_lock);
    for (int i = 0; (max < 0 || i < max) && orphans; i++) {
        mk_ctx *h = orphan_pop();
        h->next_sibling = taken;
        taken = h;
    }
    mki_unlock(&heap_lock);
    mk_ctx *keep = NULL, *last = NULL;
    while (taken) {
        mk_ctx *h = taken;
        taken = h->next_sibling;
        h->next_sibling = NULL;
        if (holds_anything(h)) {
            h->next_sibling = keep;
            keep = h;
            if (!last)
                last = h;
        } else {
            mk_ctx_delete(h);
        }
    }
    if (keep) {
        mki_lock(&heap_lock);
        last->next_sibling = orphans;
        orphans = keep;
        mki_unlock(&heap_lock);
    }
}

/* The calling thread is done with its heap @h: delete it if it holds
 * nothing, else make it an orphan. */
static void heap_release(mk_ctx *h)
{
    if (!holds_anything(h)) {
        mk_ctx_delete(h);
        return;
    }
    mki_ctx_set_owner_tid(h, 0); /* every free into it is now remote */
    mki_lock(&heap_lock);
    orphan_push(h);
    mki_unlock(&heap_lock);
}

/* pthread key destructor: the thread is exiting. */
static void heap_exit(void *arg)
{
    mk_ctx *h = arg;
    if (tls_heap == h)
        tls_heap = NULL;
    tls_current = NULL;
    mki_tls_fast = &mki_heap_boot; /* a later malloc here makes a new heap */
    mki_heap_sweep_orphans(SWEEP_AT_EXIT);
    if (h)
        heap_release(h);
}

/* ---- fork --------------------------------------------------------------------- */

static void fork_prepare(void)
{
    mki_pool_fork(0); /* (taken alone, never with another lock) */
    pthread_mutex_lock(&heap_lock);
    mki_purge_fork(0);
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
    mki_purge_fork(1);
    pthread_mutex_unlock(&heap_lock);
    mki_pool_fork(1);
}

static void fork_child(void)
{
    mki_os_forking = 0;
    mki_meta_fork(2);
    mki_segment_fork(2);
    mki_huge_fork(2);
    pthread_mutex_unlock(&heap_lock);
    mki_purge_fork(2);
    mki_pool_fork(2);
}

static void key_init(void) { pthread_key_create(&heap_key, heap_exit); }
static void fork_init(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* The handlers are registered when the library is loaded, before a
 * program's constructors and its first malloc, and never from inside
 * malloc: registering takes glibc's atfork lock, which fork() holds while
 * it runs the handlers, so a first malloc made by a fork handler would
 * otherwise wait for itself.  A library whose constructor runs earlier
 * and registers handlers of its own has them run on the other side of
 * memkit's; they may allocate all the same (mki_os_forking, os.h).  The
 * pthread_once in heap_attach covers a static link whose constructors
 * were dropped. */
__attribute__((constructor)) static void fork_at_load(void)
{
    pthread_once(&fork_once, fork_init);
}

/* ---- the heap ------------------------------------------------------------------ */

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
    mki_lock(&heap_lock);
    mk_ctx *h = orphan_pop();
    mki_unlock(&heap_lock);
    if (h)
        mki_ctx_set_owner_tid(h, mki_tid());
    else
        h = mk_ctx_new(NULL, "thread", MK_GENERAL, NULL);
    if (h) {
        tls_heap = h;
        update_fast();
        pthread_setspecific(heap_key, h); /* may allocate: the heap is set */
    }
    tls_busy = 0;
    if (h)
        pthread_once(&fork_once, fork_init); /* may allocate too */
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
    n = mki_class_malloc_size(n);
    if (c->fast_kind == MKI_KIND_SECURE && c->kind == MK_GENERAL)
        return mki_general_alloc_secure((mki_general *)c, n);
    return mk_alloc(c, n);
}

void *mki_heap_refill(mki_general *g, mki_page *pg, size_t n)
{
    if (MKI_LIKELY(g != &mki_heap_boot))
        return mki_general_refill(g, pg, mki_class_malloc_size(n));
    return mki_heap_alloc(n);
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

mk_ctx *mk_ctx_switch(mk_ctx *ctx)
{
    mk_ctx *prev = mk_ctx_current();
    tls_current = ctx;
    update_fast();
    return prev;
}
