/* SPDX-License-Identifier: MIT */
/*
 * targets.c - what memkit says about its performance, as data, and
 * whether this run's figures bear each sentence out.
 *
 * Two kinds, printed apart:
 *   CLAIM   a promise to users: the README may state it, and a miss is a
 *           regression to fix before a release.  A claim is set where the
 *           runs meet it with a margin (a contract, not a best case).
 *   TARGET  an engineering aspiration that the developers track ("2x
 *           malloc", "no more memory than glibc with threads"): a miss
 *           is a fact about the work left, not a broken promise, so it
 *           stays out of the user's verdict and the claims; `--targets`
 *           prints them, in a section of their own at the very end.
 * A newcomer reading "MISSED" under "claims" must be reading about a
 * promise; that is the whole reason for the split.
 *
 * Each entry is a sentence a user can check against the tables; the
 * trade-off is that it is a fixed threshold, so a figure just under it
 * reads MISSED however close it came (the worst cell is printed).
 * An entry names a workload (or, with workload NULL, every section with
 * the given tags: "every drop-in speed figure"), optionally a section and
 * a cell, the column judged, a range of live memory (cells outside it are
 * not judged), a most thread count (W6's cells above it are not judged)
 * and a threshold on the section's ratio (report.h: > 1 is
 * better for memkit, whatever the quantity; > or >= a threshold), on the column's own value (<=), or on how it
 * compares with another column (the ratio with `vs` in the place of the
 * baseline: BEATS, > threshold, "faster than mimalloc"; VS_AT_LEAST,
 * >= threshold, "at most 5% slower than memkit:off").  The verdict is MET if every
 * judged cell passes, MISSED otherwise - and MISSED too if the column
 * failed in a cell the baseline ran (a crash is not a pass).  An entry
 * with no measured cell is not printed when its workload did not run
 * (--only); when it ran without what the entry needs (a peer not
 * installed), one line says so.  The worst cell is printed -
 * or the `list` worst, for one over many workloads - and for a miss
 * how many cells missed.  A miss never changes the exit status:
 * the bench reports, tests assert.  Adding a claim or a target is one line.
 */
#include "targets.h"

#include <stdint.h>
#include <string.h>

#include "report.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)

enum check { RATIO_ABOVE, RATIO_AT_LEAST, VALUE_AT_MOST, BEATS, VS_AT_LEAST };
enum kind { CLAIM, TARGET };

typedef struct target {
    enum kind kind;
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
    int max_threads; /* judged cells: at most this many threads (0: any; W6's
                        --threads can add counts a claim is not about) */
} target;

#define MK BD_COL(BD_memkit)
#define ALL 0, SIZE_MAX

static const target targets[] = {
    /* ---- claims: promises ---- */
    /* the GENERAL context */
    {CLAIM, "A GENERAL context allocates and frees W2's 24- and 48-byte objects faster than "
     "malloc",
     "W2", NULL, NULL, BA_mk_general, 0, SIZE_MAX, RATIO_ABOVE, .threshold = 1.0},
    {CLAIM, "Resetting a GENERAL context is at least 1.5x as fast as freeing each chunk, above "
     "256 KiB live (W1 reset)",
     "W1", "reset", NULL, BA_mk_general, 256 * KiB + 1, SIZE_MAX, RATIO_AT_LEAST, .threshold = 1.5},
    {CLAIM, "1,000,000 live 24-byte chunks in a GENERAL context take at most 26 MB resident (RSS)",
     "RSS", NULL, "1,000,000 x 24B live", BA_mk_general, 0, SIZE_MAX, VALUE_AT_MOST,
     .threshold = 26.0},
    /* typed pools and SLAB */
    {CLAIM, "A typed pool allocates and frees W2's objects at least 2x as fast as malloc",
     "W2", NULL, NULL, BA_mk_pool, 0, SIZE_MAX, RATIO_AT_LEAST, .threshold = 2.0},
    {CLAIM, "1,000,000 live 48-byte chunks in a SLAB context take at most 49 MB resident (RSS)",
     "RSS", NULL, "1,000,000 x 48B live", BA_mk_slab, 0, SIZE_MAX, VALUE_AT_MOST,
     .threshold = 49.0},
    /* the malloc drop-in (column memkit, against glibc's malloc) */
    {CLAIM, "As malloc, memkit allocates and frees W2's objects faster than glibc (W2M)",
     "W2M", NULL, NULL, MK, ALL, RATIO_ABOVE, .threshold = 1.0},
    {CLAIM, "As malloc, memkit is nowhere more than 5% slower than glibc (every speed figure of "
     "W1M W2M W6 W7 W8 W3; ratio >= 0.95)",
     NULL, NULL, NULL, MK, ALL, RATIO_AT_LEAST, .threshold = 0.95,
     .tags = REPORT_DROPIN | REPORT_SPEED, .list = 5},
    {CLAIM, "The W7 programs peak at most 5% more resident memory on memkit than on glibc (W7; "
     "ratio >= 0.952)",
     "W7", "peak-rss", NULL, MK, ALL, RATIO_AT_LEAST, .threshold = 1 / 1.05},
    {CLAIM, "Large blocks (64 KiB..32 MiB) are no slower on memkit than on glibc (W8)",
     "W8", "time", NULL, MK, ALL, RATIO_AT_LEAST, .threshold = 1.0},
    /* giving memory back (W3, FORM's sort buffers) */
    {CLAIM, "1 s after a 512 MiB peak is freed, memkit holds at most 5% more than glibc (W3; "
     "ratio >= 0.952)",
     "W3", "rss", "peak+1s", MK, ALL, RATIO_AT_LEAST, .threshold = 1 / 1.05},
    {CLAIM, "1 s after a 512 MiB peak is freed, a GENERAL context holds at most 5% more than "
     "malloc (W3-ctx; ratio >= 0.952)",
     "W3-ctx", "rss", "peak+1s", BA_mk_general, ALL, RATIO_AT_LEAST, .threshold = 1 / 1.05},
    /* the total of the churn includes the one-time price of giving 512 MiB
     * back (the kernel freeing 131,072 pages, on the churn's CPU): a
     * target below; this one asks whether purging makes the work itself
     * slower */
    {CLAIM, "Giving memory back costs the churn after the peak at most 5% of its steady pace, "
     "one-time costs left out (W3, median slice of 1M operations; against memkit with "
     "MEMKIT_PURGE=off)",
     "W3", "time", "churn, 1M steady", MK, ALL, VS_AT_LEAST, .threshold = 1 / 1.05,
     .vs = BD_COL(BD_memkit_off)},

    /* ---- engineering targets: aspirations ---- */
    {TARGET, "A GENERAL context allocates and frees W2's 24- and 48-byte values at least 2x as "
     "fast as malloc",
     "W2", NULL, NULL, BA_mk_general, 0, SIZE_MAX, RATIO_AT_LEAST, .threshold = 2.0},
    {TARGET, "In a GENERAL context, malloc-then-free-the-oldest is faster than malloc at every "
     "chunk size, up to 64 MiB live (W1)",
     "W1", "free-oldest", NULL, BA_mk_general, 0, 64 * MiB, RATIO_ABOVE, .threshold = 1.0},
    {TARGET, "Resetting a GENERAL context is at least 3x as fast as freeing each chunk, up to "
     "256 KiB live (W1 reset)",
     "W1", "reset", NULL, BA_mk_general, 0, 256 * KiB, RATIO_AT_LEAST, .threshold = 3.0},
    {TARGET, "A typed pool allocates and frees W2's values at least 3x as fast as malloc",
     "W2", NULL, NULL, BA_mk_pool, 0, SIZE_MAX, RATIO_AT_LEAST, .threshold = 3.0},
    {TARGET, "A thread-safe typed pool (MK_POOL_THREADSAFE) does the same at least 3x as fast "
     "as malloc",
     "W2", NULL, NULL, BA_mk_poolts, 0, SIZE_MAX, RATIO_AT_LEAST, .threshold = 3.0},
    {TARGET, "Resetting a BUMP context is at least 5x as fast as freeing each chunk, up to 256 "
     "KiB live (W1 reset)",
     "W1", "reset", NULL, BA_mk_bump, 0, 256 * KiB, RATIO_AT_LEAST, .threshold = 5.0},
    {TARGET, "In a GENERATION context, malloc-then-free-the-oldest is faster than malloc at "
     "every chunk size, up to 64 MiB live (W1)",
     "W1", "free-oldest", NULL, BA_mk_gen, 0, 64 * MiB, RATIO_ABOVE, .threshold = 1.0},
    {TARGET, "10,000 GENERAL contexts of ten 64-byte chunks take at most 16 MiB resident, the "
     "whole process counted (W5)",
     "W5", "rss", "total", BA_mk_general, 0, SIZE_MAX, VALUE_AT_MOST, .threshold = 16.0},
    /* talloc, APR and mimalloc heaps, for comparison, are known by their
     * growth: the process's own baseline (the bench, its peers, its
     * arrays) is not theirs */
    {TARGET, "The same 10,000 contexts grow the resident memory by at most 16 MiB (W5)",
     "W5", "rss", "growth", BA_mk_general, 0, SIZE_MAX, VALUE_AT_MOST, .threshold = 16.0},
    {TARGET, "As malloc, memkit allocates and frees W2's values at least 1.5x as fast as glibc "
     "(W2M)",
     "W2M", NULL, NULL, MK, ALL, RATIO_AT_LEAST, .threshold = 1.5},
    {TARGET, "As malloc, memkit is faster than mimalloc on the same values (W2M; ratio against "
     "mimalloc)",
     "W2M", NULL, NULL, MK, ALL, BEATS, .threshold = 1.0, .vs = BD_COL(BD_mimalloc)},
    {TARGET, "As malloc, memkit has at least 2x glibc's throughput with 1, 2 and 4 threads (W6, "
     "each pattern)",
     "W6", NULL, NULL, MK, ALL, RATIO_AT_LEAST, .threshold = 2.0, .tags = REPORT_SPEED,
     .max_threads = 4},
    {TARGET, "As malloc, memkit's peak RSS is no more than glibc's with 1, 2 and 4 threads (W6, "
     "each pattern)",
     "W6", NULL, NULL, MK, ALL, RATIO_AT_LEAST, .threshold = 1.0, .tags = REPORT_MEMORY,
     .max_threads = 4},
    {TARGET, "The W7 programs (perl, python3, ruby, sqlite3, gcc, clang) finish at least 5% "
     "sooner on memkit than on glibc (W7; ratio >= 1.053)",
     "W7", "time", NULL, MK, ALL, RATIO_AT_LEAST, .threshold = 1 / 0.95},
    {TARGET, "Giving memory back costs the churn after the peak at most 5% of its time, the "
     "one-time price of the purge included (W3; against memkit with MEMKIT_PURGE=off)",
     "W3", "time", "churn", MK, ALL, VS_AT_LEAST, .threshold = 1 / 1.05,
     .vs = BD_COL(BD_memkit_off)},
    /* the heap profile (libmemkit-malloc-prof, MEMKIT_PROFILE=1, default rate)
     * against memkit without it */
    {TARGET, "The heap profile at its default rate costs at most 5% of W2M's speed "
     "(memkit:profile, libmemkit-malloc-prof, against memkit)",
     "W2M", NULL, NULL, BD_COL(BD_memkit_profile), ALL, VS_AT_LEAST, .threshold = 1 / 1.05,
     .vs = MK, .tags = REPORT_SPEED},
    {TARGET, "The heap profile at its default rate costs at most 5% of W6's throughput "
     "(memkit:profile against memkit)",
     "W6", NULL, NULL, BD_COL(BD_memkit_profile), ALL, VS_AT_LEAST, .threshold = 1 / 1.05,
     .vs = MK, .tags = REPORT_SPEED},
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
    case VALUE_AT_MOST: return v <= t->threshold;
    }
    return 0;
}

/* Is @a worse than @b for @t? */
static int worse(const target *t, double a, double b)
{
    return t->check == VALUE_AT_MOST ? a > b : a < b;
}

/* Does target @t judge row @r (of section @s)? */
static int judges(const target *t, const bench_row *r, const bench_section *s)
{
    if (t->workload ? strcmp(s->workload, t->workload) != 0 : !t->tags)
        return 0;
    return (s->tags & t->tags) == t->tags && (!t->section || strcmp(s->name, t->section) == 0) &&
           (!t->cell || strcmp(r->cell, t->cell) == 0) && r->live >= t->live_lo &&
           r->live <= t->live_hi && (!t->max_threads || r->threads <= t->max_threads);
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

/* Judge entry @t and print it (unless its workload did not run: then 1
 * is returned and nothing printed); one CSV line to @csv. */
static int judge(FILE *out, FILE *csv, const target *t)
{
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
    if (!judged && !failed && !unmeasured)
        return 1; /* its workload did not run: nothing to say */
    const char *verdict = missed || failed ? "MISSED" : !judged ? "unchecked" : "MET";
    char fig[160];
    snprintf(fig, sizeof fig, "%s",
             failed ? "no figure" : "what it needs was not measured (a peer not installed?)");
    if (judged) {
        if (t->check == VALUE_AT_MOST)
            snprintf(fig, sizeof fig, "%.1f %s (%s)", worst, unit, worst_cell);
        else
            snprintf(fig, sizeof fig, "worst %.2fx (%s)", worst, worst_cell);
    }
    if (out) {
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
    }
    if (csv)
        fprintf(csv, "\"%s\",%s,%s,%.4f,\"%s\",%d,%d,%d,%d\n", t->text,
                t->kind == CLAIM ? "claim" : "target", verdict, judged ? worst : 0.0, worst_cell,
                judged, missed, unmeasured, failed);
    return 0;
}

void targets_report(FILE *out, const char *dir, int show_targets)
{
    FILE *csv = dir ? report_csv_open(dir, "targets.csv") : NULL;
    if (csv)
        fprintf(csv, "target,kind,verdict,worst,worst_cell,cells_judged,cells_missed,"
                     "cells_not_measured,cells_failed\n");
    const size_t n = sizeof targets / sizeof targets[0];
    int skipped = 0, ntargets = 0, nclaims = 0;
    fprintf(out, "\n== claims: what memkit promises, checked against this run "
                 "(ratio > 1 = memkit better) ==\n");
    for (size_t k = 0; k < n; k++)
        if (targets[k].kind == CLAIM) {
            int skip = judge(out, csv, &targets[k]);
            skipped += skip;
            nclaims += !skip;
        }
    if (!nclaims)
        fprintf(out, "  (no claim is about the workloads of this run)\n");
    else if (skipped)
        fprintf(out, "  (%d more claims are about workloads this run did not include)\n", skipped);
    fprintf(out, "  (a missed claim is reported, never an error: the exit status stays 0)\n");
    for (size_t k = 0; k < n; k++)
        if (targets[k].kind == TARGET)
            ntargets += !judge(NULL, csv, &targets[k]); /* the CSV has them all */
    if (show_targets && ntargets) {
        fprintf(out, "\n== engineering targets: what memkit's developers aim for; not promises, "
                     "and not part of the verdict ==\n");
        for (size_t k = 0; k < n; k++)
            if (targets[k].kind == TARGET)
                judge(out, NULL, &targets[k]);
    } else if (ntargets) {
        fprintf(out, "  (%d engineering targets, aspirations rather than promises, were judged "
                     "too: --targets prints them%s%s)\n", ntargets, csv ? "; they are in " : "",
                csv ? "targets.csv" : "");
    }
    if (csv)
        fclose(csv);
}
