/*
 * targets.c - the performance targets of the issues, as data, and their
 * verdicts from the figures of this run.
 *
 * A target names a workload, optionally a section and a cell, the allocator
 * judged, a range of live memory (cells outside it are not judged) and a
 * threshold on either the ratio baseline / allocator (> or >=) or the allocator's own
 * value (<=).  The verdict is MET if every judged cell passes, MISSED
 * otherwise, "not measured" if no cell was run (--only); the worst cell is
 * printed either way, and for a miss how many cells missed.  A missed target
 * never changes the exit status: the bench reports, tests assert.
 * Adding a target is one line.
 */
#include "targets.h"

#include <stdint.h>
#include <string.h>

#include "report.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)

enum check { RATIO_ABOVE, RATIO_AT_LEAST, VALUE_AT_MOST };

typedef struct target {
    const char *text;
    const char *workload, *section; /* section NULL: every section */
    const char *cell;               /* NULL: every cell; else only this one */
    int alloc;
    size_t live_lo, live_hi; /* judged cells: live in [lo, hi] */
    enum check check;
    double threshold;
} target;

static const target targets[] = {
    /* issue 2: the GENERAL context */
    {"W2: mk-general >= 2.0x faster than malloc (every variant)",
     "W2", NULL, NULL, BA_mk_general, 0, SIZE_MAX, RATIO_AT_LEAST, 2.0},
    {"W1 free-oldest: mk-general faster than malloc in every cell up to 64 MiB live",
     "W1", "free-oldest", NULL, BA_mk_general, 0, 64 * MiB, RATIO_ABOVE, 1.0},
    {"W1 reset: mk-general >= 3x faster than malloc in every cell up to 256 KiB live",
     "W1", "reset", NULL, BA_mk_general, 0, 256 * KiB, RATIO_AT_LEAST, 3.0},
    {"W1 reset: mk-general >= 1.5x faster than malloc in every cell above 256 KiB live",
     "W1", "reset", NULL, BA_mk_general, 256 * KiB + 1, SIZE_MAX, RATIO_AT_LEAST, 1.5},
    {"RSS: 1,000,000 live 24-byte chunks <= 26 MB resident with mk-general",
     "RSS", NULL, "1,000,000 x 24B live", BA_mk_general, 0, SIZE_MAX, VALUE_AT_MOST, 26.0},
    /* issue 3: the other kinds, typed pools, many contexts */
    {"W2: typed pool (mk-pool) >= 3x faster than glibc malloc/free (every variant)",
     "W2", NULL, NULL, BA_mk_pool, 0, SIZE_MAX, RATIO_AT_LEAST, 3.0},
    {"W2: the same for the MK_POOL_THREADSAFE pool (mk-poolts), for reference",
     "W2", NULL, NULL, BA_mk_poolts, 0, SIZE_MAX, RATIO_AT_LEAST, 3.0},
    {"W1 reset: mk-bump >= 5x faster than malloc in every cell up to 256 KiB live",
     "W1", "reset", NULL, BA_mk_bump, 0, 256 * KiB, RATIO_AT_LEAST, 5.0},
    {"W1 free-oldest: mk-gen (GENERATION) faster than malloc in every cell up to 64 MiB",
     "W1", "free-oldest", NULL, BA_mk_gen, 0, 64 * MiB, RATIO_ABOVE, 1.0},
    {"W5: 10,000 contexts x ten 64-byte chunks <= 16 MiB total RSS with mk-general",
     "W5", "rss", "total", BA_mk_general, 0, SIZE_MAX, VALUE_AT_MOST, 16.0},
    /* the reference figures (talloc 18.0, APR 39.4, mimalloc 108.8
     * MiB) match what this bench measures as growth, not as total (which
     * adds this process's baseline: the bench binary, peers, arrays) */
    {"W5: the same judged on RSS growth (the measure of the issue's reference figures)",
     "W5", "rss", "growth", BA_mk_general, 0, SIZE_MAX, VALUE_AT_MOST, 16.0},
    {"RSS: 1,000,000 live 48-byte chunks <= 49 MB resident with mk-slab (issue 3, SLAB)",
     "RSS", NULL, "1,000,000 x 48B live", BA_mk_slab, 0, SIZE_MAX, VALUE_AT_MOST, 49.0},
};

/* The figure judged for @t in @r, or a negative number if not measured. */
static double figure(const target *t, const bench_row *r)
{
    if (t->check == VALUE_AT_MOST)
        return r->fig[t->alloc].runs ? r->fig[t->alloc].median : -1;
    double x = report_ratio(r, t->alloc);
    return x > 0 ? x : -1;
}

static int passes(const target *t, double v)
{
    switch (t->check) {
    case RATIO_ABOVE: return v > t->threshold;
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

void targets_report(FILE *out, const char *dir)
{
    FILE *csv = dir ? report_csv_open(dir, "targets.csv") : NULL;
    if (csv)
        fprintf(csv, "target,verdict,worst,worst_cell,cells_judged,cells_missed,cells_not_measured\n");
    fprintf(out, "\n== targets (from the figures above; ratio = malloc / the allocator named) ==\n");
    for (size_t k = 0; k < sizeof targets / sizeof targets[0]; k++) {
        const target *t = &targets[k];
        int judged = 0, missed = 0, unmeasured = 0;
        double worst = 0;
        const char *worst_cell = "", *unit = "";
        for (size_t i = 0; i < report_nrows(); i++) {
            const bench_row *r = report_get_row(i);
            const bench_section *s = report_get_section(r->section);
            if (strcmp(s->workload, t->workload) != 0 ||
                (t->section && strcmp(s->name, t->section) != 0) ||
                (t->cell && strcmp(r->cell, t->cell) != 0) ||
                r->live < t->live_lo || r->live > t->live_hi)
                continue;
            double v = figure(t, r);
            if (v < 0) {
                unmeasured++;
                continue;
            }
            if (!judged || worse(t, v, worst)) {
                worst = v;
                worst_cell = r->cell;
                unit = s->unit;
            }
            judged++;
            missed += !passes(t, v);
        }
        const char *verdict = !judged ? "n/a" : missed ? "MISSED" : "MET";
        char fig[96] = "not measured in this run";
        if (judged) {
            if (t->check == VALUE_AT_MOST)
                snprintf(fig, sizeof fig, "%.1f %s (%s)", worst, unit, worst_cell);
            else
                snprintf(fig, sizeof fig, "worst %.2fx (%s)", worst, worst_cell);
        }
        fprintf(out, "  %-7s %s\n          %s", verdict, t->text, fig);
        if (missed)
            fprintf(out, "; %d of %d cells miss", missed, judged);
        if (unmeasured)
            fprintf(out, "; %d cells not measured", unmeasured);
        fprintf(out, "\n");
        if (csv)
            fprintf(csv, "\"%s\",%s,%.4f,\"%s\",%d,%d,%d\n", t->text, verdict,
                    judged ? worst : 0.0, worst_cell, judged, missed, unmeasured);
    }
    fprintf(out, "  (a missed target is reported, never an error: the exit status stays 0)\n");
    if (csv)
        fclose(csv);
}
