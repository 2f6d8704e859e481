/* SPDX-License-Identifier: MIT */
/*
 * tree_stats.c - the figures of one context, alone or with its subtree
 * (mk_ctx_stats), where the tree is: the reports above (stats.c, pools)
 * read them, and nothing here calls up.
 *
 * Figures are computed on demand by walking pages: nothing is counted on the
 * fast paths.  The cost is O(pages) per context, which is what a statistics
 * call may cost and a chunk operation may not.
 */

#include "ctx.h"

#include <errno.h>
#include <string.h>

void mki_ctx_stats_add(mk_stats *to, const mk_stats *from)
{
    to->contexts += from->contexts;
    to->blocks += from->blocks;
    to->bytes_reserved += from->bytes_reserved;
    to->bytes_used += from->bytes_used;
    to->chunks += from->chunks;
    to->bytes_resting += from->bytes_resting;
    to->bytes_resident += from->bytes_resident;
}

/* The figures of one context.  With @collect, the chunks other threads
 * freed into it are taken in first, so that a chunk counts as freed as soon
 * as mk_free returns, whichever thread called it: one rule for every kind,
 * size and build (instrumented builds check a free when it happens, release
 * builds when the owner takes it in).  Asking for figures is a use of the
 * context (memkit.h's thread rules), which is what makes that safe. */
static void one(const mk_ctx *ctx, mk_stats *out, int collect)
{
    /* (a collect is a use of the context, which the checking build marks;
     * a thread-safe pool's reading of other threads' slabs is not) */
    int in = collect ? mki_ctx_enter((mk_ctx *)ctx, "mk_ctx_stats") : 0;
    if (in) /* every list: the context's and (GENERAL) its pages' */
        ctx->ops->collect((mk_ctx *)ctx);
    memset(out, 0, sizeof *out);
    out->contexts = 1;
    if (collect && !in)
        return; /* reported */
    ctx->ops->stats(ctx, out); /* (instrumented: requested bytes) */
    mki_ctx_leave((mk_ctx *)ctx, in);
}

void mki_ctx_stats_one(const mk_ctx *ctx, mk_stats *out) { one(ctx, out, 1); }

/* Should the figures of @c be preceded by a collect (see one())? */
static int may_collect(const mk_ctx *c, int owned_only)
{
    return !owned_only || mki_ctx_owner(c) == mki_tid();
}

int mki_ctx_stats_tree(const mk_ctx *ctx, mk_stats *out, int recurse,
                       int owned_only)
{
    if (!ctx || !out || mki_ctx_dead(ctx, "mk_ctx_stats")) {
        errno = EINVAL;
        return -1;
    }
    one(ctx, out, may_collect(ctx, owned_only));
    if (recurse) {
        for (const mk_ctx *c = mki_ctx_next_in(ctx, ctx); c;
             c = mki_ctx_next_in(c, ctx)) {
            mk_stats s;
            one(c, &s, may_collect(c, owned_only));
            mki_ctx_stats_add(out, &s);
        }
    }
    out->bytes_free = out->bytes_reserved - out->bytes_used;
    return 0;
}

int mk_ctx_stats(const mk_ctx *ctx, mk_stats *out, int recurse)
{
    return mki_ctx_stats_tree(ctx, out, recurse, 0);
}
