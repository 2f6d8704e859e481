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

#include "../internal.h"

#include <string.h>

#pragma GCC visibility push(hidden)

#define MKI_GEN_HDR 8u
#define MKI_GEN_LIVE 0x6576696cu /* "live" */
#define MKI_GEN_DEAD 0x64616564u /* "dead" */

/* A block's last live chunk was freed (owner thread). */
void mki_gen_block_empty(mki_page *pg);

/* Bytes a chunk of @size takes in a block: header plus data, a multiple of
 * 16, so headers sit at 8 mod 16 and chunks at 0 mod 16. */
MKI_INLINE size_t mki_gen_need(size_t size)
{
    return (MKI_GEN_HDR + (size ? size : 1) + 15) & ~(size_t)15;
}

/* A chunk bumped into the current block, or NULL if it does not fit.
 * Pre: size <= MKI_DIRECT_MAX (no overflow). */
MKI_INLINE void *mki_gen_alloc_fast(mki_gen *g, size_t size)
{
    mki_page *pg = g->cur;
    size_t need = mki_gen_need(size);
    char *h = pg->extend;
    if (MKI_UNLIKELY(need > (size_t)(pg->end - h)))
        return NULL;
    uint32_t w[2] = {(uint32_t)(need - MKI_GEN_HDR), MKI_GEN_LIVE};
    memcpy(h, w, sizeof w);
    pg->extend = h + need;
    pg->used++;
    return h + MKI_GEN_HDR;
}

/* Free a chunk of block @pg from the owner thread.  The chunk itself is
 * not touched: in a FIFO workload it was last used long ago and is cold,
 * and only instrumented contexts (which mark headers dead, generation.c)
 * need to know which chunks of a block are live. */
MKI_INLINE void mki_gen_free_fast(mki_page *pg)
{
    if (MKI_UNLIKELY(--pg->used == 0))
        mki_gen_block_empty(pg);
}

#pragma GCC visibility pop

#endif /* MKI_GENERATION_H */
