/* SPDX-License-Identifier: MIT */
/*
 * limit.c - what a context's pages cost its tree: every page or block a
 * context takes is charged to it, and to each ancestor that has a limit
 * (mk_ctx_set_limit); a page that would take a limited subtree past its
 * limit is refused.  Reparenting (mk_ctx_set_parent) moves the charges.
 *
 * Trade-off: the check runs where a context takes a page or a block, never
 * on the chunk fast paths, so its granularity is the page: a subtree never
 * holds more page bytes than its limit (up to an OS page more after a huge
 * chunk grows in place), and a chunk that fits in a page already held
 * always succeeds.  Charging walks the ancestors, O(depth) per page taken
 * or given back; a thread heap is top-level, so malloc's pages walk
 * nothing.  A page records what it was charged (`charged`), and the page
 * layer reports it when the page goes (mki_page_up.released), so what is
 * taken off is always what was put on, whatever path gives the page back.
 */

#include "ctx.h"

#include <errno.h>

static size_t load(_Atomic size_t *v)
{
    return atomic_load_explicit(v, memory_order_relaxed);
}

/* Would @bytes more take a limited context among @ctx and its ancestors
 * past its limit?  That context (its refusal counted if @count); else
 * NULL. */
static mk_ctx *over(mk_ctx *ctx, size_t bytes, int count)
{
    for (mk_ctx *a = ctx; a; a = a->parent)
        if (a->limit && load(&a->charged) + bytes > a->limit) {
            if (count)
                atomic_fetch_add_explicit(&a->refused, 1, memory_order_relaxed);
            return a;
        }
    return NULL;
}

/* Add @bytes (as a two's complement: also subtract) to the charges of
 * @ctx's own pages and of its limited ancestors and itself. */
static MKI_NOINLINE void add(mk_ctx *ctx, size_t bytes) /* (one copy for its callers) */
{
    atomic_fetch_add_explicit(&ctx->held, bytes, memory_order_relaxed);
    for (mk_ctx *a = ctx; a; a = a->parent)
        if (a->limit)
            atomic_fetch_add_explicit(&a->charged, bytes, memory_order_relaxed);
}

int mki_ctx_charge_page(mk_ctx *ctx, mki_page *pg)
{
    if (over(ctx, pg->size, 1)) {
        errno = ENOMEM;
        return -1;
    }
    add(ctx, pg->size);
    pg->charged = pg->size;
    return 0;
}

int mki_ctx_may_grow(mk_ctx *ctx, size_t bytes, int count)
{
    if (over(ctx, bytes, count)) {
        errno = ENOMEM;
        return 0;
    }
    return 1;
}

int mki_ctx_limited(const mk_ctx *ctx)
{
    for (const mk_ctx *a = ctx; a; a = a->parent)
        if (a->limit)
            return 1;
    return 0;
}

void mki_ctx_recharge(mki_page *pg)
{
    if (pg->ctx && pg->size != pg->charged) {
        add(pg->ctx, pg->size - pg->charged);
        pg->charged = pg->size;
    }
}

void mki_ctx_page_released(mki_page *pg)
{
    if (pg->ctx && pg->charged)
        add(pg->ctx, (size_t)0 - pg->charged);
    pg->charged = 0;
}

/* The page bytes of @ctx's subtree: what a limit set on it starts from. */
static size_t subtree_held(const mk_ctx *ctx)
{
    size_t sum = 0;
    for (const mk_ctx *c = ctx; c; c = mki_ctx_next_in(c, ctx))
        sum += load((_Atomic size_t *)&c->held);
    return sum;
}

int mk_ctx_set_limit(mk_ctx *ctx, size_t bytes)
{
    int in = ctx ? mki_ctx_enter(ctx, "mk_ctx_set_limit") : 0;
    if (!in) {
        errno = EINVAL;
        return -1;
    }
    if (bytes) /* (a limit below what it holds refuses every new page) */
        atomic_store_explicit(&ctx->charged, subtree_held(ctx),
                              memory_order_relaxed);
    ctx->limit = bytes;
    mki_ctx_leave(ctx, in);
    return 0;
}

size_t mk_ctx_limit(const mk_ctx *ctx, size_t *charged, size_t *refused)
{
    if (ctx && mki_ctx_dead(ctx, "mk_ctx_limit"))
        ctx = NULL; /* reported; answered as for no context */
    if (charged)
        *charged = ctx && ctx->limit ? load((_Atomic size_t *)&ctx->charged) : 0;
    if (refused)
        *refused = ctx ? load((_Atomic size_t *)&ctx->refused) : 0;
    return ctx ? ctx->limit : 0;
}

/* Before @ctx's subtree moves under @new_parent: move its page bytes from
 * the limited ancestors it leaves to those it gains (0), or refuse when
 * one it gains has no room (-1, ENOMEM, nothing changed). */
int mki_ctx_move_charges(mk_ctx *ctx, mk_ctx *new_parent)
{
    size_t bytes = subtree_held(ctx);
    /* the ancestors it gains (not those it keeps) must have the room */
    for (mk_ctx *a = new_parent; a; a = a->parent)
        if (a->limit && !mki_ctx_above(a, ctx->parent) &&
            load(&a->charged) + bytes > a->limit) {
            atomic_fetch_add_explicit(&a->refused, 1, memory_order_relaxed);
            errno = ENOMEM;
            return -1;
        }
    for (mk_ctx *a = ctx->parent; a; a = a->parent)
        if (a->limit)
            atomic_fetch_sub_explicit(&a->charged, bytes, memory_order_relaxed);
    for (mk_ctx *a = new_parent; a; a = a->parent)
        if (a->limit)
            atomic_fetch_add_explicit(&a->charged, bytes, memory_order_relaxed);
    return 0;
}
