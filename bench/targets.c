/*
 * targets.c - the performance targets of the issues, as data, and their
 * verdicts from the figures of this run.
 *
 * A target names a workload (or, with workload NULL, every section with
 * the given tags: "every drop-in speed figure"), optionally a section and
 * a cell, the column judged, a range of live memory (cells outside it are
 * not judged) and a threshold on the section's ratio (report.h: baseline /
 * X for times, X / baseline for throughput and the drop-ins' RSS; > or >=
 * a threshold, or <= one), on the column's own value (<=), or on how it
 * compares with another column (the ratio with `vs` in the place of the
 * baseline: BEATS, > threshold, "faster than mimalloc"; VS_AT_LEAST,
 * >= threshold, "at most 5% slower than memkit:off").  The verdict is MET if every
 * judged cell passes, MISSED otherwise - and MISSED too if the column
 * failed in a cell the baseline ran (a crash is not a pass) -, "n/a" if no
 * cell was measured (--only, a peer not installed); the worst cell is printed either way -
 * or the `list` worst, for a target over many workloads - and for a miss
 * how many cells missed.  A missed target never changes the exit status:
 * the bench reports, tests assert.  Adding a target is one line.
 */
#include "targets.h"

#include <stdint.h>
#include <string.h>

#include "report.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)

enum check { RATIO_ABOVE, RATIO_AT_LEAST, RATIO_AT_MOST, VALUE_AT_MOST, BEATS, VS_AT_LEAST };

typedef struct target {
    const char *text;
    const char *workload, *section; /* workload NULL: by tags; section NULL: every section */
    const char *cell;               /* NULL: every cell; else only this one */
    int alloc;                      /* the column judged */
    size_t live_lo, live_hi; /* judged cells: live in [lo, hi] */
    enum check check;
    double threshold;
    unsigned tags; /* workload NULL: the sections with all these tags */
    int vs;        /* BEATS, VS_AT_LEAST: the column compared with */
    int list;      /* print this many worst cells (0: the worst one) */
} target;

#define MK BD_COL(BD_memkit)
#define ALL 0, SIZE_MAX

static const target targets[] = {
    /* issue 2: the GENERAL context */
    {"W2: mk-general >= 2.0x faster than malloc (every variant)",
     "W2", NULL, NULL, BA_mk_general, 0, SIZE_MAX, RATIO_AT_LEAST, .threshold = 2.0},
    {"W1 free-oldest: mk-general faster than malloc in every cell up to 64 MiB live",
     "W1", "free-oldest", NULL, BA_mk_general, 0, 64 * MiB, RATIO_ABOVE, .threshold = 1.0},
    {"W1 reset: mk-general >= 3x faster than malloc in every cell up to 256 KiB live",
     "W1", "reset", NULL, BA_mk_general, 0, 256 * KiB, RATIO_AT_LEAST, .threshold = 3.0},
    {"W1 reset: mk-general >= 1.5x faster than malloc in every cell above 256 KiB live",
     "W1", "reset", NULL, BA_mk_general, 256 * KiB + 1, SIZE_MAX, RATIO_AT_LEAST, .threshold = 1.5},
    {"RSS: 1,000,000 live 24-byte chunks <= 26 MB resident with mk-general",
     "RSS", NULL, "1,000,000 x 24B live", BA_mk_general, 0, SIZE_MAX, VALUE_AT_MOST,
     .threshold = 26.0},
    /* issue 3: the other kinds, typed pools, many contexts */
    {"W2: typed pool (mk-pool) >= 3x faster than glibc malloc/free (every variant)",
     "W2", NULL, NULL, BA_mk_pool, 0, SIZE_MAX, RATIO_AT_LEAST, .threshold = 3.0},
    {"W2: the same for the MK_POOL_THREADSAFE pool (mk-poolts), for reference",
     "W2", NULL, NULL, BA_mk_poolts, 0, SIZE_MAX, RATIO_AT_LEAST, .threshold = 3.0},
    {"W1 reset: mk-bump >= 5x faster than malloc in every cell up to 256 KiB live",
     "W1", "reset", NULL, BA_mk_bump, 0, 256 * KiB, RATIO_AT_LEAST, .threshold = 5.0},
    {"W1 free-oldest: mk-gen (GENERATION) faster than malloc in every cell up to 64 MiB",
     "W1", "free-oldest", NULL, BA_mk_gen, 0, 64 * MiB, RATIO_ABOVE, .threshold = 1.0},
    {"W5: 10,000 contexts x ten 64-byte chunks <= 16 MiB total RSS with mk-general",
     "W5", "rss", "total", BA_mk_general, 0, SIZE_MAX, VALUE_AT_MOST, .threshold = 16.0},
    /* the reference figures (talloc 18.0, APR 39.4, mimalloc 108.8
     * MiB) match what this bench measures as growth, not as total (which
     * adds this process's baseline: the bench binary, peers, arrays) */
    {"W5: the same judged on RSS growth (the measure of the issue's reference figures)",
     "W5", "rss", "growth", BA_mk_general, 0, SIZE_MAX, VALUE_AT_MOST, .threshold = 16.0},
    {"RSS: 1,000,000 live 48-byte chunks <= 49 MB resident with mk-slab (issue 3, SLAB)",
     "RSS", NULL, "1,000,000 x 48B live", BA_mk_slab, 0, SIZE_MAX, VALUE_AT_MOST,
     .threshold = 49.0},
    /* issue 6: the malloc drop-in (column memkit, against glibc's malloc) */
    {"W2M: memkit >= 1.5x faster than glibc through malloc/free (every variant)",
     "W2M", NULL, NULL, MK, ALL, RATIO_AT_LEAST, .threshold = 1.5},
    {"W2M: memkit faster than the mimalloc drop-in (every variant; ratio mimalloc/memkit)",
     "W2M", NULL, NULL, MK, ALL, BEATS, .threshold = 1.0, .vs = BD_COL(BD_mimalloc)},
    {"W6: memkit >= 2x glibc's throughput (each pattern, each thread count)",
     "W6", NULL, NULL, MK, ALL, RATIO_AT_LEAST, .threshold = 2.0, .tags = REPORT_SPEED},
    {"W6: memkit peak RSS <= glibc's (each pattern, each thread count; ratio memkit/glibc)",
     "W6", NULL, NULL, MK, ALL, RATIO_AT_MOST, .threshold = 1.0, .tags = REPORT_MEMORY},
    {"W7: memkit wall time <= 0.95x glibc's (ratio glibc/memkit >= 1.053; each program)",
     "W7", "time", NULL, MK, ALL, RATIO_AT_LEAST, .threshold = 1 / 0.95},
    {"W7: memkit peak RSS <= 1.05x glibc's (ratio memkit/glibc; each program)",
     "W7", "peak-rss", NULL, MK, ALL, RATIO_AT_MOST, .threshold = 1.05},
    {"W8: memkit time <= 1.0x glibc's (ratio glibc/memkit >= 1)",
     "W8", "time", NULL, MK, ALL, RATIO_AT_LEAST, .threshold = 1.0},
    {"drop-in: no cell of W1M W2M W6 W7 W8 W3 more than 5% slower than glibc (speed >= 0.95x)",
     NULL, NULL, NULL, MK, ALL, RATIO_AT_LEAST, .threshold = 0.95,
     .tags = REPORT_DROPIN | REPORT_SPEED, .list = 5},
    /* issue 7: giving memory back (W3, FORM's sort buffers; the issue's
     * figures after the peak: glibc 12 MiB, jemalloc 118, mimalloc and
     * tcmalloc 515, memkit before the purge policy 522) */
    {"W3: memkit RSS 1 s after the peak <= 1.05x glibc's (ratio memkit/glibc)",
     "W3", "rss", "peak+1s", MK, ALL, RATIO_AT_MOST, .threshold = 1.05},
    {"W3-ctx: the same in-process, on a GENERAL context (ratio malloc/mk-general >= 0.952)",
     "W3-ctx", "rss", "peak+1s", BA_mk_general, ALL, RATIO_AT_LEAST, .threshold = 1 / 1.05},
    {"W3: memkit churn time <= 1.05x its time with MEMKIT_PURGE=off (memkit:off/memkit >= 0.952)",
     "W3", "time", "churn", MK, ALL, VS_AT_LEAST, .threshold = 1 / 1.05,
     .vs = BD_COL(BD_memkit_off)},
    /* the same for the churn's steady pace: the total above includes the
     * one-time price of giving 512 MiB back (the kernel freeing 131,072
     * pages, on the churn's CPU); this one asks whether purging makes the
     * work itself slower */
    {"W3: memkit churn's steady pace <= 1.05x MEMKIT_PURGE=off's (median 1M slice)",
     "W3", "time", "churn, 1M steady", MK, ALL, VS_AT_LEAST, .threshold = 1 / 1.05,
     .vs = BD_COL(BD_memkit_off)},
};

/* The figure judged for @t in @r, or a negative number if not measured. */
static double figure(const target *t, const bench_row *r)
{
    if (t->check == VALUE_AT_MOST)
        return r->fig[t->alloc].runs ? r->fig[t->alloc].median : -1;
    double x = t->check == BEATS || t->check == VS_AT_LEAST ? report_ratio_vs(r, t->vs, t->alloc)
                                                            : report_ratio(r, t->alloc);
    return x > 0 ? x : -1;
}

static int passes(const target *t, double v)
{
    switch (t->check) {
    case RATIO_ABOVE: return v > t->threshold;
    case BEATS: return v > t->threshold;
    case VS_AT_LEAST: return v >= t->threshold;
    case RATIO_AT_LEAST: return v >= t->threshold;
    case RATIO_AT_MOST: return v <= t->threshold;
    case VALUE_AT_MOST: return v <= t->threshold;
    }
    return 0;
}

/* Is @a worse than @b for @t? */
static int worse(const target *t, double a, double b)
{
    return t->check == VALUE_AT_MOST || t->check == RATIO_AT_MOST ? a > b : a < b;
}

/* Does target @t judge row @r (of section @s)? */
static int judges(const target *t, const bench_row *r, const bench_section *s)
{
    if (t->workload ? strcmp(s->workload, t->workload) != 0 : !t->tags)
        return 0;
    return (s->tags & t->tags) == t->tags && (!t->section || strcmp(s->name, t->section) == 0) &&
           (!t->cell || strcmp(r->cell, t->cell) == 0) && r->live >= t->live_lo &&
           r->live <= t->live_hi;
}

/* Did column @col take part in this run (usable, not left out)? */
static int col_ready(int col)
{
    return col < BA_COUNT ? bench_alloc_ready(col, NULL) : bench_dropin_ready(col - BA_COUNT, NULL);
}

/* "W6 larson, 4 threads": a cell named for a target over many sections
 * (one selected by tags); else the cell's own name. */
static const char *cell_name(const target *t, const bench_row *r, char *buf, size_t len)
{
    const bench_section *s = report_get_section(r->section);
    if (!t->tags)
        return r->cell;
    snprintf(buf, len, "%s %s, %s", s->workload, s->name, r->cell);
    return buf;
}

void targets_report(FILE *out, const char *dir)
{
    FILE *csv = dir ? report_csv_open(dir, "targets.csv") : NULL;
    if (csv)
        fprintf(csv, "target,verdict,worst,worst_cell,cells_judged,cells_missed,cells_not_measured,"
                     "cells_failed\n");
    fprintf(out, "\n== targets (from the figures above; ratio = malloc / the allocator named; "
                 "drop-ins:\n   times glibc / memkit, throughput and peak RSS memkit / glibc) "
                 "==\n");
    for (size_t k = 0; k < sizeof targets / sizeof targets[0]; k++) {
        const target *t = &targets[k];
        int judged = 0, missed = 0, unmeasured = 0, failed = 0;
        double worst = 0;
        const char *worst_cell = "", *unit = "";
        char wbuf[96], lbuf[96];
        /* the `list` worst cells, worst first */
        enum { MAXLIST = 8 };
        double lv[MAXLIST];
        const bench_row *lr[MAXLIST];
        int nl = 0;
        for (size_t i = 0; i < report_nrows(); i++) {
            const bench_row *r = report_get_row(i);
            const bench_section *s = report_get_section(r->section);
            if (!judges(t, r, s))
                continue;
            double v = figure(t, r);
            if (v < 0) {
                /* no figure: a failure if the column ran and the cell did */
                int base = t->check == BEATS || t->check == VS_AT_LEAST ? t->vs : s->baseline;
                if (!r->fig[t->alloc].runs && col_ready(t->alloc) &&
                    (t->check == VALUE_AT_MOST || r->fig[base].runs))
                    failed++;
                else
                    unmeasured++;
                continue;
            }
            if (!judged || worse(t, v, worst)) {
                worst = v;
                worst_cell = cell_name(t, r, wbuf, sizeof wbuf);
                unit = s->unit;
            }
            judged++;
            missed += !passes(t, v);
            int cap = t->list < MAXLIST ? t->list : MAXLIST, at = -1;
            if (nl < cap)
                at = nl++;
            else if (nl > 0 && worse(t, v, lv[nl - 1]))
                at = nl - 1;
            if (at >= 0) { /* insert, keeping the list sorted worst first */
                while (at > 0 && worse(t, v, lv[at - 1])) {
                    lv[at] = lv[at - 1];
                    lr[at] = lr[at - 1];
                    at--;
                }
                lv[at] = v;
                lr[at] = r;
            }
        }
        const char *verdict = missed || failed ? "MISSED" : !judged ? "n/a" : "MET";
        char fig[160];
        snprintf(fig, sizeof fig, "%s", failed ? "no figure" : "not measured in this run");
        if (judged) {
            if (t->check == VALUE_AT_MOST)
                snprintf(fig, sizeof fig, "%.1f %s (%s)", worst, unit, worst_cell);
            else
                snprintf(fig, sizeof fig, "worst %.2fx (%s)", worst, worst_cell);
        }
        fprintf(out, "  %-7s %s\n          %s", verdict, t->text, fig);
        if (missed)
            fprintf(out, "; %d of %d cells miss", missed, judged);
        if (failed)
            fprintf(out, "; %d cells FAILED (see the tables' notes)", failed);
        if (unmeasured)
            fprintf(out, "; %d cells not measured", unmeasured);
        fprintf(out, "\n");
        for (int l = 0; l < nl && t->list; l++)
            fprintf(out, "            %5.2fx  %s%s\n", lv[l],
                    cell_name(t, lr[l], lbuf, sizeof lbuf), passes(t, lv[l]) ? "" : "  (misses)");
        if (csv)
            fprintf(csv, "\"%s\",%s,%.4f,\"%s\",%d,%d,%d,%d\n", t->text, verdict,
                    judged ? worst : 0.0, worst_cell, judged, missed, unmeasured, failed);
    }
    fprintf(out, "  (a missed target is reported, never an error: the exit status stays 0)\n");
    if (csv)
        fclose(csv);
}
