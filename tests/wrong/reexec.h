/* SPDX-License-Identifier: MIT */
/*
 * wrong/reexec.h - death tests that need a fresh process: run this test
 * program again (execve of /proc/self/exe) for one case, with variables of
 * our choosing in its environment, and judge how it ended.
 *
 * Why not fork() alone (harness.h's CHECK_DIES): memkit reads MEMKIT_SECURE
 * once, when the library loads, so secure mode can only be switched on in a
 * process that starts with the variable set; and the drop-in's behaviour
 * under LD_PRELOAD is that of a whole program.  Why the child tells the
 * parent what to expect: a report names a pointer, and a fresh process has
 * fresh addresses (ASLR), so the child, which knows the pointer, prints the
 * exact line it expects on stdout ("expect: <line>") before it commits the
 * error; the parent then requires the child's stderr to be exactly that
 * one line and the child to have died of SIGABRT.
 *
 *     int main(int argc, char **argv) {
 *         if (argc > 2) return rx_child(argv[1], argv[2]);  // a case
 *         ...  RX_DIES("case", "arg", env);  // env: {"MEMKIT_SECURE=1", 0}
 *     }
 *
 * rx_child (the test file defines it) looks the case up and runs it; a case
 * that survives its error returns normally, which the parent reports.
 * RX_LIVES runs a case that must exit 0 with nothing on stderr (a case that
 * checks with the harness ends with th_done(): non-zero if a check failed).
 *
 * The child's environment is this process's, minus MEMKIT_* and the
 * harness's TH_ONLY / TH_SKIP, plus @env.  LD_PRELOAD is kept: a test run
 * under the drop-in runs its cases under it too.  Only libc is used here
 * (tests/override/ includes this file in programs that do not see memkit).
 * A child arms alarm(RX_ALARM_S) before its case (rx_begin): a hang is a
 * death by SIGALRM, reported as such.
 */
#ifndef MK_TEST_REEXEC_H
#define MK_TEST_REEXEC_H

#include "harness.h"

#include <poll.h>

extern char **environ;

#define RX_ALARM_S 30
#define RX_MAX_ENV 512

static int rx_dropped(const char *e, const char *const *env)
{
    if (strncmp(e, "MEMKIT_", 7) == 0 || strncmp(e, "TH_ONLY=", 8) == 0 ||
        strncmp(e, "TH_SKIP=", 8) == 0)
        return 1;
    for (size_t i = 0; env && env[i]; i++) {
        const char *eq = strchr(env[i], '=');
        size_t n = eq ? (size_t)(eq - env[i]) : strlen(env[i]);
        if (strncmp(e, env[i], n) == 0 && e[n] == '=')
            return 1;
    }
    return 0;
}

/* Append what fd has to buf (NUL-terminated, at most cap - 1 kept);
 * returns 0 at end of file. */
static int rx_drain(int fd, char *buf, size_t cap, size_t *len)
{
    char tmp[1024];
    ssize_t r = read(fd, tmp, sizeof tmp);
    if (r < 0 && errno == EINTR)
        return 1;
    if (r <= 0)
        return 0;
    size_t room = cap - 1 - *len, n = (size_t)r < room ? (size_t)r : room;
    memcpy(buf + *len, tmp, n);
    *len += n;
    buf[*len] = '\0';
    return 1;
}

/*
 * Run case @name with argument @arg in a fresh process.  Its stdout goes
 * to @out, its stderr to @err (both NUL-terminated, truncated).  Returns
 * the wait status, or -1 if the process could not be started.
 */
static int rx_run(const char *name, const char *arg, const char *const *env,
                  char *out, size_t out_cap, char *err, size_t err_cap)
{
    static char *envp[RX_MAX_ENV + 1];
    size_t n = 0;
    for (char **e = environ; *e && n < RX_MAX_ENV - 16; e++)
        if (!rx_dropped(*e, env))
            envp[n++] = *e;
    for (size_t i = 0; env && env[i] && n < RX_MAX_ENV; i++)
        envp[n++] = (char *)env[i];
    envp[n] = NULL;
    char *argv[] = {(char *)"reexec", (char *)name, (char *)arg, NULL};

    int po[2], pe[2];
    if (pipe(po) != 0)
        return -1;
    if (pipe(pe) != 0) {
        close(po[0]);
        close(po[1]);
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        dup2(po[1], STDOUT_FILENO);
        dup2(pe[1], STDERR_FILENO);
        close(po[0]);
        close(po[1]);
        close(pe[0]);
        close(pe[1]);
        execve("/proc/self/exe", argv, envp);
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    size_t lo = 0, le = 0;
    out[0] = err[0] = '\0';
    int open_o = 1, open_e = 1;
    while (open_o || open_e) {
        struct pollfd p[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (open_o && (p[0].revents & (POLLIN | POLLHUP | POLLERR)))
            open_o = rx_drain(po[0], out, out_cap, &lo);
        if (open_e && (p[1].revents & (POLLIN | POLLHUP | POLLERR)))
            open_e = rx_drain(pe[0], err, err_cap, &le);
        if (!open_o)
            p[0].fd = -1;
        if (!open_e)
            p[1].fd = -1;
    }
    close(po[0]);
    close(pe[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return status;
}

/* In the child: the line the parent must find on stderr. */
static void rx_expect(const char *line)
{
    printf("expect: %s\n", line);
    fflush(stdout);
}

/* rx_expect with one pointer formatted into @fmt (a %p). */
static void rx_expect_ptr(const char *fmt, const void *p)
{
    char buf[512];
    snprintf(buf, sizeof buf, fmt, p);
    rx_expect(buf);
}

static void rx_begin(const char *name)
{
    alarm(RX_ALARM_S);
    th_current = name;
}

/* The line a release build adds after its first report (base/error.c). */
#define RX_HINT "memkit: (the release build reports what it meets on its " \
                "way; link libmemkit-check, or run under Valgrind, to find " \
                "misuse where it happens)\n"

/* A release build's first report is followed by the hint, once (its own
 * test is in wrong/release.c): where it is, it must come after a report
 * and only once; it is taken off @err, so that the report is compared
 * alone.  (The checking build and glibc, the control, print none.) */
static void rx_take_hint(const char *file, int line, const char *name,
                         char *err)
{
    char *h = strstr(err, RX_HINT);
    if (!h)
        return;
    if (strstr(h + 1, RX_HINT) || h == err) {
        th_fail(file, line, "%s: stderr \"%s\" should hold the hint once, "
                "after the report", name, err);
        return;
    }
    memmove(h, h + strlen(RX_HINT), strlen(h + strlen(RX_HINT)) + 1);
}

/* The child must die of SIGABRT with exactly the line it announced (and,
 * in a release build, the hint after it). */
static void rx_dies(const char *file, int line, const char *name,
                    const char *arg, const char *const *env)
{
    char out[4096], err[4096];
    th_checks++;
    int st = rx_run(name, arg, env, out, sizeof out, err, sizeof err);
    if (st != -1)
        rx_take_hint(file, line, name, err);
    const char *exp = strstr(out, "expect: ");
    char want[600] = "";
    if (exp) {
        exp += 8;
        const char *nl = strchr(exp, '\n');
        size_t n = nl ? (size_t)(nl - exp) : strlen(exp);
        if (n > sizeof want - 2)
            n = sizeof want - 2;
        memcpy(want, exp, n);
        want[n] = '\n';
        want[n + 1] = '\0';
    }
    if (st == -1) {
        th_fail(file, line, "%s %s: could not start: %s", name, arg,
                strerror(errno));
    } else if (!exp) {
        th_fail(file, line, "%s %s: the child announced no line (status "
                "0x%x); stdout \"%s\", stderr \"%s\"", name, arg, st, out, err);
    } else if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGABRT) {
        th_fail(file, line, "%s %s: child %s %d, expected to die of SIGABRT; "
                "stderr \"%s\" (expected \"%.*s\")", name, arg,
                WIFSIGNALED(st) ? "died of signal" : "exited with",
                WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), err,
                (int)strlen(want) - 1, want);
    } else if (strcmp(err, want) != 0) {
        th_fail(file, line, "%s %s: stderr is \"%s\", expected the one line "
                "\"%.*s\"", name, arg, err, (int)strlen(want) - 1, want);
    }
}

/* The child must exit 0 and print nothing on stderr. */
static void rx_lives(const char *file, int line, const char *name,
                     const char *arg, const char *const *env)
{
    char out[16384], err[4096];
    th_checks++;
    int st = rx_run(name, arg, env, out, sizeof out, err, sizeof err);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || err[0]) {
        th_fail(file, line, "%s %s: child status 0x%x (%s %d), expected exit "
                "0 with nothing on stderr; stderr \"%s\"; stdout:\n%s", name,
                arg, st, WIFSIGNALED(st) ? "signal" : "exit",
                WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), err, out);
    }
}

#define RX_DIES(name, arg, env) rx_dies(__FILE__, __LINE__, name, arg, env)
#define RX_LIVES(name, arg, env) rx_lives(__FILE__, __LINE__, name, arg, env)

#endif /* MK_TEST_REEXEC_H */
