/* SPDX-License-Identifier: MIT */
/*
 * main.c - memkit-bench: options, the report's order, and the driver that
 * runs the selected workloads and prints their tables, the claims, the
 * charts and the CSV files.
 *
 *   memkit-bench [--quick | --full] [--runs N] [--only W1,W2,W5,RSS,W1M,...]
 *                [--alloc mk-general,talloc,memkit,jemalloc,...] [--csv DIR]
 *                [--targets] [--stream]
 *
 * --quick (the default, `make bench`) runs the grid up to 64 MiB live with
 * 3 runs per figure and at least 2M timed allocations per W1 cell, in about
 * six minutes on a 2-core machine with every peer installed (seven when
 * other work shares it): two and a half for the in-process workloads (W1,
 * W2, W5, RSS; without talloc, APR and mimalloc about half that), two and
 * a quarter for the drop-in ones (W1M, W2M, W6, W7, W8: a child process
 * per figure under each malloc drop-in, dropin.h), under one for W3 (a
 * 512 MiB peak per child, under each drop-in and purge mode).  --full (`make bench-full`) adds 256 MiB and 1 GiB
 * live, 7 runs and 10M allocations per cell, and takes far longer (an hour
 * or more; cells that would not fit in memory are skipped).
 * The bench pins itself to one CPU and runs the workloads one after the
 * other (progress on stderr).
 *
 * The report is ordered for a reader who stops early: the verdict
 * (verdict.c: a dozen lines, what memkit wins and loses against the
 * system allocator and each peer), where the charts are, the legend of
 * the workload codes, then the machine and the method, the detailed
 * summary, the tables, and memkit's claims; its engineering targets only
 * with --targets.  So everything waits in memory until the end (the
 * verdict is known only then); --stream prints the header and each table
 * as soon as it is done, and the verdict last.
 * Its exit status is 0 whatever the figures (2 for a usage or system error):
 * it measures, it does not assert.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "alloc_iface.h"
#include "barchart.h"
#include "bench.h"
#include "dropin.h"
#include "legend.h"
#include "measure.h"
#include "report.h"
#include "summary.h"
#include "sys.h"
#include "targets.h"
#include "timing.h"
#include "verdict.h"

#ifndef MEMKIT_BENCH_RESULTS_DIR
#define MEMKIT_BENCH_RESULTS_DIR "bench/results"
#endif

static const struct workload {
    const char *name;
    void (*run)(const bench_opts *);
} workloads[] = {
    {"W1", bench_w1},   {"W2", bench_w2},   {"W5", bench_w5}, {"RSS", bench_rss},
    {"W1M", bench_w1m}, {"W2M", bench_w2m}, {"W6", bench_w6}, {"W7", bench_w7},
    {"W8", bench_w8},   {"W3", bench_w3},
};
#define NWORKLOAD (int)(sizeof workloads / sizeof workloads[0])

/* The optional peers this build lacks, e.g. "talloc, apr" ("" if none). */
static const char *peers_missing(void)
{
    static char buf[64];
    buf[0] = '\0';
#ifndef HAVE_TALLOC
    strcat(buf, buf[0] ? ", talloc" : "talloc");
#endif
#ifndef HAVE_APR
    strcat(buf, buf[0] ? ", apr" : "apr");
#endif
#ifndef HAVE_MIMALLOC
    strcat(buf, buf[0] ? ", mimalloc" : "mimalloc");
#endif
    return buf;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: memkit-bench [--quick | --full] [--runs N] [--only LIST] [--alloc LIST]\n"
            "                    [--threads LIST] [--csv DIR] [--targets] [--stream]\n"
            "  --quick      the quick suite (default): live memory up to 64 MiB, 3 runs\n"
            "  --full       the whole grid: live memory up to 1 GiB, 7 runs (long)\n"
            "  --runs N     runs per figure (1..%d); each figure is their median\n"
            "  --only LIST  run only these workloads, comma-separated:",
            BENCH_MAX_RUNS);
    for (int i = 0; i < NWORKLOAD; i++)
        fprintf(out, "%s%s", i ? "," : " ", workloads[i].name);
    fprintf(out, "\n  --alloc LIST measure only these allocators, comma-separated (%s and\n"
                 "               %s are always measured: they are the baselines):\n"
                 "               in-process:",
            bench_col_name(BA_BASELINE), bench_col_name(BD_COL(BD_BASELINE)));
    for (int i = 0; i < BA_COUNT; i++)
        fprintf(out, "%s%s", i ? "," : " ", bench_col_name(i));
    fprintf(out, "\n               drop-ins (W1M W2M W6 W7 W8 W3):");
    for (int d = 0; d < BD_FIRST_MODE; d++)
        fprintf(out, "%s%s", d ? "," : " ", bench_col_name(BD_COL(d)));
    fprintf(out, "\n               memkit's purge modes (W3) and its heap profile (W2M, W6;\n"
                 "               `memkit` names them too):");
    for (int d = BD_FIRST_MODE; d < BD_COUNT; d++)
        fprintf(out, "%s%s", d > BD_FIRST_MODE ? "," : " ", bench_col_name(BD_COL(d)));
    fprintf(out, "\n  --threads LIST\n"
                 "               W6's thread counts, comma-separated (default 1,2,4; at most\n"
                 "               %d counts of 1..%d), e.g. 1,4,8,16 on a 16-core machine\n",
            BENCH_MAX_THREAD_COUNTS, BENCH_MAX_THREADS);
    fprintf(out, "  --csv DIR    write the CSV files and the charts (bench-chart.svg,\n"
                 "               chart-<family>.svg) to DIR (default %s)\n"
                 "  --targets    also print memkit's engineering targets (aspirations, not\n"
                 "               promises) after the claims\n"
                 "  --stream     print each table as soon as it is done (the verdict last)\n"
                 "workloads (--only takes any but W3-ctx, which runs with W3):\n",
            MEMKIT_BENCH_RESULTS_DIR);
    legend_help(out);
}

/* Parse --only's list into @sel; 0 on success. */
static int parse_only(const char *list, int *sel)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (int i = 0; i < NWORKLOAD; i++)
            if (strcasecmp(w, workloads[i].name) == 0)
                sel[i] = found = 1;
        if (!found) {
            fprintf(stderr, "memkit-bench: unknown workload '%s'\n", w);
            return -1;
        }
    }
    return 0;
}

/* Parse --threads' list into @o; 0 on success. */
static int parse_threads(const char *list, bench_opts *o)
{
    o->nthreads = 0;
    for (const char *p = list;; p++) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || (*end && *end != ',') || v < 1 || v > BENCH_MAX_THREADS ||
            o->nthreads == BENCH_MAX_THREAD_COUNTS) {
            fprintf(stderr, "memkit-bench: --threads wants up to %d counts of 1..%d, "
                    "comma-separated\n", BENCH_MAX_THREAD_COUNTS, BENCH_MAX_THREADS);
            return -1;
        }
        o->threads[o->nthreads++] = (int)v;
        if (!*end)
            return 0;
        p = end;
    }
}

/* Keep only the allocators and drop-ins named in @list (and the
 * baselines); 0 on success.  A name names every column that has it:
 * "mimalloc" is both the heap API in-process and the drop-in. */
static int parse_alloc(const char *list)
{
    int keep[BENCH_NCOLS] = {0};
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (int i = 0; i < BENCH_NCOLS; i++)
            if (strcasecmp(w, bench_col_name(i)) == 0)
                keep[i] = found = 1;
        if (!found) {
            fprintf(stderr, "memkit-bench: unknown allocator '%s' (see --help)\n", w);
            return -1;
        }
    }
    for (int i = 0; i < BA_COUNT; i++)
        if (!keep[i] && i != BA_BASELINE)
            bench_alloc_leave_out(i, "not in --alloc");
    for (int d = 0; d < BD_COUNT; d++)
        if (!keep[BD_COL(d)] && d != BD_BASELINE &&
            !(d >= BD_FIRST_MODE && keep[BD_COL(BD_memkit)])) /* memkit: its modes too */
            bench_dropin_leave_out(d, "not in --alloc");
    return 0;
}

int main(int argc, char **argv)
{
    /* An RSS child must start from a pristine process: nothing before it. */
    if (argc >= 2 && strcmp(argv[1], "--child") == 0)
        return bench_child_main(argc, argv);

    bench_opts o = {.csv_dir = MEMKIT_BENCH_RESULTS_DIR, .nthreads = 3, .threads = {1, 2, 4}};
    int runs = 0, sel[NWORKLOAD] = {0}, any_sel = 0, stream = 0, show_targets = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--quick") == 0) {
            o.full = 0;
        } else if (strcmp(a, "--full") == 0) {
            o.full = 1;
        } else if (strcmp(a, "--runs") == 0 && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > BENCH_MAX_RUNS) {
                fprintf(stderr, "memkit-bench: --runs wants 1..%d\n", BENCH_MAX_RUNS);
                return 2;
            }
            runs = (int)v;
        } else if (strcmp(a, "--only") == 0 && i + 1 < argc) {
            if (parse_only(argv[++i], sel) != 0)
                return 2;
            any_sel = 1;
        } else if (strcmp(a, "--alloc") == 0 && i + 1 < argc) {
            if (parse_alloc(argv[++i]) != 0)
                return 2;
        } else if (strcmp(a, "--threads") == 0 && i + 1 < argc) {
            if (parse_threads(argv[++i], &o) != 0)
                return 2;
        } else if (strcmp(a, "--stream") == 0) {
            stream = 1;
        } else if (strcmp(a, "--targets") == 0) {
            show_targets = 1;
        } else if (strcmp(a, "--csv") == 0 && i + 1 < argc) {
            o.csv_dir = argv[++i];
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "memkit-bench: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    o.runs = runs ? runs : o.full ? 7 : 3;
    o.w1_min_ops = o.full ? 10000000u : 2000000u;
    if (!any_sel)
        for (int i = 0; i < NWORKLOAD; i++)
            sel[i] = 1;

    int cpu = bench_sys_pin();
    char date[64];
    bench_sys_date(date, sizeof date);
    const char *mode = o.full ? "full" : "quick";
    report_set_meta(mode, date);

    /* Everything waits in memory (unless --stream) so that the verdict,
     * known only at the end, comes first: the header here, the tables
     * below. */
    char *head_text = NULL, *tables = NULL;
    size_t head_len = 0, tables_len = 0;
    FILE *head = stream ? stdout : open_memstream(&head_text, &head_len);
    if (!head)
        head = stdout;
    char cpu_model[256], title[512];
    bench_sys_cpu(cpu_model, sizeof cpu_model);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(title, sizeof title, "memkit-bench (memkit %s): %s suite, %d runs per figure; %s; %s, "
             "%ld CPU%s", MK_VERSION_STRING, mode, o.runs, date, cpu_model, ncpu,
             ncpu == 1 ? "" : "s");
    if (stream)
        printf("%s\n", title);
    fprintf(head, "\n== the run ==\n");
    fprintf(head, "suite:      %s, %d runs per figure, W1 >= %llu timed allocations per cell\n",
            mode, o.runs, (unsigned long long)o.w1_min_ops);
    fprintf(head, "date:       %s\n", date);
    bench_sys_describe(head, cpu);
    /* Busy CPUs measured now, over one second: the 1-minute load average
     * would still hold the build that `make bench` has just run. */
    double load = bench_sys_load(), busy = bench_sys_busy(1.0);
    char warning[256] = "";
    if (busy > 0.5 * (double)ncpu)
        snprintf(warning, sizeof warning, "the machine was busy (%.2f of %ld CPUs with other work "
                 "at the start): the figures are noisy", busy, ncpu);
    if (busy >= 0)
        fprintf(head, "load:       %.2f of %ld CPUs busy with other work over 1 s at start%s\n",
                busy, ncpu, warning[0] ? " - WARNING: the machine is busy, figures will be noisy"
                                       : "");
    else if (load >= 0)
        fprintf(head, "load:       %.2f (1-minute average at start, any build just before "
                      "included)\n", load);
    if (mk_checking()) {
        fprintf(head, "WARNING:    memkit was built with its checks on: figures are not release "
                      "figures\n");
        snprintf(warning, sizeof warning, "memkit was built with its checks on: these are not "
                 "release figures");
    }
    for (int a = 0; a < BA_COUNT; a++) {
        const char *why;
        fprintf(head, "%-11s %s\n", a == 0 ? "allocators:" : "", bench_alloc_get(a)->desc);
        if (!bench_alloc_ready(a, &why))
            fprintf(head, "%-11s   LEFT OUT of this run: %s\n", "", why);
    }
    const char *missing = peers_missing();
    if (*missing)
        fprintf(head, "%-11s not built in (not found by CMake, or -DMEMKIT_BENCH_PEERS=OFF): %s\n",
                "", missing);
    bench_dropin_describe(head);
    fprintf(head, "method:     every figure is the median of %d runs; the allocators alternate "
                  "run by run\n            (each runs once, in the order above, then again).  "
                  "Every ratio, in every table,\n            reads one way: > 1 = X better than "
                  "the baseline (%s in-process, %s for the\n            drop-ins: a child "
                  "process per figure): baseline / X for times and memory,\n            X / "
                  "baseline for throughput.  A '~' after a ratio: the runs overlap, so\n"
                  "            they do not settle which is better; a '!' after a spread: over "
                  "25%%.\n",
            o.runs, bench_col_name(BA_BASELINE), bench_col_name(BD_COL(BD_BASELINE)));
    fflush(head);

    FILE *tout = stream ? stdout : open_memstream(&tables, &tables_len);
    if (!tout)
        tout = stdout;
    uint64_t t0 = bench_now_ns();
    for (int w = 0; w < NWORKLOAD; w++) {
        if (!sel[w])
            continue;
        int from = report_nsections();
        workloads[w].run(&o);
        report_print(tout, from);
    }
    double secs = (double)(bench_now_ns() - t0) / 1e9;

    int csv_ok = report_write_csv(o.csv_dir) == 0;
    char subtitle[600];
    snprintf(subtitle, sizeof subtitle, "memkit-bench, %s suite (%d runs per figure), %s; %s, "
             "%ld CPU%s%s", mode, o.runs, date, cpu_model, ncpu, ncpu == 1 ? "" : "s",
             warning[0] ? " - busy: noisy figures" : "");
    int charts = barchart_write(o.csv_dir, subtitle);
    if (!stream) {
        printf("%s\n", title);
        verdict_print(stdout, warning[0] ? warning : NULL);
    }
    if (charts > 0)
        printf("  charts: %s/bench-chart.svg (one row per family; `make bench-chart` copies it "
               "to docs/)\n", o.csv_dir);
    if (!stream) {
        legend_print(stdout);
        fclose(head);
        fwrite(head_text, 1, head_len, stdout);
        free(head_text);
        summary_print(stdout);
        fclose(tout);
        fwrite(tables, 1, tables_len, stdout);
        free(tables);
    } else {
        summary_print(stdout);
    }
    targets_report(stdout, csv_ok ? o.csv_dir : NULL, show_targets);
    if (stream) {
        printf("\n%s\n", title);
        verdict_print(stdout, warning[0] ? warning : NULL);
    }
    printf("\ntotal time: %.1f s", secs);
    if ((load = bench_sys_load()) >= 0)
        printf("; load average at the end %.2f", load);
    if (csv_ok)
        printf("; CSV files in %s/", o.csv_dir);
    printf("\n");
    return 0;
}
