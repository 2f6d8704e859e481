/*
 * stats.c - seeing memory: per-context figures (alone or as a subtree), the
 * indented tree report, process-wide counters.
 *
 * Figures are computed on demand by walking pages: nothing is counted on the
 * fast paths.  The cost is O(pages) per context, which is what a statistics
 * call may cost and a chunk operation may not.
 */
#include "internal.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static void add(mk_stats *to, const mk_stats *from)
{
    to->contexts += from->contexts;
    to->blocks += from->blocks;
    to->bytes_reserved += from->bytes_reserved;
    to->bytes_used += from->bytes_used;
    to->chunks += from->chunks;
}

/* The figures of one context.  With @collect, the chunks other threads
 * freed into it are taken in first, so that a chunk counts as freed as soon
 * as mk_free returns, whichever thread called it: one rule for every kind,
 * size and build (instrumented builds check a free when it happens, release
 * builds when the owner takes it in).  Asking for figures is a use of the
 * context (memkit.h's thread rules), which is what makes that safe. */
static void one(const mk_ctx *ctx, mk_stats *out, int collect)
{
    if (collect) /* every list: the context's and (GENERAL) its pages' */
        mki_kinds[ctx->kind]->collect((mk_ctx *)ctx);
    memset(out, 0, sizeof *out);
    out->contexts = 1;
    mki_kinds[ctx->kind]->stats(ctx, out);
    if (ctx->fast_kind == MKI_KIND_SLOW)
        mki_instr_stats(ctx, out);
}

/* Pre-order successor of @c within the subtree rooted at @root. */
static const mk_ctx *next_in(const mk_ctx *c, const mk_ctx *root)
{
    if (c->first_child)
        return c->first_child;
    while (c != root) {
        if (c->next_sibling)
            return c->next_sibling;
        c = c->parent;
    }
    return NULL;
}

/* Should the figures of @c be preceded by a collect (see one())? */
static int may_collect(const mk_ctx *c, int owned_only)
{
    return !owned_only || mki_ctx_owner(c) == mki_tid();
}

int mki_stats_tree(const mk_ctx *ctx, mk_stats *out, int recurse,
                   int owned_only)
{
    if (!ctx || !out) {
        errno = EINVAL;
        return -1;
    }
    one(ctx, out, may_collect(ctx, owned_only));
    if (recurse) {
        for (const mk_ctx *c = next_in(ctx, ctx); c; c = next_in(c, ctx)) {
            mk_stats s;
            one(c, &s, may_collect(c, owned_only));
            add(out, &s);
        }
    }
    out->bytes_free = out->bytes_reserved - out->bytes_used;
    return 0;
}

int mk_ctx_stats(const mk_ctx *ctx, mk_stats *out, int recurse)
{
    return mki_stats_tree(ctx, out, recurse, 0);
}

static void print_line(FILE *out, int depth, const char *name,
                       const char *kind, const mk_stats *s)
{
    fprintf(out, "%*s%s (%s): %zu blocks, %zu bytes reserved, %zu used, "
                 "%zu free, %zu chunks\n",
            depth * 2, "", name, kind, s->blocks, s->bytes_reserved,
            s->bytes_used, s->bytes_reserved - s->bytes_used, s->chunks);
}

void mk_ctx_stats_print(const mk_ctx *ctx, FILE *out)
{
    if (!ctx || !out)
        return;
    mk_stats total = {0};
    int depth = 0;
    for (const mk_ctx *c = ctx; c;) {
        mk_stats s;
        one(c, &s, 1);
        add(&total, &s);
        print_line(out, depth, c->name, mki_kinds[c->kind]->name, &s);
        /* pre-order walk keeping the depth */
        if (c->first_child) {
            c = c->first_child;
            depth++;
            continue;
        }
        while (c && c != ctx && !c->next_sibling) {
            c = c->parent;
            depth--;
        }
        c = (c && c != ctx) ? c->next_sibling : NULL;
    }
    fprintf(out, "Grand total: %zu contexts, %zu blocks, %zu bytes reserved, "
                 "%zu used, %zu free, %zu chunks\n",
            total.contexts, total.blocks, total.bytes_reserved,
            total.bytes_used, total.bytes_reserved - total.bytes_used,
            total.chunks);
}

void mk_process_stats(mk_process_figures *out)
{
    out->os_reserved = mki_os_reserved();
    out->os_committed = mki_os_committed();
    out->os_calls = mki_os_calls();
    out->segments = mki_segment_count();
    out->meta_bytes = mki_meta_bytes();
    mki_purge_figures(&out->purged_bytes, &out->purge_passes);
}


/* One "name value" line of the process figures. */
static void figure(int fd, const char *name, size_t v)
{
    mki_line l = {.len = 0};
    mki_line_str(&l, "memkit: ");
    mki_line_str(&l, name);
    mki_line_str(&l, " ");
    mki_line_num(&l, (long long)v);
    mki_line_write(&l, fd);
}

void mki_stats_print_process(int fd)
{
    mk_process_figures p;
    mki_malloc_figures m;
    mk_process_stats(&p);
    mki_segment_figures(&m);
    figure(fd, "os_reserved_bytes", p.os_reserved);
    figure(fd, "os_committed_bytes", p.os_committed);
    figure(fd, "os_calls", p.os_calls);
    figure(fd, "segments", p.segments);
    figure(fd, "segment_committed_bytes", m.segment_bytes);
    figure(fd, "page_bytes", m.page_bytes);
    figure(fd, "huge_chunks", m.huge_count);
    figure(fd, "huge_bytes", m.huge_bytes);
    figure(fd, "huge_cached_bytes", m.huge_cached);
    figure(fd, "meta_bytes", p.meta_bytes);
    figure(fd, "purged_bytes", p.purged_bytes);
    figure(fd, "purge_passes", p.purge_passes);
}

/* MEMKIT_STATS: the process figures on stderr when the program ends (a
 * destructor: it runs after main returns and after exit's handlers, and
 * prints without allocating). */
__attribute__((destructor)) static void stats_at_exit(void)
{
    if (mki_option(MKI_OPT_STATS))
        mki_stats_print_process(STDERR_FILENO);
}
