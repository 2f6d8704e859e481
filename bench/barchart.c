/*
 * barchart.c - the bench's charts, as SVG text written here: no library,
 * no script, nothing to install (the files open in any browser, and the
 * README shows docs/bench-chart.svg, a copy of bench-chart.svg).
 *
 * One row per family (contexts, pools, drop-in; summary.h), two panels
 * per row: time and memory.  In a panel, one group of bars per table (a
 * measured quantity of one workload: "W6 larson"), one bar per column
 * (memkit's, then each installed peer's), each bar the table's figure
 * against the system allocator - the geometric mean of its cells' ratios,
 * the statistic of the verdict - drawn from the 1x line up (better than
 * the system allocator) or down (worse), on a log scale so that 2x and
 * 0.5x are the same length.  A whisker shows the same mean taken over
 * the runs' least and most favourable ratios (every cell's worst luck
 * at once: a wide bound); when under half of the table's cells are
 * settled by their runs (summary.h) the bar is paler and memkit's value
 * label gets a '~'.  Bars past the scale (16x, 1/16x) are cut at its
 * end and notched, their value in memkit's label or the peer's hover
 * title.  This is mimalloc-bench's chart turned the way the report
 * reads (> 1 = better) and with the run-to-run spread made visible.
 *
 * Each bar carries its figures as attributes (data-col, data-measure,
 * data-table, data-ratio) and a hover title, so a test can read the chart back and a
 * reader can check a bar against the tables.  Trade-offs: fixed sizes (a
 * 1100-pixel-wide chart that browsers and GitHub scale) and group labels
 * cut to two short lines; a table of many cells becomes one bar, so the
 * tables and the summary stay the reference.
 */
#include "barchart.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "dropin.h"
#include "legend.h"
#include "report.h"
#include "summary.h"

enum {
    W = 1100,
    MARGIN = 16,
    HEAD = 70,   /* title, subtitle, how to read */
    ROW_H = 318, /* one family */
    PLOT_TOP = 58, /* from the row's top: family title and legend above */
    PLOT_H = 186,
    AXIS_W = 46, /* the y axis's labels */
    MAXTABLES = 24,
    MAXBARS = 8,
};

static void xml(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            if ((unsigned char)*s >= 0x20)
                fputc(*s, f);
        }
    }
}

/* A stable colour per column: memkit's blues, each peer its own. */
static const char *colour(int col)
{
    static const struct {
        const char *name, *rgb;
    } c[] = {
        {"mk-general", "#1f5fbf"}, {"memkit", "#1f5fbf"},   {"mk-pool", "#1f5fbf"},
        {"mk-poolts", "#7ba7e0"},  {"mk-slab", "#0b3a7e"},  {"talloc", "#e08a1e"},
        {"apr", "#6f9a2e"},        {"mimalloc", "#a8458a"}, {"jemalloc", "#c0392b"},
        {"tcmalloc", "#8a8a8a"},
    };
    const char *n = bench_col_name(col);
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        if (strcmp(c[i].name, n) == 0)
            return c[i].rgb;
    return "#555555";
}

static int is_memkit(int fam, int col)
{
    for (const int *c = summary_family_get(fam)->chart_cols; *c >= 0; c++)
        if (*c == col)
            return 1;
    return 0;
}

/* The columns of family @fam's chart: memkit's, then the peers. */
static int columns(int fam, int *cols)
{
    int n = 0;
    for (const int *c = summary_family_get(fam)->chart_cols; *c >= 0 && n < MAXBARS; c++)
        cols[n++] = *c;
    for (const int *p = summary_family_peers(fam); *p >= 0 && n < MAXBARS; p++)
        cols[n++] = *p;
    return n;
}

/* A panel's data: its tables (the union over the columns, report order)
 * and each column's figure in each. */
typedef struct panel {
    int ntables, sections[MAXTABLES];
    int ncols, cols[MAXBARS];
    summary_table fig[MAXTABLES][MAXBARS]; /* .cells 0: no figure */
} panel;

static void panel_fill(panel *p, int fam, int memory)
{
    memset(p, 0, sizeof *p);
    p->ncols = columns(fam, p->cols);
    int base = summary_family_get(fam)->baseline;
    for (int c = 0; c < p->ncols; c++) {
        summary_table t[MAXTABLES];
        int nt = summary_tables(fam, memory, p->cols[c], base, t, MAXTABLES);
        for (int i = 0; i < nt; i++) {
            int k = 0;
            while (k < p->ntables && p->sections[k] != t[i].section)
                k++;
            if (k == p->ntables) {
                if (p->ntables == MAXTABLES)
                    continue;
                /* keep report order: insert before the first later section */
                int at = p->ntables;
                while (at > 0 && p->sections[at - 1] > t[i].section)
                    at--;
                memmove(&p->sections[at + 1], &p->sections[at],
                        (size_t)(p->ntables - at) * sizeof p->sections[0]);
                memmove(&p->fig[at + 1], &p->fig[at], (size_t)(p->ntables - at) * sizeof p->fig[0]);
                memset(&p->fig[at], 0, sizeof p->fig[0]);
                p->sections[at] = t[i].section;
                p->ntables++;
                k = at;
            }
            p->fig[k][c] = t[i];
        }
    }
}

/* The short name of a table for its group: "W6 larson" (a memory table's
 * "-rss" dropped: the panel says memory). */
static void group_name(int section, char *buf, size_t len)
{
    summary_table_name(section, buf, len);
    size_t n = strlen(buf);
    static const char *const tails[] = {" peak-rss", "-rss", " rss"};
    for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
        size_t t = strlen(tails[i]);
        if (n > t && strcmp(buf + n - t, tails[i]) == 0) {
            buf[n - t] = '\0';
            break;
        }
    }
}

/* The scale: powers of two from 2^lo to 2^hi around 1. */
typedef struct scale {
    int lo, hi;
    double top, h;
} scale;

static double y_of(const scale *s, double v)
{
    double l = log2(v);
    if (l < s->lo)
        l = s->lo;
    if (l > s->hi)
        l = s->hi;
    return s->top + (s->hi - l) / (s->hi - s->lo) * s->h;
}

static scale scale_of(const panel *p, double top)
{
    double mn = 1, mx = 1;
    for (int t = 0; t < p->ntables; t++)
        for (int c = 0; c < p->ncols; c++)
            if (p->fig[t][c].cells) {
                mn = fmin(mn, p->fig[t][c].geo);
                mx = fmax(mx, p->fig[t][c].geo);
            }
    scale s = {(int)floor(log2(mn)), (int)ceil(log2(mx)), top, PLOT_H};
    if (s.lo > -1)
        s.lo = -1;
    if (s.hi < 1)
        s.hi = 1;
    if (s.lo < -4) /* 1/16x: past it, bars are cut and labelled */
        s.lo = -4;
    if (s.hi > 4) /* 16x */
        s.hi = 4;
    return s;
}

static void tick_label(char *buf, size_t len, int e)
{
    if (e >= 0)
        snprintf(buf, len, "%dx", 1 << e);
    else
        snprintf(buf, len, "1/%dx", 1 << -e);
}

/* @label in at most two lines of @max characters, centred at @x. */
static void two_lines(FILE *f, const char *label, double x, double y, int max, const char *style)
{
    char a[64], b[64];
    snprintf(a, sizeof a, "%s", label);
    b[0] = '\0';
    if ((int)strlen(a) > max) {
        int cut = max;
        while (cut > 0 && a[cut] != ' ')
            cut--;
        if (cut == 0)
            cut = max;
        snprintf(b, sizeof b, "%s", a + cut + (a[cut] == ' '));
        a[cut] = '\0';
        if ((int)strlen(b) > max) {
            b[max > 2 ? max - 2 : 0] = '\0';
            strcat(b, "..");
        }
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" %s>", x, y, style);
    xml(f, a);
    fprintf(f, "</text>\n");
    if (b[0]) {
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" %s>", x, y + 11, style);
        xml(f, b);
        fprintf(f, "</text>\n");
    }
}

static void draw_panel(FILE *f, int fam, int memory, double x0, double top, double width)
{
    panel p;
    panel_fill(&p, fam, memory);
    const char *base = bench_col_name(summary_family_get(fam)->baseline);
    double px = x0 + AXIS_W, pw = width - AXIS_W - 8;
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" font-weight=\"bold\">%s</text>\n",
            px, top - 8, memory ? "memory (resident)" : "time");
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" fill=\"#555555\" "
               "text-anchor=\"end\">%s / X: higher = X better</text>\n",
            px + pw, top - 8, base);
    if (!p.ntables) {
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"#f6f6f6\"/>\n"
                   "<text class=\"empty\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
                   "fill=\"#777777\">not measured in this run</text>\n",
                px, top, pw, PLOT_H, px + pw / 2, top + PLOT_H / 2.0);
        return;
    }
    scale s = scale_of(&p, top);
    /* the grid: one line per power of two, the 1x line (the baseline) dark */
    for (int e = s.lo; e <= s.hi; e++) {
        double y = y_of(&s, ldexp(1, e));
        char lab[16];
        tick_label(lab, sizeof lab, e);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                   "stroke-width=\"%s\"/>\n"
                   "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\" "
                   "fill=\"#444444\"%s>%s</text>\n",
                px, y, px + pw, y, e ? "#e3e3e3" : "#333333", e ? "1" : "1.5", px - 5, y + 3.5,
                e ? "" : " font-weight=\"bold\"", lab);
    }
    double gw = pw / p.ntables;
    for (int t = 0; t < p.ntables; t++) {
        int nb = 0;
        for (int c = 0; c < p.ncols; c++)
            nb += p.fig[t][c].cells > 0;
        double bw = (gw - 10) / (nb ? nb : 1);
        if (bw > 24)
            bw = 24;
        double gx = px + t * gw + (gw - bw * nb) / 2;
        char gname[64];
        group_name(p.sections[t], gname, sizeof gname);
        int k = 0;
        for (int c = 0; c < p.ncols; c++) {
            const summary_table *fig = &p.fig[t][c];
            if (!fig->cells)
                continue;
            double bx = gx + k++ * bw, y1 = y_of(&s, 1), yv = y_of(&s, fig->geo);
            int cut = log2(fig->geo) > s.hi || log2(fig->geo) < s.lo;
            int open = fig->open;
            fprintf(f, "<g><title>%s, ", bench_col_name(p.cols[c]));
            xml(f, gname);
            fprintf(f, ": %.2fx %s's %s (runs %.2f..%.2fx; %d cell%s%s)</title>", fig->geo, base,
                    memory ? "memory" : "speed", fig->lo, fig->hi, fig->cells,
                    fig->cells == 1 ? "" : "s",
                    open ? "; within the runs' spread" : "");
            fprintf(f, "<rect class=\"bar\" data-col=\"%s\" data-measure=\"%s\" data-table=\"",
                    bench_col_name(p.cols[c]), memory ? "memory" : "time");
            xml(f, gname);
            fprintf(f, "\" data-ratio=\"%.4f\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                       "height=\"%.1f\" fill=\"%s\"%s/>",
                    fig->geo, bx + 1, fmin(y1, yv), bw - 2, fmax(fabs(yv - y1), 1.0),
                    colour(p.cols[c]), open ? " fill-opacity=\"0.55\"" : "");
            /* the runs' range */
            double cx = bx + bw / 2, ylo = y_of(&s, fig->lo), yhi = y_of(&s, fig->hi);
            fprintf(f, "<path d=\"M%.1f %.1fV%.1fM%.1f %.1fH%.1fM%.1f %.1fH%.1f\" stroke=\"#222222\" "
                       "stroke-width=\"0.8\" fill=\"none\"/>",
                    cx, ylo, yhi, cx - 2.5, ylo, cx + 2.5, cx - 2.5, yhi, cx + 2.5);
            if (cut) /* a bar past the scale: a white notch near its end */
                fprintf(f, "<path d=\"M%.1f %.1fl%.1f -4\" stroke=\"#ffffff\" stroke-width=\"2\"/>",
                        bx + 1, yv + (fig->geo >= 1 ? 8 : -6), bw - 2);
            if (is_memkit(fam, p.cols[c])) {
                char v[24];
                snprintf(v, sizeof v, fig->geo >= 10 ? "%.0fx%s" : fig->geo >= 0.095 ? "%.1fx%s"
                                                                      : "%.2fx%s",
                         fig->geo, open ? "~" : "");
                double ty = fig->geo >= 1 ? fmin(yv, yhi) - 3 : fmax(yv, ylo) + 10;
                ty = fmin(fmax(ty, top + 9), top + PLOT_H + 9); /* inside the plot's band */
                fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"9\" text-anchor=\"middle\"%s>"
                           "%s</text>", cx, ty, is_memkit(fam, p.cols[c]) ? " font-weight=\"bold\"" : "",
                        v);
            }
            fprintf(f, "</g>\n");
        }
        double lx = px + t * gw + gw / 2;
        int max = (int)(gw / 5.6);
        two_lines(f, gname, lx, top + PLOT_H + 14, max < 6 ? 6 : max, "font-size=\"10\"");
        const bench_section *sec = report_get_section(p.sections[t]);
        two_lines(f, legend_label(sec->workload), lx, top + PLOT_H + 26 + (strlen(gname) > (size_t)max ? 11 : 0),
                  max < 6 ? 6 : max, "font-size=\"9\" fill=\"#666666\"");
    }
}

/* The number of tables of family @fam's panel @memory. */
static int tables_in(int fam, int memory)
{
    panel p;
    panel_fill(&p, fam, memory);
    return p.ntables;
}

static void draw_row(FILE *f, int fam, double top)
{
    const summary_family *fm = summary_family_get(fam);
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"14\" font-weight=\"bold\">%s</text>\n"
               "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" fill=\"#444444\">",
            MARGIN, top + 16, fm->name, MARGIN + 8 + 8 * (int)strlen(fm->name), top + 16);
    xml(f, fm->what);
    fprintf(f, ", against %s</text>\n", bench_col_name(fm->baseline));
    /* the legend: one square per column */
    int cols[MAXBARS], n = columns(fam, cols);
    double lx = MARGIN;
    for (int c = 0; c < n; c++) {
        const char *name = bench_col_name(cols[c]);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"%s\"/>"
                   "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">%s</text>\n",
                lx, top + 25, colour(cols[c]), lx + 14, top + 34, name);
        lx += 14 + 7.0 * (double)strlen(name) + 16;
    }
    /* two panels, widths by their number of tables */
    int nt = tables_in(fam, 0), nm = tables_in(fam, 1);
    double inner = W - 2 * MARGIN - 20;
    double wt = inner * (nt + 1.0) / (nt + nm + 2.0);
    if (wt < 0.3 * inner)
        wt = 0.3 * inner;
    if (wt > 0.7 * inner)
        wt = 0.7 * inner;
    draw_panel(f, fam, 0, MARGIN, top + PLOT_TOP, wt);
    draw_panel(f, fam, 1, MARGIN + wt + 20, top + PLOT_TOP, inner - wt);
}

static void header(FILE *f, int height, const char *subtitle)
{
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"Helvetica, Arial, sans-serif\" "
               "font-size=\"11\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n"
               "<text x=\"%d\" y=\"24\" font-size=\"17\" font-weight=\"bold\">memkit against "
               "the system allocator and its peers</text>\n<text x=\"%d\" y=\"42\" "
               "font-size=\"11\" fill=\"#444444\">",
            W, height, W, height, MARGIN, MARGIN);
    xml(f, subtitle);
    fprintf(f, "</text>\n<text x=\"%d\" y=\"58\" font-size=\"11\" fill=\"#444444\">Each bar: "
               "one table, the geometric mean of its cells' ratios, log scale: above the dark 1x "
               "line = better than the system allocator. Whiskers: the runs' range; pale, ~: not "
               "settled by them; notched: past the scale.</text>\n",
            MARGIN);
}

static int has_data(int fam)
{
    return tables_in(fam, 0) + tables_in(fam, 1) > 0;
}

static int write_file(const char *dir, const char *name, const int *fams, int n,
                      const char *subtitle)
{
    FILE *f = report_csv_open(dir, name);
    if (!f)
        return -1;
    header(f, HEAD + n * ROW_H + 6, subtitle);
    for (int i = 0; i < n; i++)
        draw_row(f, fams[i], HEAD + i * ROW_H);
    fprintf(f, "</svg>\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        fprintf(stderr, "memkit-bench: error writing %s/%s: %s\n", dir, name, strerror(errno));
        return -1;
    }
    return 0;
}

int barchart_write(const char *dir, const char *subtitle)
{
    static const char *const files[FAM_COUNT] = {"chart-contexts.svg", "chart-pools.svg",
                                                 "chart-dropin.svg"};
    int fams[FAM_COUNT], n = 0, written = 0;
    for (int fam = 0; fam < FAM_COUNT; fam++)
        if (has_data(fam))
            fams[n++] = fam;
    if (!n)
        return 0;
    if (write_file(dir, "bench-chart.svg", fams, n, subtitle) != 0)
        return -1;
    written++;
    for (int i = 0; i < n; i++) {
        if (write_file(dir, files[fams[i]], &fams[i], 1, subtitle) != 0)
            return -1;
        written++;
    }
    return written;
}
