/* SPDX-License-Identifier: MIT */
/*
 * alloc_peers.h - the other context allocators, as bench allocators, each
 * compiled only when bench/CMakeLists.txt found it (HAVE_TALLOC, HAVE_APR,
 * HAVE_MIMALLOC).  Included by alloc_iface.h only.
 *
 *  talloc    a context is talloc_new(NULL); alloc talloc_size(ctx, n); free
 *            talloc_free(p); reset talloc_free_children(ctx); destroy
 *            talloc_free(ctx).  W5: children talloc_new(root), all deleted
 *            by talloc_free(root).
 *  apr       a context is apr_pool_create(&p, NULL) (the global allocator,
 *            as a program that does not set one up); alloc apr_palloc; no
 *            individual free (so not in free-oldest or W2); reset
 *            apr_pool_clear; destroy apr_pool_destroy.  W5: children
 *            apr_pool_create(&c, root), all deleted by apr_pool_destroy(root).
 *            apr_initialize() runs once in init.
 *  mimalloc  a context is a heap, mi_heap_new(); alloc mi_heap_malloc; free
 *            mi_free; destroy mi_heap_destroy (every block at once).  A heap
 *            has no reset, so reset is mi_heap_destroy + mi_heap_new (both
 *            timed: that is what the program must do).  W5: 10,000 heaps,
 *            no hierarchy, each destroyed.
 *
 * mimalloc is loaded with dlopen(RTLD_LOCAL), not linked: Debian's
 * libmimalloc.so exports malloc/free/realloc, and linking it would replace
 * glibc's malloc in the whole process - the baseline, talloc and APR would
 * all silently run on mimalloc.  Its functions are called through pointers
 * filled by dlsym once; such a call (`call *ptr(%rip)`) is the same
 * instruction a call into any shared library compiled with -fno-plt makes,
 * so it costs mimalloc no more than a normal dynamic link would.  (talloc
 * and APR are linked as shared libraries, called through the PLT like
 * glibc's malloc; memkit is linked statically.)
 */
#ifndef BENCH_ALLOC_PEERS_H
#define BENCH_ALLOC_PEERS_H

#define BENCH_STR_(x) #x
#define BENCH_STR(x) BENCH_STR_(x)

/* ---- talloc ----------------------------------------------------------------- */
#ifdef HAVE_TALLOC
#include <talloc.h>

static inline void *tal_ctx_new(size_t chunk)
{
    (void)chunk;
    return talloc_new(NULL);
}

static inline void *tal_tree_new(void)
{
    return talloc_new(NULL);
}

static inline void *tal_child_new(void *parent, size_t chunk)
{
    (void)chunk;
    return talloc_new(parent);
}

static inline void *tal_alloc(void *ctx, size_t size)
{
    return talloc_size(ctx, size);
}

static inline void tal_free(void *ctx, void *p, size_t size)
{
    (void)ctx;
    (void)size;
    talloc_free(p);
}

static inline void *tal_reset(void *ctx, void **live, size_t n)
{
    (void)live;
    (void)n;
    talloc_free_children(ctx);
    return ctx;
}

static inline void tal_destroy(void *ctx, void **live, size_t n)
{
    (void)live;
    (void)n;
    talloc_free(ctx);
}

static inline void tal_tree_delete(void *root, void **kids, size_t nkids, void **chunks,
                                   size_t nchunks)
{
    (void)kids;
    (void)nkids;
    (void)chunks;
    (void)nchunks;
    talloc_free(root);
}


static const bench_alloc ba_talloc BENCH_UNUSED = {
    .name = "talloc",
    .desc = "talloc: talloc " BENCH_STR(TALLOC_VERSION_MAJOR) "." BENCH_STR(
        TALLOC_VERSION_MINOR) " (talloc_new/talloc_size/talloc_free/talloc_free_children)",
    .joins = BJ_W1_FREE | BJ_W1_RESET | BJ_W2 | BJ_W5 | BJ_RSS,
    .ctx_new = tal_ctx_new,
    .tree_new = tal_tree_new,
    .child_new = tal_child_new,
    .alloc = tal_alloc,
    .free = tal_free,
    .reset = tal_reset,
    .destroy = tal_destroy,
    .tree_delete = tal_tree_delete,
};
#endif /* HAVE_TALLOC */

/* ---- APR pools -------------------------------------------------------------- */
#ifdef HAVE_APR
#include <apr_general.h>
#include <apr_pools.h>
#include <apr_version.h>

static inline int aprb_init(const char **why)
{
    if (apr_initialize() != APR_SUCCESS) {
        *why = "apr_initialize failed";
        return -1;
    }
    return 0;
}

static inline void *aprb_ctx_new(size_t chunk)
{
    (void)chunk;
    apr_pool_t *p = NULL;
    return apr_pool_create(&p, NULL) == APR_SUCCESS ? p : NULL;
}

static inline void *aprb_tree_new(void)
{
    return aprb_ctx_new(0);
}

static inline void *aprb_child_new(void *parent, size_t chunk)
{
    (void)chunk;
    apr_pool_t *p = NULL;
    return apr_pool_create(&p, (apr_pool_t *)parent) == APR_SUCCESS ? p : NULL;
}

static inline void *aprb_alloc(void *ctx, size_t size)
{
    return apr_palloc((apr_pool_t *)ctx, size);
}

static inline void *aprb_reset(void *ctx, void **live, size_t n)
{
    (void)live;
    (void)n;
    apr_pool_clear((apr_pool_t *)ctx);
    return ctx;
}

static inline void aprb_destroy(void *ctx, void **live, size_t n)
{
    (void)live;
    (void)n;
    apr_pool_destroy((apr_pool_t *)ctx);
}

static inline void aprb_tree_delete(void *root, void **kids, size_t nkids, void **chunks,
                                    size_t nchunks)
{
    (void)kids;
    (void)nkids;
    (void)chunks;
    (void)nchunks;
    apr_pool_destroy((apr_pool_t *)root);
}

static const bench_alloc ba_apr BENCH_UNUSED = {
    .name = "apr",
    .desc = "apr: APR " APR_VERSION_STRING " pools (apr_pool_create/apr_palloc/"
            "apr_pool_clear/apr_pool_destroy; no individual free)",
    .joins = BJ_W1_RESET | BJ_W5 | BJ_RSS,
    .init = aprb_init,
    .ctx_new = aprb_ctx_new,
    .tree_new = aprb_tree_new,
    .child_new = aprb_child_new,
    .alloc = aprb_alloc,
    .free = ba_no_free,
    .reset = aprb_reset,
    .destroy = aprb_destroy,
    .tree_delete = aprb_tree_delete,
};
#endif /* HAVE_APR */

/* ---- mimalloc heaps ----------------------------------------------------------- */
#ifdef HAVE_MIMALLOC
#include <dlfcn.h>
#include <mimalloc.h> /* types and prototypes only: nothing is linked */

#ifndef MIMALLOC_LIBRARY_PATH
#define MIMALLOC_LIBRARY_PATH "libmimalloc.so.2"
#endif

/* Filled once by mib_init (dlsym), read by every call; one instance for
 * the program (defined in alloc_peers.c), since the descriptor and its
 * functions are copied into every file that includes this header. */
struct bench_mib {
    __typeof__(&mi_heap_new) heap_new;
    __typeof__(&mi_heap_malloc) heap_malloc;
    __typeof__(&mi_free) free;
    __typeof__(&mi_heap_destroy) heap_destroy;
};
extern struct bench_mib mib;

static inline int mib_init(const char **why)
{
    void *h = dlopen(MIMALLOC_LIBRARY_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        *why = dlerror();
        return -1;
    }
    *(void **)&mib.heap_new = dlsym(h, "mi_heap_new");
    *(void **)&mib.heap_malloc = dlsym(h, "mi_heap_malloc");
    *(void **)&mib.free = dlsym(h, "mi_free");
    *(void **)&mib.heap_destroy = dlsym(h, "mi_heap_destroy");
    if (!mib.heap_new || !mib.heap_malloc || !mib.free || !mib.heap_destroy) {
        *why = "a mi_heap_* symbol is missing";
        return -1;
    }
    return 0;
}

static char mib_dummy_root;

static inline void *mib_ctx_new(size_t chunk)
{
    (void)chunk;
    return mib.heap_new();
}

static inline void *mib_tree_new(void)
{
    return &mib_dummy_root;
}

static inline void *mib_child_new(void *parent, size_t chunk)
{
    (void)parent;
    (void)chunk;
    return mib.heap_new();
}

static inline void *mib_alloc(void *ctx, size_t size)
{
    return mib.heap_malloc((mi_heap_t *)ctx, size);
}

static inline void mib_free(void *ctx, void *p, size_t size)
{
    (void)ctx;
    (void)size;
    mib.free(p);
}

static inline void *mib_reset(void *ctx, void **live, size_t n)
{
    (void)live;
    (void)n;
    mib.heap_destroy((mi_heap_t *)ctx);
    return mib.heap_new();
}

static inline void mib_destroy(void *ctx, void **live, size_t n)
{
    (void)live;
    (void)n;
    mib.heap_destroy((mi_heap_t *)ctx);
}

static inline void mib_tree_delete(void *root, void **kids, size_t nkids, void **chunks,
                                   size_t nchunks)
{
    (void)root;
    (void)chunks;
    (void)nchunks;
    for (size_t i = 0; i < nkids; i++)
        mib.heap_destroy((mi_heap_t *)kids[i]);
}

static const bench_alloc ba_mimalloc BENCH_UNUSED = {
    .name = "mimalloc",
    .desc = "mimalloc: mimalloc (MI_MALLOC_VERSION " BENCH_STR(MI_MALLOC_VERSION) ") heaps, "
            "dlopen'ed (mi_heap_new/mi_heap_malloc/mi_free/mi_heap_destroy)",
    .joins = BJ_W1_FREE | BJ_W1_RESET | BJ_W2 | BJ_W5 | BJ_RSS,
    .init = mib_init,
    .ctx_new = mib_ctx_new,
    .tree_new = mib_tree_new,
    .child_new = mib_child_new,
    .alloc = mib_alloc,
    .free = mib_free,
    .reset = mib_reset,
    .destroy = mib_destroy,
    .tree_delete = mib_tree_delete,
};
#endif /* HAVE_MIMALLOC */

#endif /* BENCH_ALLOC_PEERS_H */
