/* SPDX-License-Identifier: MIT */
/*
 * main.c - memkit-bench-malloc: run one malloc workload and print what it
 * measured, for memkit-bench to read.
 *
 *   memkit-bench-malloc WORKLOAD [key=value ...]
 *   memkit-bench-malloc run PROGRAM [ARGS...]
 *   LD_PRELOAD=/path/to/libmemkit-malloc.so memkit-bench-malloc w6-larson threads=4
 *
 * WORKLOAD is one of w2m, w1m, w6-larson, w6-prodcons, w6-churn, w8, w3
 * (see the table below and each workload's file); keys: size, ring, live,
 * ops, threads, seed, quiet_ms, trace.  The output is one line on stdout,
 *
 *   ns=<timed phase> ops=<operations> check=<checksum> bad=<bad objects>
 *   hwm_kib=<peak RSS, VmHWM> [more key=value figures of the workload: w3]
 *
 * and exit status 0; on failure a line "memkit-bench-malloc: <why>" on
 * stderr and exit status 1 (an allocator that crashes the program shows as
 * a signal to the parent).  The peak RSS is this process's own VmHWM: the
 * parent's wait4 would not do, as Linux counts in a child's ru_maxrss the
 * size of the process it was forked from (memkit-bench, possibly hundreds
 * of MiB) until it execs.  `run` (run.c) measures another program (W7) the
 * same way and prints the same line about it.
 *
 * This program is linked against the C library only, never against memkit:
 * the allocator under test is whatever LD_PRELOAD put in front of glibc's
 * malloc (nothing: glibc itself, the baseline).  It allocates nothing of
 * its own through malloc before the workload (the line is formatted into a
 * static buffer and written with write(2)), so the allocator starts from
 * what the C library's start-up left it.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wl.h"

static const struct {
    const char *name;
    wl_fn fn;
    wl_params defaults;
} workloads[] = {
    {"w2m", wl_w2m, {.size = 24, .ring = 0, .ops = 10000000}},
    {"w1m", wl_w1m, {.size = 64, .live = 1 << 20, .ops = 2000000}},
    {"w6-larson", wl_larson, {.threads = 1, .live = 8192, .ops = 2000000}},
    {"w6-prodcons", wl_prodcons, {.threads = 2, .ops = 1000000}},
    {"w6-churn", wl_churn, {.threads = 1, .ops = 200000}},
    {"w8", wl_w8, {.live = 4, .ops = 200}},
    {"w3", wl_w3, {.live = 512u << 20, .ring = 8u << 20, .ops = 40000000, .quiet_ms = 500}},
};
#define NWORKLOAD (sizeof workloads / sizeof workloads[0])

/* VmHWM of this process in KiB, read without allocating; 0 if unknown. */
static unsigned long long hwm_kib(void)
{
    static char buf[8192];
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t got = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (got <= 0)
        return 0;
    buf[got] = '\0';
    const char *v = strstr(buf, "VmHWM:");
    return v ? strtoull(v + 6, NULL, 10) : 0;
}

static int say(int fd, const char *line)
{
    size_t n = strlen(line);
    return write(fd, line, n) == (ssize_t)n ? 0 : -1;
}

static int usage(void)
{
    static char line[256];
    say(2, "usage: memkit-bench-malloc WORKLOAD [size=N ring=N live=N ops=N threads=N seed=N\n"
           "                                    quiet_ms=N trace=1]\n"
           "       memkit-bench-malloc run PROGRAM [ARGS...]\n"
           "workloads:");
    for (size_t i = 0; i < NWORKLOAD; i++) {
        snprintf(line, sizeof line, " %s", workloads[i].name);
        say(2, line);
    }
    say(2, "\n");
    return 2;
}

static int set_param(wl_params *p, const char *arg)
{
    static const struct {
        const char *key;
        size_t off;
    } keys[] = {
        {"size", offsetof(wl_params, size)}, {"ring", offsetof(wl_params, ring)},
        {"live", offsetof(wl_params, live)}, {"ops", offsetof(wl_params, ops)},
        {"threads", offsetof(wl_params, threads)}, {"seed", offsetof(wl_params, seed)},
        {"quiet_ms", offsetof(wl_params, quiet_ms)}, {"trace", offsetof(wl_params, trace)},
    };
    const char *eq = strchr(arg, '=');
    if (!eq)
        return -1;
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        if (strlen(keys[k].key) == (size_t)(eq - arg) &&
            strncmp(arg, keys[k].key, (size_t)(eq - arg)) == 0) {
            char *end;
            unsigned long long v = strtoull(eq + 1, &end, 0);
            if (*end || end == eq + 1)
                return -1;
            *(uint64_t *)((char *)p + keys[k].off) = v;
            return 0;
        }
    }
    return -1;
}

int main(int argc, char **argv)
{
    static char line[512];
    if (argc < 2)
        return usage();
    if (strcmp(argv[1], "run") == 0)
        return argc > 2 ? wl_run(argv + 2) : usage();
    size_t w = 0;
    while (w < NWORKLOAD && strcmp(argv[1], workloads[w].name) != 0)
        w++;
    if (w == NWORKLOAD)
        return usage();
    wl_params p = workloads[w].defaults;
    if (!p.seed)
        p.seed = 42;
    for (int i = 2; i < argc; i++) {
        if (set_param(&p, argv[i]) != 0) {
            snprintf(line, sizeof line, "memkit-bench-malloc: bad parameter '%s'\n", argv[i]);
            say(2, line);
            return usage();
        }
    }

    wl_result r = {0};
    workloads[w].fn(&p, &r);
    if (!r.error && r.bad)
        r.error = "objects read back wrong (overlapping or overwritten memory)";
    if (r.error) {
        snprintf(line, sizeof line, "memkit-bench-malloc: %s: %s (bad objects: %llu)\n",
                 workloads[w].name, r.error, (unsigned long long)r.bad);
        say(2, line);
        _exit(1); /* no exit handlers: other threads may still be running */
    }
    snprintf(line, sizeof line, "ns=%llu ops=%llu check=%llu bad=%llu hwm_kib=%llu%s\n",
             (unsigned long long)r.ns, (unsigned long long)r.ops, (unsigned long long)r.check,
             (unsigned long long)r.bad, hwm_kib(), r.extra ? r.extra : "");
    return say(1, line) == 0 ? 0 : 1;
}
