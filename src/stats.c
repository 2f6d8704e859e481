/* SPDX-License-Identifier: MIT */
/*
 * stats.c - the reports: the indented tree of a context's figures, its
 * JSON, and the process-wide figures (malloc_stats, MEMKIT_STATS).  It
 * reads every layer and no layer calls it; the figures of one context are
 * the context layer's (ctx/tree_stats.c).
 */

#include "stats.h"
#include "page/purge.h"
#include "ctx/general.h"
#include "ctx/slab.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A context's kind as reports name it: a typed pool's slabs are "pool". */
static const char *kind_name(const mk_ctx *c)
{
    if (c->kind == MK_SLAB && ((const mki_slab *)c)->pool)
        return "pool";
    return mki_kinds[c->kind]->name;
}

/* The free bytes a printed line shows: those of resident memory, which
 * cost memory (bytes_resident - bytes_used).  The rest of the reserved
 * bytes is address space no chunk has reached yet: shown as reserved, never
 * as free memory (one 4000-byte chunk in a new 32 KiB page is "32768 bytes
 * reserved, 4096 resident, 4096 used, 0 free"). */
static size_t free_resident(const mk_stats *s)
{
    return s->bytes_resident > s->bytes_used ? s->bytes_resident - s->bytes_used
                                              : 0;
}

static void print_line(FILE *out, int depth, const mk_ctx *c,
                       const mk_stats *s)
{
    fprintf(out, "%*s%s (%s): %zu blocks, %zu bytes reserved, %zu resident, "
                 "%zu used, %zu free, %zu chunks",
            depth * 2, "", c->name, kind_name(c), s->blocks, s->bytes_reserved,
            s->bytes_resident, s->bytes_used, free_resident(s), s->chunks);
    if (s->bytes_resting)
        fprintf(out, " (%zu bytes resting)", s->bytes_resting);
    size_t charged, refused, limit = mk_ctx_limit(c, &charged, &refused);
    if (limit || refused)
        fprintf(out, "; limit %zu bytes, %zu held by the subtree, %zu "
                     "refused", limit, charged, refused);
    fputc('\n', out);
}

void mk_ctx_stats_print(const mk_ctx *ctx, FILE *out)
{
    if (!ctx || !out || mki_ctx_dead(ctx, "mk_ctx_stats_print"))
        return;
    mk_stats total = {0};
    int depth = 0;
    for (const mk_ctx *c = ctx; c;) {
        mk_stats s;
        mki_ctx_stats_one(c, &s);
        mki_ctx_stats_add(&total, &s);
        print_line(out, depth, c, &s);
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
                 "%zu resident, %zu used, %zu free, %zu chunks\n",
            total.contexts, total.blocks, total.bytes_reserved,
            total.bytes_resident, total.bytes_used, free_resident(&total),
            total.chunks);
}

/* ---- JSON ------------------------------------------------------------------
 * The schemas are documented in docs/STATS.md; `version` changes when a
 * field changes meaning or goes (new fields may appear in a version). */

static void json_name(FILE *out, const char *s)
{
    fputc('"', out);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

static void json_figures(FILE *out, const mk_stats *s)
{
    fprintf(out, "\"blocks\":%zu,\"bytes_reserved\":%zu,\"bytes_used\":%zu,"
                 "\"bytes_free\":%zu,\"chunks\":%zu,\"bytes_resting\":%zu,"
                 "\"bytes_resident\":%zu",
            s->blocks, s->bytes_reserved, s->bytes_used,
            s->bytes_reserved - s->bytes_used, s->chunks, s->bytes_resting,
            s->bytes_resident);
}

int mk_ctx_stats_json(const mk_ctx *ctx, FILE *out)
{
    if (!ctx || !out || mki_ctx_dead(ctx, "mk_ctx_stats_json")) {
        errno = EINVAL;
        return -1;
    }
    mk_stats total = {0};
    fprintf(out, "{\"schema\":\"memkit-context-stats\",\"version\":1,"
                 "\"context\":");
    /* pre-order walk; each context is an object whose last member is the
     * array of its children, closed when the walk climbs back */
    for (const mk_ctx *c = ctx; c;) {
        mk_stats st;
        mki_ctx_stats_one(c, &st);
        mki_ctx_stats_add(&total, &st);
        fprintf(out, "{\"name\":");
        json_name(out, c->name);
        fprintf(out, ",\"kind\":\"%s\",", kind_name(c));
        json_figures(out, &st);
        size_t charged, refused, limit = mk_ctx_limit(c, &charged, &refused);
        if (limit || refused)
            fprintf(out, ",\"limit\":{\"bytes\":%zu,\"held\":%zu,"
                         "\"refused\":%zu}", limit, charged, refused);
        fprintf(out, ",\"children\":[");
        if (c->first_child) {
            c = c->first_child;
            continue;
        }
        fprintf(out, "]}");
        while (c != ctx && !c->next_sibling) {
            c = c->parent;
            fprintf(out, "]}");
        }
        if (c == ctx)
            break;
        c = c->next_sibling;
        fputc(',', out);
    }
    fprintf(out, ",\"totals\":{\"contexts\":%zu,", total.contexts);
    json_figures(out, &total);
    fprintf(out, "}}\n");
    return ferror(out) ? -1 : 0;
}

static const char *const purge_names[] = {"off", "dontneed", "free", "unmap"};

static const char *purge_name(void)
{
    long mode = mki_option(MKI_OPT_PURGE);
    return purge_names[mode >= 0 && mode <= 3 ? mode : 0];
}

/* The program's name (glibc's, set before main; no allocation). */
static const char *program(void)
{
    return program_invocation_short_name ? program_invocation_short_name : "?";
}

static void jkey(mki_line *l, const char *key, size_t v, int comma)
{
    if (comma)
        mki_line_str(l, ",");
    mki_line_json_str(l, key);
    mki_line_str(l, ":");
    mki_line_num(l, (long long)v);
}

/* The size classes holding the most bytes of small pages, largest first:
 * their indexes in @top (at most 8); returns how many. */
static int top_classes(int top[8])
{
    int shown[MKI_NCLASS] = {0}, k = 0;
    for (; k < 8; k++) {
        int best = -1;
        size_t most = 0;
        for (int c = 0; c < MKI_NCLASS; c++) {
            size_t b = atomic_load_explicit(&mki_general_class_bytes[c],
                                            memory_order_relaxed);
            if (!shown[c] && b > most) {
                most = b;
                best = c;
            }
        }
        if (best < 0)
            break;
        shown[best] = 1;
        top[k] = best;
    }
    return k;
}

static size_t class_bytes(int c)
{
    return atomic_load_explicit(&mki_general_class_bytes[c], memory_order_relaxed);
}

static void json_process(mki_line *l)
{
    mk_process_figures p;
    mki_malloc_figures m;
    mk_process_stats(&p);
    mki_segment_figures(&m);
    mki_line_str(l, "{\"schema\":\"memkit-process-stats\",\"version\":1,");
    jkey(l, "pid", (size_t)getpid(), 0);
    mki_line_str(l, ",\"program\":");
    mki_line_json_str(l, program());
    mki_line_str(l, ",\"os\":{");
    jkey(l, "reserved_bytes", p.os_reserved, 0);
    jkey(l, "committed_bytes", p.os_committed, 1);
    jkey(l, "committed_peak_bytes", mki_os_committed_peak(), 1);
    jkey(l, "calls", p.os_calls, 1);
    jkey(l, "segments", p.segments, 1);
    mki_line_str(l, "},\"purge\":{\"mode\":");
    mki_line_json_str(l, purge_name());
    mki_line_str(l, ",\"delay_ms\":");
    mki_line_num(l, mki_option(MKI_OPT_PURGE_DELAY_MS));
    jkey(l, "purged_bytes", p.purged_bytes, 1);
    jkey(l, "passes", p.purge_passes, 1);
    mki_line_str(l, "},\"heap\":{");
    jkey(l, "segment_committed_bytes", m.segment_bytes, 0);
    jkey(l, "page_bytes", m.page_bytes, 1);
    jkey(l, "huge_chunks", m.huge_count, 1);
    jkey(l, "huge_bytes", m.huge_bytes, 1);
    jkey(l, "huge_cached_bytes", m.huge_cached, 1);
    jkey(l, "meta_bytes", p.meta_bytes, 1);
    mki_line_str(l, "},\"classes\":[");
    int top[8], n = top_classes(top);
    for (int k = 0; k < n; k++) {
        mki_line_str(l, k ? ",{" : "{");
        jkey(l, "chunk_size", mki_class_size[top[k]], 0);
        jkey(l, "page_bytes", class_bytes(top[k]), 1);
        mki_line_str(l, "}");
    }
    mki_line_str(l, "]}\n");
}

void mki_stats_json_process(int fd)
{
    mki_line l = {.len = 0, .stream = fd + 1};
    json_process(&l);
    mki_line_flush(&l);
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

/* @v bytes in the unit a person reads: "512 B", "3.1 MiB". */
static void human(mki_line *l, size_t v)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    size_t whole = v, tenths = 0;
    while (whole >= 1024 && u < 4) {
        tenths = (whole % 1024) * 10 / 1024;
        whole /= 1024;
        u++;
    }
    mki_line_num(l, (long long)whole);
    if (u) {
        mki_line_str(l, ".");
        mki_line_num(l, (long long)tenths);
    }
    mki_line_str(l, " ");
    mki_line_str(l, units[u]);
}

/* One "memkit: name value" line of the process figures; bytes get their
 * human form after them: "memkit: page_bytes 3276800 (3.1 MiB)". */
static void figure(mki_line *l, int fd, const char *name, size_t v, int bytes)
{
    mki_line_str(l, "memkit: ");
    mki_line_str(l, name);
    mki_line_str(l, " ");
    mki_line_num(l, (long long)v);
    if (bytes) {
        mki_line_str(l, " (");
        human(l, v);
        mki_line_str(l, ")");
    }
    mki_line_write(l, fd);
}

static void text_process(mki_line *l, int fd)
{
    mk_process_figures p;
    mki_malloc_figures m;
    mk_process_stats(&p);
    mki_segment_figures(&m);
    mki_line_str(l, "memkit: process ");
    mki_line_num(l, (long long)getpid());
    mki_line_str(l, " ");
    mki_line_str(l, program());
    mki_line_write(l, fd);
    figure(l, fd, "os_reserved_bytes", p.os_reserved, 1);
    figure(l, fd, "os_committed_bytes", p.os_committed, 1);
    figure(l, fd, "os_committed_peak_bytes", mki_os_committed_peak(), 1);
    figure(l, fd, "os_calls", p.os_calls, 0);
    figure(l, fd, "segments", p.segments, 0);
    mki_line_str(l, "memkit: purge_mode ");
    mki_line_str(l, purge_name());
    mki_line_write(l, fd);
    mki_line_str(l, "memkit: purge_delay_ms ");
    mki_line_num(l, mki_option(MKI_OPT_PURGE_DELAY_MS));
    mki_line_write(l, fd);
    figure(l, fd, "purged_bytes", p.purged_bytes, 1);
    figure(l, fd, "purge_passes", p.purge_passes, 0);
    figure(l, fd, "segment_committed_bytes", m.segment_bytes, 1);
    figure(l, fd, "page_bytes", m.page_bytes, 1);
    figure(l, fd, "huge_chunks", m.huge_count, 0);
    figure(l, fd, "huge_bytes", m.huge_bytes, 1);
    figure(l, fd, "huge_cached_bytes", m.huge_cached, 1);
    figure(l, fd, "meta_bytes", p.meta_bytes, 1);
    int top[8], n = top_classes(top);
    for (int k = 0; k < n; k++) {
        mki_line_str(l, "memkit: class ");
        mki_line_num(l, (long long)mki_class_size[top[k]]);
        mki_line_str(l, " B: page_bytes ");
        mki_line_num(l, (long long)class_bytes(top[k]));
        mki_line_str(l, " (");
        human(l, class_bytes(top[k]));
        mki_line_str(l, ")");
        mki_line_write(l, fd);
    }
}

void mki_stats_print_process(int fd)
{
    mki_line l = {.len = 0};
    text_process(&l, fd);
}

/* MEMKIT_STATS_FILE with %p (the pid), %e (the program's name) and %%
 * expanded into @out (as core_pattern does); 0, or -1 if it does not fit. */
static int stats_path(const char *pattern, char *out, size_t cap)
{
    mki_line l = {.len = 0};
    for (const char *c = pattern; *c; c++) {
        if (c[0] == '%' && c[1] == 'p') {
            mki_line_num(&l, (long long)getpid());
            c++;
        } else if (c[0] == '%' && c[1] == 'e') {
            mki_line_str(&l, program());
            c++;
        } else if (c[0] == '%' && c[1] == '%') {
            mki_line_str(&l, "%");
            c++;
        } else {
            char one[2] = {*c, 0};
            mki_line_str(&l, one);
        }
    }
    if (l.len >= cap || l.len >= sizeof l.buf - 2)
        return -1;
    for (size_t i = 0; i < l.len; i++)
        out[i] = l.buf[i];
    out[l.len] = '\0';
    return 0;
}

/* MEMKIT_STATS: the process figures when the program ends (a destructor:
 * it runs after main returns and after exit's handlers, and prints
 * without allocating), on stderr or appended to MEMKIT_STATS_FILE, as one
 * write: the records of processes that share the file (a program and the
 * ones it forks or execs) do not interleave, and each names its process. */
__attribute__((destructor)) static void stats_at_exit(void)
{
    long how = mki_option(MKI_OPT_STATS);
    if (how == 0)
        return;
    int fd = STDERR_FILENO;
    const char *file = getenv("MEMKIT_STATS_FILE");
    char path[256];
    if (file && *file && stats_path(file, path, sizeof path) == 0) {
        fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0)
            fd = STDERR_FILENO;
    }
    char record[8192];
    mki_line l = {.len = 0, .sink = record, .sink_cap = sizeof record};
    if (how == 2)
        json_process(&l);
    else
        text_process(&l, fd);
    mki_line_sink_write(&l, fd);
    if (fd != STDERR_FILENO)
        close(fd);
}
