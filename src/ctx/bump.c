/* SPDX-License-Identifier: MIT */
/*
 * bump.c - the BUMP context kind: any size, no header, no individual free;
 * memory comes back only on reset or delete.  The fastest kind: the
 * allocation fast path (in chunk.c's mk_alloc) is a rounding, a bounds
 * check and a pointer store.  PostgreSQL's bump.c is the model.
 *
 * Data structure: the context holds `ptr` and `end` of the current block;
 * blocks (pages of 1 KiB growing to 1 MiB) are listed, current first, so
 * reset and delete can give them back.  A chunk larger than a quarter of
 * the largest block, or aligned beyond 64 KiB, gets a page or huge segment
 * of its own (the `large` list), so the current block keeps filling.  Sizes
 * round up to 16, so every chunk is 16-aligned; mk_alloc_aligned pads
 * inside the block.
 *
 * Trade-offs: no size is stored, so mk_usable_size returns 0, mk_realloc
 * fails with ENOTSUP and statistics count bytes but not chunks; mk_free is
 * a no-op (the checking build reports it).  Instrumented contexts (checking,
 * ASan, Valgrind) put a 16-byte header {size, 0} before each chunk so that
 * reset and delete can find every chunk's sentinel.
 */

#include "bump.h"

#include <errno.h>
#include <string.h>

#define FIRST_BLOCK ((size_t)1 << 10)
#define MAX_BLOCK ((size_t)1 << 20)
#define IHDR 16u /* instrumented header */

static mki_bump *bump(mk_ctx *ctx) { return (mki_bump *)ctx; }
static int instrumented(const mki_bump *b)
{
    return b->base.fast_kind == MKI_KIND_SLOW;
}

/* The current block's fill level lives in the context; store it back. */
static void save_current(mki_bump *b)
{
    if (b->blocks) /* the head is the current block (big chunks have their
                      own list) */
        b->blocks->extend = b->ptr;
}

/* An ordinary block (at most MAX_BLOCK, so it lies in a segment and every
 * unit of it is in the page map). */
static mki_page *block_alloc(mki_bump *b, size_t bytes)
{
    mki_page *pg = mki_segment_page_alloc(mki_segment_units_for(bytes), bytes);
    if (!pg)
        return NULL;
    pg->end = pg->start + bytes;
    pg->kind = MKI_PAGE_BLOCK;
    pg->extend = pg->start;
    if (mki_ctx_claim_page(&b->base, pg) != 0) { /* a limit refused it */
        mki_segment_page_release(pg);
        return NULL;
    }
    return pg;
}

/* Where a chunk goes when the free space starts at @at: after a header of
 * @hdr bytes, aligned to @align. */
static char *place(char *at, size_t hdr, size_t align)
{
    return (char *)(((uintptr_t)at + hdr + align - 1) &
                    ~(uintptr_t)(align - 1));
}

/* Instrumented header of the chunk at @p: {size, pad}; pad != 0 marks the
 * filler that keeps headers contiguous before an over-aligned chunk. */
static void hdr_set(char *h, size_t n, uint64_t pad)
{
    uint64_t w[2] = {n, pad};
    mki_mem_undefined(h, IHDR);
    memcpy(h, w, IHDR);
    mki_mem_noaccess(h, IHDR);
}

static void hdr_get(const char *h, uint64_t w[2])
{
    mki_mem_defined(h, IHDR);
    memcpy(w, h, IHDR);
    mki_mem_noaccess(h, IHDR);
}

/* Put the chunk of @n bytes whose free space starts at @at; returns it. */
static char *put(mki_bump *b, char *at, size_t n, size_t align)
{
    if (!instrumented(b))
        return place(at, 0, align);
    char *p = place(at, IHDR, align);
    if (p - IHDR > at) /* a gap of 16 bytes or more: fill it */
        hdr_set(at, (size_t)(p - IHDR - at) - IHDR, 1);
    hdr_set(p - IHDR, n, 0);
    return p;
}

/* No room in the current block: open a new one, or give a big or
 * over-aligned chunk a page (or huge segment) of its own, aligned there, so
 * that the current block keeps filling. */
static void *alloc_slow(mki_bump *b, size_t n, size_t align)
{
    size_t need = n + (instrumented(b) ? 2 * IHDR : 0) +
                  (align > 16 ? align - 16 : 0);
    if (need > MAX_BLOCK / 4 || align > MKI_PAGE_MAX) {
        mki_page *pg = mki_ctx_chunk_page(&b->base, n, align);
        if (!pg)
            return NULL;
        mki_page_list_push(&b->large, pg);
        return pg->start;
    }
    size_t bytes = b->block_size;
    while (bytes < need)
        bytes <<= 1;
    mki_page *pg = block_alloc(b, bytes);
    if (!pg)
        return NULL;
    if (b->block_size < MAX_BLOCK)
        b->block_size <<= 1;
    save_current(b);
    pg->prev = NULL;
    pg->next = b->blocks;
    if (b->blocks)
        b->blocks->prev = pg;
    b->blocks = pg;
    char *p = put(b, pg->start, n, align);
    b->ptr = p + n;
    b->end = pg->end;
    return p;
}

static void *bump_alloc_aligned(mk_ctx *ctx, size_t size, size_t align)
{
    mki_bump *b = bump(ctx);
    if (size > MKI_SIZE_MAX) {
        errno = ENOMEM;
        return NULL;
    }
    if (align < 16)
        align = 16;
    size_t n = size ? (size + 15) & ~(size_t)15 : 16;
    if (b->ptr) {
        char *p = place(b->ptr, instrumented(b) ? IHDR : 0, align);
        if (p <= b->end && n <= (size_t)(b->end - p)) {
            p = put(b, b->ptr, n, align);
            b->ptr = p + n;
            return p;
        }
    }
    return alloc_slow(b, n, align);
}

static void *bump_alloc(mk_ctx *ctx, size_t size)
{
    return bump_alloc_aligned(ctx, size, 16);
}

static void bump_free(mki_page *pg, void *p) { (void)pg, (void)p; }
static void bump_collect(mk_ctx *ctx)
{
    atomic_store_explicit(&ctx->remote, NULL, memory_order_relaxed);
}

static void *bump_realloc(mki_page *pg, void *p, size_t size)
{
    (void)pg, (void)p, (void)size;
    errno = ENOTSUP;
    return NULL;
}

static size_t bump_usable_size(const mki_page *pg, const void *p)
{
    if (pg->ctx->fast_kind != MKI_KIND_SLOW)
        return 0;
    if (pg->kind != MKI_PAGE_BLOCK) /* a chunk with a page of its own */
        return (size_t)(pg->end - pg->start);
    uint64_t w[2];
    hdr_get((const char *)p - IHDR, w);
    return (size_t)w[0];
}

/* Instrumented: call @fn on every chunk (headers are contiguous). */
static size_t walk(mki_bump *b, void (*fn)(mki_page *, void *, void *),
                   void *arg)
{
    size_t count = 0;
    save_current(b);
    for (mki_page *pg = b->blocks; pg; pg = pg->next)
        for (char *at = pg->start; at + IHDR <= pg->extend;) {
            uint64_t w[2];
            hdr_get(at, w);
            if (!w[1]) {
                count++;
                if (fn)
                    fn(pg, at + IHDR, arg);
            }
            at += IHDR + w[0];
        }
    for (mki_page *pg = b->large; pg; pg = pg->next) {
        count++;
        if (fn)
            fn(pg, pg->start, arg);
    }
    return count;
}

static void bump_each_live(mk_ctx *ctx, void (*fn)(mki_page *, void *, void *),
                           void *arg)
{
    walk(bump(ctx), fn, arg);
}

static void bump_reset(mk_ctx *ctx, int keep_one)
{
    mki_bump *b = bump(ctx);
    mki_page *one = b->blocks;
    if (keep_one && one && !one->next && !b->large && !instrumented(b)) {
        b->ptr = one->extend = one->start; /* the common case: rewind */
        return;
    }
    mki_page *keep = NULL;
    if (keep_one) /* the largest block */
        for (mki_page *pg = b->blocks; pg; pg = pg->next)
            if (!keep || pg->size > keep->size)
                keep = pg;
    for (mki_page *pg = b->blocks, *next; pg; pg = next) {
        next = pg->next;
        if (pg != keep)
            mki_segment_page_release(pg);
    }
    for (mki_page *pg = b->large, *next; pg; pg = next) {
        next = pg->next;
        mki_page_release(pg);
    }
    b->large = NULL;
    b->blocks = keep;
    b->ptr = b->end = NULL;
    if (keep) {
        keep->next = keep->prev = NULL;
        keep->extend = keep->start;
        b->ptr = keep->start;
        b->end = keep->end;
        mki_ctx_page_reset(&b->base, keep);
    }
}

static void bump_destroy(mk_ctx *ctx) { bump_reset(ctx, 0); }

static void bump_stats(const mk_ctx *ctx, mk_stats *out)
{
    mki_bump *b = bump((mk_ctx *)ctx);
    save_current(b);
    for (mki_page *pg = b->blocks; pg; pg = pg->next) {
        out->blocks++;
        out->bytes_reserved += pg->size;
        out->bytes_used += (size_t)(pg->extend - pg->start);
        out->bytes_resident +=
            mki_ctx_reached((size_t)(pg->extend - pg->start), pg->size, 0);
    }
    for (mki_page *pg = b->large; pg; pg = pg->next) {
        out->blocks++;
        out->bytes_reserved += pg->size;
        out->bytes_used += (size_t)(pg->end - pg->start);
        out->bytes_resident +=
            mki_ctx_reached((size_t)(pg->end - pg->start), pg->size, 0);
    }
    if (instrumented(b))
        out->chunks = walk(b, NULL, NULL);
}

static void bump_set_owner(mk_ctx *ctx, uintptr_t tid) { (void)ctx, (void)tid; }

static int bump_init(mk_ctx *ctx, const mk_ctx_opts *opts)
{
    mki_bump *b = bump(ctx);
    b->block_size = mki_ctx_block_size(opts, FIRST_BLOCK, MAX_BLOCK);
    return b->block_size ? 0 : -1;
}

const mki_kind_ops mki_bump_ops = {
    .name = "bump",
    .ctx_size = sizeof(mki_bump),
    .no_free = 1,
    .init = bump_init,
    .destroy = bump_destroy,
    .alloc = bump_alloc,
    .alloc_aligned = bump_alloc_aligned,
    .free = bump_free,
    .collect = bump_collect,
    .realloc = bump_realloc,
    .usable_size = bump_usable_size,
    .reset = bump_reset,
    .stats = bump_stats,
    .set_owner = bump_set_owner,
    .each_live = bump_each_live,
};
