/* SPDX-License-Identifier: MIT */
/*
 * rss.c - resident memory measured in fresh processes: the RSS workload
 * (memory per chunk: 1,000,000 live 24- and 48-byte chunks) and the
 * machinery W5 shares with it (bench_child_spawn, bench_child_main).
 *
 * Each measurement runs in a fresh process (fork, then exec of this same
 * program with --child WHAT ALLOCATOR [SIZE]): a forked copy of the bench
 * would inherit the heaps that W1 and W2 left behind - free memory already
 * resident - and would report less growth than a program starting from
 * nothing.  The child loads its allocator (bench_alloc_ready: dlopen for
 * mimalloc, apr_initialize for APR), maps and touches its pointer arrays,
 * and only then reads the baseline, so neither the arrays nor the loading
 * of a library is counted in the growth; then it creates the context (its
 * cost is counted), allocates and writes the chunks, reads the RSS again
 * (/proc/self/statm) and prints the two figures on its stdout, which is a
 * pipe to the parent.  Children alternate (allocator by allocator, run by
 * run) and each figure is the median of the runs.  RSS: MB = 10^6 bytes, so
 * with 10^6 chunks MB and bytes per chunk are the same number.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc_iface.h"
#include "bench.h"
#include "measure.h"
#include "report.h"
#include "sys.h"

#define RSS_CHUNKS 1000000u

static int find_alloc(const char *name)
{
    for (int i = 0; i < BA_COUNT; i++)
        if (strcmp(bench_alloc_get(i)->name, name) == 0)
            return i;
    return -1;
}

/* The RSS child: RSS_CHUNKS chunks of @size bytes, all written. */
static int rss_child(const bench_alloc *a, size_t size)
{
    void **ptrs = bench_buf_new(RSS_CHUNKS * sizeof(void *)); /* pre-faulted */
    size_t before = bench_sys_rss();

    void *ctx = a->ctx_new(size);
    if (!ctx)
        return 3;
    for (size_t i = 0; i < RSS_CHUNKS; i++) {
        unsigned char *p = a->alloc(ctx, size);
        if (!p)
            return 3;
        memset(p, (int)(i & 0xff), size);
        ptrs[i] = p;
    }
    size_t after = bench_sys_rss();

    unsigned long long check = 0; /* the chunks are data, not dead stores */
    for (size_t i = 0; i < RSS_CHUNKS; i += 997)
        check += ((unsigned char *)ptrs[i])[size - 1];
    printf("%zu %zu %llu\n", before, after, check);
    fflush(stdout);
    return 0; /* the chunks die with the process */
}

int bench_child_main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "memkit-bench: --child WHAT ALLOCATOR [SIZE]\n");
        return 2;
    }
    int id = find_alloc(argv[3]);
    const char *why = "";
    if (id < 0) {
        fprintf(stderr, "memkit-bench: --child: unknown allocator %s\n", argv[3]);
        return 2;
    }
    if (!bench_alloc_ready(id, &why)) {
        fprintf(stderr, "memkit-bench: --child: %s unusable: %s\n", argv[3], why);
        return 2;
    }
    const bench_alloc *a = bench_alloc_get(id);
    if (strcmp(argv[2], "rss") == 0 && argc == 5)
        return rss_child(a, (size_t)strtoul(argv[4], NULL, 10));
    if (strcmp(argv[2], "w5") == 0)
        return bench_w5_child(a);
    if (strcmp(argv[2], "w3") == 0)
        return bench_w3_child(id, argc == 5 ? strtoull(argv[4], NULL, 10) : 0);
    fprintf(stderr, "memkit-bench: --child: unknown measurement %s\n", argv[2]);
    return 2;
}

int bench_child_spawn(const char *what, const bench_alloc *a, size_t size, size_t *before,
                      size_t *after)
{
    int fd[2];
    if (pipe(fd) != 0)
        return -1;
    char sz[32];
    snprintf(sz, sizeof sz, "%zu", size);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(fd[1], STDOUT_FILENO);
        close(fd[0]);
        close(fd[1]);
        execl("/proc/self/exe", "memkit-bench", "--child", what, a->name, sz, (char *)NULL);
        fprintf(stderr, "memkit-bench: cannot exec /proc/self/exe: %s\n", strerror(errno));
        _exit(127);
    }
    close(fd[1]);
    char buf[128];
    size_t got = 0;
    ssize_t r;
    while (got + 1 < sizeof buf && (r = read(fd[0], buf + got, sizeof buf - 1 - got)) > 0)
        got += (size_t)r;
    buf[got] = '\0';
    close(fd[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
        sscanf(buf, "%zu %zu", before, after) != 2)
        return -1;
    return 0;
}

void bench_rss(const bench_opts *o)
{
    static const size_t sizes[] = {24, 48};
    static double mb[BA_COUNT][BENCH_MAX_RUNS];
    int runs = o->runs > BENCH_MAX_RUNS ? BENCH_MAX_RUNS : o->runs;
    int sec = report_section("RSS", "memory-per-chunk", "MB", RSS_CHUNKS,
                             "resident growth for 1,000,000 live chunks, each figure from "
                             "a fresh process; the 8 MB pointer array is allocated and "
                             "touched before the baseline and not counted (MB = 10^6 bytes, so "
                             "with 10^6 chunks the figure is also bytes per chunk)");
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t size = sizes[k];
        char cell[40];
        snprintf(cell, sizeof cell, "1,000,000 x %zuB live", size);
        bench_row *row = report_row(sec, cell, size, 0, RSS_CHUNKS);
        int failed[BA_COUNT] = {0};
        for (int r = 0; r < runs; r++) {
            report_progress("RSS 1,000,000 x %zuB: run %d of %d", size, r + 1, runs);
            for (int a = 0; a < BA_COUNT; a++) {
                size_t before, after;
                if (failed[a] || !bench_alloc_joins(a, BJ_RSS))
                    continue;
                if (bench_child_spawn("rss", bench_alloc_get(a), size, &before, &after) != 0)
                    failed[a] = 1;
                else
                    mb[a][r] = (after > before ? (double)(after - before) : 0) / 1e6;
            }
        }
        for (int a = 0; a < BA_COUNT; a++) {
            if (!bench_alloc_joins(a, BJ_RSS))
                continue;
            if (failed[a])
                report_note(row, "%s: child failed", bench_alloc_get(a)->name);
            else
                report_set(row, a, mb[a], runs);
        }
    }
    report_progress_end();
}
