/* SPDX-License-Identifier: MIT */
/*
 * pool.c - typed pools: fixed-size objects over SLAB contexts.
 *
 * A pool is a SLAB context (the root) plus a name and flags.  Without
 * MK_POOL_THREADSAFE, a pool has a *front*: a stack of the objects freed
 * into it, which the next allocations take first.  The front takes
 * only objects of the slab's current page (an address range the slab keeps
 * up to date) and gives them back to that page when the slab moves to
 * another, so it never keeps any other page from emptying.  The front is the
 * first member of the pool and its layout is in memkit.h, so the inline
 * mk_pool_get / mk_pool_put (and MK_POOL_DECLARE's typed functions) serve a
 * program that allocates and frees in turn without any call: the cost of
 * a call is what bounds a called allocator near 2.5x glibc.  Objects in the
 * front are live for their page and free for the program (statistics
 * count them, walking the front, and subtract them).  The front keeps no
 * count: a count of its own bounded nothing (it holds only the current
 * page's objects) and cost two read-modify-writes a get and put pair.  Past the front, alloc and
 * free go straight to the slab (no lookup: the pool is the slab).  With it, every thread allocates from a slab of
 * its own, a child of the root owned by that thread, so the allocation path
 * has no lock and no atomic operation; a free from another thread is pushed
 * on the owning slab's atomic remote list, which its thread collects when it
 * runs out of partly free pages.  The calling thread's slab is found
 * through a one-entry thread-local cache (pool pointer and a unique pool id,
 * so a new pool at a freed pool's address is not mistaken for it); on a
 * miss, the pool's mutex guards the walk of the children and the creation
 * of a new slab.
 *
 * A thread that uses thread-safe pools takes a *shard number*, the
 * smallest one no live thread holds, and gives it back when it exits (a
 * thread-specific key's destructor).  A slab records the number of the
 * thread it serves; a thread that finds no slab of its own in a pool takes
 * over the slab of its number, whose thread has exited (its objects, its
 * pages, the frees other threads pushed meanwhile), before it makes a new
 * one.  So a pool holds at most one slab per thread alive at once, however
 * many threads come and go (thread identities are never reused, os.h: by
 * identity alone, a program that starts 1,000 threads that each touch a
 * pool would leave 1,000 slabs and their pages, found by the soak test).
 *
 * Trade-off: a thread that allocates from many thread-safe pools in turn
 * misses the one-entry cache each time (a mutex and a short walk); a
 * thread's first use of a thread-safe pool takes the shard lock once.
 */

#include "pool.h"

#include <errno.h>

struct mk_pool {
    mk_pool_front front;   /* first: the inline paths in memkit.h read it */
    mki_slab *fast;        /* the slab when alloc/free need no lookup and
                              no instrumentation; else NULL */
    const char *name;
    size_t size, align;
    unsigned flags;
    uint64_t id;
    mk_ctx *root;          /* the slab; thread-safe: the creator's slab */
    pthread_mutex_t lock;  /* thread-safe: the children of root */
};

static _Atomic uint64_t next_id = 1;

/* ---- shard numbers ------------------------------------------------------------ */

typedef struct shard_num {
    unsigned n;
    struct shard_num *next;
} shard_num;

static pthread_mutex_t shard_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t shard_once = PTHREAD_ONCE_INIT;
static pthread_key_t shard_key;
static shard_num *shards_free; /* numbers given back, smallest first */
static unsigned shards_next = 1;
static _Thread_local __attribute__((tls_model("initial-exec"))) unsigned
    my_shard;

/* Thread exit: the number goes back, for the next thread to take (with
 * the slabs it served). */
static void shard_exit(void *arg)
{
    shard_num *e = arg;
    mki_os_lock(&shard_lock);
    shard_num **at = &shards_free;
    while (*at && (*at)->n < e->n)
        at = &(*at)->next;
    e->next = *at;
    *at = e;
    mki_os_unlock(&shard_lock);
    my_shard = 0;
}

static void shard_init(void) { pthread_key_create(&shard_key, shard_exit); }

void mki_pool_fork(int phase)
{
    if (phase == 0)
        pthread_mutex_lock(&shard_lock);
    else
        pthread_mutex_unlock(&shard_lock);
}

/* The calling thread's shard number (0 if memory ran out). */
static unsigned shard_number(void)
{
    if (MKI_LIKELY(my_shard != 0))
        return my_shard;
    pthread_once(&shard_once, shard_init);
    mki_os_lock(&shard_lock);
    shard_num *e = shards_free;
    if (e)
        shards_free = e->next;
    mki_os_unlock(&shard_lock);
    if (!e) {
        e = mki_meta_alloc(sizeof *e);
        if (!e)
            return 0;
        mki_os_lock(&shard_lock);
        e->n = shards_next++;
        mki_os_unlock(&shard_lock);
    }
    e->next = NULL;
    my_shard = e->n;
    /* (may allocate, in glibc, for a program with many keys: no lock of
     * ours is held) */
    if (pthread_setspecific(shard_key, e) != 0) {
        shard_exit(e); /* no destructor to give it back: do it now */
        return 0;
    }
    return my_shard;
}

static _Thread_local __attribute__((tls_model("initial-exec"))) struct {
    const mk_pool *pool;
    uint64_t id;
    mk_ctx *slab;
} cache;

/* The pool's root is going (mk_pool_delete, or the delete or reset of the
 * context it is a child of): the pool goes with it. */
static void pool_gone(void *arg)
{
    mk_pool *pool = arg;
    /* the callback runs before the root's pages go: the slab must not
     * reach into the pool's front, nor name the pool, once it is freed */
    mki_slab *root = (mki_slab *)pool->root;
    root->front = NULL;
    root->pool = NULL;
    pthread_mutex_destroy(&pool->lock);
    if (cache.pool == pool)
        cache.pool = NULL;
    mki_meta_free(pool, sizeof *pool);
}

static mk_pool *pool_make(mk_ctx *parent, const char *name, size_t size,
                          size_t align, unsigned flags);

/* (The names in parentheses: memkit.h defines mk_pool_new and
 * mk_pool_new_in as macros over mk_pool_new_abi; the functions stay for
 * programs that do not go through the header.) */
mk_pool *(mk_pool_new)(const char *name, size_t size, size_t align,
                       unsigned flags)
{
    return pool_make(NULL, name, size, align, flags);
}

mk_pool *(mk_pool_new_in)(mk_ctx *parent, const char *name, size_t size,
                          size_t align, unsigned flags)
{
    return pool_make(parent, name, size, align, flags);
}

/* The layout of the pool front the program was compiled with (@abi, the
 * header's MK_POOL_ABI_) against this library's: the inline mk_pool_get
 * and mk_pool_put of another layout would read and write the front at the
 * wrong places, so such a program gets a report and no pool. */
mk_pool *mk_pool_new_abi(mk_ctx *parent, const char *name, size_t size,
                         size_t align, unsigned flags, size_t abi)
{
    if (abi != MK_POOL_ABI_) {
        mki_line l = {.len = 0};
        mki_line_str(&l, "the program was compiled with another memkit.h "
                         "(ABI ");
        mki_line_num(&l, (long long)(abi >> 16));
        mki_line_str(&l, ", a pool front of ");
        mki_line_num(&l, (long long)(abi & 0xffff));
        mki_line_str(&l, " bytes; this library: ABI ");
        mki_line_num(&l, MK_ABI_VERSION);
        mki_line_str(&l, ", ");
        mki_line_num(&l, (long long)sizeof(mk_pool_front));
        mki_line_str(&l, " bytes): rebuild it against this memkit");
        l.buf[l.len] = '\0'; /* (a line keeps room for it) */
        mki_error_fatal(parent ? "mk_pool_new_in" : "mk_pool_new", l.buf);
        errno = EINVAL;
        return NULL;
    }
    return pool_make(parent, name, size, align, flags);
}

static mk_pool *pool_make(mk_ctx *parent, const char *name, size_t size,
                          size_t align, unsigned flags)
{
    if (size == 0 || (align & (align - 1)) != 0) {
        errno = EINVAL;
        return NULL;
    }
    mk_pool *pool = mki_meta_alloc(sizeof *pool);
    if (!pool)
        return NULL;
    mk_ctx_opts opts = {.chunk_size = size, .chunk_align = align};
    pool->root = mk_ctx_new(parent, name, MK_SLAB, &opts);
    if (!pool->root) {
        mki_meta_free(pool, sizeof *pool);
        return NULL;
    }
    if (mk_ctx_on_reset(pool->root, pool_gone, pool) != 0) {
        mk_ctx_delete(pool->root);
        mki_meta_free(pool, sizeof *pool);
        errno = ENOMEM;
        return NULL;
    }
    ((mki_slab *)pool->root)->pool = pool;
    if (flags & MK_POOL_THREADSAFE) /* the creator's slab: its number's */
        ((mki_slab *)pool->root)->shard = shard_number();
    pool->name = name ? name : "?";
    pool->size = size;
    pool->align = align;
    pool->flags = flags;
    pool->id = atomic_fetch_add(&next_id, 1);
    if (!(flags & MK_POOL_THREADSAFE) && pool->root->fast_kind == MK_SLAB) {
        pool->fast = (mki_slab *)pool->root;
        pool->fast->front = &pool->front; /* the slab keeps its range */
    }
    pthread_mutex_init(&pool->lock, NULL);
    return pool;
}

/* The calling thread's slab in a thread-safe pool: its own, else the one
 * its shard number served (that thread has exited: taken over), else a
 * new one. */
static MKI_NOINLINE mk_ctx *shard_slow(mk_pool *pool)
{
    uintptr_t tid = mki_tid();
    unsigned me = shard_number();
    mk_ctx *found = NULL, *heir = NULL;
    pthread_mutex_lock(&pool->lock);
    for (mk_ctx *c = pool->root; !found && c;
         c = c == pool->root ? c->first_child : c->next_sibling) {
        if (mki_ctx_owner(c) == tid)
            found = c;
        else if (me && ((mki_slab *)c)->shard == me)
            heir = c;
    }
    if (!found && heir) {
        found = heir;
        mki_ctx_set_owner_tid(found, tid);
    }
    if (!found) {
        mk_ctx_opts opts = {.chunk_size = pool->size, .chunk_align = pool->align};
        found = mk_ctx_new(pool->root, pool->name, MK_SLAB, &opts);
        if (found) {
            ((mki_slab *)found)->pool = pool;
            ((mki_slab *)found)->shard = me;
        }
    }
    pthread_mutex_unlock(&pool->lock);
    if (found) {
        cache.pool = pool;
        cache.id = pool->id;
        cache.slab = found;
    }
    return found;
}

static mk_ctx *shard(mk_pool *pool)
{
    if (!(pool->flags & MK_POOL_THREADSAFE))
        return pool->root;
    if (MKI_LIKELY(cache.pool == pool && cache.id == pool->id))
        return cache.slab;
    return shard_slow(pool);
}

/* Thread-safe or instrumented pools. */
static MKI_NOINLINE void *alloc_slow(mk_pool *pool)
{
    mk_ctx *c = shard(pool);
    if (MKI_UNLIKELY(!c))
        return NULL;
    if (c->fast_kind == MKI_KIND_SLOW) /* the decorator's (ctx.h) */
        return c->ops->alloc(c, pool->size);
    if (c->fast_kind != MK_SLAB) /* secure mode: encoded links */
        return mki_slab_alloc_chunk((mki_slab *)c);
    return mki_slab_alloc_fast((mki_slab *)c);
}

/* The calling thread's slab of thread-safe pool @pool when the one-entry
 * cache holds it and its fast paths apply (not instrumented, not secure),
 * else NULL.  (The cache names thread-safe pools only.) */
static inline mki_slab *cached_fast(const mk_pool *pool)
{
    if (MKI_LIKELY(cache.pool == pool && cache.id == pool->id &&
                   cache.slab->fast_kind == MK_SLAB))
        return (mki_slab *)cache.slab;
    return NULL;
}

void *mk_pool_alloc(mk_pool *pool)
{
    void *obj = pool->front.head;
    if (obj) {
        pool->front.head = *(void **)obj;
        mki_page_chunk_set_live(obj);
        return obj;
    }
    if (MKI_LIKELY(pool->fast != NULL))
        return mki_slab_alloc_fast(pool->fast);
    mki_slab *s = cached_fast(pool);
    if (MKI_LIKELY(s != NULL))
        return mki_slab_alloc_fast(s);
    return alloc_slow(pool);
}

/* Everything but an object of the plain pool's own page: thread-safe and
 * instrumented pools, secure mode, objects of other pages, and whatever
 * is no object of a slab (reported, as mk_free reports it). */
static MKI_NOINLINE void free_slow(mk_pool *pool, void *obj)
{
    mki_page *pg = MK_CONFIG_CHECK ? mki_page_validate(obj, "mk_pool_free", 1)
                                   : mki_segment_find(obj);
    if (!pg) {
        if (!MK_CONFIG_CHECK)
            mki_error_invalid("mk_pool_free", obj);
        return;
    }
    mk_ctx *c = pg->ctx;
    if (!MK_CONFIG_CHECK && (pg->kind != MKI_PAGE_SMALL || !c ||
                             c->kind != MK_SLAB)) {
        mki_chunk_free_slow(pg, obj, "mk_pool_free"); /* mk_free's rules */
        return;
    }
    const mk_pool *owner = c->kind == MK_SLAB ? ((mki_slab *)c)->pool : NULL;
    if (MK_CONFIG_CHECK && owner != pool) {
        mki_error_wrong_pool("mk_pool_free", obj, owner ? "pool" : "context",
                             owner ? owner->name : c->name, pool->name);
        return;
    }
    if (c->ops->free_any) { /* the decorator's (ctx.h) */
        c->ops->free_any(pg, obj, "mk_pool_free");
        return;
    }
    if ((pool->flags & MK_POOL_THREADSAFE) && mki_ctx_owner(c) != mki_tid()) {
        if (!mki_page_is_chunk_exact(pg, obj) || mki_page_chunk_freed(pg, obj)) {
            mki_slab_free_checked(pg, obj, "mk_pool_free"); /* reports */
            return;
        }
        if (c->fast_kind == MKI_KIND_SECURE && !mki_chunk_guard_ok(pg, obj, "mk_pool_free"))
            return;
        mki_page_chunk_set_freed(pg, obj); /* before it is on the remote list */
        mki_chunk_remote_push(c, obj);
    } else if (c->fast_kind != MK_SLAB) { /* secure mode: encoded links */
        mki_slab_free_checked(pg, obj, "mk_pool_free");
    } else {
        mki_slab_free_fast((mki_slab *)c, pg, obj, "mk_pool_free");
    }
}

void mk_pool_free(mk_pool *pool, void *obj)
{
    mk_pool_front *f = &pool->front;
    uintptr_t off = (uintptr_t)obj - f->lo;
    if (off < f->span && (uint32_t)off * f->magic < f->limit) {
        /* (the front's key is its page's: the slab's current page) */
        if (MKI_UNLIKELY(((uintptr_t *)obj)[1] == f->key)) {
            mki_error_double_free("mk_pool_free", obj, mki_ctx_name(pool->root));
            return;
        }
        *(void **)obj = f->head;
        ((uintptr_t *)obj)[1] = f->key;
        f->head = obj;
        return;
    }
    if (MKI_UNLIKELY(!obj))
        return;
    /* the plain pool's own objects, or in a thread-safe pool those of the
     * calling thread's slab: their page is that slab's, found in a known
     * segment (a pointer elsewhere goes to free_slow, reported; another
     * thread's object goes on its slab's remote list there) */
    mki_slab *s = pool->fast ? pool->fast : cached_fast(pool);
    if (MKI_LIKELY(s != NULL && mki_segment_known(obj))) {
        mki_page *pg = mki_page_of(obj);
        if (MKI_LIKELY(pg != NULL && pg->ctx == &s->base)) {
            mki_slab_free_fast(s, pg, obj, "mk_pool_free");
            return;
        }
    }
    free_slow(pool, obj);
}

int mk_pool_stats(const mk_pool *pool, mk_stats *out)
{
    if (!pool) {
        errno = EINVAL;
        return -1;
    }
    /* the lock keeps the list of per-thread slabs still */
    pthread_mutex_lock((pthread_mutex_t *)&pool->lock);
    int r = mki_ctx_stats_tree(pool->root, out, 1,
                           (pool->flags & MK_POOL_THREADSAFE) != 0);
    pthread_mutex_unlock((pthread_mutex_t *)&pool->lock);
    if (r != 0)
        return -1;
    /* (objects in the front count as free: the slab's figures say so) */
    return 0;
}

void mk_pool_delete(mk_pool *pool)
{
    if (!pool)
        return;
    /* take in what other threads freed, so it is not counted as leaked */
    mki_kinds[MK_SLAB]->collect(pool->root);
    for (mk_ctx *c = pool->root->first_child; c; c = c->next_sibling)
        mki_kinds[MK_SLAB]->collect(c);
    mk_stats st;
    mk_pool_stats(pool, &st);
    if (st.chunks)
        mki_error_leak("mk_pool_delete", "pool", pool->name, "object", st.chunks,
                       st.chunks * pool->size);
    mk_ctx_delete(pool->root); /* and the pool with it (pool_gone) */
}
