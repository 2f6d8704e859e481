/* SPDX-License-Identifier: MIT */
/*
 * profile.c - memkit-run --profile: read the heap profile a run left
 * (PID.peak.folded / .exit.folded, and the mappings from the .heap file,
 * in the run's own directory), name the frames (symbols.c) and report who
 * held the memory: the top stacks at the peak and still live at exit, and
 * the bytes by context at the peak; then the two flame graphs (flame.c)
 * and the same stacks as named folded files, for flamegraph.pl and
 * speedscope, which cannot name the raw files' return addresses.
 *
 * Only this run's files are read: the program's processes write into a
 * directory made for the run (PREFIX.XXXXXX, beside the files it ends up
 * as), and the report moves them to PREFIX.PID.* once it has read the
 * list.  So a profile an earlier run left under the same prefix, or one
 * of another program, can never be taken for this one; the price is a
 * rename per file, and the files of a process still running when the
 * program ends arrive in that directory, which then stays (the report
 * says where).
 *
 * A process tree leaves one profile per process on memkit; the report is
 * of the process whose peak estimate is the largest (the program, unless a
 * wrapper started it).  The frames of memkit itself at the top of a stack
 * (mk_*, mki_*, the malloc family, operator new, anything in libmemkit*)
 * are dropped: the stack ends where the program asked for memory.
 * Trade-off: stacks that differ only below the frames kept are merged by
 * their names, so a report and a flame graph count what a reader sees.
 * A run that left no profile (no sample taken) still writes both flame
 * graphs, each saying so, so that no graph of an earlier run stays behind
 * under this run's name.
 */
#include "run.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

enum { MAX_FRAMES = 64 }; /* memkit records at most this many */

/* The frames of @s named, root first, memkit's own cut from the top;
 * returns how many are kept, at most MAX_FRAMES, the innermost (the names
 * point into @sym's cache, or into @tmp for addresses it could not
 * place). */
static int named(const mr_symbols *sym, const raw_stack *s, const char **out,
                 char (*tmp)[24])
{
    int n = s->depth, first = 0;
    while (n > 1) { /* innermost last */
        const char *nm = mr_symbols_name(sym, s->frames[n - 1]);
        if (!mr_symbols_is_memkit(sym, s->frames[n - 1]) && !(nm && memkit_name(nm)))
            break;
        n--;
    }
    if (n > MAX_FRAMES) /* a file not of memkit's making: keep the innermost */
        first = n - MAX_FRAMES;
    for (int i = first; i < n; i++) {
        const char *nm = mr_symbols_name(sym, s->frames[i]);
        if (!nm) {
            snprintf(tmp[i - first], sizeof tmp[i - first], "0x%llx",
                     (unsigned long long)s->frames[i]);
            nm = tmp[i - first];
        }
        out[i - first] = nm;
    }
    return n - first;
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
        const char *names[MAX_FRAMES];
        char tmp[MAX_FRAMES][24];
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

/* ---- flame graphs and named folded stacks ------------------------------------------ */

/* One frame name in a folded line: ';' separates frames there, and the
 * count follows the last blank, so neither may be mistaken. */
static void folded_frame(FILE *f, const char *name)
{
    for (const char *c = name; *c; c++)
        fputc(*c == ';' ? ':' : (unsigned char)*c < 0x20 ? '?' : *c, f);
}

/* The flame graph of @p at @svg and its stacks, named, at @folded (one
 * line per stack: "context CTX;outermost;...;innermost BYTES", the format
 * of flamegraph.pl and speedscope); @empty says why there is nothing when
 * @p holds no bytes. */
static int flame_of(const mr_symbols *sym, const raw_prof *p, const char *svg,
                    const char *folded, const char *title, const char *empty, FILE *log)
{
    mr_flame *fl = mr_flame_new();
    FILE *ff = folded ? fopen(folded, "w") : NULL;
    for (size_t i = 0; fl && p && sym && i < p->n; i++) {
        const char *names[MAX_FRAMES + 1];
        char tmp[MAX_FRAMES][24];
        char ctx[256];
        snprintf(ctx, sizeof ctx, "context %s", p->v[i].ctx);
        names[0] = ctx;
        int n = named(sym, &p->v[i], names + 1, tmp);
        mr_flame_add(fl, names, n + 1, p->v[i].bytes);
        if (ff) {
            for (int k = 0; k <= n; k++) {
                if (k)
                    fputc(';', ff);
                folded_frame(ff, names[k]);
            }
            fprintf(ff, " %.0f\n", p->v[i].bytes);
        }
    }
    int r = fl ? mr_flame_write(fl, svg, title, empty) : -1;
    if (r == 0)
        fprintf(log, "  flame graph %s\n", svg);
    else
        fprintf(log, "memkit-run: cannot write %s: %s\n", svg, strerror(errno));
    if (folded && (!ff || fclose(ff) != 0)) {
        fprintf(log, "memkit-run: cannot write %s: %s\n", folded, strerror(errno));
        r = -1;
    }
    mr_flame_free(fl);
    return r;
}

/* ---- the run's profile ------------------------------------------------------------------- */

/* The pid whose DIR/PID.peak.folded holds the most (0: none). */
static long pick_process(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    long best = 0;
    double most = -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (pid <= 0 || end == e->d_name || strcmp(end, ".peak.folded") != 0)
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

/* Move every file of @dir to PREFIX.<its name>; then remove @dir unless
 * @keep_dir (processes still running will write there). */
static void move_files(const char *dir, const char *prefix, int keep_dir, FILE *log)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char from[8192], to[8192];
        snprintf(from, sizeof from, "%s/%s", dir, e->d_name);
        snprintf(to, sizeof to, "%s.%s", prefix, e->d_name);
        if (rename(from, to) != 0)
            fprintf(log, "memkit-run: cannot move %s to %s: %s\n", from, to,
                    strerror(errno));
    }
    closedir(d);
    if (!keep_dir)
        rmdir(dir);
}

int mr_profile_report(FILE *out, const char *prefix, const char *dir, long rate,
                      int still_running)
{
    long pid = pick_process(dir);
    move_files(dir, prefix, still_running, out);
    char svg_peak[4096], svg_exit[4096], named_peak[4096], named_exit[4096];
    snprintf(svg_peak, sizeof svg_peak, "%s.peak.svg", prefix);
    snprintf(svg_exit, sizeof svg_exit, "%s.exit.svg", prefix);
    snprintf(named_peak, sizeof named_peak, "%s.peak.folded", prefix);
    snprintf(named_exit, sizeof named_exit, "%s.exit.folded", prefix);
    if (!pid) {
        char why[200];
        snprintf(why, sizeof why, "no heap profile: the program took no sample (one per %ld "
                 "bytes allocated on average), or did not run on memkit", rate);
        fprintf(out, "memkit-run: %s\n", why);
        flame_of(NULL, NULL, svg_peak, NULL, "memkit heap profile: live at the peak", why, out);
        flame_of(NULL, NULL, svg_exit, NULL, "memkit heap profile: live at exit", why, out);
        remove(named_peak); /* an earlier run's: not this run's stacks */
        remove(named_exit);
        if (still_running)
            fprintf(out, "  note        the profiles of processes still running go to %s/\n",
                    dir);
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
        flame_of(sym, &peak, svg_peak, named_peak, "memkit heap profile: live at the peak",
                 "nothing was live at the peak", out);
        flame_of(sym, &exit_p, svg_exit, named_exit, "memkit heap profile: live at exit",
                 rate <= 1 ? "nothing was live at exit: every allocation was freed"
                           : "no sampled allocation was still live at exit", out);
        fprintf(out, "  named       %s, %s (folded stacks with names: flamegraph.pl, "
                     "speedscope)\n", named_peak, named_exit);
        fprintf(out, "  profiles    %s.%ld.{peak,exit}.{heap,folded} (raw addresses: pprof, "
                     "jeprof)\n", prefix, pid);
    }
    if (still_running)
        fprintf(out, "  note        the profiles of processes still running go to %s/\n", dir);
    mr_symbols_free(sym);
    free(heap);
    raw_free(&peak);
    raw_free(&exit_p);
    return 0;
}
