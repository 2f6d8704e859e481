/*
 * alloc_iface.h - the allocator abstraction every workload is written against.
 *
 * For the bench an allocator is a handful of operations on a "context":
 * create one (top-level, or as a child of another), allocate a chunk in it,
 * free one chunk, reset it (every chunk goes at once, the context stays),
 * destroy it, and delete a whole tree of contexts (W5).  memkit maps them
 * onto its contexts (alloc_memkit.h), talloc, APR and mimalloc onto theirs
 * (alloc_peers.h).  The system allocator has no contexts: its "context" is a
 * dummy, and its reset/destroy free every live chunk one by one
 * (alloc_malloc.h) - the work a program on malloc must do to drop a batch of
 * objects, so it is timed exactly where memkit's reset is.  That is why reset
 * and destroy receive the workload's array of live pointers; allocators that
 * do not need it ignore it, and the workload fills it the same way for all.
 *
 * Why static inline functions in headers and not a table of function
 * pointers in a .c file: the timed loops must call each allocator directly,
 * as a real program does.  An indirect call through a table would add the
 * same ~1 ns to every operation of both allocators and pull every ratio
 * towards 1.  So each allocator is a `static const` descriptor the compiler
 * can see; a workload writes its timed loop once, as a BENCH_KERNEL taking a
 * descriptor, and BENCH_SPECIALIZE(kernel) makes one copy of it per
 * allocator with the descriptor a constant, so `a->alloc(...)` folds into a
 * direct call to mk_alloc / malloc / talloc_size (check: objdump -d shows no
 * `call *` in the kernel copies, except mimalloc's: see alloc_peers.h).
 * kernel_for[id] then picks the copy at run time.
 *
 * Which workloads an allocator joins is its `joins` set (BJ_*), not derived
 * from what it can do: a BUMP context cannot free one chunk, so it is not in
 * W1 free-oldest or W2; a SLAB context could be reset, but SLAB is measured
 * in free-oldest only: the quick suite's time is better spent elsewhere.  An operation an allocator does not support is a stub that
 * aborts (ba_no_*): it is never called, because the workloads that would
 * call it are not in its `joins`.
 *
 * Adding an allocator: write its descriptor `ba_<name>` (in alloc_memkit.h,
 * alloc_peers.h or a new header included below) and add X(<name>, arg) to
 * BENCH_ALLOCATORS - guarded by the HAVE_<LIB> macro bench/CMakeLists.txt
 * defines when an optional library is found.  Ratios are always
 * baseline / allocator, the baseline being the system malloc.
 */
#ifndef BENCH_ALLOC_IFACE_H
#define BENCH_ALLOC_IFACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The workloads (and patterns) an allocator takes part in. */
#define BJ_W1_FREE 0x01u  /* W1 free-oldest: needs an individual free */
#define BJ_W1_RESET 0x02u /* W1 reset: needs a reset */
#define BJ_W2 0x04u       /* W2 pool test: needs an individual free */
#define BJ_W5 0x08u       /* W5: many small contexts (needs child_new, tree_delete) */
#define BJ_RSS 0x10u      /* RSS per chunk (allocate only) */
#define BJ_W3 0x20u       /* W3 in-process: a 512 MiB peak, then churn (free) */

typedef struct bench_alloc {
    const char *name; /* short column title: "mk-general", "malloc" */
    const char *desc; /* one line for the header of the report */
    unsigned joins;   /* BJ_* */
    /* NULL, or make the allocator usable (load a library); 0 on success,
     * else -1 with a reason in *why.  Called once, outside every timing and
     * before an RSS child reads its baseline (see bench_alloc_ready). */
    int (*init)(const char **why);
    /* A new, empty top-level context.  @chunk is the chunk size the workload
     * will use (a fixed-size allocator needs it; others ignore it).  NULL on
     * failure. */
    void *(*ctx_new)(size_t chunk);
    /* W5: the root of a tree of contexts (memkit: a GENERAL context, whatever
     * the column's kind; an allocator without a hierarchy: a dummy). */
    void *(*tree_new)(void);
    /* W5: a new context that dies with @parent (an allocator without a
     * hierarchy returns an independent one). */
    void *(*child_new)(void *parent, size_t chunk);
    void *(*alloc)(void *ctx, size_t size);
    /* Free chunk @p of @size bytes (the size it was allocated with, as C23's
     * free_sized; only a typed pool uses it, to pick its typed free). */
    void (*free)(void *ctx, void *p, size_t size);
    /* Drop every chunk; live[0..n) are the chunks the workload holds.
     * Returns the context to go on with (mimalloc has no heap reset: a new
     * heap replaces the destroyed one), NULL on failure. */
    void *(*reset)(void *ctx, void **live, size_t n);
    /* Drop every chunk and the context itself. */
    void (*destroy)(void *ctx, void **live, size_t n);
    /* W5: drop @root, its children kids[0..nkids) and every chunk
     * (chunks[0..nchunks)), the way a program on this allocator would. */
    void (*tree_delete)(void *root, void **kids, size_t nkids, void **chunks,
                        size_t nchunks);
} bench_alloc;

#define BENCH_UNUSED __attribute__((unused))

/* Stubs for the operations an allocator does not have; never called (see
 * above), they abort loudly if a workload's `joins` check is ever wrong. */
static inline __attribute__((noreturn)) void ba_unsupported(const char *op)
{
    fprintf(stderr, "memkit-bench: internal error: %s called on an allocator "
                    "without it\n", op);
    abort();
}
static inline void ba_no_free(void *ctx, void *p, size_t size)
{
    (void)ctx;
    (void)p;
    (void)size;
    ba_unsupported("free");
}
static inline void *ba_no_reset(void *ctx, void **live, size_t n)
{
    (void)ctx;
    (void)live;
    (void)n;
    ba_unsupported("reset");
}
static inline void *ba_no_tree_new(void)
{
    ba_unsupported("tree_new");
}
static inline void *ba_no_child(void *parent, size_t chunk)
{
    (void)parent;
    (void)chunk;
    ba_unsupported("child_new");
}
static inline void ba_no_tree(void *root, void **kids, size_t nkids, void **chunks,
                              size_t nchunks)
{
    (void)root;
    (void)kids;
    (void)nkids;
    (void)chunks;
    (void)nchunks;
    ba_unsupported("tree_delete");
}

#include "alloc_malloc.h"
#include "alloc_memkit.h"
#include "alloc_peers.h"

#ifdef HAVE_TALLOC
#define BA_X_TALLOC_(X, arg) X(talloc, arg)
#else
#define BA_X_TALLOC_(X, arg)
#endif
#ifdef HAVE_APR
#define BA_X_APR_(X, arg) X(apr, arg)
#else
#define BA_X_APR_(X, arg)
#endif
#ifdef HAVE_MIMALLOC
#define BA_X_MIMALLOC_(X, arg) X(mimalloc, arg)
#else
#define BA_X_MIMALLOC_(X, arg)
#endif

/* Every allocator the bench knows, in column order (X-macro; the second
 * argument is passed through to X).  Runs alternate in this order too. */
#define BENCH_ALLOCATORS(X, arg) \
    X(mk_general, arg)           \
    X(mk_gen, arg)               \
    X(mk_slab, arg)              \
    X(mk_bump, arg)              \
    X(mk_pool, arg)              \
    X(mk_poolts, arg)            \
    BA_X_TALLOC_(X, arg)         \
    BA_X_APR_(X, arg)            \
    BA_X_MIMALLOC_(X, arg)       \
    X(malloc, arg)

#define BA_ENUM_(n, arg) BA_##n,
enum { BENCH_ALLOCATORS(BA_ENUM_, _) BA_COUNT };

/* The allocator every ratio is measured against. */
#define BA_BASELINE BA_malloc

/** The descriptor of allocator @p id (0 <= id < BA_COUNT). */
static inline const bench_alloc *bench_alloc_get(int id)
{
#define BA_PTR_(n, arg) [BA_##n] = &ba_##n,
    static const bench_alloc *const all[BA_COUNT] = {BENCH_ALLOCATORS(BA_PTR_, _)};
#undef BA_PTR_
    return all[id];
}

/** Run allocator @p id's init once; non-zero if it is usable.  @p why (may
 *  be NULL) gets the reason when it is not.  (measure.c) */
int bench_alloc_ready(int id, const char **why);

/** Leave allocator @p id out of this run (--alloc), saying @p why. */
void bench_alloc_leave_out(int id, const char *why);

/** Does allocator @p id take part in @p joins (all of its bits) and is it
 *  usable? */
static inline int bench_alloc_joins(int id, unsigned joins)
{
    return (bench_alloc_get(id)->joins & joins) == joins && bench_alloc_ready(id, NULL);
}

/* ---- kernels ---------------------------------------------------------------
 * A kernel runs one timed measurement of one allocator and fills a sample. */

#define BENCH_MAX_PARTS 3

typedef struct bench_sample {
    uint64_t ns;    /* time of the timed phase */
    uint64_t ops;   /* operations in it (what ns/op divides by) */
    uint64_t check; /* a checksum of the data read back (same for all) */
    int failed;     /* the allocator returned NULL */
    /* Optional: the times of parts of the phase, each a figure of its own
     * (W5: create+fill and delete; see bench_measure_parts). */
    uint64_t part_ns[BENCH_MAX_PARTS];
} bench_sample;

typedef void (*bench_kernel_fn)(const void *job, bench_sample *out);

/* A kernel is written once, for any descriptor: */
#define BENCH_KERNEL static inline __attribute__((always_inline)) void

/* BENCH_SPECIALIZE(k) defines k_for[BA_COUNT]: one out-of-line copy of
 * kernel k per allocator, with that allocator's descriptor constant. */
#define BA_COPY_(n, k)                                                      \
    static __attribute__((noinline)) void k##__##n(const void *job,         \
                                                   bench_sample *out)       \
    {                                                                       \
        k(&ba_##n, job, out);                                               \
    }
#define BA_ENTRY_(n, k) [BA_##n] = k##__##n,
#define BENCH_SPECIALIZE(k)                                                 \
    BENCH_ALLOCATORS(BA_COPY_, k)                                           \
    static const bench_kernel_fn k##_for[BA_COUNT] = {                      \
        BENCH_ALLOCATORS(BA_ENTRY_, k)}

#endif /* BENCH_ALLOC_IFACE_H */
