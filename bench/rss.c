/*
 * rss.c - memory per chunk: the resident-memory growth of 1,000,000 live
 * 24-byte chunks, memkit vs malloc.
 *
 * Each measurement runs in a fresh process (fork, then exec of this same
 * program with --rss-child NAME): a forked copy of the bench would inherit
 * the heaps that W1 and W2 left behind - free memory already resident -
 * and would report less growth than a program starting from nothing.
 * The child maps and touches its 8 MB array of pointers *before* reading
 * the baseline, so the array is not counted; then it creates the context
 * (its cost is counted), allocates the chunks and writes all 24 bytes of
 * each, reads the RSS again (/proc/self/statm) and prints the two figures
 * on its stdout, which is a pipe to the parent.  Children alternate
 * (memkit, malloc, memkit, ...) and each figure is the median of the runs.
 * MB = 10^6 bytes, so with 10^6 chunks MB and bytes per chunk are the same
 * number.
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
#define RSS_SIZE 24u

int bench_rss_child(const char *alloc_name)
{
    const bench_alloc *a = NULL;
    for (int i = 0; i < BA_COUNT; i++)
        if (strcmp(bench_alloc_get(i)->name, alloc_name) == 0)
            a = bench_alloc_get(i);
    if (!a) {
        fprintf(stderr, "memkit-bench: --rss-child: unknown allocator %s\n", alloc_name);
        return 2;
    }
    void **ptrs = bench_buf_new(RSS_CHUNKS * sizeof(void *)); /* pre-faulted */
    size_t before = bench_sys_rss();

    void *ctx = a->ctx_new(RSS_SIZE);
    if (!ctx)
        return 3;
    for (size_t i = 0; i < RSS_CHUNKS; i++) {
        unsigned char *p = a->alloc(ctx, RSS_SIZE);
        if (!p)
            return 3;
        memset(p, (int)(i & 0xff), RSS_SIZE);
        ptrs[i] = p;
    }
    size_t after = bench_sys_rss();

    unsigned long long check = 0; /* the chunks are data, not dead stores */
    for (size_t i = 0; i < RSS_CHUNKS; i += 997)
        check += ((unsigned char *)ptrs[i])[RSS_SIZE - 1];
    printf("%zu %zu %llu\n", before, after, check);
    fflush(stdout);
    return 0; /* the chunks die with the process */
}

/* One measurement: the RSS growth in bytes of a fresh child using @a, or
 * -1 on failure. */
static double spawn(const bench_alloc *a)
{
    int fd[2];
    if (pipe(fd) != 0)
        return -1;
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
        execl("/proc/self/exe", "memkit-bench", "--rss-child", a->name, (char *)NULL);
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
    size_t before, after;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
        sscanf(buf, "%zu %zu", &before, &after) != 2)
        return -1;
    return after > before ? (double)(after - before) : 0;
}

void bench_rss(const bench_opts *o)
{
    static double mb[BA_COUNT][BENCH_MAX_RUNS];
    int runs = o->runs > BENCH_MAX_RUNS ? BENCH_MAX_RUNS : o->runs;
    int sec = report_section("RSS", "memory-per-chunk", "MB", RSS_CHUNKS,
                             "resident growth for 1,000,000 live 24-byte chunks, each "
                             "figure from a fresh process; the 8 MB pointer array is "
                             "allocated and touched before the baseline and not counted "
                             "(MB = 10^6 bytes)");
    bench_row *row = report_row(sec, "1,000,000 x 24B live", RSS_SIZE, 0, RSS_CHUNKS);
    int failed[BA_COUNT] = {0};
    for (int r = 0; r < runs; r++) {
        report_progress("RSS 1,000,000 x 24B: run %d of %d", r + 1, runs);
        for (int a = 0; a < BA_COUNT; a++) {
            if (failed[a])
                continue;
            double grow = spawn(bench_alloc_get(a));
            if (grow < 0)
                failed[a] = 1;
            else
                mb[a][r] = grow / 1e6;
        }
    }
    for (int a = 0; a < BA_COUNT; a++) {
        if (failed[a])
            snprintf(row->note, sizeof row->note, "%s: child failed",
                     bench_alloc_get(a)->name);
        else
            report_set(row, a, mb[a], runs);
    }
    report_progress_end();
}
