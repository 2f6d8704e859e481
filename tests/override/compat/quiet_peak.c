/* SPDX-License-Identifier: MIT */
/*
 * compat/quiet_peak.c - resident memory follows use after a peak, with no
 * thread of the allocator's own: FORM's case.
 *
 * A program makes a 512 MiB peak of buffers, touches every page, frees
 * them all, and then either sleeps (makes no call at all) or goes on with
 * small work (a ring of 64-byte objects, 4 MiB live, freed and allocated
 * in turn).  1.5 s after the last free, its resident memory must be at
 * most 16 MiB (plus the ring, in the second case).  Buffers of 1 MiB, of
 * 64 KiB and of 4 KiB, each case in a child of its own.  The figures are
 * printed.  glibc (the control) meets the bound with 1 MiB buffers (its
 * mmap'ed chunks go back at free), and keeps the whole peak of smaller
 * ones here (513 - 516 MiB: they never coalesce into its heap's top):
 * there the bound is memkit's promise, not glibc's, and is checked on
 * memkit only.
 */
#include "compat.h"

#include <sys/wait.h>
#include <time.h>

#define MiB ((size_t)1 << 20)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The child: the peak in @block-byte buffers, freed; then 1.5 s asleep or
 * (@work) churning small objects; exits 0 if RSS came down. */
static int child(size_t block, int work, int bounded)
{
    size_t n = 512 * MiB / block;
    char **b = malloc(n * sizeof *b);
    if (!b)
        return 2;
    for (size_t i = 0; i < n; i++) {
        b[i] = malloc(compat_opaque(block));
        if (!b[i])
            return 2;
        memset(b[i], (int)i, block);
    }
    size_t peak = th_rss_bytes();
    for (size_t i = 0; i < n; i++)
        free(b[i]);
    free(b);
    double freed = now_s();
    enum { RING = 65536 }; /* 64-byte objects: 4 MiB */
    static void *ring[RING];
    size_t k = 0, bound = 16 * MiB + (work ? 4 * MiB : 0);
    while (now_s() - freed < 1.5) {
        if (!work) {
            usleep(100 * 1000);
            continue;
        }
        for (int i = 0; i < 100000; i++, k++) {
            free(ring[k % RING]);
            ring[k % RING] = malloc(compat_opaque(64));
            if (!ring[k % RING])
                return 2;
        }
    }
    size_t rss = th_rss_bytes();
    printf("  %zu-byte buffers, then %s: peak %.0f MiB, 1.5 s after the free %.1f MiB\n",
           block, work ? "small work" : "asleep", (double)peak / MiB,
           (double)rss / MiB);
    fflush(stdout);
    return bounded && rss > bound;
}

static void run(size_t block, int work)
{
    fflush(stdout);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0)
        _exit(child(block, work, compat_memkit || block >= MiB));
    int st;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    th_checks++;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        th_fail(__FILE__, __LINE__, "%zu-byte buffers, %s: status 0x%x (1: RSS "
                "stayed up)", block, work ? "small work" : "asleep", st);
}

static void test_asleep(void)
{
    run(MiB, 0);
    run(64 << 10, 0);
    run(4096, 0);
}

static void test_small_work(void)
{
    run(MiB, 1);
    run(64 << 10, 1);
    run(4096, 1);
}

int main(void)
{
    compat_start();
    RUN(test_asleep);
    RUN(test_small_work);
    return th_done();
}
