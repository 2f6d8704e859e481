/* SPDX-License-Identifier: MIT */
/*
 * launch.c - start the program, stay out of its way, and learn how it
 * ended.
 *
 * Start: fork, set the environment (locate.c), execvp.  A pipe with
 * O_CLOEXEC tells the parent whether the exec worked: it reads EOF when
 * the exec closed the pipe, or the child's errno when it failed, so "not
 * found" (127) and "not executable" (126) are told apart, as a shell does,
 * and the first sample is taken only once the program itself is running.
 *
 * Wait: SIGCHLD writes a byte into a non-blocking "wake" pipe (the
 * self-pipe trick), so the sampling loop can poll() that pipe with the
 * time to the next sample as timeout: the end of the program is noticed at
 * once (an exact wall time) without a busy loop, with one code path on
 * every kernel (a pidfd would need Linux 5.3).  Reaping uses wait4, whose
 * rusage gives the program's own peak RSS (ru_maxrss, the kernel's
 * high-water mark; it includes the children it waited for), which no
 * sampling interval can miss.
 *
 * Orphans: the tool makes itself the "child subreaper" (prctl), so a
 * grandchild whose parent exited is re-parented to the tool instead of
 * init and stays in the sampled tree; every reap loop also reaps those.
 *
 * Signals: like system(3), the tool ignores SIGINT and SIGQUIT while the
 * program runs (the terminal sends them to the program too; the tool must
 * live on to report and pass on the status), and forwards SIGTERM and
 * SIGHUP to the program (someone asked the tool to stop: the program is
 * what should stop).  Dispositions are changed in the parent only, after
 * fork, so the program starts with the dispositions the tool was given
 * (an ignored signal would stay ignored across exec).
 */
#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static int wake[2] = {-1, -1};
static volatile sig_atomic_t forward_to; /* the program's pid, or 0 */

static void on_child(int sig)
{
    (void)sig;
    int e = errno;
    char c = 0;
    if (write(wake[1], &c, 1) < 0) { /* full: a wake-up is pending anyway */
    }
    errno = e;
}

static void on_forward(int sig)
{
    pid_t p = (pid_t)forward_to;
    if (p > 0)
        kill(p, sig);
}

static void set_handler(int sig, void (*fn)(int), int flags)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
}

int mr_launch_init(int *wake_fd)
{
    /* failure is not fatal: orphans are then lost to init */
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0)
        return -1;
    set_handler(SIGCHLD, on_child, SA_RESTART | SA_NOCLDSTOP);
    *wake_fd = wake[0];
    return 0;
}

pid_t mr_launch_start(char *const argv[], const char *lib,
                      const char *stats_file, int *fail)
{
    int ep[2];
    if (pipe2(ep, O_CLOEXEC) != 0) {
        fprintf(stderr, "memkit-run: pipe: %s\n", strerror(errno));
        *fail = MR_EXIT_USAGE;
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "memkit-run: fork: %s\n", strerror(errno));
        close(ep[0]);
        close(ep[1]);
        *fail = MR_EXIT_USAGE;
        return -1;
    }
    if (pid == 0) {
        close(ep[0]);
        int err;
        if (mr_locate_env(lib, stats_file) != 0) {
            err = errno;
        } else {
            execvp(argv[0], argv);
            err = errno;
        }
        if (write(ep[1], &err, sizeof err) < 0) { /* nothing else to do */
        }
        _exit(err == ENOENT ? MR_EXIT_NOTFOUND : MR_EXIT_NOEXEC);
    }
    close(ep[1]);
    forward_to = pid;
    set_handler(SIGTERM, on_forward, SA_RESTART);
    set_handler(SIGHUP, on_forward, SA_RESTART);
    set_handler(SIGINT, SIG_IGN, 0);
    set_handler(SIGQUIT, SIG_IGN, 0);

    int err = 0;
    ssize_t n;
    do
        n = read(ep[0], &err, sizeof err);
    while (n < 0 && errno == EINTR);
    close(ep[0]);
    if (n != (ssize_t)sizeof err)
        return pid; /* EOF: the exec succeeded */

    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    forward_to = 0;
    *fail = err == ENOENT ? MR_EXIT_NOTFOUND : MR_EXIT_NOEXEC;
    fprintf(stderr, "memkit-run: cannot run %s: %s%s\n", argv[0],
            strerror(err),
            err == ENOENT && !strchr(argv[0], '/') ? " (searched PATH)" : "");
    return -1;
}

int mr_launch_reap(pid_t program, int *status, long *maxrss_kib,
                   double *user_s, double *sys_s)
{
    int done = 0;
    for (;;) {
        int st;
        struct rusage ru;
        pid_t p = wait4(-1, &st, WNOHANG, &ru);
        if (p < 0 && errno == EINTR)
            continue;
        if (p <= 0)
            break; /* none ended (0) or no child left (ECHILD) */
        if (p != program)
            continue; /* an orphan re-parented to us */
        done = 1;
        *status = st;
        *maxrss_kib = ru.ru_maxrss;
        *user_s = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
        *sys_s = (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    }
    return done;
}

void mr_launch_drain(int wake_fd)
{
    char buf[64];
    while (read(wake_fd, buf, sizeof buf) > 0) {
    }
}

void mr_launch_done(void)
{
    forward_to = 0;
    set_handler(SIGTERM, SIG_DFL, 0);
    set_handler(SIGHUP, SIG_DFL, 0);
    set_handler(SIGINT, SIG_DFL, 0);
    set_handler(SIGQUIT, SIG_DFL, 0);
    set_handler(SIGPIPE, SIG_IGN, 0); /* a gnuplot that dies early */
}
