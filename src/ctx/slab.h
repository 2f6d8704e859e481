/*
 * slab.h - the SLAB kind's fast paths, inline for pool.c and chunk.c.
 * Only for contexts that are not instrumented (raw link words).
 *
 * Allocation pops the current page's free list and bumps `used`; a free
 * pushes and drops it.  Leaving the page's bucket range [lo, hi] is the one
 * rare event, handled out of line by mki_slab_rebucket (slab.c).
 */
#ifndef MKI_SLAB_H
#define MKI_SLAB_H

#include "../internal.h"

#pragma GCC visibility push(hidden)

void mki_slab_rebucket(mki_slab *s, mki_page *pg);
void *mki_slab_alloc_slow(mki_slab *s); /* free list empty */
/* rebucket after an allocation, returning its chunk @b (a tail call keeps
 * the fast path free of saved registers) */
void *mki_slab_alloc_rebucket(mki_slab *s, mki_page *pg, void *b);

MKI_INLINE void *mki_slab_alloc_fast(mki_slab *s)
{
    mki_page *pg = s->curpg;
    void *b = pg->free;
    if (MKI_LIKELY(b != NULL)) {
        pg->free = *(void **)b;
        if (MKI_LIKELY(++pg->used <= pg->hi))
            return b;
        return mki_slab_alloc_rebucket(s, pg, b);
    }
    return mki_slab_alloc_slow(s);
}

MKI_INLINE void mki_slab_free_fast(mki_slab *s, mki_page *pg, void *p)
{
    void *head = pg->free;
    if (MKI_UNLIKELY(p == head)) { /* freed twice in a row */
        mki_error_double_free(p, pg->ctx);
        return;
    }
    *(void **)p = head;
    pg->free = p;
    if (MKI_UNLIKELY(--pg->used < pg->lo))
        mki_slab_rebucket(s, pg);
}

#pragma GCC visibility pop

#endif /* MKI_SLAB_H */
