/* SPDX-License-Identifier: MIT */
/*
 * override.h - the allocation and free paths shared by the C library's
 * functions (malloc.c) and C++'s operators (cxx.c), inline in both so that
 * operator new costs what malloc costs.
 */
#ifndef MKI_OVERRIDE_H
#define MKI_OVERRIDE_H

#include "../heap/heap.h"

#pragma GCC visibility push(hidden)

/* malloc(n): the GENERAL fast path on the thread's malloc context, with
 * malloc's own classes (every one 16-aligned: sizeclass.c). */
MKI_INLINE void *mki_override_alloc(size_t n)
{
    mki_general *g = mki_tls_fast;
    mki_page *pg;
    if (MKI_LIKELY(n <= MKI_DIRECT_MAX)) /* one test for most sizes */
        pg = g->cls[mki_class_of_a16(n)];
    else if (n <= MKI_SMALL_MAX)
        pg = mki_general_page_for(g, n);
    else
        return mki_heap_alloc(n);
#if MKI_PROF_BUILD
    /* libmemkit-malloc-prof: the heap profile's countdown on the inline
     * path (ctx.h), so that a profiled heap keeps the inline pop; the
     * plain library has no such line (heap.c serves a profiled heap on its
     * slow path instead).  Larger requests are counted by mk_alloc. */
    if (MKI_UNLIKELY(mki_prof_tick(n)))
        return mki_heap_alloc_sampled(n);
#endif
    void *b = mki_general_pop(pg);
    if (MKI_LIKELY(b != NULL))
        return b;
    return mki_heap_refill(g, pg, n);
}

/* free(p): mk_free (in the checking build, with its validation), a misuse
 * reported as one of @fn (free, operator delete...).  NULL needs no test
 * of its own: it is in no segment (the checked path). */
MKI_INLINE void mki_override_free(void *p, const char *fn)
{
    if (MK_CONFIG_CHECK) {
        mki_chunk_free_named(p, fn);
        return;
    }
    mki_chunk_free(p, fn);
}

/* A chunk of @n bytes aligned to @align (a power of two), in the thread's
 * malloc context; NULL with errno ENOMEM. */
void *mki_override_alloc_aligned(size_t align, size_t n);

#pragma GCC visibility pop

#endif /* MKI_OVERRIDE_H */
