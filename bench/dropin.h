/* SPDX-License-Identifier: MIT */
/*
 * dropin.h - the malloc drop-ins as columns of the report, and the run loop
 * of the drop-in workloads (W1M, W2M, W6, W7, W8).
 *
 * A drop-in is a shared library that replaces the whole malloc family when
 * preloaded: memkit's libmemkit-malloc, and the peers jemalloc, mimalloc
 * and tcmalloc when their Debian packages are installed (found at run time
 * by path; none is needed to build or run the bench).  glibc's malloc - no
 * LD_PRELOAD at all - is their baseline.  They are not bench_alloc
 * descriptors (alloc_iface.h): those are called in-process, in specialised
 * kernels; a drop-in can only be chosen when a process starts, so every
 * figure of a drop-in workload comes from a child process (spawn.h).
 *
 * Columns: the report's rows hold one figure per column; columns
 * [0, BA_COUNT) are the in-process allocators, [BA_COUNT, BENCH_NCOLS) the
 * drop-ins (BD_COL).  A section says which column is its baseline
 * (report.h); the drop-in sections' baseline is BD_COL(BD_glibc).
 */
#ifndef BENCH_DROPIN_H
#define BENCH_DROPIN_H

#include <stdio.h>

#include "alloc_iface.h"

/* The drop-ins, in column (and run) order: the baseline first, so that
 * each cell knows the baseline's time before it runs the others (see the
 * time limit in dropin.c).  After the peers, memkit's purge modes: the
 * same library as BD_memkit with MEMKIT_PURGE set (off, dontneed, free,
 * unmap), extra columns of the workloads that ask for them
 * (bench_dropin_job.purge_modes: W3), and the heap profile on at its default
 * rate (profile_mode: W2M, W6); the others run BD_glibc..BD_tcmalloc
 * only. */
enum {
    BD_glibc,
    BD_memkit,
    BD_jemalloc,
    BD_mimalloc,
    BD_tcmalloc,
    BD_memkit_off,
    BD_memkit_dontneed,
    BD_memkit_free,
    BD_memkit_unmap,
    BD_memkit_profile, /* MEMKIT_PROFILE=1: the heap profile's cost (W2M, W6) */
    BD_COUNT
};
#define BD_BASELINE BD_glibc
#define BD_FIRST_MODE BD_memkit_off /* [BD_FIRST_MODE, BD_COUNT): memkit's modes */
#define BD_LAST_PURGE BD_memkit_unmap /* [BD_FIRST_MODE, BD_LAST_PURGE]: purge modes */

#define BENCH_NCOLS (BA_COUNT + BD_COUNT)
#define BD_COL(d) (BA_COUNT + (d))

/** The column title of report column @p col (an allocator or a drop-in). */
const char *bench_col_name(int col);

/** Is drop-in @p d usable (its library exists, not left out)?  @p why (may
 *  be NULL) gets the reason when it is not. */
int bench_dropin_ready(int d, const char **why);

/** Leave drop-in @p d out of this run (--alloc), saying @p why. */
void bench_dropin_leave_out(int d, const char *why);

/** The header lines: each drop-in, what is preloaded, or why it is out. */
void bench_dropin_describe(FILE *out);

/** The path of memkit-bench-malloc, the workload program; NULL (and a
 *  reason in *@p why) if it cannot be found. */
const char *bench_dropin_program(const char **why);

/* What a drop-in figure's speed is, from the child's line (ns, ops). */
enum bench_speed {
    BS_NS_PER_OP, /* ns / ops */
    BS_US_PER_OP, /* the same in microseconds */
    BS_S_PER_OP,  /* the same in seconds (W7: ops = 1, the program's run) */
    BS_MOPS,      /* ops / ns x 1000: millions of operations per second */
    BS_MS,        /* ns / 10^6: the timed phase in milliseconds (W3) */
};

struct bench_row;

/* Another figure of the child's line, " key=<number>", x scale, recorded
 * in a row of its own (W3: RSS at given moments, phase times) if @row is
 * not NULL, and its median by drop-in in @median (0: not measured). */
typedef struct bench_dropin_figure {
    const char *key;
    double scale;
    struct bench_row *row;
    double median[BD_COUNT]; /* out */
} bench_dropin_figure;

#define BD_MAX_FIGURES 8

/* memkit's own account of a cell (MEMKIT_STATS=json at the child's exit):
 * the medians over the runs, for the memkit columns. */
typedef struct bench_dropin_mkstats {
    int have[BD_COUNT];
    double purged_mib[BD_COUNT]; /* bytes given back by the purge policy */
    double passes[BD_COUNT];     /* purge passes run */
} bench_dropin_mkstats;

typedef struct bench_dropin_job {
    /* memkit-bench-malloc's arguments: a workload and its parameters, or
     * "run PROGRAM ARGS..." (W7); argv[0] is bench_dropin_program() */
    const char *const *argv;
    const char *const *env_extra; /* NULL or "NAME=value", NULL-ended */
    int unpin;                    /* multi-threaded: not pinned to one CPU */
    enum bench_speed speed;
    int purge_modes;              /* also the BD_memkit_<purge mode> columns */
    int profile_mode;             /* also the BD_memkit_profile column */
    bench_dropin_figure *figures; /* NULL, or nfigures more figures */
    int nfigures;
    bench_dropin_mkstats *mkstats; /* NULL, or read memkit's exit figures */
} bench_dropin_job;

/**
 * Run @p job under every usable drop-in (and memkit's purge modes if the
 * job asks), @p runs times each, alternating (glibc, memkit, jemalloc,
 * ..., then again); record the median speed in @p speed, the median peak
 * RSS (MiB: the child's own VmHWM, or the program's ru_maxrss for `run`)
 * in @p rss (either may be NULL) and the medians of the job's other
 * figures in their rows; with job->mkstats, the memkit columns run with
 * MEMKIT_STATS=json into a temporary file, read back after each run.  A
 * drop-in whose child fails (signal, exit status, time limit, bad objects)
 * is dropped from the cell with a note saying what happened; checksums
 * that differ from glibc's get a CHECKSUM MISMATCH note.
 * @return 0, or -1 if something was noted.
 */
int bench_dropin_measure(struct bench_row *speed, struct bench_row *rss,
                         const bench_dropin_job *job, int runs);

#endif /* BENCH_DROPIN_H */
