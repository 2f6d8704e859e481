/* SPDX-License-Identifier: MIT */
/*
 * instrument.c - the instrumented path every call on an instrumented context
 * takes: the checking build's checks, and the AddressSanitizer / Valgrind
 * annotations (annotate.h).
 *
 * A context is instrumented when memkit is the checking build
 * (MK_CONFIG_CHECK), an AddressSanitizer build, or runs under Valgrind.
 * Such a context has fast_kind = MKI_KIND_SLOW and its pages fast_tid = 0,
 * so it takes no fast path, and its `ops` is this file's wrapper table
 * (mki_instrument_ops, at the end), a decorator around the kind's own table:
 * the dispatcher (ctx/chunk.c) calls it as it would call a kind.  The
 * kinds call this file's page hooks through mki_ctx_up (bound in bind.c).
 * The release build pays nothing.
 *
 * Layout of an instrumented chunk (the kind is asked for size + TAIL):
 *
 *   | requested bytes | sentinel 0xA5 (>= 1 byte) | requested size (8 bytes) |
 *   p                 p + n                       p + usable - 8
 *
 * so mk_usable_size() is the requested size and a write past it is seen at
 * free, realloc, reset and delete.  In the checking build freed chunks (and
 * fresh pages) are filled with 0xDF and the fill is verified when a chunk
 * is handed out again (a write to freed memory).  In every instrumented
 * mode small pages keep a bit per chunk that is set while the chunk is live
 * (double free; and the walk behind statistics and reset-time checks).
 * Bits are atomic: a chunk may be freed by any thread.
 *
 * Every allocation, realloc and owner's free here enters its context
 * (mki_ctx_enter, ctx/record.c), as the context layer's own operations
 * do: in the checking build a second thread inside the same context is
 * reported as what it is, before the two corrupt its lists.  A free by a
 * thread that does not own the context only queues the chunk: it does
 * not enter.
 */

#include "check.h"
#include "../page/purge.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define TAIL MKI_INSTR_TAIL
#define SENTINEL 0xA5
#define FREED_FILL 0xDF

static pthread_once_t anchor_once = PTHREAD_ONCE_INIT;

#if MKI_VALGRIND
/* Memcheck searches mempool chunks for leaks only when some malloc block is
 * live at exit ("All heap blocks were freed -- no leaks are possible"
 * otherwise); this one block, still reachable, keeps the search on.  It is
 * an OS page described to Memcheck as a malloc'ed block, not a malloc
 * call: in the drop-in, malloc is memkit's own, and this runs inside it. */
static void *volatile valgrind_anchor; /* volatile: never optimised out */
#endif

static void anchor_once_fn(void)
{
#if MKI_VALGRIND
    if (mki_valgrind_on) {
        void *p = mki_os_reserve(MKI_OS_PAGE, MKI_OS_PAGE);
        if (p && mki_os_commit(p, MKI_OS_PAGE) == 0) {
            VALGRIND_MALLOCLIKE_BLOCK(p, 1, 0, 0);
            valgrind_anchor = p;
        }
    }
#endif
}

int mki_instrument_active(void)
{
    mki_annotate_init();
    pthread_once(&anchor_once, anchor_once_fn);
    return MK_CONFIG_CHECK || MKI_ASAN || mki_valgrind_on;
}

/* ---- contexts ------------------------------------------------------------- */

static void instr_ctx_new(mk_ctx *ctx)
{
#if MKI_VALGRIND
    if (mki_valgrind_on)
        VALGRIND_CREATE_MEMPOOL(ctx, 0, 0);
#endif
    (void)ctx;
}

/* ---- the live bitmap of small pages --------------------------------------- */

static size_t live_bytes(const mki_page *pg) { return mki_page_live_bytes(pg); }

static size_t chunk_index(const mki_page *pg, const void *p)
{
    return (size_t)((const char *)p - pg->start) / pg->chunk_size;
}

/* Set or clear the live bit of @p; returns the bit's previous value. */
static int live_flip(mki_page *pg, const void *p, int on)
{
    size_t i = chunk_index(pg, p);
    uint64_t bit = 1ull << (i % 64);
    uint64_t old = on ? atomic_fetch_or(&pg->live[i / 64], bit)
                      : atomic_fetch_and(&pg->live[i / 64], ~bit);
    return (old & bit) != 0;
}

int mki_instrument_page_new(mki_page *pg)
{
    size_t area = (size_t)(pg->end - pg->start);
    if (pg->kind == MKI_PAGE_SMALL) {
        pg->live = mki_meta_alloc(live_bytes(pg));
        if (!pg->live)
            return -1;
        mki_mem_undefined(pg->start, area); /* may hold an old page's poison */
        if (MK_CONFIG_CHECK)
            memset(pg->start, FREED_FILL, area);
    }
    mki_mem_noaccess(pg->start, area);
    return 0;
}

/* A page kept by a reset: every chunk it held is gone. */
void mki_instrument_page_reset(mki_page *pg)
{
    size_t area = (size_t)(pg->end - pg->start);
    mki_mem_undefined(pg->start, area);
    if (pg->live) {
        memset((void *)pg->live, 0, live_bytes(pg));
        if (MK_CONFIG_CHECK)
            memset(pg->start, FREED_FILL, area);
    }
    mki_mem_noaccess(pg->start, area);
}

/* ---- the tail ------------------------------------------------------------- */

/* Read the requested size from the tail of chunk @p and verify the
 * sentinel; 1 if intact. */
static int tail_ok(const char *p, size_t usable, size_t *req)
{
    if (usable < TAIL)
        return 0;
    uint64_t n;
    mki_mem_defined(p + usable - 8, 8);
    memcpy(&n, p + usable - 8, 8);
    mki_mem_noaccess(p + usable - 8, 8);
    if (n > usable - TAIL)
        return 0;
    int ok = 1;
    if (MK_CONFIG_CHECK) {
        mki_mem_defined(p + n, usable - 8 - n);
        for (size_t i = n; i < usable - 8; i++)
            if ((unsigned char)p[i] != SENTINEL) {
                ok = 0;
                break;
            }
        mki_mem_noaccess(p + n, usable - 8 - n);
    }
    *req = (size_t)n;
    return ok;
}

static size_t kind_usable(const mki_page *pg, const void *p)
{
    return mki_kinds[pg->ctx->kind]->usable_size(pg, p);
}

/* The size the program asked for (its usable size while instrumented). */
static size_t instr_usable(const mki_page *pg, const void *p)
{
    size_t req = 0;
    return tail_ok(p, kind_usable(pg, p), &req) ? req : 0;
}

static int is_live(mki_page *pg, const void *p)
{
    if (pg->live)
        return (int)((atomic_load(&pg->live[chunk_index(pg, p) / 64]) >>
                      (chunk_index(pg, p) % 64)) & 1);
    const mki_kind_ops *ops = mki_kinds[pg->ctx->kind];
    return ops->is_live ? ops->is_live(pg, p) : 1;
}

/* ---- allocation and free -------------------------------------------------- */

static void *instr_alloc_in(mk_ctx *ctx, size_t size, size_t align);

static void *instr_alloc(mk_ctx *ctx, size_t size, size_t align)
{
    int in = mki_ctx_enter(ctx, align ? "mk_alloc_aligned" : "mk_alloc");
    if (!in) {
        errno = EINVAL;
        return NULL;
    }
    void *p = instr_alloc_in(ctx, size, align);
    mki_ctx_leave(ctx, in);
    return p;
}

static void *instr_alloc_in(mk_ctx *ctx, size_t size, size_t align)
{
    const mki_kind_ops *ops = mki_kinds[ctx->kind];
    if (size > MKI_SIZE_MAX) {
        errno = ENOMEM;
        return NULL;
    }
    /* the tail must not change the alignment mk_alloc promises for @size
     * (mk_alloc's GENERAL chunks of up to 8 bytes and of 17..24 bytes are
     * only 8-aligned) */
    if (ctx->kind == MK_GENERAL && align < 16 &&
        !(size <= 8 || (size > 16 && size <= 24)))
        align = 16;
    char *p = align > 8 ? ops->alloc_aligned(ctx, size + TAIL, align)
                        : ops->alloc(ctx, size + TAIL);
    if (!p)
        return NULL;
    mki_page *pg = mki_page_of(p);
    size_t usable = kind_usable(pg, p);
    /* memkit reads the fill and writes the tail: for Memcheck this memory
     * is memkit's, defined; MEMPOOL_ALLOC below hands the program its part
     * as undefined, like malloc */
    mki_mem_defined(p, usable);
    if (pg->live) {
        /* a reused chunk still holds the fill, but for its link word */
        for (size_t i = sizeof(void *); MK_CONFIG_CHECK && i < usable; i++)
            if ((unsigned char)p[i] != FREED_FILL) {
                mki_error_report(NULL, "write to freed memory at", p,
                                 "found as it was handed out again",
                                 mki_ctx_name(ctx));
                break;
            }
        live_flip(pg, p, 1);
    }
    uint64_t n = size;
    memset(p + size, SENTINEL, usable - 8 - size);
    memcpy(p + usable - 8, &n, 8);
    mki_mem_noaccess(p + size, usable - size);
#if MKI_VALGRIND
    if (mki_valgrind_on) {
        mki_mem_noaccess(p, size);
        VALGRIND_MEMPOOL_ALLOC(ctx, p, size);
        if (pg->kind == MKI_PAGE_HUGE) /* a fresh mapping: mk_alloc_zero
                                          relies on it being zero */
            mki_mem_defined(p, size);
    }
#endif
    return p;
}

static void instr_free(mki_page *pg, void *p, const char *fn)
{
    mk_ctx *ctx = pg->ctx;
    const mki_kind_ops *ops = mki_kinds[ctx->kind];
    if (ops->no_free) {
        if (MK_CONFIG_CHECK)
            mki_error_report(fn, "free of BUMP chunk", p,
                             "its memory returns on reset or delete",
                             mki_ctx_name(ctx));
        return;
    }
    size_t usable = kind_usable(pg, p), req;
    if (MK_CONFIG_CHECK || pg->live || ops->is_live) {
        int live = is_live(pg, p);
        if (live < 0) {
            mki_error_invalid_in(fn, p, mki_ctx_name(ctx), 0);
            return;
        }
        if (live == 0) {
            mki_error_double_free(fn, p, mki_ctx_name(ctx));
            return;
        }
        if (!tail_ok(p, usable, &req)) {
            mki_error_report(fn, "write past the end of chunk", p,
                             "past the requested size", mki_ctx_name(ctx));
            return;
        }
        if (pg->live && !live_flip(pg, p, 0)) { /* lost a race */
            mki_error_double_free(fn, p, mki_ctx_name(ctx));
            return;
        }
        if (MK_CONFIG_CHECK &&
            (pg->kind == MKI_PAGE_SMALL || pg->kind == MKI_PAGE_BLOCK)) {
            mki_mem_undefined(p, usable);
            memset(p, FREED_FILL, usable);
        }
    }
#if MKI_VALGRIND
    if (mki_valgrind_on)
        VALGRIND_MEMPOOL_FREE(ctx, p);
#endif
    mki_mem_noaccess(p, usable);
    uintptr_t owner = mki_ctx_owner(ctx);
    if (owner != mki_tid()) {
        mki_chunk_remote_push(ctx, p);
        if (owner == 0) /* no thread will collect it (chunk.c) */
            mki_purge_collect();
        return;
    }
    int in = mki_ctx_enter(ctx, fn); /* the owner's free is a use */
    if (in) {
        ops->free(pg, p);
        mki_ctx_leave(ctx, in);
    }
}

static void *instr_realloc_in(mki_page *pg, void *p, size_t size);

static void *instr_realloc(mki_page *pg, void *p, size_t size)
{
    mk_ctx *ctx = pg->ctx;
    int in = mki_ctx_enter(ctx, "mk_realloc");
    if (!in) {
        errno = EINVAL;
        return NULL;
    }
    void *q = instr_realloc_in(pg, p, size);
    mki_ctx_leave(ctx, in);
    return q;
}

static void *instr_realloc_in(mki_page *pg, void *p, size_t size)
{
    mk_ctx *ctx = pg->ctx;
    if (mki_kinds[ctx->kind]->no_free) {
        if (MK_CONFIG_CHECK)
            mki_error_report("mk_realloc", "resize of BUMP chunk", p, NULL,
                             mki_ctx_name(ctx));
        errno = ENOTSUP;
        return NULL;
    }
    size_t usable = kind_usable(pg, p), old = 0;
    if (MK_CONFIG_CHECK && is_live(pg, p) <= 0) {
        mki_error_invalid_in("mk_realloc", p, mki_ctx_name(ctx),
                             is_live(pg, p) == 0);
        return NULL;
    }
    if (!tail_ok(p, usable, &old)) {
        mki_error_report("mk_realloc", "write past the end of chunk", p,
                         "past the requested size", mki_ctx_name(ctx));
        return NULL;
    }
    void *q = instr_alloc(ctx, size, 0);
    if (!q)
        return NULL;
    memcpy(q, p, old < size ? old : size);
    instr_free(pg, p, "mk_realloc");
    return q;
}

/* ---- reset and delete ----------------------------------------------------- */

static void verify_chunk(mki_page *pg, void *p, void *arg)
{
    (void)arg;
    size_t req;
    if (!tail_ok(p, kind_usable(pg, p), &req))
        mki_error_report(NULL, "write past the end of chunk", p,
                         "past the requested size, found at reset or delete",
                         mki_ctx_name(pg->ctx));
}

/* Call @fn on every live chunk of a page that has a live bitmap, or on the
 * one chunk of a large or huge page. */
static void instr_page_each_live(mki_page *pg,
                                 void (*fn)(mki_page *, void *, void *), void *arg)
{
    if (pg->kind == MKI_PAGE_LARGE || pg->kind == MKI_PAGE_HUGE) {
        fn(pg, pg->start, arg);
        return;
    }
    if (!pg->live)
        return;
    for (size_t w = 0; w * 64 < pg->capacity; w++) {
        uint64_t bits = atomic_load(&pg->live[w]);
        while (bits) {
            unsigned b = (unsigned)__builtin_ctzll(bits);
            bits &= bits - 1;
            fn(pg, pg->start + (w * 64 + b) * pg->chunk_size, arg);
        }
    }
}

static void add_requested(mki_page *pg, void *p, void *arg)
{
    size_t *sum = arg;
    sum[0]++;
    sum[1] += instr_usable(pg, p);
}

/* Statistics of an instrumented context count requested bytes, as
 * mk_usable_size does; returns 0 if the kind cannot list its chunks. */
static int instr_stats(const mk_ctx *ctx, mk_stats *out)
{
    const mki_kind_ops *ops = mki_kinds[ctx->kind];
    if (!ops->each_live)
        return 0;
    size_t sum[2] = {0, 0};
    ops->each_live((mk_ctx *)ctx, add_requested, sum);
    out->chunks = sum[0];
    out->bytes_used = sum[1];
    return 1;
}

void mki_instrument_walk_page(mki_page *pg, void *walk)
{
    mki_live_walk *w = walk;
    instr_page_each_live(pg, w->fn, w->arg);
}

/* Before a reset (@deleting 0) or a delete of an instrumented context. */
static void instr_reset(mk_ctx *ctx, int deleting)
{
    if (MK_CONFIG_CHECK && mki_kinds[ctx->kind]->each_live)
        mki_kinds[ctx->kind]->each_live(ctx, verify_chunk, NULL);
#if MKI_VALGRIND
    if (mki_valgrind_on) {
        VALGRIND_DESTROY_MEMPOOL(ctx);
        if (!deleting)
            VALGRIND_CREATE_MEMPOOL(ctx, 0, 0);
    }
#endif
    (void)deleting;
}

/* ---- the wrapper table ---------------------------------------------------- */

static const mki_kind_ops *kind(const mk_ctx *ctx) { return mki_kinds[ctx->kind]; }

static int w_init(mk_ctx *ctx, const mk_ctx_opts *opts)
{
    if (kind(ctx)->init(ctx, opts) != 0)
        return -1;
    instr_ctx_new(ctx);
    return 0;
}

static void w_destroy(mk_ctx *ctx)
{
    mki_ctx_collect(ctx); /* chunks freed elsewhere are not live */
    instr_reset(ctx, 1);
    kind(ctx)->destroy(ctx);
}

static void *w_alloc(mk_ctx *ctx, size_t size) { return instr_alloc(ctx, size, 0); }

static void *w_alloc_aligned(mk_ctx *ctx, size_t size, size_t align)
{
    return instr_alloc(ctx, size, align);
}

static void w_free(mki_page *pg, void *p) { kind(pg->ctx)->free(pg, p); }
static void w_collect(mk_ctx *ctx) { kind(ctx)->collect(ctx); }

static void w_reset(mk_ctx *ctx, int keep_one)
{
    mki_ctx_collect(ctx); /* chunks freed elsewhere are not live */
    instr_reset(ctx, 0);
    kind(ctx)->reset(ctx, keep_one);
}

static void w_stats(const mk_ctx *ctx, mk_stats *out)
{
    kind(ctx)->stats(ctx, out);
    instr_stats(ctx, out); /* requested bytes, where it can list them */
}

static void w_set_owner(mk_ctx *ctx, uintptr_t tid) { kind(ctx)->set_owner(ctx, tid); }

static size_t w_trim(mk_ctx *ctx)
{
    return kind(ctx)->trim ? kind(ctx)->trim(ctx) : 0;
}

static int w_is_live(const mki_page *pg, const void *p)
{
    const mki_kind_ops *k = kind(pg->ctx);
    return k->is_live ? k->is_live(pg, p) : 1;
}

static void w_each_live(mk_ctx *ctx, void (*fn)(mki_page *, void *, void *),
                        void *arg)
{
    if (kind(ctx)->each_live)
        kind(ctx)->each_live(ctx, fn, arg);
}

/* The same table for every kind: each entry calls the kind's own
 * (mki_kinds[ctx->kind]) around its checks.  ctx_size and no_free are
 * the kind's (context.c reads them from the kind's table). */
const mki_kind_ops mki_instrument_ops = {
    .name = "instrumented",
    .init = w_init,
    .destroy = w_destroy,
    .alloc = w_alloc,
    .alloc_aligned = w_alloc_aligned,
    .free = w_free,
    .collect = w_collect,
    .realloc = instr_realloc,
    .usable_size = instr_usable,
    .reset = w_reset,
    .stats = w_stats,
    .set_owner = w_set_owner,
    .trim = w_trim,
    .is_live = w_is_live,
    .each_live = w_each_live,
    .free_any = instr_free,
};
