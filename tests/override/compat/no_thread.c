/* SPDX-License-Identifier: MIT */
/*
 * compat/no_thread.c - the drop-in starts no thread of its own, so a
 * program stays single-threaded through peaks, frees and quiet spells, as
 * on glibc, and everything that needs a single-threaded caller works:
 *  - __libc_single_threaded stays 1 (libstdc++ then keeps its reference
 *    counts non-atomic);
 *  - children made without fork handlers - raw clone(SIGCHLD) with no
 *    CLONE_VM, and glibc's _Fork(), as bubblewrap, systemd, lxc and crun
 *    make them - right after a large free, 30 of each, every one of which
 *    mallocs and frees: none may hang (a lock held by a thread the child
 *    does not have); each must finish within 5 s (the clones come 85 to
 *    120 ms after the free, when an allocator that gives memory back
 *    from a thread of its own, 100 ms after a free, is at work);
 *  - unshare(CLONE_NEWUSER) after a 20 MiB buffer is freed, in the process
 *    and in a forked child that frees what it inherited (refused with
 *    EINVAL by a multi-threaded caller; a system that forbids user
 *    namespaces answers EPERM or ENOSPC, and the case is skipped);
 *  - a program that forbids itself clone with seccomp (SIGSYS on clone or
 *    clone3) allocates and frees a 512 MiB peak and lives.
 * Each also checks the thread count (/proc/self/status) stays 1.
 */
#include "compat.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#define MiB ((size_t)1 << 20)

extern pid_t _Fork(void);

/* A peak of @mib MiB in blocks of @block bytes, touched, then freed. */
static void peak_and_free(size_t mib, size_t block)
{
    size_t n = mib * MiB / block;
    char **b = malloc(n * sizeof *b);
    REQUIRE_NOT_NULL(b);
    for (size_t i = 0; i < n; i++) {
        b[i] = malloc(compat_opaque(block));
        REQUIRE_NOT_NULL(b[i]);
        memset(b[i], (int)i, block);
    }
    for (size_t i = 0; i < n; i++)
        free(b[i]);
    free(b);
}

static void test_single_threaded_through_peaks(void)
{
    CHECK_EQ(__libc_single_threaded, 1);
    peak_and_free(64, 64 << 10);
    peak_and_free(64, 4 << 20);
    peak_and_free(16, 100);
    usleep(300 * 1000); /* (a purge delay or three, quiet) */
    peak_and_free(8, 1000);
    CHECK_EQ(__libc_single_threaded, 1);
    CHECK_EQ(compat_threads(), 1);
}

/* A child's work: allocate and free, then exit 0. */
static void child_work(void)
{
    for (int i = 0; i < 1000; i++) {
        void *p = malloc(compat_opaque((size_t)(i % 37) * 100 + 1));
        void *q = malloc(compat_opaque((size_t)2 << 20));
        if (!p || !q)
            _exit(2);
        memset(q, 1, 4096);
        free(q);
        free(p);
    }
    _exit(0);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Wait up to 5 s for child @pid: 0 if it exited 0, else -1 (killed if it
 * hung). */
static int wait_child(pid_t pid)
{
    double until = now_s() + 5.0;
    int st;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
        if (r < 0 || now_s() > until) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        usleep(1000);
    }
}

static void test_children_without_fork_handlers(void)
{
    int hung = 0, failed = 0;
    for (int i = 0; i < 60; i++) {
        peak_and_free(20, 64 << 10); /* a large free right before */
        /* (where the clone lands against an allocator's own thread that
         * gives the memory back about 100 ms after a free) */
        usleep((useconds_t)(85 + (i / 2) % 8 * 5) * 1000);
        fflush(stdout);
        pid_t pid = i % 2 ? _Fork() : (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
        REQUIRE(pid >= 0);
        if (pid == 0)
            child_work();
        if (wait_child(pid) != 0) {
            if (i % 2)
                failed++;
            else
                hung++;
        }
    }
    printf("raw clone: %d of 30 did not finish; _Fork: %d of 30\n", hung, failed);
    CHECK_EQ(hung, 0);
    CHECK_EQ(failed, 0);
}

/* unshare(CLONE_NEWUSER) here; 1 if it worked, 0 if the system forbids
 * it, -1 if it was refused as from a multi-threaded caller. */
static int try_unshare(void)
{
    errno = 0;
    if (unshare(CLONE_NEWUSER) == 0)
        return 1;
    return errno == EINVAL ? -1 : 0;
}

static void test_unshare_after_free(void)
{
    char *big = malloc(compat_opaque(20 * MiB));
    REQUIRE_NOT_NULL(big);
    memset(big, 1, 20 * MiB);
    char *inherited = malloc(compat_opaque(20 * MiB));
    REQUIRE_NOT_NULL(inherited);
    memset(inherited, 2, 20 * MiB);
    free(big);
    fflush(stdout);
    /* a forked child that frees what it inherited, then unshares */
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        free(inherited);
        peak_and_free(20, 1 << 20);
        _exit(try_unshare() < 0 ? 1 : 0);
    }
    CHECK_EQ(wait_child(pid), 0);
    free(inherited);
    int r = try_unshare();
    if (r == 0)
        printf("skipped here: user namespaces are not allowed (%s)\n", strerror(errno));
    CHECK(r != -1);
}

/* seccomp: clone and clone3 kill the process (SIGSYS) */
static int forbid_clone(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 2, 0),
#ifdef SYS_clone3
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 1, 0),
#else
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0xffffffff, 1, 0),
#endif
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    };
    struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

static void test_seccomp_without_clone(void)
{
    fflush(stdout);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        if (forbid_clone() != 0)
            _exit(77);
        peak_and_free(512, 1 << 20);
        usleep(300 * 1000);
        peak_and_free(64, 64 << 10);
        usleep(300 * 1000);
        _exit(compat_threads() == 1 ? 0 : 1);
    }
    int st;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
        printf("skipped: no seccomp here\n");
        return;
    }
    th_checks++;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        th_fail(__FILE__, __LINE__, "the child %s %d", WIFSIGNALED(st) ? "died of signal" :
                "exited with", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

int main(void)
{
    compat_start();
    RUN(test_single_threaded_through_peaks);
    RUN(test_children_without_fork_handlers);
    RUN(test_unshare_after_free);
    RUN(test_seccomp_without_clone);
    return th_done();
}
