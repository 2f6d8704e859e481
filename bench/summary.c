/* SPDX-License-Identifier: MIT */
/*
 * summary.c - memkit's figures by family and by table (summary.h), and
 * the detailed summary that follows the verdict: the answer to "where
 * exactly does it win and lose?", read back from the rows the workloads
 * recorded (report.h).
 *
 * A family is a memkit column and the workloads that exercise it:
 * contexts (a GENERAL context: W1 W2 W5 RSS W3-ctx), pools (the typed
 * pool for time, its SLAB context for memory: W2 RSS, with the thread-safe
 * pool and SLAB's own speed in the details), and the drop-in (memkit as
 * malloc: every drop-in workload).
 *
 * The one headline statistic is the geometric mean over tables of each
 * table's geometric mean: a table is one measured quantity of one
 * workload, so W1M's 40 cells weigh as much as W8's one, and a target
 * stated over workloads ("0.72x glibc's time") reads the same here
 * (1/0.72 = 1.39x).  The median over the cells weighs each table by its
 * number of cells, and the geometric mean over the cells is pulled by the
 * largest ratios (a 512 MiB free, 90x): both are printed beside it, and
 * when they tell a different story one line says which table or cell
 * makes the difference, so the figures never silently disagree.  Cells
 * marked ROW_INFO (a process's baseline, a sum of its neighbours) are
 * left out.  Every ratio reads one way: > 1 = memkit better.
 */
#include "summary.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_iface.h"
#include "dropin.h"
#include "legend.h"
#include "report.h"

enum { MAXCELLS = 1024, MAXTABLES = 32, NAMELOSERS = 4 };

static const summary_family families[FAM_COUNT] = {
    [FAM_CONTEXTS] = {"contexts", "a GENERAL context", "W1 W2 W5 RSS W3-ctx", BA_mk_general,
                      BA_mk_general, {BA_mk_general, -1}, BA_BASELINE},
    [FAM_POOLS] = {"pools", "a typed pool (memory: its SLAB context)", "W2 W1 RSS", BA_mk_pool,
                   BA_mk_slab, {BA_mk_pool, BA_mk_poolts, BA_mk_slab, -1}, BA_BASELINE},
    [FAM_DROPIN] = {"drop-in", "memkit as malloc", NULL, BD_COL(BD_memkit), BD_COL(BD_memkit),
                    {BD_COL(BD_memkit), -1}, BD_COL(BD_glibc)},
};

const summary_family *summary_family_get(int fam)
{
    return &families[fam];
}

static int col_ready(int col)
{
    return col < BA_COUNT ? bench_alloc_ready(col, NULL) : bench_dropin_ready(col - BA_COUNT, NULL);
}

const int *summary_family_peers(int fam)
{
    static int peers[FAM_COUNT][5];
    static const int inproc[] = {
#ifdef HAVE_TALLOC
        BA_talloc,
#endif
#ifdef HAVE_APR
        BA_apr,
#endif
#ifdef HAVE_MIMALLOC
        BA_mimalloc,
#endif
        -1};
    static const int dropin[] = {BD_COL(BD_jemalloc), BD_COL(BD_mimalloc), BD_COL(BD_tcmalloc),
                                 -1};
    const int *all = fam == FAM_DROPIN ? dropin : inproc;
    int n = 0;
    for (int k = 0; all[k] >= 0 && n < 4; k++)
        if (col_ready(all[k]))
            peers[fam][n++] = all[k];
    peers[fam][n] = -1;
    return peers[fam];
}

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

static int in_family(const char *workloads, const bench_section *s)
{
    return workloads ? in_list(workloads, s->workload) : (s->tags & REPORT_DROPIN) != 0;
}

int summary_agg_open(const summary_agg *a)
{
    return a->tables && 2 * a->open > a->tables;
}

const char *summary_table_name(int section, char *buf, size_t len)
{
    const bench_section *s = report_get_section(section);
    int same = 0; /* other sections of the workload with the same measure */
    for (int i = 0; i < report_nsections(); i++) {
        const bench_section *t = report_get_section(i);
        same += i != section && strcmp(t->workload, s->workload) == 0 &&
                is_memory(t) == is_memory(s);
    }
    if (same)
        snprintf(buf, len, "%s %s", s->workload, s->name);
    else
        snprintf(buf, len, "%s", s->workload);
    return buf;
}

/* The tables of @workloads (NULL: the drop-in's), measure @memory, of
 * @col against @base. */
static int tables_of(const char *workloads, int memory, int col, int base, summary_table *out,
                     int max)
{
    int n = 0;
    for (int sec = 0; sec < report_nsections() && n < max; sec++) {
        const bench_section *s = report_get_section(sec);
        if (!in_family(workloads, s) || is_memory(s) != memory)
            continue;
        summary_table t = {.section = sec};
        double lg = 0, llo = 0, lhi = 0;
        for (size_t i = 0; i < report_nrows(); i++) {
            const bench_row *r = report_get_row(i);
            if (r->section != sec || (r->flags & ROW_INFO))
                continue;
            double x = report_ratio_vs(r, base, col), lo, hi;
            if (x <= 0 || report_ratio_range(r, base, col, &lo, &hi) != 0)
                continue;
            lg += log(x);
            llo += log(lo);
            lhi += log(hi);
            t.cells++;
            int open = lo < 1.0 && hi > 1.0;
            t.unsettled += open;
            t.better += x > 1.0 && !open;
            t.worse += x < 1.0 && !open;
        }
        if (!t.cells)
            continue;
        t.geo = exp(lg / t.cells);
        t.lo = exp(llo / t.cells);
        t.hi = exp(lhi / t.cells);
        t.open = 2 * (t.geo >= 1.0 ? t.better : t.worse) < t.cells;
        out[n++] = t;
    }
    return n;
}

int summary_tables(int fam, int memory, int col, int base, summary_table *out, int max)
{
    return tables_of(families[fam].workloads, memory, col, base, out, max);
}

static summary_agg aggregate(const summary_table *t, int n)
{
    summary_agg a = {0};
    double lg = 0, llo = 0, lhi = 0;
    for (int i = 0; i < n; i++) {
        lg += log(t[i].geo);
        llo += log(t[i].lo);
        lhi += log(t[i].hi);
        a.cells += t[i].cells;
        a.unsettled_cells += t[i].unsettled;
        if (t[i].open)
            a.open++;
        else if (t[i].geo < SUMMARY_EVEN && t[i].geo > 1 / SUMMARY_EVEN)
            a.even++;
        else if (t[i].geo >= 1.0)
            a.ahead++;
        else
            a.behind++;
    }
    a.tables = n;
    if (n) {
        a.geo = exp(lg / n);
        a.lo = exp(llo / n);
        a.hi = exp(lhi / n);
    }
    return a;
}

summary_agg summary_aggregate(int fam, int memory, int col, int base)
{
    summary_table t[MAXTABLES];
    return aggregate(t, summary_tables(fam, memory, col, base, t, MAXTABLES));
}

/* ---- the detailed summary ------------------------------------------------- */

/* The lines of the detailed summary: a family's memkit column each. */
static const struct line {
    const char *title;
    const char *workloads; /* NULL: every drop-in section */
    int col;
    int fam; /* whose peers */
} lines[] = {
    {"contexts: a GENERAL context", "W1 W2 W5 RSS W3-ctx", BA_mk_general, FAM_CONTEXTS},
    {"pools: a typed pool", "W2 W1 RSS", BA_mk_pool, FAM_POOLS},
    {"pools: a thread-safe typed pool", "W2 W1 RSS", BA_mk_poolts, FAM_POOLS},
    {"pools: a SLAB context", "W2 W1 RSS", BA_mk_slab, FAM_POOLS},
    {"drop-in: memkit as malloc", NULL, BD_COL(BD_memkit), FAM_DROPIN},
};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Wrapped output: items after a hanging indent. */
typedef struct wrap {
    FILE *out;
    int col, indent;
} wrap;

static void wrap_put(wrap *w, const char *item)
{
    int n = (int)strlen(item);
    if (w->col > w->indent && w->col + n > 100) {
        fprintf(w->out, "\n%*s", w->indent, "");
        w->col = w->indent;
        while (*item == ' ')
            item++;
    }
    w->col += fprintf(w->out, "%s", item);
}

/* @text word by word. */
static void wrap_words(wrap *w, const char *text)
{
    while (*text) {
        const char *sp = strchr(text + 1, ' ');
        size_t n = sp ? (size_t)(sp - text) : strlen(text);
        char word[256];
        snprintf(word, sizeof word, "%.*s", (int)(n < sizeof word ? n : sizeof word - 1), text);
        wrap_put(w, word);
        text += n;
    }
}

static const char *mark(int open)
{
    return open ? "~" : "";
}

/* The cells' figures of @l, measure @memory, against the baseline:
 * median, geomean, lowest and highest (named) and the losers; 0 if none. */
static void cells_line(FILE *out, const struct line *l, int memory, int base,
                       const summary_table *t, int nt, double bytable)
{
    static double v[MAXCELLS], sorted[MAXCELLS];
    static const bench_row *rows[MAXCELLS];
    int n = 0, open = 0;
    for (size_t i = 0; i < report_nrows() && n < MAXCELLS; i++) {
        const bench_row *r = report_get_row(i);
        const bench_section *s = report_get_section(r->section);
        if (!in_family(l->workloads, s) || is_memory(s) != memory || (r->flags & ROW_INFO))
            continue;
        double x = report_ratio_vs(r, base, l->col);
        if (x <= 0)
            continue;
        open += report_unsettled(r, base, l->col);
        rows[n] = r;
        v[n++] = x;
    }
    if (!n)
        return;
    double logs = 0;
    int ilo = 0, ihi = 0;
    for (int i = 0; i < n; i++) {
        logs += log(v[i]);
        sorted[i] = v[i];
        ilo = v[i] < v[ilo] ? i : ilo;
        ihi = v[i] > v[ihi] ? i : ihi;
    }
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
    double median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    double geo = exp(logs / n);
    char text[320];
    int len = snprintf(text, sizeof text, "over the %d cell%s: median %.2fx, geomean %.2fx, "
                       "lowest %.2fx, highest %.2fx", n, n == 1 ? "" : "s", median, geo, v[ilo],
                       v[ihi]);
    if (open)
        snprintf(text + len, sizeof text - (size_t)len, "; %d within their runs' spread (~)", open);
    wrap cw = {out, 22, 22};
    fprintf(out, "%22s", "");
    wrap_words(&cw, text);
    fprintf(out, "\n");
    /* do the three figures tell one story?  If not, say why */
    if (nt > 1 && ((median >= 1) != (bytable >= 1) || (geo >= 1) != (bytable >= 1) ||
                   fabs(log(median / bytable)) > log(1.15) ||
                   fabs(log(geo / bytable)) > log(1.15))) {
        int most = 0;
        for (int i = 1; i < nt; i++)
            most = t[i].cells > t[most].cells ? i : most;
        char tn[64], why[640];
        const bench_section *slo = report_get_section(rows[ilo]->section),
                            *shi = report_get_section(rows[ihi]->section);
        snprintf(why, sizeof why,
                 "(they differ: the first figure weighs each of the %d tables once; over the "
                 "cells, %s holds %d of the %d, and the extremes are %s %s %s %.2fx and %s %s "
                 "%s %.2fx)", nt, summary_table_name(t[most].section, tn, sizeof tn),
                 t[most].cells, n, slo->workload, slo->name, rows[ilo]->cell, v[ilo],
                 shi->workload, shi->name, rows[ihi]->cell, v[ihi]);
        wrap w = {out, 22, 22};
        fprintf(out, "%22s", "");
        wrap_words(&w, why);
        fprintf(out, "\n");
    }
    /* the cells where memkit is behind the baseline, worst first */
    int lose[MAXCELLS], nl = 0;
    for (int i = 0; i < n; i++)
        if (v[i] < 1.0)
            lose[nl++] = i;
    for (int i = 1; i < nl; i++)
        for (int j = i; j > 0 && v[lose[j]] < v[lose[j - 1]]; j--) {
            int tmp = lose[j];
            lose[j] = lose[j - 1];
            lose[j - 1] = tmp;
        }
    if (!nl)
        return;
    wrap w = {out, 0, 24};
    char item[192];
    snprintf(item, sizeof item, "%22s%s than %s in %d of %d cells:", "",
             memory ? "bigger" : "slower", bench_col_name(base), nl, n);
    wrap_put(&w, item);
    for (int i = 0; i < nl && i < NAMELOSERS; i++) {
        const bench_row *r = rows[lose[i]];
        const bench_section *s = report_get_section(r->section);
        snprintf(item, sizeof item, " %s %s %s %.2fx%s%s", s->workload, s->name, r->cell,
                 v[lose[i]], report_unsettled(r, base, l->col) ? "~" : "",
                 i + 1 < nl && i + 1 < NAMELOSERS ? "," : "");
        wrap_put(&w, item);
    }
    if (nl > NAMELOSERS) {
        snprintf(item, sizeof item, ", and %d more (the tables)", nl - NAMELOSERS);
        wrap_put(&w, item);
    }
    fprintf(out, "\n");
}

/* Time or memory of one line: by table against the baseline (each table
 * named), the cells, each peer; 0 if nothing measured. */
static int measure_lines(FILE *out, const struct line *l, int memory)
{
    int base = families[l->fam].baseline;
    summary_table t[MAXTABLES];
    int nt = tables_of(l->workloads, memory, l->col, base, t, MAXTABLES);
    if (!nt)
        return 0;
    summary_agg a = aggregate(t, nt);
    char head[128], item[160], tn[64];
    snprintf(head, sizeof head, "  %-7s vs %-9s", memory ? "memory" : "time",
             bench_col_name(base));
    wrap w = {out, 0, 22};
    snprintf(item, sizeof item, "%s%.2fx%s by table (%d table%s:", head, a.geo,
             mark(summary_agg_open(&a)), nt, nt == 1 ? "" : "s");
    wrap_put(&w, item);
    for (int i = 0; i < nt; i++) {
        snprintf(item, sizeof item, " %s %.2fx%s%s", summary_table_name(t[i].section, tn,
                 sizeof tn), t[i].geo, mark(t[i].open), i + 1 < nt ? "," : ")");
        wrap_put(&w, item);
    }
    fprintf(out, "\n");
    cells_line(out, l, memory, base, t, nt, a.geo);
    for (const int *p = summary_family_peers(l->fam); *p >= 0; p++) {
        summary_table pt[MAXTABLES];
        int np = tables_of(l->workloads, memory, l->col, *p, pt, MAXTABLES);
        if (!np)
            continue;
        summary_agg pa = aggregate(pt, np);
        fprintf(out, "          vs %-9s%.2fx%s by table (%d table%s: ahead in %d, behind in "
                     "%d, even in %d, not settled in %d)\n", bench_col_name(*p), pa.geo,
                mark(summary_agg_open(&pa)), np, np == 1 ? "" : "s", pa.ahead, pa.behind,
                pa.even, pa.open);
    }
    return 1;
}

void summary_print(FILE *out)
{
    fprintf(out, "\n== summary: memkit by family, time and memory; every ratio > 1 = memkit "
                 "better ==\n"
                 "  (first the geometric mean over the tables of each table's geometric mean, "
                 "the verdict's figure;\n"
                 "  then the same cells' median and geometric mean; ~ = the runs leave it open: "
                 "under half of the\n  cells, or tables, settled)\n");
    int any = 0;
    for (size_t k = 0; k < sizeof lines / sizeof lines[0]; k++) {
        const struct line *l = &lines[k];
        int base = families[l->fam].baseline;
        /* the workloads where the column has a figure, for the title */
        char ran[128] = "";
        for (int sec = 0; sec < report_nsections(); sec++) {
            const bench_section *s = report_get_section(sec);
            int has = 0;
            for (size_t i = 0; i < report_nrows() && !has; i++) {
                const bench_row *r = report_get_row(i);
                has = r->section == sec && r->fig[l->col].runs;
            }
            if (has && in_family(l->workloads, s) && !in_list(ran, s->workload) &&
                strlen(ran) + strlen(s->workload) + 2 < sizeof ran) {
                if (ran[0])
                    strcat(ran, " ");
                strcat(ran, s->workload);
            }
        }
        summary_table t[MAXTABLES];
        if (!tables_of(l->workloads, 0, l->col, base, t, MAXTABLES) &&
            !tables_of(l->workloads, 1, l->col, base, t, MAXTABLES))
            continue;
        fprintf(out, "%s, against %s (%s)\n", l->title, bench_col_name(base), ran);
        measure_lines(out, l, 0);
        measure_lines(out, l, 1);
        any = 1;
    }
    if (!any)
        fprintf(out, "  (no figure of memkit against a baseline in this run)\n");
    fflush(out);
}
