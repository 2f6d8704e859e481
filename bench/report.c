/* SPDX-License-Identifier: MIT */
/*
 * report.c - the results store, the tables on stdout, the CSV files and the
 * progress line on stderr (see report.h for the model: sections, rows,
 * figures, ratios > 1 = better).
 *
 * Tables list one row per cell: the median of each allocator, its ratio to
 * the section's baseline (> 1 = X better, whatever the quantity: every
 * table's header says so), marked '~' when the runs leave the order open
 * (report.h: unsettled), and the spread (the largest (max - min) / median
 * over the allocators of the row, in percent, '!' past 25%) so that a
 * reader can tell a real difference from noise.  Sections whose cells form a
 * chunk-size x live-memory grid (W1) also get the ratios as a matrix.
 * CSV files are in long form - one line per cell and allocator - so that new
 * allocators add lines, not columns, and old scripts keep working.
 */
#include "report.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "timing.h"

#define MAX_SECTIONS 64
#define SPREAD_LOUD 0.25 /* a spread past this is marked '!' in the tables */
#define MAX_ROWS 1024

static bench_section sections[MAX_SECTIONS];
static int nsections;
static bench_row rows[MAX_ROWS]; /* fixed: a row pointer stays valid */
static size_t nrows;
static const char *meta_mode = "", *meta_date = "";

void report_set_meta(const char *mode, const char *date)
{
    meta_mode = mode;
    meta_date = date;
}

int report_section(const char *workload, const char *name, const char *unit,
                   size_t items, const char *about)
{
    int sec = report_section_vs(workload, name, unit, BA_BASELINE, REPORT_LOWER_BETTER, 0, about);
    sections[sec].items = items;
    return sec;
}

int report_section_vs(const char *workload, const char *name, const char *unit,
                      int baseline, enum report_ratio_kind ratio, unsigned tags,
                      const char *about)
{
    if (nsections == MAX_SECTIONS) {
        fprintf(stderr, "memkit-bench: too many sections (raise MAX_SECTIONS)\n");
        exit(2);
    }
    bench_section *s = &sections[nsections];
    s->workload = workload;
    snprintf(s->name, sizeof s->name, "%s", name);
    snprintf(s->unit, sizeof s->unit, "%s", unit);
    snprintf(s->about, sizeof s->about, "%s", about ? about : "");
    s->items = 0;
    s->footer[0] = '\0';
    s->baseline = baseline;
    s->ratio = ratio;
    s->tags = tags;
    return nsections++;
}

bench_row *report_row(int sec, const char *cell, size_t chunk, size_t live,
                      uint64_t ops)
{
    if (nrows == MAX_ROWS) {
        fprintf(stderr, "memkit-bench: too many rows (raise MAX_ROWS)\n");
        exit(2);
    }
    bench_row *r = &rows[nrows++];
    memset(r, 0, sizeof *r);
    r->section = sec;
    snprintf(r->cell, sizeof r->cell, "%s", cell);
    r->chunk = chunk;
    r->live = live;
    r->ops = ops;
    return r;
}

void report_note(bench_row *row, const char *fmt, ...)
{
    size_t len = strlen(row->note);
    if (len && len + 2 < sizeof row->note) {
        memcpy(row->note + len, "; ", 3);
        len += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(row->note + len, sizeof row->note - len, fmt, ap);
    va_end(ap);
}

void report_footer(int sec, const char *fmt, ...)
{
    bench_section *s = &sections[sec];
    size_t len = strlen(s->footer);
    if (len + 3 >= sizeof s->footer)
        return;
    memcpy(s->footer + len, "  ", 3);
    len += 2;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->footer + len, sizeof s->footer - len - 1, fmt, ap);
    va_end(ap);
    len = strlen(s->footer);
    s->footer[len] = '\n';
    s->footer[len + 1] = '\0';
}

void report_set(bench_row *row, int col, double *samples, int n)
{
    bench_fig *f = &row->fig[col];
    bench_minmax(samples, n, &f->min, &f->max);
    f->median = bench_median(samples, n);
    f->runs = n;
}

double report_ratio_vs(const bench_row *row, int base, int col)
{
    const bench_fig *b = &row->fig[base], *x = &row->fig[col];
    if (!b->runs || !x->runs || x->median <= 0 || b->median <= 0)
        return 0;
    /* the one direction: > 1 means X is better (faster, more throughput,
     * less memory) than @base */
    return sections[row->section].ratio == REPORT_HIGHER_BETTER ? x->median / b->median
                                                                    : b->median / x->median;
}

int report_ratio_range(const bench_row *row, int base, int col, double *lo, double *hi)
{
    const bench_fig *b = &row->fig[base], *x = &row->fig[col];
    if (!b->runs || !x->runs || x->min <= 0 || b->min <= 0)
        return -1;
    if (sections[row->section].ratio == REPORT_HIGHER_BETTER) {
        *lo = x->min / b->max;
        *hi = x->max / b->min;
    } else {
        *lo = b->min / x->max;
        *hi = b->max / x->min;
    }
    return 0;
}

int report_unsettled(const bench_row *row, int base, int col)
{
    double lo, hi;
    return report_ratio_range(row, base, col, &lo, &hi) == 0 && lo < 1.0 && hi > 1.0;
}

double report_ratio(const bench_row *row, int col)
{
    return report_ratio_vs(row, sections[row->section].baseline, col);
}

const char *report_ratio_text(int sec, int col, char *buf, size_t len)
{
    const char *base = bench_col_name(sections[sec].baseline), *x = bench_col_name(col);
    if (sections[sec].ratio == REPORT_HIGHER_BETTER)
        snprintf(buf, len, "%s/%s", x, base);
    else
        snprintf(buf, len, "%s/%s", base, x);
    return buf;
}

size_t report_nrows(void) { return nrows; }
const bench_row *report_get_row(size_t i) { return &rows[i]; }
int report_nsections(void) { return nsections; }
const bench_section *report_get_section(int i) { return &sections[i]; }

const char *report_size(size_t bytes, char *buf, size_t len)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (u < 4 && bytes >= 1024 && bytes % 1024 == 0) {
        bytes /= 1024;
        u++;
    }
    snprintf(buf, len, "%zu%s", bytes, unit[u]);
    return buf;
}

/* ---- tables --------------------------------------------------------------- */

static void put_value(FILE *out, double v, int width)
{
    fprintf(out, v < 100 ? " %*.2f" : " %*.1f", width - 1, v);
}

/* Which allocators have a figure in section @sec; returns how many. */
static int present(int sec, int *ids)
{
    int n = 0;
    for (int a = 0; a < BENCH_NCOLS; a++) {
        for (size_t i = 0; i < nrows; i++) {
            if (rows[i].section == sec && rows[i].fig[a].runs) {
                ids[n++] = a;
                break;
            }
        }
    }
    return n;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* Distinct non-zero values of a row field (chunk or live) in section @sec,
 * sorted; returns the count, or -1 if some row lacks the field. */
static int distinct(int sec, int live, size_t *out, int max)
{
    int n = 0;
    for (size_t i = 0; i < nrows; i++) {
        if (rows[i].section != sec)
            continue;
        size_t v = live ? rows[i].live : rows[i].chunk;
        if (v == 0)
            return -1;
        int seen = 0;
        for (int k = 0; k < n; k++)
            seen |= out[k] == v;
        if (!seen && n < max)
            out[n++] = v;
    }
    qsort(out, (size_t)n, sizeof *out, cmp_size);
    return n;
}

static const bench_row *find_row(int sec, size_t chunk, size_t live)
{
    for (size_t i = 0; i < nrows; i++)
        if (rows[i].section == sec && rows[i].chunk == chunk && rows[i].live == live)
            return &rows[i];
    return NULL;
}

/* The chunk x live matrix of ratios baseline / @alloc. */
static void print_matrix(FILE *out, int sec, int alloc)
{
    size_t chunks[32], lives[32];
    int nc = distinct(sec, 0, chunks, 32), nl = distinct(sec, 1, lives, 32);
    if (nc < 2 || nl < 2)
        return;
    char b[32], rt[64];
    fprintf(out, "\n  ratio %s by chunk size (rows) and live memory (columns):\n",
            report_ratio_text(sec, alloc, rt, sizeof rt));
    fprintf(out, "  %-8s", "");
    for (int l = 0; l < nl; l++)
        fprintf(out, " %8s ", report_size(lives[l], b, sizeof b));
    fprintf(out, "\n");
    for (int c = 0; c < nc; c++) {
        fprintf(out, "  %-8s", report_size(chunks[c], b, sizeof b));
        for (int l = 0; l < nl; l++) {
            const bench_row *r = find_row(sec, chunks[c], lives[l]);
            double x = r ? report_ratio(r, alloc) : 0;
            if (x > 0)
                fprintf(out, " %7.2fx%c", x,
                        report_unsettled(r, sections[sec].baseline, alloc) ? '~' : ' ');
            else
                fprintf(out, " %8s ", "-");
        }
        fprintf(out, "\n");
    }
}

/* @text, word-wrapped to lines of at most @width characters after a
 * two-space indent. */
static void put_wrapped(FILE *out, const char *text, int width)
{
    while (*text) {
        int n = (int)strlen(text);
        if (n > width) {
            n = width;
            while (n > 0 && text[n] != ' ')
                n--;
            if (n == 0)
                n = width;
        }
        fprintf(out, "  %.*s\n", n, text);
        text += n;
        while (*text == ' ')
            text++;
    }
}

/* Is section @sec a chunk-size x live-memory grid (W1)? */
static int is_grid(int sec)
{
    size_t v[32];
    return distinct(sec, 0, v, 32) >= 2 && distinct(sec, 1, v, 32) >= 2;
}

static int col_width(const char *name, int min)
{
    int n = (int)strlen(name);
    return n > min ? n : min;
}

/* Grids (W1): one line per cell with every allocator's median and the
 * spread; with one allocator besides the baseline a ratio column too, with
 * more the ratios follow as one chunk x live matrix per allocator. */
static void print_flat(FILE *out, int sec, const int *ids, int n, const int *others,
                       int nothers)
{
    fprintf(out, "  %-16s", "cell");
    for (int k = 0; k < n; k++)
        fprintf(out, " %*s", col_width(bench_col_name(ids[k]), 8), bench_col_name(ids[k]));
    if (nothers == 1)
        fprintf(out, " %8s ", "ratio");
    fprintf(out, " %6s\n", "spread");

    for (size_t i = 0; i < nrows; i++) {
        const bench_row *r = &rows[i];
        if (r->section != sec)
            continue;
        fprintf(out, "  %-16s", r->cell);
        int any = 0;
        double spread = 0;
        for (int k = 0; k < n; k++) {
            const bench_fig *f = &r->fig[ids[k]];
            int w = col_width(bench_col_name(ids[k]), 8);
            if (!f->runs) {
                fprintf(out, " %*s", w, "-");
                continue;
            }
            any = 1;
            put_value(out, f->median, w + 1);
            if (f->median > 0 && (f->max - f->min) / f->median > spread)
                spread = (f->max - f->min) / f->median;
        }
        if (nothers == 1) {
            double x = report_ratio(r, others[0]);
            if (x > 0)
                fprintf(out, " %7.2fx%c", x,
                        report_unsettled(r, sections[sec].baseline, others[0]) ? '~' : ' ');
            else
                fprintf(out, " %8s ", "-");
        }
        if (any)
            fprintf(out, " %5.0f%%%s", spread * 100, spread > SPREAD_LOUD ? "!" : "");
        if (r->note[0])
            fprintf(out, "  %s", r->note);
        fprintf(out, "\n");
    }
    for (int k = 0; k < nothers; k++)
        print_matrix(out, sec, others[k]);
}

/* Other sections (W2, W5, RSS: a few cells): one line per allocator, one
 * column per cell holding the median and the ratio baseline / allocator,
 * then the spread (the largest (max-min)/median of the line); notes after
 * the table. */
static void print_transposed(FILE *out, int sec, const int *ids, int n)
{
    const bench_row *cells[16];
    int nc = 0;
    for (size_t i = 0; i < nrows && nc < 16; i++)
        if (rows[i].section == sec)
            cells[nc++] = &rows[i];
    int width[16], namew = 11;
    for (int k = 0; k < n; k++)
        namew = col_width(bench_col_name(ids[k]), namew);
    fprintf(out, "  %-*s", namew, "");
    for (int c = 0; c < nc; c++) {
        width[c] = col_width(cells[c]->cell, 15);
        fprintf(out, "  %*s", width[c], cells[c]->cell);
    }
    fprintf(out, " %6s\n", "spread");
    for (int k = 0; k < n; k++) {
        int a = ids[k];
        fprintf(out, "  %-*s", namew, bench_col_name(a));
        double spread = 0;
        for (int c = 0; c < nc; c++) {
            const bench_fig *f = &cells[c]->fig[a];
            char v[32] = "-", x[16] = "";
            if (f->runs) {
                snprintf(v, sizeof v, f->median < 100 ? "%.2f" : "%.1f", f->median);
                double ratio = report_ratio(cells[c], a);
                if (a != sections[sec].baseline && ratio > 0)
                    snprintf(x, sizeof x, "%.2fx%s", ratio,
                             report_unsettled(cells[c], sections[sec].baseline, a) ? "~" : " ");
                if (f->median > 0 && (f->max - f->min) / f->median > spread)
                    spread = (f->max - f->min) / f->median;
            }
            fprintf(out, "  %*s %8s", width[c] - 9, v, x);
        }
        fprintf(out, " %5.0f%%%s\n", spread * 100, spread > SPREAD_LOUD ? "!" : "");
    }
    for (int c = 0; c < nc; c++)
        if (cells[c]->note[0])
            fprintf(out, "  note, %s: %s\n", cells[c]->cell, cells[c]->note);
}

static void print_section(FILE *out, int sec)
{
    const bench_section *s = &sections[sec];
    int ids[BENCH_NCOLS], others[BENCH_NCOLS];
    int n = present(sec, ids), nothers = 0;
    for (int k = 0; k < n; k++)
        if (ids[k] != s->baseline)
            others[nothers++] = ids[k];

    fprintf(out, "\n== %s %s: %s ==\n", s->workload, s->name, s->unit);
    put_wrapped(out, s->about, 86);
    const char *base = bench_col_name(s->baseline);
    if (s->ratio == REPORT_HIGHER_BETTER)
        fprintf(out, "  (ratio X / %s: > 1 = X better than %s, more per second)\n", base, base);
    else
        fprintf(out, "  (ratio %s / X: > 1 = X better than %s, %s)\n", base, base,
                strchr(s->unit, 'B') ? "less memory" : "faster");
    if (is_grid(sec)) {
        print_flat(out, sec, ids, n, others, nothers);
    } else {
        fprintf(out, "  (each cell: the median, then the ratio; ~ = the runs overlap)\n");
        print_transposed(out, sec, ids, n);
    }
    if (s->footer[0])
        fprintf(out, "%s", s->footer);
}

void report_print(FILE *out, int from)
{
    for (int s = from; s < nsections; s++)
        print_section(out, s);
    fflush(out);
}

/* ---- CSV -------------------------------------------------------------------- */

static int mkdir_p(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(path, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

FILE *report_csv_open(const char *dir, const char *name)
{
    if (mkdir_p(dir) != 0) {
        fprintf(stderr, "memkit-bench: cannot create %s: %s\n", dir, strerror(errno));
        return NULL;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        fprintf(stderr, "memkit-bench: cannot write %s: %s\n", path, strerror(errno));
    return f;
}

/* A text field, quoted (RFC 4180). */
static void csv_text(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static int write_workload(const char *dir, const char *workload)
{
    char name[64];
    size_t k = 0;
    for (const char *p = workload; *p && k < sizeof name - 5; p++)
        name[k++] = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
    memcpy(name + k, ".csv", 5);
    FILE *f = report_csv_open(dir, name);
    if (!f)
        return -1;
    int base = BA_BASELINE; /* the same in every section of a workload */
    for (int sec = 0; sec < nsections; sec++)
        if (strcmp(sections[sec].workload, workload) == 0)
            base = sections[sec].baseline;
    fprintf(f, "mode,date,workload,section,cell,chunk_bytes,live_bytes,ops_per_run,"
               "allocator,unit,median,min,max,runs,ratio_vs_%s,note,ratio_is\n",
            bench_col_name(base));
    for (size_t i = 0; i < nrows; i++) {
        const bench_row *r = &rows[i];
        const bench_section *s = &sections[r->section];
        if (strcmp(s->workload, workload) != 0)
            continue;
        for (int a = 0; a < BENCH_NCOLS; a++) {
            const bench_fig *fg = &r->fig[a];
            if (!fg->runs && !(a == s->baseline && r->note[0]))
                continue; /* a cell with no figure at all still gets a line */
            fprintf(f, "%s,", meta_mode);
            csv_text(f, meta_date);
            fprintf(f, ",%s,%s,", s->workload, s->name);
            csv_text(f, r->cell);
            fprintf(f, ",%zu,%zu,%llu,%s,%s,", r->chunk, r->live,
                    (unsigned long long)r->ops, bench_col_name(a), s->unit);
            if (fg->runs)
                fprintf(f, "%.4f,%.4f,%.4f,%d,", fg->median, fg->min, fg->max, fg->runs);
            else
                fprintf(f, ",,,0,");
            double x = report_ratio(r, a);
            if (x > 0)
                fprintf(f, "%.4f,", x);
            else
                fprintf(f, ",");
            csv_text(f, r->note);
            char rt[64];
            fprintf(f, ",%s\n", report_ratio_text(r->section, a, rt, sizeof rt));
        }
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        fprintf(stderr, "memkit-bench: error writing %s/%s\n", dir, name);
        return -1;
    }
    return 0;
}

int report_write_csv(const char *dir)
{
    int rc = 0;
    for (int s = 0; s < nsections; s++) {
        int first = 1; /* one file per workload, written once */
        for (int t = 0; t < s; t++)
            if (strcmp(sections[t].workload, sections[s].workload) == 0)
                first = 0;
        if (first && write_workload(dir, sections[s].workload) != 0)
            rc = -1;
    }
    return rc;
}

/* ---- progress --------------------------------------------------------------- */

static int progress_open;

void report_progress(const char *fmt, ...)
{
    static uint64_t start;
    static int tty = -1;
    if (tty < 0) {
        tty = isatty(STDERR_FILENO);
        start = bench_now_ns();
    }
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    double t = (double)(bench_now_ns() - start) / 1e9;
    if (tty) {
        fprintf(stderr, "\r[%5.0fs] %s\033[K", t, line);
        progress_open = 1;
    } else {
        fprintf(stderr, "[%5.0fs] %s\n", t, line);
    }
    fflush(stderr);
}

void report_progress_end(void)
{
    if (progress_open) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
        progress_open = 0;
    }
}
