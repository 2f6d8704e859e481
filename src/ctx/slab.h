/* SPDX-License-Identifier: MIT */
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

#include "ctx.h"

#pragma GCC visibility push(hidden)

/* SLAB: one chunk size; pages bucketed by how many chunks they have free. */
#define MKI_SLAB_BUCKETS 16
typedef struct mki_slab {
    mk_ctx base;
    mki_page *curpg;      /* page allocated from, or &mki_page_empty */
    uint32_t slot;        /* bytes per chunk in a page (>= user size) */
    uint32_t user_size;   /* opts->chunk_size */
    uint32_t align;       /* every chunk's alignment (chunk_align, >= 8) */
    uint32_t page_units;  /* every page but a small first one (slab.c) */
    uint32_t capacity;    /* chunks per page of page_units (each page
                             holds its own in mki_page.capacity) */
    uint32_t pages;       /* pages held */
    uint32_t shift;       /* bucket of a page = nfree >> shift */
    mki_page *bucket[MKI_SLAB_BUCKETS]; /* [0]: full pages; the current
                                           page is on no list */
    mki_page *spare;      /* an empty page kept for reuse (if still empty) */
    const void *pool;     /* the mk_pool this slab serves, or NULL */
    unsigned shard;       /* thread-safe pool: the shard number of the
                             thread it serves (pool.c), else 0 */
    mk_pool_front *front; /* that pool's front, if it has one: it holds
                             objects of curpg only (pool.c) */
} mki_slab;

/* SLAB, for pools: a chunk of the slab's size; free from the owner thread. */
void *mki_slab_alloc_chunk(mki_slab *s);
void mki_slab_free_chunk(mki_page *pg, void *p);


void mki_slab_rebucket(mki_slab *s, mki_page *pg);
void *mki_slab_alloc_slow(mki_slab *s); /* free list empty */
/* The inline free's test failed on chunk @p of @pg (or @pg is a page above
 * 64 KiB, which has no inline test): validate it exactly, report it as a
 * misuse of @fn (mk_pool_free, mk_free...) if it is not the start of a
 * live chunk, else free it. */
void mki_slab_free_checked(mki_page *pg, void *p, const char *fn);
/* rebucket after an allocation, returning its chunk @b (a tail call keeps
 * the fast path free of saved registers) */
void *mki_slab_alloc_rebucket(mki_slab *s, mki_page *pg, void *b);

MKI_INLINE void *mki_slab_alloc_fast(mki_slab *s)
{
    mki_page *pg = s->curpg;
    void *b = pg->free;
    if (MKI_LIKELY(b != NULL)) {
        pg->free = *(void **)b;
        mki_page_chunk_set_live(b); /* its double-free key goes (page.h) */
        if (MKI_LIKELY(++pg->used <= pg->hi))
            return b;
        return mki_slab_alloc_rebucket(s, pg, b);
    }
    return mki_slab_alloc_slow(s);
}

/* Free chunk @p of page @pg of slab @s, from its owner: reported as a
 * misuse of @fn instead if it is not the start of a chunk the page handed
 * out, or holds its double-free key (freed already, wherever it waits). */
MKI_INLINE void mki_slab_free_fast(mki_slab *s, mki_page *pg, void *p, const char *fn)
{
    if (MKI_UNLIKELY(!mki_page_is_chunk(pg, p) || mki_page_chunk_freed(pg, p))) {
        mki_slab_free_checked(pg, p, fn);
        return;
    }
    /* four chunks on, as GENERAL's free (general.h): a program that frees
     * in the order it allocated would wait for each chunk's key (in a
     * context larger than the caches: ctx.h, mki_prefetch_frees) */
    if (mki_prefetch_frees)
        mki_page_prefetch(pg, (char *)p + 4 * (size_t)pg->chunk_size);
    *(void **)p = pg->free;
    mki_page_chunk_set_freed(pg, p);
    pg->free = p;
    if (MKI_UNLIKELY(--pg->used < pg->lo))
        mki_slab_rebucket(s, pg);
}

#pragma GCC visibility pop

#endif /* MKI_SLAB_H */
