/* SPDX-License-Identifier: MIT */
/*
 * api/respawn.h - run this test program again, as a fresh process, for one
 * case: the tests of the purge policy and of the environment variables
 * need what fork() cannot give, a process in which memkit has not started
 * yet (its options are read once, from the environment, at first use; its
 * purge thread starts once and stays; segments it keeps for reuse change
 * every later figure).
 *
 *     if (argc > 1) return rs_run_case(cases, RS_NCASES(cases), argv[1]);
 *     int st = rs_run("case", env, out, sizeof out);  // in a test
 *
 * rs_run() executes /proc/self/exe with argv[1] = the case's name, in an
 * environment made of this process's, minus every MEMKIT_* variable and the
 * harness's TH_ONLY / TH_SKIP (the child must not inherit what ctest set
 * for the parent), plus the "NAME=value" entries of @env.  The child's
 * stdout and stderr both go into @out (truncated to @cap - 1 bytes, NUL-
 * terminated); rs_run() returns the wait status, or -1 if fork/pipe failed.
 * The environment is built before fork(): the child only calls execve.
 *
 * rs_expect_ok() runs a case, shows its output indented under the parent's
 * test (so a failure inside the child is printed with its file and line),
 * and checks that the child exited with status 0; a child case ends with
 * `return th_done();`, so it fails when a check failed and when none ran.
 *
 * A child arms alarm(RS_CHILD_ALARM_S) (rs_child_begin), so a child stuck
 * waiting for memory that never comes back dies of SIGALRM, reported as
 * such, instead of hanging the suite until ctest's timeout.
 */
#ifndef MK_TEST_RESPAWN_H
#define MK_TEST_RESPAWN_H

#include "harness.h"

#include <fcntl.h>
#include <time.h>

extern char **environ;

#define RS_CHILD_ALARM_S 30
#define RS_MAX_ENV 512

/* Does environment entry @e name one of the variables a child must not
 * inherit, or one that @env sets? */
static int rs_dropped(const char *e, const char *const *env)
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

static int rs_run(const char *mode, const char *const *env, char *out,
                  size_t cap)
{
    static char *envp[RS_MAX_ENV + 1];
    size_t n = 0;
    for (char **e = environ; *e && n < RS_MAX_ENV - 16; e++)
        if (!rs_dropped(*e, env))
            envp[n++] = *e;
    for (size_t i = 0; env && env[i] && n < RS_MAX_ENV; i++)
        if (strchr(env[i], '='))
            envp[n++] = (char *)env[i];
    envp[n] = NULL;
    char *argv[] = {(char *)"respawned", (char *)mode, NULL};

    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], STDOUT_FILENO);
        dup2(fds[1], STDERR_FILENO);
        close(fds[1]);
        execve("/proc/self/exe", argv, envp);
        _exit(127);
    }
    close(fds[1]);
    size_t len = 0;
    char sink[256];
    for (;;) {
        char *dst = len + 1 < cap ? out + len : sink;
        size_t room = len + 1 < cap ? cap - 1 - len : sizeof sink;
        ssize_t r = read(fds[0], dst, room);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (dst != sink)
            len += (size_t)r;
    }
    out[len] = '\0';
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return status;
}

/* Print @text with every line indented by "    | ". */
static void rs_show(const char *text)
{
    for (const char *s = text; *s;) {
        const char *e = strchr(s, '\n');
        int len = e ? (int)(e - s) : (int)strlen(s);
        printf("    | %.*s\n", len, s);
        s += len + (e ? 1 : 0);
    }
    fflush(stdout);
}

/* Run case @mode in a fresh process; it must exit with status 0. */
static void rs_expect_ok_at(const char *file, int line, const char *mode,
                            const char *const *env, char *out, size_t cap)
{
    int st = rs_run(mode, env, out, cap);
    rs_show(out);
    th_checks++;
    if (st == -1)
        th_fail(file, line, "case %s: could not start: %s", mode,
                strerror(errno));
    else if (WIFSIGNALED(st))
        th_fail(file, line, "case %s: child died of signal %d%s", mode,
                WTERMSIG(st),
                WTERMSIG(st) == SIGALRM ? " (its alarm: it hung)" : "");
    else if (WEXITSTATUS(st) != 0)
        th_fail(file, line, "case %s: child exited with status %d", mode,
                WEXITSTATUS(st));
}

#define rs_expect_ok(mode, env, out, cap) \
    rs_expect_ok_at(__FILE__, __LINE__, mode, env, out, cap)

/* In the child, before its case: a deadline for the whole process. */
static void rs_child_begin(const char *mode)
{
    alarm(RS_CHILD_ALARM_S);
    th_current = mode;
}

/* ---- small helpers the respawned cases share ----------------------------- */

static double rs_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void rs_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* A child case: its name (argv[1] of the child) and its body. */
typedef struct rs_case {
    const char *name;
    void (*fn)(void);
} rs_case;

#define RS_NCASES(cases) (sizeof(cases) / sizeof *(cases))

/* In the child: run the case named @name of @cases (rs_child_begin
 * first); its exit status is th_done()'s, 2 for an unknown name. */
static int rs_run_case(const rs_case *cases, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(cases[i].name, name) == 0) {
            rs_child_begin(name);
            cases[i].fn();
            return th_done();
        }
    fprintf(stderr, "no case %s\n", name);
    return 2;
}

#endif /* MK_TEST_RESPAWN_H */
