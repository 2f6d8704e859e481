/* SPDX-License-Identifier: MIT */
/*
 * generation.h - the GENERATION kind's fast paths, inline for chunk.c.
 * Only for contexts that are not instrumented (raw header words).
 *
 * Allocation writes the chunk's header {size, state} at the current
 * block's `extend` and moves it; a free drops the block's live count,
 * calling out only when the count reaches zero.
 */
#ifndef MKI_GENERATION_H
#define MKI_GENERATION_H

#include "ctx.h"

#include <string.h>

#pragma GCC visibility push(hidden)

/* GENERATION: chunks bumped into blocks, a block goes when its last dies. */
typedef struct mki_generation {
    mk_ctx base;
    mki_page *cur;        /* block being filled, or &mki_page_empty */
    mki_page *blocks;     /* every block, `cur` included */
    mki_page *large;      /* chunks in a page of their own */
    size_t block_size;    /* size of the next block */
    size_t block_max;
} mki_generation;


#define MKI_GEN_HDR 8u

/* The state word of a chunk's header: derived from the chunk's address and
 * a secret drawn at start (mki_free_key), so that a program's data can
 * pass for a header only by chance or by reading the secret: a free of a
 * pointer into a chunk's data (whose "header" is data) is reported, not
 * counted.  A freed chunk's is the complement. */
MKI_INLINE uint32_t mki_generation_live(const void *p)
{
    return (uint32_t)(((uintptr_t)p ^ mki_free_key) >> 4);
}
MKI_INLINE uint32_t mki_generation_dead(const void *p) { return ~mki_generation_live(p); }

/* A block's last live chunk was freed (owner thread). */
void mki_generation_block_empty(mki_page *pg);

/* Bytes a chunk of @size takes in a block: header plus data, a multiple of
 * 16, so headers sit at 8 mod 16 and chunks at 0 mod 16. */
MKI_INLINE size_t mki_generation_need(size_t size)
{
    return (MKI_GEN_HDR + (size ? size : 1) + 15) & ~(size_t)15;
}

/* A chunk bumped into the current block, or NULL if it does not fit.
 * Pre: size <= MKI_DIRECT_MAX (no overflow). */
MKI_INLINE void *mki_generation_alloc_fast(mki_generation *g, size_t size)
{
    mki_page *pg = g->cur;
    size_t need = mki_generation_need(size);
    char *h = pg->extend;
    if (MKI_UNLIKELY(need > (size_t)(pg->end - h)))
        return NULL;
    uint32_t w[2] = {(uint32_t)(need - MKI_GEN_HDR), mki_generation_live(h + MKI_GEN_HDR)};
    memcpy(h, w, sizeof w);
    pg->extend = h + need;
    pg->used++;
    return h + MKI_GEN_HDR;
}

/* A chunk being freed, once validated (its header said live: chunk.c):
 * its header says dead from now on, whichever thread frees it, so that a
 * second free is seen even while the first waits on a remote list.  (The
 * header shares the chunk's first cache line, which a FIFO workload last
 * touched long ago: the price of reporting double frees in the release
 * build.)  Not instrumented contexts (their headers are poisoned). */
MKI_INLINE void mki_generation_mark_dead(void *p)
{
    uint32_t dead = mki_generation_dead(p);
    memcpy((char *)p - MKI_GEN_HDR + 4, &dead, 4);
}

/* Secure mode: the chunk after validated chunk @p of block @pg, if there
 * is one, must have a header (live or dead: a write past @p's end went
 * into it otherwise); returns @p if it has not, else NULL. */
MKI_INLINE const void *mki_generation_next_broken(const mki_page *pg, const char *p)
{
    uint32_t w[2];
    memcpy(w, p - MKI_GEN_HDR, sizeof w);
    const char *next = p + w[0] + MKI_GEN_HDR;
    const char *ext = __atomic_load_n(&((mki_page *)pg)->extend, __ATOMIC_RELAXED);
    if (next + MKI_GEN_HDR > ext)
        return NULL; /* the block's last chunk */
    memcpy(w, next - MKI_GEN_HDR, sizeof w);
    return w[1] == mki_generation_live(next) || w[1] == mki_generation_dead(next) ? NULL : p;
}

/* Free a (validated, marked) chunk of block @pg from the owner thread: the
 * block counts one chunk less. */
MKI_INLINE void mki_generation_free_fast(mki_page *pg)
{
    if (MKI_UNLIKELY(--pg->used == 0))
        mki_generation_block_empty(pg);
}

/* The owner's free of chunk @p of block @pg of a plain GENERATION context
 * (fast_kind MK_GENERATION: not secure, instrumented or profiled), when
 * @p is the start of a live chunk: marked dead and counted, 1.  Else 0 and
 * nothing done: another thread's free, a page with sampled chunks, or
 * anything that is not a live chunk's start, which the caller's
 * validating path (chunk.c) handles and reports.  The same tests as that
 * path's (gen_is_live), without its calls. */
MKI_INLINE int mki_generation_free_try(mki_page *pg, void *p)
{
    const char *c = p;
    if (mki_ctx_owner(pg->ctx) != mki_tid_now() ||
        atomic_load_explicit(&pg->samples, memory_order_relaxed) ||
        c < pg->start + 2 * MKI_GEN_HDR || c + MKI_GEN_HDR > pg->extend ||
        ((uintptr_t)c & 15))
        return 0;
    uint32_t w[2]; /* the header: {bytes to the next header, state} */
    memcpy(w, c - MKI_GEN_HDR, sizeof w);
    if (w[1] != mki_generation_live(p))
        return 0;
    /* the header sixteen chunks on, if they are this one's size: chunks
     * are bumped in order, a FIFO workload frees them in that order, and
     * each free would wait for its header (GENERAL's free prefetches four
     * chunks on, general.h; here four gained nothing, sixteen 7-11% at 64
     * to 512 bytes with 64 MiB live: docs/DESIGN.md); only in a context
     * larger than the caches, as GENERAL's (ctx.h, mki_prefetch_frees) */
    if (mki_prefetch_frees)
        mki_page_prefetch(pg, c - MKI_GEN_HDR + 16 * ((size_t)w[0] + MKI_GEN_HDR));
    mki_generation_mark_dead(p);
    mki_generation_free_fast(pg);
    return 1;
}

#pragma GCC visibility pop

#endif /* MKI_GENERATION_H */
