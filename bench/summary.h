/* SPDX-License-Identifier: MIT */
/*
 * summary.h - memkit's figures gathered by family (contexts, pools, the
 * malloc drop-in) and by table: what the verdict (verdict.h), the chart
 * (barchart.h) and the detailed summary print.
 *
 * One statistic everywhere: a table's figure is the geometric mean of its
 * cells' ratios, and a family's is the geometric mean of its tables'
 * figures, so that a table of 40 cells (W1M) weighs as much as a table of
 * one (W8).  The same is done with each cell's least and most favourable
 * ratio (report_ratio_range) to give a range, which the chart draws.
 *
 * Whether the runs settle a figure is decided by its cells, not by that
 * range (which assumes every cell had its worst luck at once, and so
 * holds 1 for most tables of a busy machine): a cell is settled when its
 * range does not hold 1 (report_unsettled), a table when at least half its
 * cells are settled in the direction of its figure, and a family's figure
 * when at least half its tables are.  A table is then ahead, behind, even
 * (settled, within SUMMARY_EVEN of 1) or open.
 */
#ifndef BENCH_SUMMARY_H
#define BENCH_SUMMARY_H

#include <stdio.h>

enum { FAM_CONTEXTS, FAM_POOLS, FAM_DROPIN, FAM_COUNT };

/* Within this factor of 1 (5%), a figure reads "even": a table counts as
 * ahead or behind only past it, and beyond the runs' spread. */
#define SUMMARY_EVEN 1.05

/* A family, as the verdict and the chart show it. */
typedef struct summary_family {
    const char *name;      /* "contexts" */
    const char *what;      /* "a GENERAL context" (time), for the verdict */
    const char *workloads; /* space-separated codes; NULL: every drop-in section */
    int time_col, mem_col; /* memkit's column for time, for memory */
    int chart_cols[4];     /* memkit's columns in the chart, -1 ended */
    int baseline;          /* malloc, or glibc for the drop-in */
} summary_family;

const summary_family *summary_family_get(int fam);

/** The peers of family @p fam that took part in this run (-1 ended, at
 *  most 4): talloc, apr, mimalloc's heaps in-process; jemalloc, mimalloc,
 *  tcmalloc as drop-ins. */
const int *summary_family_peers(int fam);

/* One table of a family: column @col against column @base, its cells
 * (rows not marked ROW_INFO) with a figure for both. */
typedef struct summary_table {
    int section;
    int cells, unsettled; /* cells, and those whose runs overlap */
    int better, worse;    /* cells where @col is ahead, behind, settled */
    int open;             /* the runs do not settle the table's figure */
    double geo, lo, hi;   /* geometric means of the ratios and their ranges */
} summary_table;

/** The tables of family @p fam holding time (@p memory 0) or memory
 *  figures (1) of column @p col against @p base, in report order; how
 *  many (at most @p max). */
int summary_tables(int fam, int memory, int col, int base, summary_table *out, int max);

/* Those tables as one figure. */
typedef struct summary_agg {
    int tables, cells, unsettled_cells;
    int ahead, behind;  /* tables where @col is ahead, behind by more than
                           SUMMARY_EVEN, settled */
    int even, open;     /* tables settled within SUMMARY_EVEN; not settled */
    double geo, lo, hi; /* geometric means over the tables (0: no table) */
} summary_agg;

/** Is the family figure @p a left open by the runs (most of its tables
 *  not settled)? */
int summary_agg_open(const summary_agg *a);

summary_agg summary_aggregate(int fam, int memory, int col, int base);


/** "W6 larson" or "W2" (a workload with one table of this measure): a
 *  table's short name (into @p buf). */
const char *summary_table_name(int section, char *buf, size_t len);

/** Print the detailed summary of every row recorded so far to @p out:
 *  for each family and memkit column, time and memory against the
 *  baseline (by table, then over the cells) and against each peer, and
 *  the cells where memkit is behind. */
void summary_print(FILE *out);

#endif /* BENCH_SUMMARY_H */
