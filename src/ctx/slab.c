/* SPDX-License-Identifier: MIT */
/*
 * slab.c - the SLAB context kind: one chunk size fixed at creation, O(1)
 * allocate and free, no per-chunk header.  PostgreSQL's slab.c is the model;
 * typed pools (pool.c) are built on it.
 *
 * Data structure: every page has the same size (64 KiB, or a multiple of it
 * for chunks above 64 KiB), but the first, which is small (8 chunks, at
 * least 1 KiB: a slab holding a few objects costs what a GENERAL context
 * holding them costs).  Allocation takes from the *current* page; every
 * other page sits in one of MKI_SLAB_BUCKETS lists by how many chunks it has
 * free, in whole steps of 2^shift (a fifteenth to a thirtieth of a page):
 * bucket 0 holds pages with less than one step free, bucket b pages with
 * nfree in [b * 2^shift, (b+1) * 2^shift).  When the current page fills, the
 * next one is the head of the lowest non-empty bucket above 0, one of the
 * fullest pages with a step free; a page that reaches bucket b while the
 * current page is emptier takes over.  Frees therefore concentrate on the
 * emptier pages, which empty out and go back to the shared page pool.  The
 * step is hysteresis: were a full page that gets one chunk back eligible at
 * once, a FIFO workload would switch pages on every allocation; its price
 * is that up to a step of free chunks in a nearly full page waits (under
 * 7% of the page) while other pages are used.
 *
 * O(1) both ways, and nearly free: each page carries the range [lo, hi] of
 * `used` that keeps it where it is, so the inline fast paths (slab.h)
 * compare one counter and call mki_slab_rebucket only when the current page
 * fills, or when another page (which only receives frees) crosses one of
 * its few bucket boundaries or empties.
 *
 * Empty pages: the current page may sit empty (a pool that allocates and
 * frees one object in a loop must not get a new page each time), and one
 * empty page is kept as `spare` when the current page is not empty; any
 * further page is given back the moment its last chunk is freed.
 *
 * Slab pages keep fast_tid 0: mk_free always takes its slow path (the bucket
 * bookkeeping lives here), where the owner's free of a live chunk is
 * mki_slab_free_chunk at once (chunk.c); frees from other threads go to
 * the context's remote list like every kind's, collected when the slab
 * needs a new page.
 */

#include "slab.h"

#include <errno.h>
#include <string.h>

#define NB MKI_SLAB_BUCKETS

static mki_slab *slab(mk_ctx *ctx) { return (mki_slab *)ctx; }

/* Bucket of a page with @used live chunks: whole steps of free chunks, so
 * a page with less than one step free counts as full (hysteresis: a full
 * page that gets one chunk back does not become the fullest partial page,
 * which would make allocation chase single holes). */
static unsigned bucket_of(const mki_slab *s, uint32_t cap, uint32_t used)
{
    return (cap - used) >> s->shift;
}

/* The `used` range that keeps @pg where it is.  The current page calls out
 * only when it fills; any other page only receives frees, so it calls out
 * when it crosses into the next bucket (a handful of times in its life) or
 * loses its last chunk. */
static void set_range(mki_slab *s, mki_page *pg)
{
    uint32_t b = pg->cls, step = 1u << s->shift, cap = pg->capacity;
    if (pg == s->curpg) {
        pg->lo = 0;
        pg->hi = cap - 1;
        return;
    }
    pg->hi = cap;
    uint32_t top = cap - b * step; /* most used chunks of bucket b */
    pg->lo = top >= step ? top - step + 1 : 1;
}

static void place(mki_slab *s, mki_page *pg, unsigned b)
{
    pg->cls = (uint8_t)b;
    mki_page_list_push(&s->bucket[b], pg);
    set_range(s, pg);
}

/* Make @pg the current page (or none).  A pool's front holds objects of the
 * current page only: they go back onto it first, and the front then takes
 * objects of the new page. */
static void set_current(mki_slab *s, mki_page *pg)
{
    mk_pool_front *f = s->front;
    if (f) {
        mki_page *old = s->curpg;
        while (f->head) {
            void *obj = f->head;
            f->head = *(void **)obj;
            mki_page_push(old, obj);
            old->used--;
        }
        f->lo = pg == &mki_page_empty ? 0 : (uintptr_t)pg->start;
        f->span = (uintptr_t)(pg->end - pg->start);
        f->magic = pg->pos_magic;
        f->limit = pg->pos_limit; /* (kept equal: mki_slab_alloc_chunk) */
        f->key = (uintptr_t)pg;   /* the double-free key (page.h) */
    }
    s->curpg = pg;
    if (pg != &mki_page_empty)
        set_range(s, pg);
}

/* The current page is full or gone: take the head of the lowest non-empty
 * bucket above 0, one of the fullest pages, off its list. */
static void select_current(mki_slab *s)
{
    unsigned i = 1;
    while (i < NB && !s->bucket[i])
        i++;
    if (i == NB) {
        set_current(s, &mki_page_empty);
        return;
    }
    mki_page *pg = s->bucket[i];
    mki_page_list_remove(&s->bucket[i], pg);
    set_current(s, pg);
}

/* Is @sp an empty page kept for reuse (other than @pg)? */
static int spare_held(const mki_slab *s, const mki_page *pg)
{
    const mki_page *sp = s->spare;
    return sp && sp != pg && sp != s->curpg && sp->used == 0;
}

/* Put a page that is not (or no longer) current where it belongs: its
 * bucket, or, if it is empty, the spare slot or back to the page pool. */
static void settle(mki_slab *s, mki_page *pg)
{
    if (pg->used == 0) {
        /* keep one empty page (an empty current page counts) */
        if (spare_held(s, pg) ||
            (s->curpg != &mki_page_empty && s->curpg->used == 0)) {
            if (s->spare == pg)
                s->spare = NULL;
            s->pages--;
            mki_segment_page_release(pg);
            return;
        }
        s->spare = pg;
    }
    place(s, pg, bucket_of(s, pg->capacity, pg->used));
}

void mki_slab_rebucket(mki_slab *s, mki_page *pg)
{
    if (pg == s->curpg) { /* it filled up */
        set_current(s, &mki_page_empty); /* the front's objects go back */
        if (pg->used <= pg->hi) {        /* ... and it was not full */
            set_current(s, pg);
            return;
        }
        place(s, pg, 0);
        select_current(s);
        return;
    }
    mki_page_list_remove(&s->bucket[pg->cls], pg);
    uint32_t used = pg->used, cap = pg->capacity;
    settle(s, pg); /* may give pg back: read nothing of it after */
    /* a page that has just become eligible and is fuller than the current
     * page takes over: allocation goes to the fullest eligible page */
    unsigned b = bucket_of(s, cap, used);
    mki_page *cur = s->curpg;
    if (used > 0 && b >= 1 && cur != &mki_page_empty &&
        bucket_of(s, cur->capacity, cur->used) > b) {
        set_current(s, &mki_page_empty);
        select_current(s);
        settle(s, cur);
    }
}

void *mki_slab_alloc_rebucket(mki_slab *s, mki_page *pg, void *b)
{
    mki_slab_rebucket(s, pg);
    return b;
}

/* Units of the slab's next page: its first is small (8 chunks, at least a
 * unit: a slab that holds a few objects costs a unit, as a GENERAL context
 * does, not 64 KiB), every later one s->page_units.  A small page counts
 * as full in the buckets (its free chunks are fewer than a step), so the
 * big pages are preferred once there are some. */
static uint32_t next_units(const mki_slab *s)
{
    if (s->pages || s->page_units > MKI_PAGE_MAX_UNITS)
        return s->page_units;
    size_t want = (size_t)8 * s->slot;
    uint32_t u = 1;
    while ((size_t)u * MKI_UNIT < want && u < s->page_units)
        u <<= 1;
    return u;
}

static int page_new(mki_slab *s)
{
    uint32_t units = next_units(s);
    mki_page *pg = mki_segment_page_alloc(units, (size_t)units * MKI_UNIT);
    if (!pg)
        return -1;
    uint32_t cap = (uint32_t)((size_t)units * MKI_UNIT / s->slot);
    pg->kind = MKI_PAGE_SMALL;
    pg->chunk_size = s->slot;
    pg->capacity = cap;
    pg->extend = pg->start;
    pg->end = pg->start + (size_t)cap * s->slot;
    mki_page_pos_init(pg);
    if (mki_ctx_claim_page(&s->base, pg) != 0) {
        mki_segment_page_release(pg);
        return -1;
    }
    s->pages++;
    set_current(s, pg); /* called only when there is no current page */
    return 0;
}

static void slab_collect(mk_ctx *ctx);

/* The current page has no chunk to give: take in other threads' frees, or
 * open a page.  Returns 0, or -1 when memory is exhausted. */
static int refill(mki_slab *s)
{
    mki_ctx_collect(&s->base);
    if (s->curpg == &mki_page_empty)
        select_current(s);
    if (mki_page_has_chunk(s->curpg))
        return 0;
    if (page_new(s) != 0) {
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

/* Allocation off the inline path: a never-used chunk of the current page,
 * a refill, and instrumented contexts (link words through page/page.h). */
void *mki_slab_alloc_chunk(mki_slab *s)
{
    if (!mki_page_has_chunk(s->curpg) && refill(s) != 0)
        return NULL;
    mki_page *pg = s->curpg;
    void *b = mki_page_take(pg);
    if (s->base.fast_kind == MKI_KIND_SECURE)
        mki_guard_hand_out(pg, b);
    else if (s->base.fast_kind != MKI_KIND_SLOW)
        mki_page_chunk_set_live(b); /* (instrumented chunks are poisoned) */
    if (s->front) /* its position test follows the page's */
        s->front->limit = pg->pos_limit;
    if (pg->used > pg->hi)
        mki_slab_rebucket(s, pg);
    return b;
}

void *mki_slab_alloc_slow(mki_slab *s) { return mki_slab_alloc_chunk(s); }

/* (Validated chunks only: mk_free validates in chunk.c, the pools'
 * paths in slab.h and pool.c; chunks on a remote list were validated
 * when they were freed.) */
void mki_slab_free_chunk(mki_page *pg, void *p)
{
    mki_page_push(pg, p);
    if (--pg->used < pg->lo)
        mki_slab_rebucket(slab(pg->ctx), pg);
}

void mki_slab_free_checked(mki_page *pg, void *p, const char *fn)
{
    if (!mki_page_is_chunk_exact(pg, p)) {
        mki_error_invalid_in(fn, p, mki_ctx_name(pg->ctx), 0);
        return;
    }
    if (mki_page_chunk_freed(pg, p)) {
        mki_error_double_free(fn, p, mki_ctx_name(pg->ctx));
        return;
    }
    if (pg->ctx->fast_kind == MKI_KIND_SECURE && !mki_chunk_guard_ok(pg, p, fn))
        return;
    mki_page_chunk_set_freed(pg, p);
    mki_slab_free_chunk(pg, p);
}

static void slab_collect(mk_ctx *ctx)
{
    void *list = atomic_exchange_explicit(&ctx->remote, NULL,
                                          memory_order_acquire);
    while (list) {
        void *next = mki_link_get(list);
        mki_slab_free_chunk(mki_page_of(list), list);
        list = next;
    }
}

/* ---- the method table ----------------------------------------------------- */

static void *slab_alloc(mk_ctx *ctx, size_t size)
{
    mki_slab *s = slab(ctx);
    size_t max = s->user_size +
                 (ctx->fast_kind == MKI_KIND_SLOW ? MKI_INSTR_TAIL : 0);
    if (size > max) {
        errno = EINVAL; /* a slab has one chunk size */
        return NULL;
    }
    return mki_slab_alloc_chunk(s);
}

static void *slab_alloc_aligned(mk_ctx *ctx, size_t size, size_t align)
{
    /* A slab's chunks have one alignment, fixed at creation (memkit.h):
     * it can give that or less, in every build, and never more.  (Slots
     * may happen to be multiples of a larger power of two, but pages above
     * 64 KiB are aligned to 64 KiB only, and instrumented slots are longer:
     * promising what the slot gives would differ by size and by build.) */
    if (align > slab(ctx)->align) {
        errno = EINVAL;
        return NULL;
    }
    return slab_alloc(ctx, size);
}

static void slab_free(mki_page *pg, void *p) { mki_slab_free_chunk(pg, p); }

static void *slab_realloc(mki_page *pg, void *p, size_t size)
{
    if (size <= slab(pg->ctx)->user_size)
        return p;
    errno = EINVAL;
    return NULL;
}

static size_t slab_usable_size(const mki_page *pg, const void *p)
{
    (void)p;
    return pg->chunk_size -
           (pg->ctx->fast_kind == MKI_KIND_SECURE ? MKI_GUARD : 0);
}

typedef void (*page_fn)(mki_page *pg, void *arg);

static void each_page(mki_slab *s, page_fn fn, void *arg)
{
    if (s->curpg != &mki_page_empty)
        fn(s->curpg, arg);
    for (unsigned b = 0; b < NB; b++)
        for (mki_page *pg = s->bucket[b], *next; pg; pg = next) {
            next = pg->next;
            fn(pg, arg);
        }
}

static void release_unless(mki_page *pg, void *keep)
{
    if (pg != keep) {
        slab(pg->ctx)->pages--;
        mki_segment_page_release(pg);
    }
}

static void slab_reset(mk_ctx *ctx, int keep_one)
{
    mki_slab *s = slab(ctx);
    atomic_store_explicit(&ctx->remote, NULL, memory_order_relaxed);
    mki_page *keep = keep_one ? s->curpg : NULL;
    for (unsigned b = 0; keep == &mki_page_empty && b < NB; b++)
        keep = s->bucket[b];
    if (keep == &mki_page_empty)
        keep = NULL;
    each_page(s, (page_fn)release_unless, keep);
    memset(s->bucket, 0, sizeof s->bucket);
    if (s->front) { /* its objects died with their pages */
        s->front->head = NULL;
    }
    s->curpg = &mki_page_empty;
    s->spare = NULL;
    if (keep) {
        keep->free = NULL;
        keep->extend = keep->start;
        mki_page_pos_rewind(keep); /* no chunk of before is one now */
        keep->used = 0;
        keep->next = keep->prev = NULL;
        mki_ctx_page_reset(ctx, keep);
        set_current(s, keep);
    }
}

static void slab_destroy(mk_ctx *ctx) { slab_reset(ctx, 0); }

static void add_stats(mki_page *pg, void *arg)
{
    mk_stats *out = arg;
    out->blocks++;
    out->bytes_reserved += pg->size;
    out->chunks += pg->used;
    out->bytes_used += (size_t)pg->used * slab_usable_size(pg, NULL);
    out->bytes_resident += mki_ctx_reached((size_t)(pg->extend - pg->start),
                                            pg->size, MK_CONFIG_CHECK && pg->live);
}

static void slab_stats(const mk_ctx *ctx, mk_stats *out)
{
    mki_slab *s = slab((mk_ctx *)ctx);
    each_page(s, add_stats, out);
    /* a pool's front: its objects are free for the program, live for the
     * page (so that every walk of the tree counts them as free) */
    size_t in_front = 0;
    for (void *o = s->front ? s->front->head : NULL; o; o = *(void **)o)
        in_front++;
    out->chunks -= in_front;
    out->bytes_used -= in_front * s->slot;
}

/* mk_ctx_trim: the spare page, and the current page if it holds nothing
 * (nor the pool's front). */
static size_t slab_trim(mk_ctx *ctx)
{
    mki_slab *s = slab(ctx);
    size_t bytes = 0;
    if (spare_held(s, NULL)) {
        mki_page *pg = s->spare;
        s->spare = NULL;
        mki_page_list_remove(&s->bucket[pg->cls], pg);
        s->pages--;
        bytes += mki_segment_page_release_now(pg);
    }
    mki_page *cur = s->curpg;
    if (cur != &mki_page_empty && cur->used == 0 &&
        !(s->front && s->front->head)) {
        set_current(s, &mki_page_empty);
        if (s->spare == cur)
            s->spare = NULL;
        s->pages--;
        bytes += mki_segment_page_release_now(cur);
    }
    return bytes;
}

static void slab_set_owner(mk_ctx *ctx, uintptr_t tid)
{
    (void)ctx, (void)tid; /* slab pages never take the fast free path */
}

static void slab_each_live(mk_ctx *ctx, void (*fn)(mki_page *, void *, void *),
                           void *arg)
{
    mki_live_walk w = {fn, arg};
    each_page(slab(ctx), mki_ctx_up.walk_page, &w);
}

static int slab_init(mk_ctx *ctx, const mk_ctx_opts *opts)
{
    mki_slab *s = slab(ctx);
    if (!opts || opts->chunk_size == 0) {
        mki_note_einval("mk_ctx_new", ctx->name,
                        "MK_SLAB needs mk_ctx_opts.chunk_size, its one chunk "
                        "size (1 byte to 1 MiB)");
        errno = EINVAL;
        return -1;
    }
    if (opts->chunk_size > MKI_SLAB_MAX) {
        mki_note_einval("mk_ctx_new", ctx->name,
                        "MK_SLAB's chunk_size is above 1 MiB");
        errno = EINVAL;
        return -1;
    }
    size_t size = opts->chunk_size, align = opts->chunk_align;
    if (align == 0) /* the alignment mk_alloc gives this size */
        align = (size <= 8 || (size > 16 && size <= 24)) ? 8 : 16;
    if ((align & (align - 1)) != 0 || align > MKI_PAGE_MAX) {
        mki_note_einval("mk_ctx_new", ctx->name,
                        "MK_SLAB's chunk_align is not a power of two up to "
                        "64 KiB");
        errno = EINVAL;
        return -1;
    }
    if (align < 8)
        align = 8; /* a free chunk holds a pointer */
    size_t extra = ctx->fast_kind == MKI_KIND_SLOW     ? MKI_INSTR_TAIL
                   : ctx->fast_kind == MKI_KIND_SECURE ? MKI_GUARD
                                                       : 0; /* (page.h) */
    size_t slot = (size + extra + align - 1) & ~(align - 1);
    if (slot < 16)
        slot = 16; /* a free chunk holds its link and its double-free key */
    size_t units = MKI_PAGE_MAX_UNITS;
    if (slot > MKI_PAGE_MAX)
        units = ((slot + MKI_PAGE_MAX - 1) / MKI_PAGE_MAX) * MKI_PAGE_MAX_UNITS;
    s->user_size = (uint32_t)size;
    s->align = (uint32_t)align;
    s->slot = (uint32_t)slot;
    s->page_units = (uint32_t)units;
    s->capacity = (uint32_t)(units * MKI_UNIT / slot);
    s->shift = 0;
    while ((s->capacity >> s->shift) > NB - 1)
        s->shift++;
    s->curpg = &mki_page_empty;
    return 0;
}

const mki_kind_ops mki_slab_ops = {
    .name = "slab",
    .ctx_size = sizeof(mki_slab),
    .init = slab_init,
    .destroy = slab_destroy,
    .alloc = slab_alloc,
    .alloc_aligned = slab_alloc_aligned,
    .free = slab_free,
    .collect = slab_collect,
    .realloc = slab_realloc,
    .usable_size = slab_usable_size,
    .reset = slab_reset,
    .stats = slab_stats,
    .set_owner = slab_set_owner,
    .trim = slab_trim,
    .each_live = slab_each_live,
};
