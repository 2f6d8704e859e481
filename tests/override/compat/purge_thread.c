/* SPDX-License-Identifier: MIT */
/*
 * compat/purge_thread.c - memkit does not leave a program multi-threaded
 * once it is idle.
 *
 * Past 16 MiB memkit starts a background thread that gives free memory
 * back to the OS.  It used to stay for good, and calls that need a
 * single-threaded caller then failed: unshare(CLONE_NEWUSER) returned
 * EINVAL (setns(2) into a user namespace documents the same).  The thread
 * must exit once nothing waits to go back: here the program allocates
 * 64 MiB in 64 KiB blocks, frees them, and must be single-threaded again
 * within 1.6 s (the memory goes back after the 100 ms purge delay, the
 * thread after a second without work), and unshare must not fail with
 * EINVAL.  With MEMKIT_PURGE_THREAD=0 (argument "off") the process must
 * never have a second thread.  On glibc the program is single-threaded
 * throughout.
 */
#include "compat.h"

#include <sched.h>
#include <time.h>

#define MiB ((size_t)1 << 20)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int off;

static void test_single_threaded_again(void)
{
    enum { N = 1024 };
    static char *blocks[N];
    int most = compat_threads();
    for (int i = 0; i < N; i++) {
        blocks[i] = malloc(compat_opaque(64 << 10));
        REQUIRE_NOT_NULL(blocks[i]);
        memset(blocks[i], i, 64 << 10);
        int t = compat_threads();
        most = t > most ? t : most;
    }
    size_t peak = th_rss_bytes();
    for (int i = 0; i < N; i++)
        free(blocks[i]);
    double freed = now_s(), single = -1;
    while (now_s() - freed < 3.0) {
        int t = compat_threads();
        most = t > most ? t : most;
        if (t == 1 && single < 0)
            single = now_s() - freed;
        if (single >= 0 && now_s() - freed > (off ? 1.0 : single + 0.2))
            break;
        usleep(20 * 1000);
    }
    size_t after = th_rss_bytes();
    printf("threads at most %d; single-threaded %.2f s after the last free; "
           "RSS %.1f MiB at the peak, %.1f MiB then\n", most, single,
           peak / (double)MiB, after / (double)MiB);
    th_checks++;
    if (single < 0 || single > 1.6)
        th_fail(__FILE__, __LINE__, "still multi-threaded 1.6 s after the last "
                "free (%.2f s)", single);
    if (off || !compat_memkit)
        CHECK_EQ(most, 1);
    if (compat_memkit && !off) /* and the memory did go back */
        CHECK_LT(after + 32 * MiB, peak);
    /* the call that refused a multi-threaded caller */
    errno = 0;
    int r = unshare(CLONE_NEWUSER);
    printf("unshare(CLONE_NEWUSER) = %d (%s)\n", r, r ? strerror(errno) : "ok");
    th_checks++;
    if (r != 0 && errno == EINVAL)
        th_fail(__FILE__, __LINE__, "unshare(CLONE_NEWUSER): EINVAL (the "
                "process is multi-threaded)");
}

int main(int argc, char **argv)
{
    compat_start();
    off = argc > 1 && strcmp(argv[1], "off") == 0;
    RUN(test_single_threaded_again);
    return th_done();
}
