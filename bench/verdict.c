/*
 * verdict.c - the few lines a bench report opens with: should I adopt
 * this, and where does it lose?
 *
 * One row per family and comparison (memkit against the system allocator,
 * then against each installed peer), time and memory side by side, each
 * as one figure: the geometric mean over the tables of each table's
 * geometric mean (summary.h), in words too ("2.65x faster", "1.33x less
 * memory", "even" within 5%), with how many tables memkit is ahead in.
 * Then the tables where memkit is behind by more than 5% and beyond the
 * runs' spread, named with what the workload code stands for (the legend
 * comes after the verdict, so the verdict explains its own codes); then
 * how many cells the runs left open, and a busy machine's warning.
 *
 * What it leaves out, on purpose: memkit's own engineering targets (they
 * are aspirations, not results: --targets prints them at the end), and
 * the cells (the summary and the tables have them).  Trade-off: a family
 * in one figure hides the spread between its tables; the [ahead/tables]
 * count and the "loses" lines are there so that a good average cannot
 * hide a bad table.
 */
#include "verdict.h"

#include <math.h>
#include <string.h>

#include "dropin.h"
#include "legend.h"
#include "report.h"
#include "summary.h"

enum { MAXTABLES = 32, MAXLOSSES = 64 };

#define EVEN SUMMARY_EVEN /* within 5%: "even" */
#define LOSS (1 / SUMMARY_EVEN) /* behind by more than 5%: named */

/* "2.65x faster", "0.50x more memory", "1.02x even", "1.18x~ not
 * settled" (the runs leave it open) into @buf. */
static const char *words(const summary_agg *a, int memory, char *buf, size_t len)
{
    int open = summary_agg_open(a);
    const char *w = open ? "not settled"
                    : a->geo >= EVEN ? (memory ? "less memory" : "faster")
                    : a->geo <= 1 / EVEN ? (memory ? "more memory" : "slower")
                                         : "even";
    snprintf(buf, len, "%.2fx%s %s", a->geo, open ? "~" : "", w);
    return buf;
}

/* One figure of the verdict's table into @buf (at @len): "2.65x faster
 * [4/5]", or "-" when not measured. */
static void cell(char *buf, size_t len, int fam, int memory, int col, int base)
{
    summary_agg a = summary_aggregate(fam, memory, col, base);
    char w[64], n[16];
    if (!a.tables) {
        snprintf(buf, len, "%-18s %-7s", "-", "");
        return;
    }
    snprintf(n, sizeof n, "[%d/%d]", a.ahead, a.tables);
    snprintf(buf, len, "%-18s %-7s", words(&a, memory, w, sizeof w), n);
}

typedef struct loss {
    int fam, memory, vs, section;
    double geo;
} loss;

static int losses_of(int fam, int memory, int col, int vs, loss *out, int n)
{
    summary_table t[MAXTABLES];
    int nt = summary_tables(fam, memory, col, vs, t, MAXTABLES);
    for (int i = 0; i < nt && n < MAXLOSSES; i++)
        if (t[i].geo < LOSS && !t[i].open)
            out[n++] = (loss){fam, memory, vs, t[i].section, t[i].geo};
    return n;
}

/* "W5 (10,000 small contexts)", "W6 larson (threads)" into @buf. */
static const char *table_words(int section, char *buf, size_t len)
{
    char tn[64];
    const bench_section *s = report_get_section(section);
    snprintf(buf, len, "%s (%s)", summary_table_name(section, tn, sizeof tn),
             legend_label(s->workload));
    return buf;
}

/* One "to X:" line of losses, wrapped; the losses against column @vs. */
static void loss_line(FILE *out, const loss *l, int n, int vs)
{
    int col = 0, first = 1;
    for (int i = 0; i < n; i++) {
        if (l[i].vs != vs)
            continue;
        char item[200], tw[128];
        snprintf(item, sizeof item, "%s%s %s in %s %.2fx", first ? "" : "; ",
                 summary_family_get(l[i].fam)->name, l[i].memory ? "memory" : "time",
                 table_words(l[i].section, tw, sizeof tw), l[i].geo);
        if (first)
            col = fprintf(out, "    to %s: ", bench_col_name(vs));
        else if (col + (int)strlen(item) > 100) {
            fprintf(out, ";\n      ");
            col = 6;
            memmove(item, item + 2, strlen(item + 2) + 1);
        }
        col += fprintf(out, "%s", item);
        first = 0;
    }
    if (!first)
        fprintf(out, "\n");
}

void verdict_print(FILE *out, const char *warning)
{
    fprintf(out, "\n== verdict: memkit against the system allocator and each installed peer ==\n"
                 "  (> 1 = memkit better: 2.00x = half the time, or half the memory; each figure "
                 "is the geometric\n"
                 "  mean over the tables of each table's own; [a/n] = ahead in a of n tables; "
                 "~ = most tables not settled)\n");
    fprintf(out, "  %-9s %-12s  %-26s  %s\n", "", "", "time", "memory");
    int rows = 0;
    loss l[MAXLOSSES];
    int nl = 0;
    for (int fam = 0; fam < FAM_COUNT; fam++) {
        const summary_family *f = summary_family_get(fam);
        summary_agg t = summary_aggregate(fam, 0, f->time_col, f->baseline),
                    m = summary_aggregate(fam, 1, f->mem_col, f->baseline);
        if (!t.tables && !m.tables)
            continue;
        int cmp[6] = {f->baseline}, nc = 1;
        for (const int *p = summary_family_peers(fam); *p >= 0 && nc < 6; p++)
            cmp[nc++] = *p;
        for (int c = 0; c < nc; c++) {
            summary_agg pt = summary_aggregate(fam, 0, f->time_col, cmp[c]),
                        pm = summary_aggregate(fam, 1, f->mem_col, cmp[c]);
            if (!pt.tables && !pm.tables)
                continue;
            char vs[32], tc[96], mc[96], line[240];
            snprintf(vs, sizeof vs, "vs %s", bench_col_name(cmp[c]));
            cell(tc, sizeof tc, fam, 0, f->time_col, cmp[c]);
            cell(mc, sizeof mc, fam, 1, f->mem_col, cmp[c]);
            int n = snprintf(line, sizeof line, "  %-9s %-12s  %s  %s", c ? "" : f->name, vs, tc,
                             mc);
            while (n > 0 && line[n - 1] == ' ')
                line[--n] = '\0';
            fprintf(out, "%s\n", line);
            nl = losses_of(fam, 0, f->time_col, cmp[c], l, nl);
            nl = losses_of(fam, 1, f->mem_col, cmp[c], l, nl);
        }
        rows++;
    }
    if (!rows) {
        fprintf(out, "  (no figure of memkit against a baseline in this run)\n");
        return;
    }
    fprintf(out, "  (");
    int first = 1;
    for (int fam = 0; fam < FAM_COUNT; fam++) {
        const summary_family *f = summary_family_get(fam);
        if (!summary_aggregate(fam, 0, f->time_col, f->baseline).tables &&
            !summary_aggregate(fam, 1, f->mem_col, f->baseline).tables)
            continue;
        fprintf(out, "%s%s: %s", first ? "" : "; ", f->name, f->what);
        first = 0;
    }
    fprintf(out, ")\n");

    if (!nl) {
        fprintf(out, "  where memkit loses: nowhere by more than 5%% beyond the runs' spread, "
                     "table by table\n");
    } else {
        fprintf(out, "  where memkit loses (tables behind by more than 5%%, beyond the runs' "
                     "spread):\n");
        int seen[BENCH_NCOLS] = {0};
        for (int i = 0; i < nl; i++)
            if (!seen[l[i].vs]++)
                loss_line(out, l, nl, l[i].vs);
    }
    /* the cells the runs left open, over every figure the verdict used */
    int cells = 0, open = 0;
    for (int fam = 0; fam < FAM_COUNT; fam++) {
        const summary_family *f = summary_family_get(fam);
        summary_agg t = summary_aggregate(fam, 0, f->time_col, f->baseline),
                    m = summary_aggregate(fam, 1, f->mem_col, f->baseline);
        cells += t.cells + m.cells;
        open += t.unsettled_cells + m.unsettled_cells;
    }
    int most_runs = 0;
    for (size_t i = 0; i < report_nrows(); i++)
        for (int c = 0; c < BENCH_NCOLS; c++)
            if (report_get_row(i)->fig[c].runs > most_runs)
                most_runs = report_get_row(i)->fig[c].runs;
    if (cells && most_runs < 2)
        fprintf(out, "  noise: one run per figure, so no spread to judge the noise by: read "
                     "differences under 10%% as even\n");
    else if (cells)
        fprintf(out, "  noise: %d of memkit's %d cells against the system allocator are within "
                     "their runs' spread\n  (~ in the tables: read them as even; --runs 7 on an "
                     "idle machine settles more)\n", open, cells);
    if (warning)
        fprintf(out, "  WARNING: %s\n", warning);
}
