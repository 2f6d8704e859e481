/* SPDX-License-Identifier: MIT */
/*
 * chunk.c - the public chunk entry points: mk_alloc, mk_free, mk_realloc
 * and friends.  This file owns the two fast paths; everything else is a
 * call through the kind's method table.
 *
 * mk_alloc, GENERAL kind, request <= 32 KiB (the common case), in words:
 *   1. compare the context's kind with GENERAL and the size with 32 KiB;
 *   2. load the size class from a 131-byte table indexed by (size + 7) / 8
 *      (above 1040 bytes: a second table, sizeclass.h);
 *   3. load the class's current page from the context;
 *   4. load the page's free-list head; if it is NULL, hand out the page's
 *      next never-used chunk (inline), or call the refill, which takes the
 *      frees other threads made into the page or the slow path;
 *   5. store the chunk's first word (the next free chunk) as the new head,
 *      clear its second (the double-free key, page.h), add one to the
 *      page's live count, return the chunk.
 * mk_free, in words (general.h, mki_chunk_free):
 *   1. the pointer must lie in the arena of normal segments (a subtraction
 *      and a compare, os.h); anything else goes to the checked path, which
 *      finds huge chunks and segments outside the arena and reports what
 *      memkit does not hold;
 *   2. mask the pointer down to its segment and load the page descriptor
 *      from the segment's page map (indexed by the pointer's 1 KiB unit;
 *      NULL: a unit no page covers, the slow path reports it);
 *   3. compare the page's fast_tid with the thread's identity (one
 *      thread-local load, os.h); if they differ (another thread's context,
 *      a full or large page, a kind without free lists, secure mode) take
 *      the slow path;
 *   4. the pointer must start a chunk the page has handed out (one
 *      multiply, page.h) and the chunk must not hold its double-free key:
 *      else report it (out of line);
 *   5. push the chunk on the page's free list, store its key, subtract one
 *      from the live count; if that reaches zero, give the page back (out
 *      of line).
 * mk_alloc, BUMP kind: round the size to 16, compare it with the room left
 * in the current block, move the pointer.  GENERATION: the same, plus an
 * 8-byte header store; its free (in mki_chunk_free_slow) checks and marks
 * the header's state word, then drops the block's count.  SLAB (not a
 * pool's own slab, whose front holds objects of its current page): the
 * typed pool's pop (slab.h); its free, from the owner, is the pool's push
 * on the slow path (slab pages keep fast_tid 0, their buckets live in
 * slab.c), 119 instructions a mk_alloc/mk_free pair of 24 bytes (callgrind;
 * 224 through the method table).
 * No atomic operation, lock or call on any of these paths.  Errors, refills,
 * new pages, large chunks, other threads' frees, the other kinds and
 * instrumented contexts are `noinline` helpers.  An instrumented context
 * takes no fast path (MKI_KIND_SLOW) and its slow paths call through its
 * `ops`, the checking layer's wrapper, which this file does not name.
 */

#include "general.h"
#include "generation.h"
#include "slab.h"
#include "bump.h"
#include "../page/purge.h"

#include <errno.h>
#include <string.h>

/* ---- allocation ----------------------------------------------------------- */

/* The countdown is the sampler's (ctx.h); a thread starts at 0, so that
 * its first allocation in a profiled context draws its first interval. */
_Thread_local int64_t mki_prof_left __attribute__((tls_model("initial-exec")));
/* Whether this thread's frees prefetch ahead (ctx.h); a thread starts
 * without, until a context of MKI_PREFETCH_FROM bytes takes a page. */
_Thread_local unsigned char mki_prefetch_frees __attribute__((tls_model("initial-exec")));

/* A profiled context's allocation (MKI_KIND_PROF): its kind's own path,
 * then the countdown.  GENERAL's free-list pop is repeated here (mk_alloc
 * does not take it for such a context); the other kinds take their method
 * table, which serves every request. */
static MKI_NOINLINE void *alloc_profiled(mk_ctx *ctx, size_t size)
{
    void *p;
    if (MKI_LIKELY(ctx->kind == MK_GENERAL && size <= MKI_SMALL_MAX)) {
        mki_general *g = (mki_general *)ctx;
        mki_page *pg = mki_general_page_for(g, size);
        p = mki_general_pop(pg);
        if (!p)
            p = mki_general_refill(g, pg, size);
    } else { /* (GENERAL's alloc is mki_general_alloc_slow) */
        mki_purge_safe_point();
        p = size > MKI_SIZE_MAX ? (errno = ENOMEM, NULL) : ctx->ops->alloc(ctx, size);
    }
    return mki_prof_count(ctx, p, size);
}

static MKI_NOINLINE void *alloc_generic(mk_ctx *ctx, size_t size)
{
    if (ctx->fast_kind == MKI_KIND_PROF)
        return alloc_profiled(ctx, size);
    mki_purge_safe_point(); /* before anything is touched (purge.c) */
    if (MKI_LIKELY(ctx->fast_kind == MK_GENERAL))
        return mki_general_alloc_slow((mki_general *)ctx, size);
    if (ctx->fast_kind == MKI_KIND_SECURE && ctx->kind == MK_GENERAL)
        return mki_general_alloc_secure((mki_general *)ctx, size);
    if (size > MKI_SIZE_MAX) {
        errno = ENOMEM;
        return NULL;
    }
    return ctx->ops->alloc(ctx, size);
}

/* A NULL context is no context: nothing can be put in it (memkit.h). */
static MKI_COLD void *no_ctx(void)
{
    errno = EINVAL;
    return NULL;
}

void *mk_alloc(mk_ctx *ctx, size_t size)
{
    if (MKI_UNLIKELY(!ctx))
        return no_ctx();
    if (MKI_LIKELY(ctx->fast_kind == MK_GENERAL)) {
        mki_page *pg;
        if (MKI_LIKELY(size <= MKI_DIRECT_MAX)) /* one test for most sizes */
            pg = ((mki_general *)ctx)->cls[mki_class_of_direct(size)];
        else if (size <= MKI_SMALL_MAX)
            pg = mki_general_page_for((mki_general *)ctx, size);
        else
            return alloc_generic(ctx, size);
        void *b = mki_general_pop(pg);
        if (MKI_LIKELY(b != NULL))
            return b;
        if ((b = mki_general_extend(pg)) != NULL)
            return b;
        return mki_general_refill((mki_general *)ctx, pg, size);
    }
    if (ctx->fast_kind == MK_BUMP) {
        /* a pointer bump and a bounds check; sizes round to 16, and a size
         * of 0 or one that wraps gives n == 0, which the slow path takes */
        mki_bump *bp = (mki_bump *)ctx;
        size_t n = (size + 15) & ~(size_t)15;
        char *p = bp->ptr;
        if (MKI_LIKELY(n != 0 && n <= (size_t)(bp->end - p))) {
            bp->ptr = p + n;
            return p;
        }
    } else if (ctx->fast_kind == MK_GENERATION && size <= MKI_DIRECT_MAX) {
        void *p = mki_generation_alloc_fast((mki_generation *)ctx, size);
        if (MKI_LIKELY(p != NULL))
            return p;
    } else if (ctx->fast_kind == MK_SLAB) {
        /* a typed pool's pop (slab.h), when the current page has a free
         * chunk (the refill takes the slow path, purge safe point first);
         * not for a pool's own slab, whose front holds objects of its
         * current page (pool.c) */
        mki_slab *s = (mki_slab *)ctx;
        if (MKI_LIKELY(size <= s->user_size && !s->front && s->curpg->free))
            return mki_slab_alloc_fast(s);
    }
    return alloc_generic(ctx, size);
}

int mki_chunk_is_zero(const void *p, size_t n)
{
    /* a huge chunk in a fresh mapping (not one reused from the cache) */
    if (n <= MKI_LARGE_MAX)
        return 0;
    const mki_page *pg = mki_page_of(p);
    return pg->kind == MKI_PAGE_HUGE && (pg->flags & MKI_PF_FRESH);
}

void *mk_alloc_zero(mk_ctx *ctx, size_t size)
{
    int huge = size > MKI_LARGE_MAX;
    if (huge)
        mki_huge_calloc(1); /* fresh zeroes: no huge pages (huge.c) */
    void *p = mk_alloc(ctx, size);
    if (huge)
        mki_huge_calloc(0);
    if (p && !mki_chunk_is_zero(p, size))
        memset(p, 0, size);
    return p;
}

void *mk_alloc_aligned(mk_ctx *ctx, size_t size, size_t align)
{
    if (align == 0 || (align & (align - 1)) != 0 || !ctx) {
        errno = EINVAL;
        return NULL;
    }
    if (align <= 8)
        return mk_alloc(ctx, size);
    if (size > MKI_SIZE_MAX || align > MKI_SIZE_MAX) {
        errno = ENOMEM;
        return NULL;
    }
    mki_purge_safe_point();
    void *p = ctx->ops->alloc_aligned(ctx, size, align);
    if (ctx->fast_kind == MKI_KIND_PROF)
        mki_prof_count(ctx, p, size);
    return p;
}

void *mk_alloc_array(mk_ctx *ctx, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return mk_alloc_zero(ctx, total);
}

char *mk_strdup(mk_ctx *ctx, const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = mk_alloc(ctx, n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* ---- freeing -------------------------------------------------------------- */

/* Another thread's chunk: queue it for the owner (lock-free push; the
 * owner takes the whole list with one exchange, so there is no ABA). */
void mki_chunk_remote_push(mk_ctx *ctx, void *p)
{
    void *head = atomic_load_explicit(&ctx->remote, memory_order_relaxed);
    do {
        mki_link_set(p, head);
    } while (!atomic_compare_exchange_weak_explicit(
        &ctx->remote, &head, p, memory_order_release, memory_order_relaxed));
}

/* Is @p, whose page (or huge mapping) descriptor is @pg, the start of a
 * live chunk?  1 yes; 0 no, reported for function @fn (a free, @is_free,
 * reports a chunk freed already as a double free).  For contexts that are not
 * instrumented (those validate in check/instrument.c, with their bitmap):
 * memory memkit holds but in no chunk (a page or huge mapping that went
 * back, units never handed out); a small page's address that is not a
 * chunk it has handed out (an interior pointer, or past `extend`); a chunk
 * that holds its double-free key (page.h); a large or huge page's address
 * other than its chunk's; a kind's own test for its blocks (is_live). */
static int chunk_valid(mki_page *pg, const void *p, const char *fn, int is_free)
{
    if (MKI_UNLIKELY(!pg || pg->kind == MKI_PAGE_FREE || !pg->ctx)) {
        if (is_free)
            mki_error_double_free(fn, p, NULL); /* "memory memkit holds free" */
        else
            mki_error_invalid(fn, p);
        return 0;
    }
    mk_ctx *ctx = pg->ctx;
    int state;
    switch (pg->kind) {
    case MKI_PAGE_SMALL:
        state = !mki_page_is_chunk_exact(pg, p) ? -1 : mki_page_chunk_freed(pg, p) ? 0 : 1;
        break;
    case MKI_PAGE_LARGE:
    case MKI_PAGE_HUGE: /* (freed by another thread: marked, waiting) */
        state = p != pg->start ? -1
                : atomic_load_explicit(&pg->xfree, memory_order_relaxed) ? 0
                                                                          : 1;
        break;
    default: {
        const mki_kind_ops *ops = mki_kinds[ctx->kind];
        state = ops->is_live ? ops->is_live(pg, p) : 1;
    }
    }
    if (MKI_LIKELY(state == 1))
        return 1;
    if (state == 0 && is_free)
        mki_error_double_free(fn, p, mki_ctx_name(ctx));
    else
        mki_error_invalid_in(fn, p, mki_ctx_name(ctx), state == 0);
    return 0;
}

int mki_chunk_guard_ok(mki_page *pg, const void *p, const char *fn)
{
    const void *broken = NULL;
    if (pg->kind == MKI_PAGE_SMALL || pg->kind == MKI_PAGE_LARGE) {
        broken = mki_guard_broken(pg, p);
    } else if (pg->kind == MKI_PAGE_BLOCK && pg->ctx->kind == MK_GENERATION) {
        /* GENERATION chunks are followed by the next one's header */
        broken = mki_generation_next_broken(pg, p);
    }
    if (MKI_LIKELY(!broken))
        return 1;
    mki_error_report(fn, "write past the end of chunk", broken,
                     "into its neighbour", mki_ctx_name(pg->ctx));
    return 0;
}

MKI_NOINLINE void mki_chunk_free_checked(void *p, const char *fn)
{
    if (!p)
        return; /* free(NULL) */
    mki_page *pg = mki_segment_find(p);
    if (MKI_UNLIKELY(!pg)) {
        mki_error_invalid(fn, p);
        return;
    }
    mki_chunk_free_slow(pg, p, fn);
}

MKI_COLD void mki_chunk_free_bad(mki_page *pg, void *p, const char *fn)
{
    chunk_valid(pg, p, fn, 1); /* reports */
}

static MKI_NOINLINE void free_slow(mki_page *pg, void *p, const char *fn);

/* (a wrapper that saves no register: secure mode's common case, first;
 * another thread's free of a GENERAL chunk (W6 prodcons: some 80
 * instructions a free against 160 through free_slow, callgrind; the whole
 * run 25% fewer), or its owner's into a full page; and GENERATION's,
 * whose pages keep fast_tid 0, so that its every free comes here: its
 * owner's free of a live chunk took the validating path, some 100
 * instructions, before it had this one) */
void mki_chunk_free_slow(mki_page *pg, void *p, const char *fn)
{
    if (MKI_UNLIKELY(mki_secure) && pg && mki_general_free_secure_try(pg, p))
        return;
    if (pg && mki_general_free_try(pg, p))
        return;
    if (pg && pg->kind == MKI_PAGE_BLOCK && pg->ctx &&
        pg->ctx->fast_kind == MK_GENERATION && mki_generation_free_try(pg, p))
        return;
    free_slow(pg, p, fn);
}

static MKI_NOINLINE void free_slow(mki_page *pg, void *p, const char *fn)
{
    if (MKI_UNLIKELY(!pg || pg->kind == MKI_PAGE_FREE || !pg->ctx)) {
        chunk_valid(pg, p, fn, 1); /* reports */
        return;
    }
    /* (only the exact address of a live sample matches: a bad pointer is
     * not one, and is reported below as ever) */
    mki_prof_forget(pg, p);
    mk_ctx *ctx = pg->ctx;
    if (ctx->fast_kind == MK_SLAB && !((mki_slab *)ctx)->front &&
        mki_ctx_owner(ctx) == mki_tid()) {
        /* its owner's free of a SLAB chunk (slab pages keep fast_tid 0,
         * their buckets live in slab.c): a typed pool's free, which
         * reports a bad pointer as a misuse of @fn */
        mki_slab_free_fast((mki_slab *)ctx, pg, p, fn);
        return;
    }
    const mki_kind_ops *ops = ctx->ops;
    if (ops->free_any) { /* a decorator's: the whole free is its own */
        ops->free_any(pg, p, fn);
        return;
    }
    if (!chunk_valid(pg, p, fn, 1))
        return;
    if (ops->no_free)
        return;
    if (ctx->fast_kind == MKI_KIND_SECURE && !mki_chunk_guard_ok(pg, p, fn))
        return; /* reported; the chunk is left as it is */
    /* marked freed before it is on any list (page.h, generation.h) */
    if (pg->kind == MKI_PAGE_SMALL)
        mki_page_chunk_set_freed(pg, p);
    else if (pg->kind == MKI_PAGE_BLOCK && ctx->kind == MK_GENERATION)
        mki_generation_mark_dead(p);
    uintptr_t owner = mki_ctx_owner(ctx);
    if (owner != mki_tid()) {
        /* a large or huge chunk is marked in its descriptor (its xfree
         * word, unused otherwise) while it waits for its owner: a second
         * free, however close, finds the mark */
        if ((pg->kind == MKI_PAGE_LARGE || pg->kind == MKI_PAGE_HUGE) &&
            atomic_exchange_explicit(&pg->xfree, 1, memory_order_relaxed)) {
            mki_error_double_free(fn, p, mki_ctx_name(ctx));
            return;
        }
        if (ctx->kind == MK_GENERAL && pg->kind == MKI_PAGE_SMALL)
            mki_general_free_remote(pg, p); /* the page's own list */
        else
            mki_chunk_remote_push(ctx, p);
        /* no thread will collect it: every so many frees, the layer above
         * looks at it (heap.c: the last free into an exited thread's heap
         * gives it back, with no thread of memkit's own) */
        if (owner == 0 &&
            atomic_fetch_sub_explicit(&ctx->orphan_left, 1, memory_order_relaxed) <= 1)
            mki_ctx_up.orphan_freed(ctx);
        return;
    }
    if (ctx->fast_kind == MK_GENERATION && pg->kind == MKI_PAGE_BLOCK) {
        mki_generation_free_fast(pg);
        return;
    }
    ops->free(pg, p); /* (secure mode's common case was taken above) */
}

void mki_chunk_free_named(void *p, const char *fn)
{
    if (!p)
        return;
    /* validate before touching anything the pointer leads to */
    mki_page *pg = mki_page_validate(p, fn, 1);
    if (pg)
        free_slow(pg, p, fn);
}

void mk_free(void *p)
{
    if (MK_CONFIG_CHECK) {
        mki_chunk_free_named(p, "mk_free");
        return;
    }
    mki_chunk_free(p, "mk_free");
}

/* ---- queries and resizing ------------------------------------------------- */

/* The page of a live chunk handed to @fn; validated in the checking build;
 * in the release build, a pointer outside memkit's memory, or that is not
 * the start of a live chunk, is reported (NULL).  What page_for does after
 * its inline test (general.h) did not take @p. */
static mki_page *page_checked(const void *p, const char *fn)
{
    if (MK_CONFIG_CHECK)
        return mki_page_validate(p, fn, 0);
    mki_page *pg = mki_segment_find(p);
    if (MKI_UNLIKELY(!pg || pg->kind == MKI_PAGE_FREE || !pg->ctx)) {
        mki_error_invalid(fn, p);
        return NULL;
    }
    if (pg->ctx->fast_kind != MKI_KIND_SLOW && !chunk_valid(pg, p, fn, 0))
        return NULL;
    return pg;
}

/* A live small chunk of a plain GENERAL context inline (the common case),
 * else page_checked's answer. */
static mki_page *page_for(const void *p, const char *fn)
{
    mki_page *pg = MK_CONFIG_CHECK ? NULL : mki_general_live_small(p);
    return MKI_LIKELY(pg != NULL) ? pg : page_checked(p, fn);
}

void *mk_realloc(void *p, size_t size)
{
    if (!p) {
        mk_ctx *cur = mki_ctx_up.current();
        return cur ? mk_alloc(cur, size) : NULL;
    }
    mki_page *pg = page_for(p, "mk_realloc");
    if (!pg)
        return NULL;
    if (size > MKI_SIZE_MAX) {
        errno = ENOMEM;
        return NULL;
    }
    mk_ctx *ctx = pg->ctx;
    const mki_kind_ops *ops = ctx->ops;
    if (ops->no_free) {
        errno = ENOTSUP;
        return NULL;
    }
    /* a sampled chunk is replaced: its sample goes, and the new size is
     * counted as an allocation (as jemalloc counts a realloc) */
    mki_prof_forget(pg, p);
    if (ctx->fast_kind != MKI_KIND_PROF)
        return ops->realloc(pg, p, size);
    /* (a kind that moves the chunk with mk_alloc counts nothing: the
     * realloc is counted once, here) */
    int64_t left = mki_prof_left;
    mki_prof_left = INT64_MAX / 2;
    void *q = ops->realloc(pg, p, size);
    mki_prof_left = left;
    return mki_prof_count(ctx, q, size);
}

size_t mki_chunk_usable_size(const void *p, const char *fn)
{
    mki_page *pg = MK_CONFIG_CHECK ? NULL : mki_general_live_small(p);
    if (MKI_LIKELY(pg != NULL))
        return pg->chunk_size; /* (general.c's usable_size) */
    if (!p)
        return 0;
    pg = page_checked(p, fn);
    if (!pg)
        return 0;
    return pg->ctx->ops->usable_size(pg, p);
}

size_t mk_usable_size(const void *p) { return mki_chunk_usable_size(p, "mk_usable_size"); }

mk_ctx *mk_ctx_of(const void *p)
{
    if (!p)
        return NULL;
    mki_page *pg = page_for(p, "mk_ctx_of");
    return pg ? pg->ctx : NULL;
}

/* The question mk_ctx_of and mk_usable_size leave to the caller: the page
 * layer's lookup (which reads only memkit's maps), then what the free path
 * validates, without a report.  Instrumented small pages answer from their
 * live bits; the others from the position test and the double-free key
 * (page.h), a kind's own test for its blocks (GENERATION's headers), and
 * for a large or huge page its one chunk. */
int mk_owns(const void *p)
{
    if (!p)
        return 0;
    mki_page *pg = mki_segment_find(p);
    if (!pg || pg->kind == MKI_PAGE_FREE || !pg->ctx)
        return 0;
    const mk_ctx *ctx = pg->ctx;
    switch (pg->kind) {
    case MKI_PAGE_SMALL:
        if (!mki_page_is_chunk_exact(pg, p))
            return 0;
        if (pg->live) { /* (instrumented: a bit per chunk) */
            size_t i = (size_t)((const char *)p - pg->start) / pg->chunk_size;
            return (int)((atomic_load_explicit(&pg->live[i / 64],
                                               memory_order_relaxed) >>
                          (i % 64)) & 1);
        }
        return !mki_page_chunk_freed(pg, p); /* (uninstrumented: no
                                                 poison to lift) */
    case MKI_PAGE_LARGE:
    case MKI_PAGE_HUGE:
        return p == pg->start &&
               !atomic_load_explicit(&pg->xfree, memory_order_relaxed);
    default: {
        const mki_kind_ops *ops = mki_kinds[ctx->kind];
        if (ops->is_live)
            return ops->is_live(pg, p) == 1;
        /* (BUMP: no boundaries, any address of a block) */
        return (const char *)p >= pg->start && (const char *)p < pg->end;
    }
    }
}

mk_ctx *mki_chunk_ctx(const void *p, const char *fn)
{
    mki_page *pg = page_for(p, fn);
    return pg ? pg->ctx : NULL;
}
