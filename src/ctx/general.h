/*
 * general.h - the GENERAL kind's fast paths, inline for mk_alloc/mk_free
 * (ctx/chunk.c) and for malloc/free (override/malloc.c), which must be the
 * same instructions.
 *
 * Allocation of a small chunk (up to 32 KiB, every size class): find the
 * class's current page (one table load for requests up to 1 KiB; a count of
 * leading zeros and two shifts above), pop its free list, count the chunk.
 * The class tables never hold NULL: an unused class points at
 * mki_page_empty, and a context that has never used a class above 1 KiB
 * points its `cls_hi` at a shared table of them (mki_general_hi_empty), so
 * the path has no NULL test.  An empty free list calls the refill.
 *
 * Free: the owner lookup (page.h) and one comparison of the page's fast_tid
 * with the thread's identity decide everything; a mismatch (another thread's
 * chunk, a full or large page, another kind, an instrumented context) goes
 * out of line.
 */
#ifndef MKI_GENERAL_H
#define MKI_GENERAL_H

#include "../internal.h"
#include "../page/sizeclass.h"

#pragma GCC visibility push(hidden)

#define MKI_NCLASS_HI (MKI_NCLASS - MKI_NCLASS_DIRECT)

/* The class table above 1 KiB of a context that has never used one; never
 * written (the slow path gives the context a table of its own first). */
extern mki_page *mki_general_hi_empty[MKI_NCLASS_HI];

/* The current page of the class of a request of @n <= MKI_SMALL_MAX. */
MKI_INLINE mki_page *mki_general_page_for(const mki_general *g, size_t n)
{
    if (MKI_LIKELY(n <= MKI_DIRECT_MAX))
        return g->cls[mki_class_of_direct(n)];
    return g->cls_hi[mki_class_of(n) - MKI_NCLASS_DIRECT];
}

/* Pop a chunk of @pg's free list, or NULL when it is empty. */
MKI_INLINE void *mki_general_pop(mki_page *pg)
{
    void *b = pg->free;
    if (MKI_LIKELY(b != NULL)) {
        void *next = *(void **)b;
        pg->free = next;
        pg->used++;
        /* the next pop reads its link; (never prefetch NULL: an address
         * with no mapping costs a page walk every time) */
        __builtin_prefetch(next ? next : b);
    }
    return b;
}

/* Out of line: a chunk freed where the fast path does not apply (@pg may
 * be NULL: a pointer into a unit no page covers). */
void mki_chunk_free_slow(mki_page *pg, void *p);
/* Out of line, cold: report a chunk freed twice (it is the head of its
 * page's free list). */
void mki_chunk_free_twice(const mki_page *pg, const void *p);
/* Secure mode's free: before anything the pointer leads to is read, its
 * segment must be one memkit holds (a bit in a map of the address space),
 * so that free of a stack or foreign pointer is reported, not followed. */
void mki_chunk_free_checked(void *p);

/* mk_free and free: the fast path of the release build.  A pointer
 * outside the span of memkit's segments (a stack, a global, another
 * heap) goes to the checked path and is reported, as every pointer does
 * in secure mode (whose span is empty); a chunk freed twice in a row is
 * seen as the head of its page's free list (one comparison).  The exact
 * test of a pointer inside the span (a bit map) costs more (7% on W2) and
 * is secure mode's (docs/DESIGN.md, "Hardening"). */
MKI_INLINE void mki_chunk_free(void *p)
{
    if (MKI_UNLIKELY(mki_outside_span(p))) {
        mki_chunk_free_checked(p);
        return;
    }
    mki_page *pg = mki_page_of(p); /* (mki_page_gone for a freed page) */
    if (MKI_LIKELY(mki_page_tid(pg) == mki_tid_now())) {
        void *head = pg->free;
        if (MKI_UNLIKELY(p == head)) {
            mki_chunk_free_twice(pg, p);
            return;
        }
        *(void **)p = head;
        pg->free = p;
        if (MKI_UNLIKELY(--pg->used == 0))
            mki_general_page_empty(pg);
        return;
    }
    mki_chunk_free_slow(pg, p);
}

#pragma GCC visibility pop

#endif /* MKI_GENERAL_H */
