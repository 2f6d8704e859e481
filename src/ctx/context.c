/* SPDX-License-Identifier: MIT */
/*
 * context.c - the context tree: create, reset, delete, callbacks, owner.
 * (The per-thread current context and thread heaps are heap/heap.c's.)
 *
 * Every context, whatever its kind, starts with the shared `mk_ctx` header
 * (ctx.h): parent, first child, siblings, callbacks, owner thread.  The
 * kind's behaviour lives behind the method table `mki_kinds`, indexed by
 * mk_kind, so adding a kind is one file plus one line here.  A context
 * calls through its `ops`: its kind's table, or for an instrumented one
 * the checking layer's wrapper (mki_ctx_up.wrapper), which this file does
 * not know beyond that pointer.
 *
 * Deletion is depth first and iterative (no recursion, so a deep tree cannot
 * overflow the stack): descendants go before their parents, and each
 * context runs its callbacks, newest first, before its memory goes.
 *
 * Context structs are bookkeeping (page/meta.c), not chunks of another
 * context: deleting a parent never frees memory a child still describes.
 * A deleted context's record is poisoned and reused late (record.c), and
 * every public operation here first checks the handle it is given
 * (mki_ctx_enter: a deleted context is reported in every build; the
 * checking build also reports a second thread inside the context).
 */

#include "ctx.h"

#include <errno.h>

const mki_kind_ops *const mki_kinds[4] = {
    [MK_GENERAL] = &mki_general_ops,
    [MK_SLAB] = &mki_slab_ops,
    [MK_GENERATION] = &mki_generation_ops,
    [MK_BUMP] = &mki_bump_ops,
};

/* ---- tree ----------------------------------------------------------------- */

static void link_child(mk_ctx *parent, mk_ctx *c)
{
    c->parent = parent;
    c->prev_sibling = NULL;
    c->next_sibling = parent->first_child;
    if (parent->first_child)
        parent->first_child->prev_sibling = c;
    parent->first_child = c;
}

static void unlink_child(mk_ctx *c)
{
    if (!c->parent)
        return;
    if (c->prev_sibling)
        c->prev_sibling->next_sibling = c->next_sibling;
    else
        c->parent->first_child = c->next_sibling;
    if (c->next_sibling)
        c->next_sibling->prev_sibling = c->prev_sibling;
    c->parent = c->next_sibling = c->prev_sibling = NULL;
}

mk_ctx *mk_ctx_new(mk_ctx *parent, const char *name, mk_kind kind,
                   const mk_ctx_opts *opts)
{
    if ((unsigned)kind >= 4 || !mki_kinds[kind]) {
        mki_note_einval("mk_ctx_new", name, "kind is not one of mk_kind");
        errno = EINVAL;
        return NULL;
    }
    /* (creating a child is a use of the parent, but not an entry: the
     * threads of a thread-safe pool add their slabs to its root, under the
     * pool's lock, while the root's owner allocates from it) */
    if (parent && mki_ctx_dead(parent, "mk_ctx_new")) {
        errno = EINVAL;
        return NULL;
    }
    const mki_kind_ops *ops = mki_kinds[kind];
    mki_options_init(); /* secure mode is decided before any context */
    mk_ctx *c = mki_ctx_record_new(kind);
    if (!c) {
        errno = ENOMEM;
        return NULL;
    }
    int instrumented = mki_ctx_up.instrumented();
    c->kind = (uint8_t)kind;
    c->fast_kind = instrumented ? MKI_KIND_SLOW
                   : mki_secure ? MKI_KIND_SECURE
                   : kind != MK_SLAB && mki_ctx_up.profiled() ? MKI_KIND_PROF
                                                               : (uint8_t)kind;
    c->flags = (uint16_t)(opts ? opts->flags & ~MKI_CTX_OWN : 0);
    c->name = name ? name : "?";
    atomic_init(&c->owner_tid, mki_tid());
    c->fast_tid = instrumented ? 0
                  : mki_secure ? mki_tid() | MKI_TID_SECURE
                               : mki_tid();
    atomic_init(&c->remote, NULL);
    c->ops = instrumented ? mki_ctx_up.wrapper : ops;
    if (c->ops->init(c, opts) != 0) {
        int e = errno;
        mki_ctx_record_abandon(c);
        errno = e;
        return NULL;
    }
    if (parent)
        link_child(parent, c);
    return c;
}

/* Run the callbacks registered so far, newest first, once.  One that
 * registers a callback during a reset registers it for the next reset;
 * during a delete (@until_empty) it runs in the same delete. */
static void run_callbacks(mk_ctx *c, int until_empty)
{
    do {
        mki_callback *cb = c->callbacks;
        c->callbacks = NULL;
        while (cb) {
            mki_callback *next = cb->next;
            cb->fn(cb->arg);
            mki_meta_free(cb, sizeof *cb);
            cb = next;
        }
    } while (until_empty && c->callbacks);
}

/* Delete a context that has no children; 0 if it was refused (another
 * thread is inside it: reported). */
static int delete_leaf(mk_ctx *c, const char *fn)
{
    if (!mki_ctx_enter(c, fn))
        return 0;
    run_callbacks(c, 1);
    if ((c->flags & MK_CTX_REPORT_LEAKS) && !mki_kinds[c->kind]->no_free) {
        mk_stats st;
        mki_ctx_stats_one(c, &st); /* (other threads' frees taken in) */
        if (st.chunks)
            mki_error_leak(fn, "context", c->name, "chunk", st.chunks,
                           st.bytes_used);
    }
    c->ops->destroy(c);
    unlink_child(c);
    mki_ctx_up.deleted(c); /* the calling thread's current or heap */
    mki_ctx_record_free(c); /* poisoned: a stale handle is reported */
    return 1;
}

/* Delete every descendant of @ctx, children before their parents; 0 if one
 * was refused (the rest is left as it is). */
static int delete_descendants(mk_ctx *ctx, const char *fn)
{
    mk_ctx *c = ctx->first_child;
    while (c) {
        if (c->first_child) {
            c = c->first_child;
            continue;
        }
        mk_ctx *parent = c->parent;
        if (!delete_leaf(c, fn))
            return 0;
        c = parent == ctx ? ctx->first_child : parent;
    }
    return 1;
}

void mk_ctx_reset(mk_ctx *ctx)
{
    if (!ctx)
        return;
    int in = mki_ctx_enter(ctx, "mk_ctx_reset");
    if (!in)
        return;
    if (!ctx->first_child || delete_descendants(ctx, "mk_ctx_reset")) {
        if (ctx->callbacks)
            run_callbacks(ctx, 0);
        ctx->ops->reset(ctx, !(ctx->flags & MK_CTX_RELEASE_ON_RESET));
    }
    mki_ctx_leave(ctx, in);
}

size_t mk_ctx_trim(mk_ctx *ctx)
{
    size_t bytes = 0;
    if (!ctx)
        return 0;
    for (mk_ctx *c = ctx; c; c = mki_ctx_next_in(c, ctx)) {
        int in = mki_ctx_enter(c, "mk_ctx_trim");
        if (!in)
            break;
        const mki_kind_ops *ops = c->ops;
        ops->collect(c);
        if (ops->trim)
            bytes += ops->trim(c);
        mki_ctx_leave(c, in);
    }
    return bytes;
}

void mk_ctx_delete(mk_ctx *ctx)
{
    if (!ctx)
        return;
    int in = mki_ctx_enter(ctx, "mk_ctx_delete");
    if (!in)
        return;
    if (delete_descendants(ctx, "mk_ctx_delete") &&
        delete_leaf(ctx, "mk_ctx_delete"))
        return; /* (its record is dead: nothing to leave) */
    mki_ctx_leave(ctx, in);
}

int mk_ctx_on_reset(mk_ctx *ctx, void (*fn)(void *), void *arg)
{
    if (!ctx || !fn) {
        errno = EINVAL;
        return -1;
    }
    int in = mki_ctx_enter(ctx, "mk_ctx_on_reset");
    if (!in) {
        errno = EINVAL;
        return -1;
    }
    mki_callback *cb = mki_meta_alloc(sizeof *cb);
    if (cb) {
        cb->fn = fn;
        cb->arg = arg;
        cb->next = ctx->callbacks;
        ctx->callbacks = cb;
    }
    mki_ctx_leave(ctx, in);
    return cb ? 0 : -1;
}

size_t mki_ctx_block_size(const mk_ctx_opts *opts, size_t def, size_t max)
{
    size_t want = opts && opts->block_size ? opts->block_size : def;
    if (want < MKI_UNIT || want > max) {
        mki_note_einval("mk_ctx_new", NULL,
                        "mk_ctx_opts.block_size is below 1 KiB or above the "
                        "kind's largest block");
        errno = EINVAL;
        return 0;
    }
    size_t p2 = MKI_UNIT;
    while (p2 < want)
        p2 <<= 1;
    return p2;
}

int mk_ctx_set_parent(mk_ctx *ctx, mk_ctx *new_parent)
{
    if (!ctx) {
        errno = EINVAL;
        return -1;
    }
    if (new_parent && mki_ctx_dead(new_parent, "mk_ctx_set_parent")) {
        errno = EINVAL;
        return -1;
    }
    int in = mki_ctx_enter(ctx, "mk_ctx_set_parent");
    if (!in) {
        errno = EINVAL;
        return -1;
    }
    int r = 0;
    if (mki_ctx_above(ctx, new_parent)) { /* under itself or a descendant:
                                              a cycle */
        errno = EINVAL;
        r = -1;
    } else if (ctx->parent != new_parent) {
        r = mki_ctx_move_charges(ctx, new_parent); /* -1: a limit of the
                                                      new ancestors */
        if (r == 0) {
            unlink_child(ctx);
            if (new_parent)
                link_child(new_parent, ctx);
        }
    }
    mki_ctx_leave(ctx, in);
    return r;
}

/* The getters read the record: a deleted one is reported (and answers as
 * NULL would). */
const char *mk_ctx_name(const mk_ctx *ctx)
{
    return ctx && !mki_ctx_dead(ctx, "mk_ctx_name") ? ctx->name : NULL;
}
mk_ctx *mk_ctx_parent(const mk_ctx *ctx)
{
    return ctx && !mki_ctx_dead(ctx, "mk_ctx_parent") ? ctx->parent : NULL;
}
mk_kind mk_ctx_kind(const mk_ctx *ctx)
{
    return ctx && !mki_ctx_dead(ctx, "mk_ctx_kind") ? (mk_kind)ctx->kind
                                                    : (mk_kind)-1;
}

void mki_ctx_set_owner_tid(mk_ctx *ctx, uintptr_t tid)
{
    atomic_store_explicit(&ctx->owner_tid, tid, memory_order_relaxed);
    if (ctx->fast_kind < MKI_KIND_SECURE) /* a kind's own fast paths */
        ctx->fast_tid = tid;
    else if (ctx->fast_kind == MKI_KIND_SECURE) /* (ctx.h) */
        ctx->fast_tid = tid ? tid | MKI_TID_SECURE : 0;
    ctx->ops->set_owner(ctx, ctx->fast_tid);
}

void mki_ctx_set_profiled(mk_ctx *ctx, int on)
{
    if (!ctx || ctx->fast_tid != mki_tid() || ctx->kind == MK_SLAB)
        return; /* not the caller's, or secure or instrumented */
    if (on && ctx->fast_kind == ctx->kind)
        ctx->fast_kind = MKI_KIND_PROF;
    else if (!on && ctx->fast_kind == MKI_KIND_PROF)
        ctx->fast_kind = ctx->kind;
}

void mk_ctx_set_owner(mk_ctx *ctx)
{
    if (!ctx)
        return;
    int in = mki_ctx_enter(ctx, "mk_ctx_set_owner");
    if (!in)
        return;
    mki_ctx_set_owner_tid(ctx, mki_tid());
    mki_ctx_leave(ctx, in);
}

mki_page *mki_ctx_chunk_page(mk_ctx *ctx, size_t size, size_t align)
{
    mki_page *pg = mki_segment_chunk_alloc(ctx, size, align);
    if (pg && mki_ctx_claim_page(ctx, pg) != 0) { /* a limit refused it */
        mki_page_release(pg);
        errno = ENOMEM;
        return NULL;
    }
    /* Its second word must not hold a double-free key that a small chunk
     * left in this memory before (page.h): a realloc copies the first
     * bytes of a chunk, written by the program or not, into a small chunk,
     * whose free would then take it for freed when the old key is the new
     * page's (descriptors are reused).  ctx_fuzz found it: a 0-byte chunk
     * aligned to 64 KiB (a large page), reallocated to 236 bytes, was "a
     * freed chunk" (api_alloc realloc_unwritten_large).  Fresh mappings
     * are zero; instrumented contexts check chunks by their bitmap, not
     * the key. */
    if (pg && !(pg->flags & MKI_PF_FRESH) && ctx->fast_kind != MKI_KIND_SLOW)
        mki_page_chunk_set_live(pg->start);
    return pg;
}
