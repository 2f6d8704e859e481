/* SPDX-License-Identifier: MIT */
/*
 * summary.c - the answer to "should I adopt this?" in a few lines per
 * family, read back from the rows the workloads recorded (report.h).
 *
 * A family is a memkit column and the workloads that exercise it:
 * contexts (a GENERAL context: W1 W2 W5 RSS W3-ctx), pools (the typed pool,
 * the thread-safe pool and SLAB contexts: W2 W1 RSS), and the drop-in
 * (memkit as malloc: every drop-in workload).  For each, speed and memory
 * apart, it prints the median of memkit's ratios over the cells with the
 * range (lowest..highest) and the geometric mean, over the cells and over
 * the tables (each table's own geometric mean, so that W1M's 40 cells
 * weigh as much as W8's one: the figure a target over many workloads is
 * stated in, "0.72x glibc's time" being 1/0.72 = 1.39x here), against
 * the baseline (malloc / glibc) and against the best installed peer - the
 * peer whose median ratio is the lowest, i.e. the hardest to beat - then
 * names the cells where memkit is
 * slower or bigger than the baseline, worst first.  The trade-off: one
 * median over cells of different weight (a 24-byte pool and a 1 GiB
 * context count the same) is a blunt figure, so the range and the losing
 * cells always come with it, and the tables stay the reference.  Every
 * ratio reads one way: > 1 = memkit better.
 */
#include "summary.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_iface.h"
#include "dropin.h"
#include "report.h"

enum { MAXCELLS = 1024, NAMELOSERS = 4 };

typedef struct family {
    const char *title;     /* "contexts: a GENERAL context" */
    const char *workloads; /* space-separated; NULL: every drop-in section */
    int col;
} family;

static const family families[] = {
    {"contexts: a GENERAL context against malloc", "W1 W2 W5 RSS W3-ctx", BA_mk_general},
    {"pools: a typed pool against malloc", "W2 W1 RSS", BA_mk_pool},
    {"pools: a thread-safe typed pool against malloc", "W2 W1 RSS", BA_mk_poolts},
    {"pools: a SLAB context against malloc", "W2 W1 RSS", BA_mk_slab},
    {"drop-in: memkit as malloc against glibc", NULL, BD_COL(BD_memkit)},
};

/* The peers a family's column is compared with. */
static const int inproc_peers[] = {
#ifdef HAVE_TALLOC
    BA_talloc,
#endif
#ifdef HAVE_APR
    BA_apr,
#endif
#ifdef HAVE_MIMALLOC
    BA_mimalloc,
#endif
    -1,
};
static const int dropin_peers[] = {BD_COL(BD_jemalloc), BD_COL(BD_mimalloc),
                                   BD_COL(BD_tcmalloc), -1};

static int in_list(const char *list, const char *w)
{
    size_t n = strlen(w);
    for (const char *p = list; (p = strstr(p, w)) != NULL; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return 1;
    return 0;
}

static int is_memory(const bench_section *s)
{
    if (s->tags & REPORT_MEMORY)
        return 1;
    if (s->tags & REPORT_SPEED)
        return 0;
    size_t n = strlen(s->unit);
    return n > 0 && s->unit[n - 1] == 'B'; /* MB, MiB */
}

static int in_family(const family *f, const bench_section *s)
{
    return f->workloads ? in_list(f->workloads, s->workload) : (s->tags & REPORT_DROPIN) != 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct stat3 {
    int n;
    double median, lo, hi, geo;
} stat3;

static stat3 stat_of(double *v, int n)
{
    stat3 s = {n, 0, 0, 0, 0};
    if (!n)
        return s;
    double logs = 0;
    for (int i = 0; i < n; i++)
        logs += log(v[i]);
    s.geo = exp(logs / n);
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    s.lo = v[0];
    s.hi = v[n - 1];
    s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    return s;
}

/* The ratios of @col against column @base (-1: each section's baseline)
 * over the family's cells of one kind (@memory); how many. */
static int collect(const family *f, int memory, int base, double *v, const bench_row **rows)
{
    int n = 0;
    for (size_t i = 0; i < report_nrows() && n < MAXCELLS; i++) {
        const bench_row *r = report_get_row(i);
        const bench_section *s = report_get_section(r->section);
        if (!in_family(f, s) || is_memory(s) != memory)
            continue;
        double x = base < 0 ? report_ratio(r, f->col) : report_ratio_vs(r, base, f->col);
        if (x <= 0)
            continue;
        if (rows)
            rows[n] = r;
        v[n++] = x;
    }
    return n;
}

static void put_stat(FILE *out, stat3 s)
{
    fprintf(out, "%.2fx (%.2f..%.2f, geomean %.2fx, %d cell%s)", s.median, s.lo, s.hi, s.geo, s.n,
            s.n == 1 ? "" : "s");
}

/* The geometric mean over tables of each table's geometric mean (@v[i]
 * from @rows[i]; a table is a section: W1M's 40 cells weigh as much as
 * W8's one), and how many tables; 0 when fewer than two. */
static double by_table(const double *v, const bench_row *const *rows, int n, int *ntables)
{
    double sum = 0;
    int t = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = rows[j]->section == rows[i]->section;
        if (seen)
            continue;
        double logs = 0;
        int m = 0;
        for (int j = i; j < n; j++)
            if (rows[j]->section == rows[i]->section) {
                logs += log(v[j]);
                m++;
            }
        sum += logs / m;
        t++;
    }
    *ntables = t;
    return t > 1 ? exp(sum / t) : 0;
}

/* One line: speed or memory against the baseline and the best peer, then
 * the cells where memkit loses to the baseline; 0 if nothing measured. */
static int family_line(FILE *out, const family *f, int memory)
{
    static double v[MAXCELLS], w[MAXCELLS];
    static const bench_row *rows[MAXCELLS];
    int n = collect(f, memory, -1, v, rows);
    if (!n)
        return 0;
    /* the losers, before stat_of sorts v: worst first */
    int lose[MAXCELLS], nl = 0;
    for (int i = 0; i < n; i++)
        if (v[i] < 1.0)
            lose[nl++] = i;
    for (int i = 1; i < nl; i++)
        for (int j = i; j > 0 && v[lose[j]] < v[lose[j - 1]]; j--) {
            int t = lose[j];
            lose[j] = lose[j - 1];
            lose[j - 1] = t;
        }
    char names[NAMELOSERS][96];
    double worst[NAMELOSERS];
    for (int i = 0; i < nl && i < NAMELOSERS; i++) {
        const bench_row *r = rows[lose[i]];
        const bench_section *s = report_get_section(r->section);
        snprintf(names[i], sizeof names[i], "%s %s %s", s->workload, s->name, r->cell);
        worst[i] = v[lose[i]];
    }
    const bench_section *s0 = report_get_section(rows[0]->section);
    int ntables = 0;
    double tables = by_table(v, rows, n, &ntables); /* (before stat_of sorts v) */
    stat3 st = stat_of(v, n);
    fprintf(out, "  %-7s vs %s ", memory ? "memory" : "speed", bench_col_name(s0->baseline));
    put_stat(out, st);
    if (tables > 0)
        fprintf(out, "; by table %.2fx (%d tables)", tables, ntables);

    const int *peers = f->col < BA_COUNT ? inproc_peers : dropin_peers;
    int best = -1;
    stat3 bst = {0, 0, 0, 0, 0};
    for (int k = 0; peers[k] >= 0; k++) {
        int m = collect(f, memory, peers[k], w, NULL);
        stat3 ps = stat_of(w, m);
        if (m && (best < 0 || ps.median < bst.median)) {
            best = peers[k];
            bst = ps;
        }
    }
    if (best >= 0) {
        fprintf(out, "\n          vs %s (best peer) ", bench_col_name(best));
        put_stat(out, bst);
    } else {
        fprintf(out, "; no peer measured");
    }
    fprintf(out, "\n");
    if (nl) {
        int col = fprintf(out, "          %s than %s in %d of %d:", memory ? "bigger" : "slower",
                          bench_col_name(s0->baseline), nl, n);
        for (int i = 0; i < nl && i < NAMELOSERS; i++) {
            char item[128];
            int len = snprintf(item, sizeof item, " %s %.2fx%s", names[i], worst[i],
                               i + 1 < nl && i + 1 < NAMELOSERS ? "," : "");
            if (col + len > 96) {
                fprintf(out, "\n           ");
                col = 11;
            }
            col += fprintf(out, "%s", item);
        }
        if (nl > NAMELOSERS)
            fprintf(out, "%s and %d more (the tables)", col > 70 ? "\n           " : ",",
                    nl - NAMELOSERS);
        fprintf(out, "\n");
    }
    return 1;
}

void summary_print(FILE *out)
{
    fprintf(out, "\n== summary: every ratio > 1 = memkit better; the median over the cells, "
                 "then (lowest..highest, the geometric mean) ==\n");
    int any = 0;
    for (size_t k = 0; k < sizeof families / sizeof families[0]; k++) {
        const family *f = &families[k];
        /* the family's workloads where its column has a figure, for its
         * title */
        char ran[128] = "";
        for (size_t i = 0; i < report_nrows(); i++) {
            const bench_row *r = report_get_row(i);
            const bench_section *sec = report_get_section(r->section);
            if (r->fig[f->col].runs && in_family(f, sec) && !in_list(ran, sec->workload) &&
                strlen(ran) + strlen(sec->workload) + 2 < sizeof ran) {
                if (ran[0])
                    strcat(ran, " ");
                strcat(ran, sec->workload);
            }
        }
        static double v[MAXCELLS];
        if (!collect(f, 0, -1, v, NULL) && !collect(f, 1, -1, v, NULL))
            continue;
        fprintf(out, "%s (%s)\n", f->title, ran);
        family_line(out, f, 0);
        family_line(out, f, 1);
        any = 1;
    }
    if (!any)
        fprintf(out, "  (no figure of memkit against a baseline in this run)\n");
    fflush(out);
}
