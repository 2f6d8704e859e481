/* SPDX-License-Identifier: MIT */
/*
 * generation.c - the GENERATION context kind: any size, individual free,
 * for data that dies roughly in the order it was born (queues, tuple
 * buffers, per-batch state).  PostgreSQL's generation.c is the model.
 *
 * Data structure: chunks are bumped into blocks (pages of 1 KiB growing to
 * 256 KiB) one after the other; a block counts its live chunks and goes
 * back to the shared page pool the moment the count falls to zero (the
 * block being filled is instead rewound and reused).  Freed space inside a
 * block is never reused: that is the trade-off that makes allocation a
 * bump and free a decrement, and it is why this kind suits FIFO lifetimes
 * and wastes memory when a few long-lived chunks pin otherwise dead blocks.
 *
 * Chunk layout: an 8-byte header {size, state} right before the data (the
 * size is what realloc and mk_usable_size need; the state word, derived
 * from the chunk's address and a secret (generation.h), says live or dead,
 * which is how every build sees a double free or a pointer into a chunk's
 * data); header plus data take a multiple of 16 bytes, so data is
 * 16-aligned.  A free reads and marks the header and does not touch the
 * block's free space: the block's bytes count as used up to its fill point
 * until it goes back (the statistics say so).  Chunks larger than a quarter of
 * the largest block get a page (or a huge segment) of their own, without a
 * header.  Every page of this kind has fast_tid 0: frees always reach
 * gen_free.
 */

#include "generation.h"

#include <errno.h>

#define HDR MKI_GEN_HDR
#define FIRST_BLOCK ((size_t)1 << 10)
#define MAX_BLOCK ((size_t)256 << 10)

typedef struct gen_hdr {
    uint32_t size;  /* usable bytes of the chunk (a multiple of 16) */
    uint32_t state; /* mki_generation_live(chunk) or mki_generation_dead(chunk) */
} gen_hdr;

static mki_generation *gen(mk_ctx *ctx) { return (mki_generation *)ctx; }

/* Headers are memkit's, not the program's: instrumented, they stay
 * poisoned except while memkit reads or writes them. */
static gen_hdr hdr_get(const void *p)
{
    gen_hdr h;
    mki_mem_defined((const char *)p - HDR, HDR);
    memcpy(&h, (const char *)p - HDR, HDR);
    mki_mem_noaccess((const char *)p - HDR, HDR);
    return h;
}

static void hdr_set(void *p, uint32_t size, uint32_t state)
{
    gen_hdr h = {size, state};
    mki_mem_undefined((char *)p - HDR, HDR);
    memcpy((char *)p - HDR, &h, HDR);
    mki_mem_noaccess((char *)p - HDR, HDR);
}

/* The first header sits 8 bytes into a block so that data is 16-aligned. */
static void block_rewind(mki_page *pg)
{
    pg->extend = pg->start + HDR;
    pg->used = 0;
}

static mki_page *block_new(mki_generation *g, size_t need)
{
    size_t bytes = g->block_size;
    while (bytes < need + HDR)
        bytes <<= 1;
    mki_page *pg = mki_segment_page_alloc(mki_segment_units_for(bytes), bytes);
    if (!pg)
        return NULL;
    pg->kind = MKI_PAGE_BLOCK;
    pg->end = pg->start + bytes;
    block_rewind(pg);
    if (mki_ctx_claim_page(&g->base, pg) != 0) {
        mki_segment_page_release(pg);
        return NULL;
    }
    if (g->block_size < g->block_max)
        g->block_size <<= 1;
    mki_page_list_push(&g->blocks, pg);
    return pg;
}

static void gen_collect(mk_ctx *ctx);

/* Secure mode: a large chunk ends in a guard word, as GENERAL's do
 * (page.h); huge ones have none. */
static size_t large_guard(const mki_generation *g)
{
    return g->base.fast_kind == MKI_KIND_SECURE ? MKI_GUARD : 0;
}

static void *large_alloc(mki_generation *g, size_t size, size_t align)
{
    mki_ctx_collect(&g->base);
    mki_page *pg = mki_ctx_chunk_page(&g->base, size + large_guard(g), align);
    if (!pg)
        return NULL;
    if (large_guard(g) && pg->kind == MKI_PAGE_LARGE)
        mki_guard_set(pg, pg->start);
    mki_page_list_push(&g->large, pg);
    return pg->start;
}

static void *gen_alloc(mk_ctx *ctx, size_t size)
{
    mki_generation *g = gen(ctx);
    if (size > MKI_SIZE_MAX) {
        errno = ENOMEM;
        return NULL;
    }
    size_t need = mki_generation_need(size);
    size_t data = need - HDR;
    if (need > g->block_max / 4)
        return large_alloc(g, size, 0);
    mki_page *pg = g->cur;
    if ((size_t)(pg->end - pg->extend) < need) {
        /* a new block: first let other threads' frees empty old ones */
        mki_ctx_collect(&g->base);
        pg = g->cur;
    }
    if ((size_t)(pg->end - pg->extend) < need) {
        mki_page *old = pg;
        pg = block_new(g, need);
        if (!pg)
            return NULL;
        g->cur = pg;
        if (old != &mki_page_empty && old->used == 0) {
            /* nothing live: give it back now */
            mki_page_list_remove(&g->blocks, old);
            mki_segment_page_release(old);
        }
    }
    char *p = pg->extend + HDR;
    hdr_set(p, (uint32_t)data, mki_generation_live(p));
    pg->extend += need;
    pg->used++;
    return p;
}

static void *gen_alloc_aligned(mk_ctx *ctx, size_t size, size_t align)
{
    if (align <= 16)
        return gen_alloc(ctx, size);
    /* over-aligned chunks get a page of their own, aligned to its size */
    return large_alloc(gen(ctx), size < align ? align : size, align);
}

static void gen_free(mki_page *pg, void *p)
{
    mki_generation *g = gen(pg->ctx);
    if (pg->kind != MKI_PAGE_BLOCK) {
        mki_page_list_remove(&g->large, pg);
        mki_page_release(pg);
        return;
    }
    /* (the release build marked it when it was freed: chunk.c) */
    if (g->base.fast_kind == MKI_KIND_SLOW) /* double frees are checked */
        hdr_set(p, hdr_get(p).size, mki_generation_dead(p));
    if (--pg->used == 0)
        mki_generation_block_empty(pg);
}

void mki_generation_block_empty(mki_page *pg)
{
    mki_generation *g = gen(pg->ctx);
    if (pg == g->cur) { /* rewind the block being filled */
        block_rewind(pg);
        mki_ctx_page_reset(&g->base, pg);
    } else {
        mki_page_list_remove(&g->blocks, pg);
        mki_segment_page_release(pg);
    }
}

static void gen_collect(mk_ctx *ctx)
{
    void *list = atomic_exchange_explicit(&ctx->remote, NULL,
                                          memory_order_acquire);
    while (list) {
        void *next = mki_link_get(list);
        gen_free(mki_page_of(list), list);
        list = next;
    }
}

static size_t gen_usable_size(const mki_page *pg, const void *p)
{
    if (pg->kind != MKI_PAGE_BLOCK)
        return (size_t)(pg->end - pg->start) - large_guard(gen(pg->ctx));
    return hdr_get(p).size;
}

static void *gen_realloc(mki_page *pg, void *p, size_t size)
{
    size_t old = gen_usable_size(pg, p);
    if (size <= old && (pg->kind == MKI_PAGE_BLOCK || size >= old / 2))
        return p;
    mki_generation *g = gen(pg->ctx);
    size_t data = ((HDR + size + 15) & ~(size_t)15) - HDR;
    /* the newest chunk of the current block grows in place */
    if (pg == g->cur && (char *)p + old == pg->extend &&
        data <= (size_t)(pg->end - (char *)p) && HDR + data <= g->block_max / 4) {
        pg->extend = (char *)p + data;
        hdr_set(p, (uint32_t)data, mki_generation_live(p));
        return p;
    }
    void *q = gen_alloc(pg->ctx, size);
    if (!q)
        return NULL;
    memcpy(q, p, size < old ? size : old);
    gen_free(pg, p);
    return q;
}

/* 1: a live chunk; 0: a freed one; -1: not the start of a chunk (no header
 * there: the check can be fooled only by data that imitates a header). */
static int gen_is_live(const mki_page *pg, const void *p)
{
    if (pg->kind != MKI_PAGE_BLOCK)
        return 1;
    /* a header lies in the block's handed-out part (a pointer from before
     * a reset, now past `extend`, is no chunk) */
    const char *c = p, *ext = __atomic_load_n(&((mki_page *)pg)->extend,
                                              __ATOMIC_RELAXED);
    if (c < pg->start + 2 * HDR || c + HDR > ext || ((uintptr_t)c & 15))
        return -1;
    uint32_t state = hdr_get(p).state;
    return state == mki_generation_live(p) ? 1 : state == mki_generation_dead(p) ? 0 : -1;
}

static void gen_each_live(mk_ctx *ctx, void (*fn)(mki_page *, void *, void *),
                          void *arg)
{
    mki_generation *g = gen(ctx);
    for (mki_page *pg = g->blocks; pg; pg = pg->next)
        for (char *c = pg->start + 2 * HDR; c < pg->extend;) {
            gen_hdr h = hdr_get(c);
            if (h.state == mki_generation_live(c))
                fn(pg, c, arg);
            c += h.size + HDR;
        }
    for (mki_page *pg = g->large; pg; pg = pg->next)
        fn(pg, pg->start, arg);
}

static void gen_reset(mk_ctx *ctx, int keep_one)
{
    mki_generation *g = gen(ctx);
    atomic_store_explicit(&ctx->remote, NULL, memory_order_relaxed);
    mki_page *keep = keep_one && g->cur != &mki_page_empty ? g->cur : NULL;
    for (mki_page *pg = g->blocks, *next; pg; pg = next) {
        next = pg->next;
        if (pg != keep)
            mki_segment_page_release(pg);
    }
    for (mki_page *pg = g->large, *next; pg; pg = next) {
        next = pg->next;
        mki_page_release(pg);
    }
    g->blocks = g->large = NULL;
    g->cur = keep ? keep : &mki_page_empty;
    if (keep) {
        keep->next = keep->prev = NULL;
        g->blocks = keep;
        block_rewind(keep);
        mki_ctx_page_reset(ctx, keep);
    }
}

static void gen_destroy(mk_ctx *ctx) { gen_reset(ctx, 0); }

static void gen_stats(const mk_ctx *ctx, mk_stats *out)
{
    const mki_generation *g = (const mki_generation *)ctx;
    for (mki_page *pg = g->blocks; pg; pg = pg->next) {
        out->blocks++;
        out->bytes_reserved += pg->size;
        out->chunks += pg->used;
        /* frees do not touch chunks, so the bytes of a block count up to
         * its fill point until the block goes back (instrumented contexts
         * count exactly: check/instrument.c) */
        out->bytes_used += pg->used ? (size_t)(pg->extend - pg->start) : 0;
        out->bytes_resident +=
            mki_ctx_reached((size_t)(pg->extend - pg->start), pg->size, 0);
    }
    for (mki_page *pg = g->large; pg; pg = pg->next) {
        out->blocks++;
        out->bytes_reserved += pg->size;
        out->chunks++;
        out->bytes_used += gen_usable_size(pg, pg->start);
        out->bytes_resident +=
            mki_ctx_reached((size_t)(pg->end - pg->start), pg->size, 0);
    }
}

static void gen_set_owner(mk_ctx *ctx, uintptr_t tid) { (void)ctx, (void)tid; }

/* mk_ctx_trim: the block being filled, if it holds nothing (every other
 * block goes back when its last chunk dies). */
static size_t gen_trim(mk_ctx *ctx)
{
    mki_generation *g = gen(ctx);
    mki_page *pg = g->cur;
    if (pg == &mki_page_empty || pg->used != 0)
        return 0;
    mki_page_list_remove(&g->blocks, pg);
    g->cur = &mki_page_empty;
    return mki_segment_page_release_now(pg);
}

static int gen_init(mk_ctx *ctx, const mk_ctx_opts *opts)
{
    mki_generation *g = gen(ctx);
    g->block_size = mki_ctx_block_size(opts, FIRST_BLOCK, MKI_LARGE_MAX);
    g->block_max = g->block_size > MAX_BLOCK ? g->block_size : MAX_BLOCK;
    g->cur = &mki_page_empty;
    return g->block_size ? 0 : -1;
}

const mki_kind_ops mki_generation_ops = {
    .name = "generation",
    .ctx_size = sizeof(mki_generation),
    .init = gen_init,
    .destroy = gen_destroy,
    .alloc = gen_alloc,
    .alloc_aligned = gen_alloc_aligned,
    .free = gen_free,
    .collect = gen_collect,
    .realloc = gen_realloc,
    .usable_size = gen_usable_size,
    .reset = gen_reset,
    .stats = gen_stats,
    .set_owner = gen_set_owner,
    .trim = gen_trim,
    .is_live = gen_is_live,
    .each_live = gen_each_live,
};
