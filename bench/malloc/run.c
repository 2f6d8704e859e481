/* SPDX-License-Identifier: MIT */
/*
 * run.c - `memkit-bench-malloc run PROGRAM ARGS...`: run another program
 * (W7's programs: perl, python3, sqlite3, ...) and report on it in the workload line, as if it
 * were a workload: ns = its wall time from fork to exit, ops = 1, check =
 * a hash (FNV-1a) of all it wrote on stdout, hwm_kib = its peak RSS
 * (wait4's ru_maxrss).  Its stderr passes through.
 *
 * Why a trampoline and not a plain fork + exec from memkit-bench: Linux
 * counts in a process's ru_maxrss the resident size of the process it was
 * forked from, up to its exec - and memkit-bench, after the in-process
 * workloads, can hold hundreds of MiB, which would then be every
 * program's "peak".  This small program, freshly exec'ed, is what the
 * measured program is forked from, so its peak is its own (plus this
 * program's few hundred KiB, the same for every allocator).  The
 * trampoline itself runs under the same LD_PRELOAD (it inherits it, as the
 * program does); it allocates next to nothing.
 *
 * If the program dies of a signal, so does the trampoline (the same
 * signal, re-raised), so that memkit-bench reports it as it would report a
 * crash of the program; any other failure is exit status 1 with a line on
 * stderr.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "wl.h"

int wl_run(char **argv)
{
    static char line[256];
    int out[2];
    if (pipe(out) != 0)
        return 1;
    uint64_t t0 = bench_now_ns();
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        dup2(out[1], STDOUT_FILENO);
        close(out[0]);
        close(out[1]);
        execv(argv[0], argv);
        snprintf(line, sizeof line, "memkit-bench-malloc: run: cannot execute %s: %s\n", argv[0],
                 strerror(errno));
        if (write(STDERR_FILENO, line, strlen(line)) < 0) {
            /* nothing more to say */
        }
        _exit(127);
    }
    close(out[1]);
    uint64_t hash = 0xcbf29ce484222325u;
    for (;;) {
        char buf[4096];
        ssize_t n = read(out[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n; i++) {
            hash ^= (unsigned char)buf[i];
            hash *= 0x100000001b3u;
        }
    }
    close(out[0]);
    int status;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0)
        if (errno != EINTR)
            return 1;
    uint64_t ns = bench_now_ns() - t0;

    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        signal(sig, SIG_DFL);
        raise(sig);
        return 1;
    }
    if (WEXITSTATUS(status) != 0) {
        snprintf(line, sizeof line, "memkit-bench-malloc: run: %s exited with status %d\n",
                 argv[0], WEXITSTATUS(status));
        if (write(STDERR_FILENO, line, strlen(line)) < 0) {
            /* nothing more to say */
        }
        return 1;
    }
    snprintf(line, sizeof line, "ns=%llu ops=1 check=%llu bad=0 hwm_kib=%ld\n",
             (unsigned long long)ns, (unsigned long long)hash, ru.ru_maxrss);
    return write(STDOUT_FILENO, line, strlen(line)) == (ssize_t)strlen(line) ? 0 : 1;
}
