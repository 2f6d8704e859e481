/* SPDX-License-Identifier: MIT */
/*
 * profile.c - memkit-run --profile: read the heap profile a run left
 * (PREFIX.PID.peak.folded / .exit.folded, and the mappings from the .heap
 * file), name the frames (symbols.c) and report who held the memory: the
 * top stacks at the peak and still live at exit, and the bytes by context
 * at the peak; then the two flame graphs (flame.c).
 *
 * A process tree leaves one profile per process on memkit; the report is
 * of the process whose peak estimate is the largest (the program, unless a
 * wrapper started it).  The frames of memkit itself at the top of a stack
 * (mk_*, mki_*, the malloc family, operator new, anything in libmemkit*)
 * are dropped: the stack ends where the program asked for memory.
 * Trade-off: stacks that differ only below the frames kept are merged by
 * their names, so a report and a flame graph count what a reader sees.
 */
#include "run.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *b = realloc(buf, 2 * cap + 1);
            if (!b) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf)
        buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

/* ---- one folded file ------------------------------------------------------------ */

typedef struct raw_stack {
    char *ctx;
    uintptr_t *frames; /* root first */
    int depth;
    double bytes;
} raw_stack;

typedef struct raw_prof {
    raw_stack *v;
    size_t n;
    double total;
} raw_prof;

static void raw_free(raw_prof *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free(p->v[i].ctx);
        free(p->v[i].frames);
    }
    free(p->v);
    memset(p, 0, sizeof *p);
}

static int raw_read(const char *path, raw_prof *out)
{
    memset(out, 0, sizeof *out);
    char *text = slurp(path, NULL);
    if (!text)
        return -1;
    for (char *line = text; line && *line;) {
        char *end = strchr(line, '\n');
        if (end)
            *end = '\0';
        char *sp = strrchr(line, ' ');
        char *semi = strchr(line, ';');
        if (sp && semi && semi < sp) {
            raw_stack s = {0};
            s.bytes = strtod(sp + 1, NULL);
            *sp = '\0';
            *semi = '\0';
            s.ctx = strdup(line);
            int cap = 8;
            s.frames = malloc(cap * sizeof *s.frames);
            for (char *t = semi + 1; s.frames && *t;) {
                char *next;
                uintptr_t a = (uintptr_t)strtoull(t, &next, 16);
                if (next == t)
                    break;
                if (s.depth == cap) {
                    cap *= 2;
                    uintptr_t *f = realloc(s.frames, cap * sizeof *f);
                    if (!f)
                        break;
                    s.frames = f;
                }
                s.frames[s.depth++] = a;
                t = *next == ';' ? next + 1 : next;
            }
            raw_stack *v = realloc(out->v, (out->n + 1) * sizeof *v);
            if (v && s.ctx && s.frames) {
                out->v = v;
                v[out->n++] = s;
                out->total += s.bytes;
            } else {
                free(s.ctx);
                free(s.frames);
            }
        }
        line = end ? end + 1 : NULL;
    }
    free(text);
    return 0;
}

/* ---- naming the stacks -------------------------------------------------------------- */

static int memkit_name(const char *n)
{
    static const char *const names[] = {
        "malloc ", "calloc ", "realloc ", "free ", "posix_memalign ", "aligned_alloc ",
        "memalign ", "valloc ", "pvalloc ", "reallocarray ", "strdup ", "operator new",
        "__libc_malloc", "__libc_calloc", "__libc_realloc", "__libc_memalign", NULL};
    if (strncmp(n, "mk_", 3) == 0 || strncmp(n, "mki_", 4) == 0)
        return 1;
    for (int i = 0; names[i]; i++)
        if (strncmp(n, names[i], strlen(names[i])) == 0 ||
            (strncmp(n, names[i], strlen(names[i]) - 1) == 0 &&
             n[strlen(names[i]) - 1] == '+'))
            return 1;
    return 0;
}

/* The frames of @s named, root first, memkit's own cut from the top;
 * returns how many are kept (the names point into @sym's cache, or into
 * @tmp for addresses it could not place). */
static int named(const mr_symbols *sym, const raw_stack *s, const char **out,
                 char (*tmp)[24])
{
    int n = s->depth;
    while (n > 1) { /* innermost last */
        const char *nm = mr_symbols_name(sym, s->frames[n - 1]);
        if (!mr_symbols_is_memkit(sym, s->frames[n - 1]) && !(nm && memkit_name(nm)))
            break;
        n--;
    }
    for (int i = 0; i < n; i++) {
        const char *nm = mr_symbols_name(sym, s->frames[i]);
        if (!nm) {
            snprintf(tmp[i], sizeof tmp[i], "0x%llx", (unsigned long long)s->frames[i]);
            nm = tmp[i];
        }
        out[i] = nm;
    }
    return n;
}

/* The report's view of one profile: stacks by their names. */
typedef struct named_stack {
    char *key; /* frames innermost first, joined with " < " */
    char *ctx;
    double bytes;
} named_stack;

static int by_bytes(const void *a, const void *b)
{
    const named_stack *x = a, *y = b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

static void top_stacks(FILE *out, const mr_symbols *sym, const raw_prof *p,
                       const char *title, int max)
{
    named_stack *v = calloc(p->n ? p->n : 1, sizeof *v);
    size_t nv = 0;
    for (size_t i = 0; v && i < p->n; i++) {
        const char *names[64];
        char tmp[64][24];
        int n = named(sym, &p->v[i], names, tmp);
        char key[1024];
        size_t len = 0;
        key[0] = '\0';
        for (int k = n - 1, shown = 0; k >= 0 && shown < 4 && len < sizeof key; k--, shown++)
            len += (size_t)snprintf(key + len, sizeof key - len, "%s%s",
                                    shown ? "\n                    < " : "", names[k]);
        size_t j = 0;
        while (j < nv && (strcmp(v[j].key, key) != 0 || strcmp(v[j].ctx, p->v[i].ctx) != 0))
            j++;
        if (j == nv) {
            v[nv].key = strdup(key);
            v[nv].ctx = strdup(p->v[i].ctx);
            nv++;
        }
        v[j].bytes += p->v[i].bytes;
    }
    char total[32];
    mr_view_bytes(total, sizeof total, p->total);
    fprintf(out, "  %s: %s estimated\n", title, total);
    if (v)
        qsort(v, nv, sizeof *v, by_bytes);
    for (size_t j = 0; j < nv && (int)j < max; j++) {
        char b[32];
        mr_view_bytes(b, sizeof b, v[j].bytes);
        fprintf(out, "    %9s %5.1f%%  %s\n                    [context %s]\n", b,
                p->total > 0 ? 100 * v[j].bytes / p->total : 0, v[j].key, v[j].ctx);
    }
    if (!nv)
        fprintf(out, "    (nothing)\n");
    for (size_t j = 0; j < nv; j++) {
        free(v[j].key);
        free(v[j].ctx);
    }
    free(v);
}

static void by_context(FILE *out, const raw_prof *p)
{
    named_stack *v = calloc(p->n ? p->n : 1, sizeof *v);
    size_t nv = 0;
    for (size_t i = 0; v && i < p->n; i++) {
        size_t j = 0;
        while (j < nv && strcmp(v[j].ctx, p->v[i].ctx) != 0)
            j++;
        if (j == nv)
            v[nv++].ctx = p->v[i].ctx;
        v[j].bytes += p->v[i].bytes;
    }
    if (v)
        qsort(v, nv, sizeof *v, by_bytes);
    fprintf(out, "  bytes by context at the peak:\n");
    for (size_t j = 0; j < nv && j < 12; j++) {
        char b[32];
        mr_view_bytes(b, sizeof b, v[j].bytes);
        fprintf(out, "    %9s %5.1f%%  %s\n", b,
                p->total > 0 ? 100 * v[j].bytes / p->total : 0, v[j].ctx);
    }
    free(v);
}

/* ---- flame graph input ---------------------------------------------------------------- */

static int flame_of(const mr_symbols *sym, const raw_prof *p, const char *path,
                    const char *title, FILE *log)
{
    mr_flame *f = mr_flame_new();
    for (size_t i = 0; f && i < p->n; i++) {
        const char *names[65];
        char tmp[64][24];
        char ctx[256];
        snprintf(ctx, sizeof ctx, "context %s", p->v[i].ctx);
        names[0] = ctx;
        int n = named(sym, &p->v[i], names + 1, tmp);
        mr_flame_add(f, names, n + 1, p->v[i].bytes);
    }
    int r = f ? mr_flame_write(f, path, title) : -1;
    if (r == 0)
        fprintf(log, "  flame graph %s\n", path);
    else
        fprintf(log, "memkit-run: cannot write %s: %s\n", path, strerror(errno));
    mr_flame_free(f);
    return r;
}

/* ---- the run's profile ------------------------------------------------------------------- */

/* The pid whose PREFIX.PID.peak.folded holds the most (0: none). */
static long pick_process(const char *prefix)
{
    char dir[4096];
    const char *slash = strrchr(prefix, '/');
    const char *base = slash ? slash + 1 : prefix;
    if (slash)
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - prefix), prefix);
    else
        snprintf(dir, sizeof dir, ".");
    DIR *d = opendir(dir[0] ? dir : "/");
    if (!d)
        return 0;
    long best = 0;
    double most = -1;
    size_t bl = strlen(base);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, base, bl) != 0 || e->d_name[bl] != '.')
            continue;
        char *end;
        long pid = strtol(e->d_name + bl + 1, &end, 10);
        if (pid <= 0 || strcmp(end, ".peak.folded") != 0)
            continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        raw_prof p;
        if (raw_read(path, &p) == 0 && p.total > most) {
            most = p.total;
            best = pid;
        }
        raw_free(&p);
    }
    closedir(d);
    return best;
}

int mr_profile_report(FILE *out, const char *prefix, long rate)
{
    long pid = pick_process(prefix);
    if (!pid) {
        fprintf(out, "memkit-run: no heap profile found at %s.PID.* (did the "
                     "program run on memkit?)\n", prefix);
        return -1;
    }
    char path[4096];
    raw_prof peak, exit_p;
    snprintf(path, sizeof path, "%s.%ld.peak.folded", prefix, pid);
    if (raw_read(path, &peak) != 0)
        return -1;
    snprintf(path, sizeof path, "%s.%ld.exit.folded", prefix, pid);
    if (raw_read(path, &exit_p) != 0)
        memset(&exit_p, 0, sizeof exit_p);
    snprintf(path, sizeof path, "%s.%ld.exit.heap", prefix, pid);
    char *heap = slurp(path, NULL);
    const char *maps = heap ? strstr(heap, "MAPPED_LIBRARIES:\n") : NULL;
    mr_symbols *sym = mr_symbols_new(maps ? maps + 18 : "");
    size_t na = 0;
    for (size_t i = 0; i < peak.n; i++)
        na += (size_t)peak.v[i].depth;
    for (size_t i = 0; i < exit_p.n; i++)
        na += (size_t)exit_p.v[i].depth;
    uintptr_t *all = malloc((na ? na : 1) * sizeof *all);
    size_t k = 0;
    for (size_t i = 0; all && i < peak.n; i++)
        for (int j = 0; j < peak.v[i].depth; j++)
            all[k++] = peak.v[i].frames[j];
    for (size_t i = 0; all && i < exit_p.n; i++)
        for (int j = 0; j < exit_p.v[i].depth; j++)
            all[k++] = exit_p.v[i].frames[j];
    if (sym && all)
        mr_symbols_resolve(sym, all, k);
    free(all);
    fprintf(out, "\nheap profile (process %ld, one sample per %ld bytes on "
                 "average%s):\n", pid, rate, rate <= 1 ? ": every allocation" : "");
    if (sym) {
        top_stacks(out, sym, &peak, "top stacks at the peak", 8);
        top_stacks(out, sym, &exit_p, rate <= 1 ? "never freed (live at exit)"
                                                : "still live at exit", 8);
        by_context(out, &peak);
        snprintf(path, sizeof path, "%s.peak.svg", prefix);
        flame_of(sym, &peak, path, "memkit heap profile: live at the peak", out);
        snprintf(path, sizeof path, "%s.exit.svg", prefix);
        flame_of(sym, &exit_p, path, "memkit heap profile: live at exit", out);
        fprintf(out, "  profiles    %s.%ld.{peak,exit}.{heap,folded} (pprof, "
                     "jeprof; flame graph tools)\n", prefix, pid);
    }
    mr_symbols_free(sym);
    free(heap);
    raw_free(&peak);
    raw_free(&exit_p);
    return 0;
}
