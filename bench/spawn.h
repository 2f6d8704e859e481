/* SPDX-License-Identifier: MIT */
/*
 * spawn.h - run a program in a child process under a chosen malloc
 * (LD_PRELOAD), and learn how it went: its output, wall time and how it
 * ended - without letting a child that crashes or hangs take the bench
 * down with it.  (Not its peak RSS: Linux counts in a child's ru_maxrss
 * the size of the bench it was forked from; the child reports its own,
 * see malloc/main.c.)
 */
#ifndef BENCH_SPAWN_H
#define BENCH_SPAWN_H

#include <stdint.h>

typedef struct bench_proc {
    /* in */
    const char *const *argv;      /* argv[0]: the program's path */
    const char *preload;          /* LD_PRELOAD value; NULL: none (glibc malloc) */
    const char *const *env_extra; /* NULL, or "NAME=value" strings, NULL-ended */
    int unpin;                    /* run on every CPU the bench had before pinning */
    double timeout_s;             /* killed (SIGKILL) past this wall time */
    /* out */
    char out[512];       /* the start of its stdout, NUL-terminated */
    char why[200];       /* how it failed: "killed by signal 11 (...): <stderr>" */
    double wall_s;       /* from fork to its exit */
} bench_proc;

/**
 * Run @p p->argv to completion (fork, execve with the bench's environment
 * minus LD_PRELOAD, plus LD_PRELOAD=@p p->preload and @p p->env_extra).
 * Its stdout is captured; its stderr too (the first line goes into
 * @p p->why on failure, all of it is echoed to the bench's stderr).
 * @return 0 if it exited with status 0 in time, else -1 with @p p->why set.
 */
int bench_proc_run(bench_proc *p);

/**
 * The number that follows "@p key=" in @p out (a child's line of
 * " key=value" figures, the key at the start or after a space) in @p v.
 * @return 0, or -1 if the key is not there.
 */
int bench_proc_figure(const char *out, const char *key, double *v);

#endif /* BENCH_SPAWN_H */
