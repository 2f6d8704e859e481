/* SPDX-License-Identifier: MIT */
/*
 * spawn.c - one child process per figure of the drop-in workloads (see
 * spawn.h): fork, set up the child's environment and CPU set, execve,
 * collect stdout and stderr through pipes, wait for its exit status.
 *
 * Why a child per figure: a malloc drop-in can only be chosen when a
 * process starts (LD_PRELOAD), and its peak RSS is only meaningful for a
 * process that did nothing else.  The cost is a fork and an exec (a few
 * milliseconds), outside the workload's own timing; W7's wall time, which
 * is measured here, includes them - the same for every allocator.
 *
 * A child that crashes (a signal), exits non-zero, or runs past its time
 * limit is a failed figure, not a failed bench: it is killed with SIGKILL
 * if need be, reaped, and described in one line (with the first line it
 * wrote on stderr, e.g. memkit's own error report), which the caller puts
 * in the table's notes.  Reading both pipes with poll() keeps a child that
 * fills one pipe from blocking while the bench waits on the other.
 *
 * The environment is the bench's own minus any LD_PRELOAD (the baseline
 * must really be glibc's malloc), plus the preload and the caller's extra
 * variables; it is built before fork, so the child allocates nothing
 * between fork and exec.
 */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sys.h"
#include "timing.h"

extern char **environ;

#define MAX_ENV 512

/* Does "NAME=..." @a set the variable that @b ("NAME=...") sets? */
static int same_var(const char *a, const char *b)
{
    const char *ea = strchr(a, '='), *eb = strchr(b, '=');
    return ea && eb && ea - a == eb - b && strncmp(a, b, (size_t)(ea - a)) == 0;
}

/* Keep the first line of @s (at most @len bytes) in @dst. */
static void first_line(char *dst, size_t len, const char *s)
{
    size_t n = strcspn(s, "\n");
    if (n >= len)
        n = len - 1;
    memcpy(dst, s, n);
    dst[n] = '\0';
}

int bench_proc_run(bench_proc *p)
{
    static char preload_var[4096];
    const char *envp[MAX_ENV + 1];
    size_t ne = 0;
    if (p->preload)
        snprintf(preload_var, sizeof preload_var, "LD_PRELOAD=%s", p->preload);
    for (char **e = environ; *e && ne < MAX_ENV - 16; e++) {
        int drop = strncmp(*e, "LD_PRELOAD=", 11) == 0;
        for (const char *const *x = p->env_extra; x && *x && !drop; x++)
            drop = same_var(*e, *x);
        if (!drop)
            envp[ne++] = *e;
    }
    if (p->preload)
        envp[ne++] = preload_var;
    for (const char *const *x = p->env_extra; x && *x && ne < MAX_ENV; x++)
        envp[ne++] = *x;
    envp[ne] = NULL;

    p->out[0] = p->why[0] = '\0';
    p->wall_s = 0;

    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0)
        goto sys_fail;
    if (pipe2(err, O_CLOEXEC) != 0) {
        close(out[0]);
        close(out[1]);
        goto sys_fail;
    }
    fflush(NULL);
    uint64_t t0 = bench_now_ns();
    pid_t pid = fork();
    if (pid < 0) {
        close(out[0]), close(out[1]), close(err[0]), close(err[1]);
        goto sys_fail;
    }
    if (pid == 0) {
        dup2(out[1], STDOUT_FILENO);
        dup2(err[1], STDERR_FILENO);
        if (p->unpin)
            bench_sys_unpin();
        execve(p->argv[0], (char *const *)p->argv, (char *const *)envp);
        static const char msg[] = "memkit-bench: cannot execute the program\n";
        if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) {
            /* nothing more to say */
        }
        _exit(127);
    }
    close(out[1]);
    close(err[1]);

    static char errbuf[4096];
    size_t nout = 0, nerr = 0;
    int timed_out = 0;
    struct pollfd fds[2] = {{.fd = out[0], .events = POLLIN}, {.fd = err[0], .events = POLLIN}};
    int open_fds = 2;
    uint64_t deadline = t0 + (uint64_t)(p->timeout_s * 1e9);
    while (open_fds > 0) {
        uint64_t now = bench_now_ns();
        if (now >= deadline) {
            timed_out = 1;
            kill(pid, SIGKILL);
            break;
        }
        int ms = (int)((deadline - now) / 1000000u) + 1;
        int r = poll(fds, 2, ms);
        if (r < 0 && errno != EINTR)
            break;
        for (int k = 0; k < 2 && r > 0; k++) {
            if (fds[k].fd < 0 || !fds[k].revents)
                continue;
            char buf[4096];
            ssize_t got = read(fds[k].fd, buf, sizeof buf);
            if (got <= 0) {
                close(fds[k].fd);
                fds[k].fd = -1;
                open_fds--;
                continue;
            }
            if (k == 0) {
                size_t room = sizeof p->out - 1 - nout, n = (size_t)got < room ? (size_t)got : room;
                memcpy(p->out + nout, buf, n);
                p->out[nout += n] = '\0';
            } else {
                fwrite(buf, 1, (size_t)got, stderr); /* the child's own words */
                size_t room = sizeof errbuf - 1 - nerr, n = (size_t)got < room ? (size_t)got : room;
                memcpy(errbuf + nerr, buf, n);
                errbuf[nerr += n] = '\0';
            }
        }
    }
    for (int k = 0; k < 2; k++)
        if (fds[k].fd >= 0)
            close(fds[k].fd);

    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    p->wall_s = (double)(bench_now_ns() - t0) / 1e9;
    errbuf[nerr] = '\0';
    char said[120] = "";
    if (nerr)
        first_line(said, sizeof said, errbuf);

    if (timed_out) {
        snprintf(p->why, sizeof p->why, "timed out after %.0f s (killed)%s%s", p->timeout_s,
                 said[0] ? ": " : "", said);
        return -1;
    }
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        snprintf(p->why, sizeof p->why, "killed by signal %d (%s)%s%s", sig, strsignal(sig),
                 said[0] ? ": " : "", said);
        return -1;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(p->why, sizeof p->why, "exit status %d%s%s", WEXITSTATUS(status),
                 said[0] ? ": " : "", said);
        return -1;
    }
    return 0;

sys_fail:
    snprintf(p->why, sizeof p->why, "cannot start a process: %s", strerror(errno));
    return -1;
}

int bench_proc_figure(const char *out, const char *key, double *v)
{
    size_t n = strlen(key);
    for (const char *s = strstr(out, key); s; s = strstr(s + 1, key))
        if ((s == out || s[-1] == ' ') && s[n] == '=')
            return sscanf(s + n + 1, "%lf", v) == 1 ? 0 : -1;
    return -1;
}
