/* SPDX-License-Identifier: MIT */
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

#include "ctx.h"

#pragma GCC visibility push(hidden)

/* GENERAL: per-class page lists, large/huge chunk list, full pages. */
typedef struct mki_general {
    mk_ctx base;
    mki_page *cls[MKI_NCLASS_DIRECT]; /* current page per class (or empty) */
    mki_page **cls_hi;   /* classes > 1 KiB: a table allocated on first
                            use; until then mki_general_hi_empty */
    uint64_t classes;    /* bit c: class c's list is not empty */
    mki_page *full;      /* pages with no free chunk */
    mki_page *large;     /* large and huge chunks */
    mki_page *spare;     /* one empty page kept for the next page needed */
    mki_page *rest;      /* pages the last reset kept past its bound,
                            resting (segment.c), for the pages this round
                            needs; linked by next (general.c, reset) */
    size_t page_bytes;   /* bytes of small pages held (sizes next pages) */
    size_t page_floor;   /* bytes of its smallest page, from half of it
                            held on (mk_ctx_opts's block_size; 0: none) */
} mki_general;

void *mki_general_alloc_slow(mki_general *g, size_t size);
void *mki_general_refill(mki_general *g, mki_page *pg, size_t size);
/* mk_free's fast path left a non-current page of a GENERAL context empty
 * (only GENERAL pages take that path). */
void mki_general_page_empty(mki_page *pg);
void mki_general_collect(mk_ctx *ctx);
/* Secure mode (base/base.h): malloc's allocation from GENERAL context @g,
 * which the calling thread owns, without the inline paths (which read raw
 * links): a chunk of @size bytes and a guard word, 16-aligned. */
void *mki_general_alloc_secure(mki_general *g, size_t size);
/* Bytes of small pages per size class, process-wide (relaxed). */
extern _Atomic size_t mki_general_class_bytes[MKI_NCLASS];
/* A chunk of a GENERAL small page freed by a thread that does not own the
 * context (any thread; no lock). */
void mki_general_free_remote(mki_page *pg, void *p);
/* The owner's free of chunk @p of GENERAL page @pg, marked freed already,
 * where the fast path does not take it (a full page; the kind's `free`). */
void mki_general_free_owned(mki_page *pg, void *p);

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

/* Pop a chunk of @pg's free list, or NULL when it is empty.  The chunk's
 * double-free key goes (page.h): its line is the one just read.  (It used
 * to prefetch the next chunk's link, for free-oldest with a large live set,
 * which a full page that gets a chunk back becoming current has made
 * moot: bench/ab.sh, 7 runs, W1M's 40 cells 4% faster without it, the
 * 256 B x 64 MiB cell it was for unchanged, W2M 6% faster.) */
MKI_INLINE void *mki_general_pop(mki_page *pg)
{
    void *b = pg->free;
    if (MKI_LIKELY(b != NULL)) {
        pg->free = *(void **)b;
        pg->used++;
        mki_page_chunk_set_live(b);
    }
    return b;
}

/* The next never-used chunk of @pg (a new or rewound page), one at a time,
 * or NULL when it has none or other threads' frees wait on it (those go
 * first: they are warm; mki_general_refill takes them).  Inline in
 * mk_alloc, so that a context refilled after its reset, whose pages have
 * no free list, makes no call per chunk; malloc's path has no such step,
 * and its refill threads a run of them at once (general.c, extend_run).
 * (mk_alloc through the refill's runs: W1 reset of one 1 KiB chunk a
 * round took 31% more instructions, a run threading chunks that the
 * reset dropped, and a call a round; 64 B x 16 KiB 9% fewer.) */
MKI_INLINE void *mki_general_extend(mki_page *pg)
{
    char *b = pg->extend;
    if (MKI_UNLIKELY(b >= pg->end) ||
        MKI_UNLIKELY(atomic_load_explicit(&pg->xfree, memory_order_relaxed) != 0))
        return NULL;
    pg->extend = b + pg->chunk_size;
    mki_page_pos_grow(pg, 1);
    pg->used++;
    mki_page_chunk_set_live(b); /* (the memory may have held a key) */
    return b;
}

/* The page of @p when @p is a live chunk of a small page of a plain
 * GENERAL context (not secure, instrumented or profiled), else NULL: the
 * caller then takes its validating path (chunk.c), which finds and reports
 * everything else.  The free fast path's tests without its owner test, so
 * any thread may ask (the position limit is read relaxed): for
 * malloc_usable_size, mk_usable_size and realloc, which some programs call
 * as often as malloc (Ruby asks the usable size of every block it
 * allocates and frees). */
MKI_INLINE mki_page *mki_general_live_small(const void *p)
{
    if (MKI_UNLIKELY(!mki_segment_fast(p)))
        return NULL;
    mki_page *pg = mki_page_of(p);
    if (MKI_UNLIKELY(pg == NULL || pg->kind != MKI_PAGE_SMALL || pg->ctx == NULL) ||
        MKI_UNLIKELY(pg->ctx->fast_kind != MK_GENERAL) ||
        MKI_UNLIKELY(!mki_page_is_chunk_exact(pg, p) || mki_page_chunk_freed(pg, p)))
        return NULL;
    return pg;
}

/* Does a realloc of chunk @p (@old usable bytes, page @pg) to @size bytes
 * aligned to @align keep it where it is?  When it fits and is so aligned,
 * unless that would waste more than half of it outside its class (the one
 * rule of mk_realloc, general.c, and of realloc's inline path). */
MKI_INLINE int mki_general_keeps(const mki_page *pg, const void *p, size_t old,
                                 size_t size, size_t align)
{
    return size <= old && ((uintptr_t)p & (align - 1)) == 0 &&
           (size >= old / 2 || (pg->kind == MKI_PAGE_SMALL && size <= MKI_SMALL_MAX &&
                                mki_class_of(size) == pg->cls));
}

/* Out of line: a chunk freed where the fast path does not apply (@pg may
 * be NULL: a pointer into a unit no page covers).  It validates @p before
 * anything else (the start of a live chunk), reports what is not, as a
 * misuse of function @fn (the one the program called: "mk_free", "free",
 * "operator delete"...; a constant, loaded on the slow branch only). */
void mki_chunk_free_slow(mki_page *pg, void *p, const char *fn);
/* Out of line, cold: the fast path's test failed on a chunk of an owned
 * small page: report it (not the start of a chunk, or freed already). */
void mki_chunk_free_bad(mki_page *pg, void *p, const char *fn);
/* Out of line: @p is not in the arena (NULL, a huge chunk, a segment
 * outside the arena, or memory memkit does not hold, which is reported,
 * not followed). */
void mki_chunk_free_checked(void *p, const char *fn);

/* mk_free and free: the fast path of the release build.  In words: the
 * pointer must be in the arena of normal segments (a subtraction and a
 * comparison: a stack, a global, another heap, a huge chunk go to the
 * checked path, which reports what memkit does not hold rather than follow
 * it, and finds its huge chunks and any segment outside the arena); its
 * page must
 * be one this thread's fast path may push to; the pointer must start a
 * chunk the page has handed out (one multiply) and the chunk must not hold
 * its double-free key (page.h) - a free of an interior pointer or of a
 * chunk freed already, wherever it waits, is reported, never pushed.  Then
 * the chunk gets its key and its link, and the page its count. */
MKI_INLINE void mki_chunk_free(void *p, const char *fn)
{
    if (MKI_UNLIKELY(!mki_segment_fast(p))) {
        mki_chunk_free_checked(p, fn);
        return;
    }
    mki_page *pg = mki_page_of(p); /* (mki_page_gone for a freed page) */
    if (MKI_LIKELY(pg != NULL && mki_page_tid(pg) == mki_tid_now())) {
        if (MKI_UNLIKELY(!mki_page_is_chunk(pg, p) || mki_page_chunk_freed(pg, p))) {
            mki_chunk_free_bad(pg, p, fn);
            return;
        }
        /* four chunks on: the free of a program that frees in the order
         * it allocated (a ring, a queue, a list torn down) would wait for
         * it (the key test reads it); one that frees at random loses a
         * prefetch.  Only where the context is larger than the caches
         * (ctx.h, mki_prefetch_frees; docs/DESIGN.md, "The fast paths") */
        if (mki_prefetch_frees)
            mki_page_prefetch(pg, (char *)p + 4 * (size_t)pg->chunk_size);
        *(void **)p = pg->free;
        mki_page_chunk_set_freed(pg, p);
        pg->free = p;
        if (MKI_UNLIKELY(--pg->used == 0))
            mki_general_page_empty(pg);
        return;
    }
    mki_chunk_free_slow(pg, p, fn);
}

/* A free that missed the fast path where nothing is wrong (first on the
 * free slow path, chunk.c): chunk @p of a small page of a plain GENERAL
 * context that a live thread owns, not sampled (prof/), the start of a
 * live chunk: marked freed, then pushed on the page's list of remote frees
 * (another thread's free: producer/consumer's every free), or, the
 * owner's, given to its page, which was full (the fast path takes the
 * owner's other frees: Larson's free into a page it had retired), 1.
 * These are the tests the slow path makes for such a chunk before the same
 * push or the same call, without the ones for other kinds and modes
 * (another thread's free: half the instructions of that path, chunk.c).
 * Else 0 and nothing done: the caller's path validates, reports and
 * handles every other case (a dead owner's context, whose frees want a
 * collect, among them). */
MKI_INLINE int mki_general_free_try(mki_page *pg, void *p)
{
    mk_ctx *ctx = pg->ctx;
    if (pg->kind != MKI_PAGE_SMALL || !ctx || ctx->fast_kind != MK_GENERAL)
        return 0;
    uintptr_t owner = mki_ctx_owner(ctx);
    if (owner == 0 || atomic_load_explicit(&pg->samples, memory_order_relaxed) != NULL ||
        !mki_page_is_chunk_exact(pg, p) || mki_page_chunk_freed(pg, p))
        return 0;
    mki_page_chunk_set_freed(pg, p);
    if (owner == mki_tid_now())
        mki_general_free_owned(pg, p);
    else
        mki_general_free_remote(pg, p);
    return 1;
}

/* Secure mode's free where nothing is wrong (the common case, first, on
 * the free slow path, chunk.c): chunk @p of small page @pg that the
 * calling thread's fast path may push to (the tagged identity, ctx.h: a
 * page of a secure GENERAL context it owns, not full), the start of a live
 * chunk, guard words intact: freed with its link encoded, 1.  Else 0 and
 * nothing done: the caller's path validates and reports. */
MKI_INLINE int mki_general_free_secure_try(mki_page *pg, void *p)
{
    if (mki_page_tid(pg) != (mki_tid_now() | MKI_TID_SECURE) ||
        !mki_page_is_chunk(pg, p) || mki_page_chunk_freed(pg, p) ||
        mki_guard_broken(pg, p))
        return 0;
    mki_link_set_enc(p, pg->free);
    mki_page_chunk_set_freed(pg, p);
    pg->free = p;
    if (MKI_UNLIKELY(--pg->used == 0))
        mki_general_page_empty(pg); /* (used 0: not current) */
    return 1;
}

#pragma GCC visibility pop

#endif /* MKI_GENERAL_H */
