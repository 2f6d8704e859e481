/* SPDX-License-Identifier: MIT */
/*
 * report.h - the results of a bench run and everything printed about them:
 * progress on stderr, the tables on stdout, the CSV files.
 *
 * Results are organised as sections (one measured quantity of one workload,
 * e.g. "W1 free-oldest, ns per allocation") holding rows (one cell, e.g.
 * "64B x 4MiB"), each row holding one figure per column (an in-process
 * allocator or a malloc drop-in, dropin.h): the median, minimum and maximum
 * of its runs.  Each section names its baseline column (the
 * system malloc: `malloc` in-process, `glibc` for the drop-ins) and how
 * its figures read:
 *   REPORT_LOWER_BETTER   times and memory: the ratio is baseline / X;
 *   REPORT_HIGHER_BETTER  throughput: the ratio is X / baseline.
 * So every ratio, in every table, the summary and the claims, reads one
 * way: > 1 means X is better than the baseline (faster, more throughput,
 * less memory).  Workloads only record; summary.c, verdict.c, barchart.c
 * and targets.c read the rows back.
 *
 * A ratio is "unsettled" when the runs do not settle which of the two is
 * better: the ratio formed from the runs most favourable to X and the one
 * formed from the runs least favourable lie on both sides of 1 (their
 * ranges overlap).  Tables print it with a '~' after the ratio; the
 * summary, the verdict and the chart count and mark such figures, so a
 * difference within the noise of a busy machine is not read as a result.
 */
#ifndef BENCH_REPORT_H
#define BENCH_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "alloc_iface.h"
#include "dropin.h"

enum report_ratio_kind { REPORT_LOWER_BETTER, REPORT_HIGHER_BETTER };

/* Section tags, for targets that judge several workloads at once. */
#define REPORT_DROPIN 0x1u /* a drop-in workload (a child per figure) */
#define REPORT_SPEED 0x2u  /* a time or a throughput */
#define REPORT_MEMORY 0x4u /* a resident-memory figure */

typedef struct bench_fig {
    double median, min, max;
    int runs; /* 0: not measured */
} bench_fig;

typedef struct bench_section {
    const char *workload; /* "W1", "W2", "RSS": also the CSV file name */
    char name[32];        /* "free-oldest" */
    char unit[24];        /* "ns/alloc", "MB" */
    char about[512];      /* printed under the title, word-wrapped */
    size_t items;         /* > 0: the figures are for this many items (RSS:
                             chunks); informational, not printed */
    char footer[1024];    /* lines printed under the table ('\n' between),
                             e.g. a figure derived from the rows */
    int baseline;         /* the column every ratio is against */
    enum report_ratio_kind ratio;
    unsigned tags;        /* REPORT_* */
} bench_section;

/* Row flags. */
#define ROW_INFO 0x1u /* shown in its table, left out of the summary, the
                         verdict and the chart: a figure not of the
                         allocator's making (a process's baseline), or a sum
                         of the row's neighbours */

typedef struct bench_row {
    int section;
    unsigned flags; /* ROW_* */
    char cell[40];  /* "64B x 4MiB" */
    size_t chunk;   /* chunk size in bytes (0: not applicable) */
    size_t live;    /* live bytes (0: not applicable) */
    int threads;    /* W6: the cell's thread count (0: not applicable) */
    uint64_t ops;   /* operations per run */
    bench_fig fig[BENCH_NCOLS]; /* by column: allocators, then drop-ins */
    char note[160]; /* why a cell has no figures, or a warning */
} bench_row;

/** Where the report stamps its CSV rows ("quick"/"full", the date). */
void report_set_meta(const char *mode, const char *date);

/** Open a new section against the in-process baseline (malloc, ratio
 *  baseline / X); returns its index. */
int report_section(const char *workload, const char *name, const char *unit,
                   size_t items, const char *about);

/** Open a new section with baseline column @p baseline, ratio @p ratio and
 *  tags @p tags (REPORT_*); returns its index. */
int report_section_vs(const char *workload, const char *name, const char *unit,
                      int baseline, enum report_ratio_kind ratio, unsigned tags,
                      const char *about);

/** Add a row to section @p sec; the pointer stays valid for the whole run. */
bench_row *report_row(int sec, const char *cell, size_t chunk, size_t live,
                      uint64_t ops);

/** Append a note to @p row ("; " between notes). */
void report_note(bench_row *row, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** Append a line to section @p sec's footer. */
void report_footer(int sec, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** Record the @p n samples of column @p col (sorted in place). */
void report_set(bench_row *row, int col, double *samples, int n);

/** The ratio of column @p col to the section's baseline, formed as the
 *  section says (baseline / X or X / baseline), or 0 if either was not
 *  measured. */
double report_ratio(const bench_row *row, int col);

/** The same ratio with column @p base in the place of the baseline (a
 *  target "faster than mimalloc"). */
double report_ratio_vs(const bench_row *row, int base, int col);

/** The range of report_ratio_vs(@p row, @p base, @p col) over the runs:
 *  @p lo from the runs least favourable to @p col, @p hi from the most.
 *  0, or -1 if either was not measured. */
int report_ratio_range(const bench_row *row, int base, int col, double *lo, double *hi);

/** Do the runs leave open which of @p col and @p base is better (the
 *  ratio's range holds 1)?  0 when either was not measured. */
int report_unsettled(const bench_row *row, int base, int col);

/** "malloc / X", "X / glibc": how section @p sec's ratios are formed, for
 *  column @p col (into @p buf). */
const char *report_ratio_text(int sec, int col, char *buf, size_t len);

size_t report_nrows(void);
const bench_row *report_get_row(size_t i);
int report_nsections(void);
const bench_section *report_get_section(int i);

/** Print sections [@p from, end) as tables. */
void report_print(FILE *out, int from);

/** Write one CSV file per workload (<dir>/<workload>.csv, lower case);
 *  creates @p dir.  Returns 0, or -1 after printing why on stderr. */
int report_write_csv(const char *dir);

/** Open <dir>/<name> for writing, creating @p dir; NULL (and a message) on
 *  failure. */
FILE *report_csv_open(const char *dir, const char *name);

/** "8B", "16KiB", "64MiB", "1GiB" for a power-of-two-ish size. */
const char *report_size(size_t bytes, char *buf, size_t len);

/** A progress line on stderr ("W1 reset 8B x 1KiB: cell 3 of 80"); on a
 *  terminal it overwrites the previous one. */
void report_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/** End the progress display (a newline on a terminal). */
void report_progress_end(void);

#endif /* BENCH_REPORT_H */
