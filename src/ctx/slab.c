/*
 * slab.c - the SLAB context kind: one chunk size fixed at creation, O(1)
 * allocate and free, no per-chunk header.  PostgreSQL's slab.c is the model;
 * typed pools (pool.c) are built on it.
 *
 * Data structure: every page has the same size (64 KiB, or a multiple of it
 * for chunks above 64 KiB) and sits in one of MKI_SLAB_BUCKETS lists by how
 * many chunks it has free: bucket 0 holds full pages, bucket b > 0 pages
 * with nfree in ((b-1) * 2^shift, b * 2^shift].  Allocation takes from the
 * *current* page, the head of the lowest non-empty bucket above 0, i.e. one
 * of the fullest pages; frees therefore concentrate on the emptier pages,
 * which empty out and go back to the shared page pool.
 *
 * O(1) both ways, and nearly free: each page carries the range [lo, hi] of
 * `used` that keeps it in its bucket, so the inline fast paths (slab.h)
 * compare one counter and only call mki_slab_rebucket when a page crosses a
 * bucket boundary, fills, or empties.
 *
 * Empty pages: the current page may sit empty (a pool that allocates and
 * frees one object in a loop must not get a new page each time), and one
 * other empty page is kept as `spare`; any further page is given back the
 * moment its last chunk is freed.
 *
 * Slab pages keep fast_tid 0: mk_free always reaches slab_free (the bucket
 * bookkeeping lives here); frees from other threads go to the context's
 * remote list like every kind's, collected when the slab needs a new page.
 */
#include "slab.h"

#include <errno.h>
#include <string.h>

#define NB MKI_SLAB_BUCKETS

static mki_slab *slab(mk_ctx *ctx) { return (mki_slab *)ctx; }

static unsigned bucket_of(const mki_slab *s, uint32_t used)
{
    uint32_t nfree = s->capacity - used;
    return (nfree + (1u << s->shift) - 1) >> s->shift;
}

/* The `used` range of @pg's bucket; the current page may empty without a
 * call (lo 0), any other page calls rebucket when its last chunk goes. */
static void set_range(mki_slab *s, mki_page *pg)
{
    uint32_t b = pg->cls, step = 1u << s->shift, cap = s->capacity;
    if (b == 0) {
        pg->lo = pg->hi = cap;
        return;
    }
    pg->hi = cap - (b - 1) * step - 1;
    pg->lo = cap > b * step ? cap - b * step : 0;
    if (pg->lo == 0 && pg != s->curpg)
        pg->lo = 1;
}

/* Make the head of the lowest non-empty bucket above 0 current. */
static void refresh(mki_slab *s)
{
    unsigned i = 1;
    while (i < NB && !s->bucket[i])
        i++;
    s->cur = i;
    mki_page *next = i < NB ? s->bucket[i] : &mki_page_empty;
    mki_page *old = s->curpg;
    if (next == old)
        return;
    s->curpg = next;
    if (next != &mki_page_empty)
        set_range(s, next);
    if (old != &mki_page_empty && old->kind == MKI_PAGE_SMALL) {
        set_range(s, old);
        if (old->used == 0)
            mki_slab_rebucket(s, old); /* an empty page that stopped being
                                          current: spare it or give it back */
    }
}

static void place(mki_slab *s, mki_page *pg, unsigned b)
{
    pg->cls = (uint8_t)b;
    mki_page_list_push(&s->bucket[b], pg);
}

void mki_slab_rebucket(mki_slab *s, mki_page *pg)
{
    mki_page_list_remove(&s->bucket[pg->cls], pg);
    if (pg->used == 0 && pg != s->curpg) {
        mki_page *sp = s->spare;
        int spare_ok = sp && sp != pg && sp->used == 0 && sp != s->curpg;
        if (spare_ok || s->curpg->used == 0) {
            mki_segment_page_release(pg);
            refresh(s);
            return;
        }
        s->spare = pg;
    }
    place(s, pg, bucket_of(s, pg->used));
    set_range(s, pg);
    refresh(s);
}

void *mki_slab_alloc_rebucket(mki_slab *s, mki_page *pg, void *b)
{
    mki_slab_rebucket(s, pg);
    return b;
}

static int page_new(mki_slab *s)
{
    mki_page *pg = mki_segment_page_alloc(s->page_units,
                                          (size_t)s->page_units * MKI_UNIT);
    if (!pg)
        return -1;
    pg->kind = MKI_PAGE_SMALL;
    pg->chunk_size = s->slot;
    pg->capacity = s->capacity;
    pg->extend = pg->start;
    pg->end = pg->start + (size_t)s->capacity * s->slot;
    pg->ctx = &s->base;
    if (s->base.fast_kind == MKI_KIND_SLOW && mki_instr_page_new(pg) != 0) {
        mki_segment_page_release(pg);
        return -1;
    }
    place(s, pg, bucket_of(s, 0));
    set_range(s, pg);
    refresh(s);
    return 0;
}

static void slab_collect(mk_ctx *ctx);

/* The current page has no chunk to give: take in other threads' frees, or
 * open a page.  Returns 0, or -1 when memory is exhausted. */
static int refill(mki_slab *s)
{
    if (atomic_load_explicit(&s->base.remote, memory_order_relaxed)) {
        slab_collect(&s->base);
        if (mki_page_has_chunk(s->curpg))
            return 0;
    }
    if (page_new(s) != 0) {
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

/* Allocation off the inline path: a never-used chunk of the current page,
 * a refill, and instrumented contexts (link words through annotate.h). */
void *mki_slab_alloc_chunk(mki_slab *s)
{
    if (!mki_page_has_chunk(s->curpg) && refill(s) != 0)
        return NULL;
    mki_page *pg = s->curpg;
    void *b = mki_page_take(pg);
    if (pg->used > pg->hi)
        mki_slab_rebucket(s, pg);
    return b;
}

void *mki_slab_alloc_slow(mki_slab *s) { return mki_slab_alloc_chunk(s); }

void mki_slab_free_chunk(mki_page *pg, void *p)
{
    mki_page_push(pg, p);
    if (--pg->used < pg->lo)
        mki_slab_rebucket(slab(pg->ctx), pg);
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
    mki_slab *s = slab(ctx);
    /* pages are aligned to their size; slots are multiples of the slab's
     * alignment */
    if ((s->slot & (align - 1)) != 0 ||
        align > (size_t)s->page_units * MKI_UNIT) {
        errno = EINVAL;
        return NULL;
    }
    return slab_alloc(ctx, size);
}

static void slab_free(mki_page *pg, void *p) { mki_slab_free_chunk(pg, p); }

static void slab_page_empty(mki_page *pg) { (void)pg; /* never: fast_tid 0 */ }

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
    return pg->chunk_size;
}

typedef void (*page_fn)(mki_page *pg, void *arg);

static void each_page(mki_slab *s, page_fn fn, void *arg)
{
    for (unsigned b = 0; b < NB; b++)
        for (mki_page *pg = s->bucket[b], *next; pg; pg = next) {
            next = pg->next;
            fn(pg, arg);
        }
}

static void release_unless(mki_page *pg, void *keep)
{
    if (pg != keep)
        mki_segment_page_release(pg);
}

static void slab_reset(mk_ctx *ctx, int keep_one)
{
    mki_slab *s = slab(ctx);
    atomic_store_explicit(&ctx->remote, NULL, memory_order_relaxed);
    mki_page *keep = NULL;
    for (unsigned b = 0; keep_one && !keep && b < NB; b++)
        keep = s->bucket[b];
    each_page(s, (page_fn)release_unless, keep);
    memset(s->bucket, 0, sizeof s->bucket);
    s->cur = NB;
    s->curpg = &mki_page_empty;
    s->spare = NULL;
    if (keep) {
        keep->free = NULL;
        keep->extend = keep->start;
        keep->used = 0;
        if (ctx->fast_kind == MKI_KIND_SLOW)
            mki_instr_page_reset(keep);
        place(s, keep, bucket_of(s, 0));
        refresh(s);
    }
}

static void slab_destroy(mk_ctx *ctx) { slab_reset(ctx, 0); }

static void add_stats(mki_page *pg, void *arg)
{
    mk_stats *out = arg;
    out->blocks++;
    out->bytes_reserved += pg->size;
    out->chunks += pg->used;
    out->bytes_used += (size_t)pg->used * pg->chunk_size;
}

static void slab_stats(const mk_ctx *ctx, mk_stats *out)
{
    each_page(slab((mk_ctx *)ctx), add_stats, out);
}

static void slab_set_owner(mk_ctx *ctx, uintptr_t tid)
{
    (void)ctx, (void)tid; /* slab pages never take the fast free path */
}

typedef struct live_walk {
    void (*fn)(mki_page *, void *, void *);
    void *arg;
} live_walk;

static void page_each_live(mki_page *pg, void *arg)
{
    live_walk *w = arg;
    mki_instr_page_each_live(pg, w->fn, w->arg);
}

static void slab_each_live(mk_ctx *ctx, void (*fn)(mki_page *, void *, void *),
                           void *arg)
{
    live_walk w = {fn, arg};
    each_page(slab(ctx), page_each_live, &w);
}

static int slab_init(mk_ctx *ctx, const mk_ctx_opts *opts)
{
    mki_slab *s = slab(ctx);
    if (!opts || opts->chunk_size == 0 || opts->chunk_size > MKI_LARGE_MAX) {
        errno = EINVAL;
        return -1;
    }
    size_t size = opts->chunk_size, align = opts->chunk_align;
    if (align == 0) /* the alignment mk_alloc gives this size */
        align = (size <= 8 || (size > 16 && size <= 24)) ? 8 : 16;
    if ((align & (align - 1)) != 0 || align > MKI_PAGE_MAX) {
        errno = EINVAL;
        return -1;
    }
    if (align < 8)
        align = 8; /* a free chunk holds a pointer */
    size_t extra = ctx->fast_kind == MKI_KIND_SLOW ? MKI_INSTR_TAIL : 0;
    size_t slot = (size + extra + align - 1) & ~(align - 1);
    size_t units = MKI_PAGE_MAX_UNITS;
    if (slot > MKI_PAGE_MAX)
        units = ((slot + MKI_PAGE_MAX - 1) / MKI_PAGE_MAX) * MKI_PAGE_MAX_UNITS;
    s->user_size = (uint32_t)size;
    s->slot = (uint32_t)slot;
    s->page_units = (uint32_t)units;
    s->capacity = (uint32_t)(units * MKI_UNIT / slot);
    s->shift = 0;
    while (bucket_of(s, 0) > NB - 1)
        s->shift++;
    s->cur = NB;
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
    .page_empty = slab_page_empty,
    .collect = slab_collect,
    .realloc = slab_realloc,
    .usable_size = slab_usable_size,
    .reset = slab_reset,
    .stats = slab_stats,
    .set_owner = slab_set_owner,
    .each_live = slab_each_live,
};
