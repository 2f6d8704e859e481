/*
 * alloc_iface.h - the allocator abstraction every workload is written against.
 *
 * For the bench an allocator is five operations on a "context": create one,
 * allocate a chunk in it, free one chunk, reset it (every chunk goes at once,
 * the context stays), destroy it.  memkit maps them onto its contexts
 * (alloc_memkit.h).  The system allocator has no contexts: its "context" is a
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
 * direct call to mk_alloc / malloc (check: objdump -d shows no `call *` in
 * the kernel copies).  kernel_for[id] then picks the copy at run time.
 *
 * Adding an allocator (issue 3: memkit SLAB/GENERATION/BUMP, talloc, APR,
 * mimalloc): write alloc_<name>.h defining `ba_<name>`, include it below and
 * add X(<name>, __VA_ARGS__) to BENCH_ALLOCATORS - guarded by the HAVE_<LIB>
 * macro bench/CMakeLists.txt defines when an optional library is found.  A
 * workload runs every allocator whose caps include what its pattern needs
 * (BA_CAN_FREE for free-oldest, BA_CAN_RESET for reset), so a BUMP context
 * (no individual free) joins the reset pattern only.  Ratios are always
 * baseline / allocator, the baseline being the system malloc.
 */
#ifndef BENCH_ALLOC_IFACE_H
#define BENCH_ALLOC_IFACE_H

#include <stddef.h>
#include <stdint.h>

#define BA_CAN_FREE 0x1u  /* chunks can be freed one by one */
#define BA_CAN_RESET 0x2u /* the context can drop every chunk at once */

typedef struct bench_alloc {
    const char *name; /* short column title: "memkit", "malloc" */
    const char *desc; /* one line for the header of the report */
    unsigned caps;    /* BA_CAN_* */
    /* A new, empty context.  @chunk is the chunk size the workload will use
     * (a fixed-size allocator needs it; others ignore it).  NULL on failure. */
    void *(*ctx_new)(size_t chunk);
    void *(*alloc)(void *ctx, size_t size);
    void (*free)(void *ctx, void *p);
    /* Drop every chunk; live[0..n) are the chunks the workload holds. */
    void (*reset)(void *ctx, void **live, size_t n);
    /* Drop every chunk and the context itself. */
    void (*destroy)(void *ctx, void **live, size_t n);
} bench_alloc;

#define BENCH_UNUSED __attribute__((unused))

#include "alloc_malloc.h"
#include "alloc_memkit.h"

/* Every allocator the bench knows, in column order (X-macro; the second
 * argument is passed through to X). */
#define BENCH_ALLOCATORS(X, arg) \
    X(mk_general, arg)           \
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

/* ---- kernels ---------------------------------------------------------------
 * A kernel runs one timed measurement of one allocator and fills a sample. */

typedef struct bench_sample {
    uint64_t ns;    /* time of the timed phase */
    uint64_t ops;   /* operations in it (what ns/op divides by) */
    uint64_t check; /* a checksum of the data read back (same for all) */
    int failed;     /* the allocator returned NULL */
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
