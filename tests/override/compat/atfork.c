/* SPDX-License-Identifier: MIT */
/*
 * compat/atfork.c - fork handlers may allocate, whatever the order they
 * were registered in.
 *
 * glibc locks its malloc inside fork() itself, after the prepare handlers
 * and before the parent and child ones, so any handler may call malloc.
 * memkit locks from a handler of its own: one registered before it runs
 * its prepare part after memkit's and its parent and child parts before
 * memkit's, with memkit's locks held.  Here both orders are present: the
 * library compat_atfork_early registers handlers from its constructor
 * before the program's first malloc, and main() registers more after it
 * has allocated; every handler allocates a size class not used before and
 * a large block.  Forks run single-threaded and with a second thread
 * allocating meanwhile; alarm() turns a hang into a failure.
 */
#include "compat.h"

#include <pthread.h>

extern int compat_early_calls[3];
static int late_calls[3];

static void use(size_t small, size_t large)
{
    char *a = malloc(compat_opaque(small)), *b = malloc(compat_opaque(large));
    if (!a || !b)
        abort();
    memset(a, 3, small);
    memset(b, 4, 4096);
    free(b);
    free(a);
}

static void late_prepare(void) { late_calls[0]++, use(15000, 9u << 20); }
static void late_parent(void) { late_calls[1]++, use(17000, 11u << 20); }
static void late_child(void) { late_calls[2]++, use(19000, 13u << 20); }

static int fork_and_wait(void)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        /* the child ran both child handlers before returning here */
        void *p = malloc(compat_opaque(21000));
        _exit(p && compat_early_calls[2] >= 1 && late_calls[2] >= 1 ? 0 : 3);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static volatile int stop;

static void *allocator(void *arg)
{
    (void)arg;
    th_rng r = {7};
    while (!stop) {
        size_t n = 16 + (size_t)th_below(&r, 5000);
        void *p = malloc(n);
        if (p)
            memset(p, 5, n < 64 ? n : 64);
        free(p);
    }
    return NULL;
}

static void test_handlers_allocate(void)
{
    alarm(30); /* a hang in a handler is a death by SIGALRM */
    free(malloc(compat_opaque(100))); /* main's first allocations */
    CHECK_EQ(pthread_atfork(late_prepare, late_parent, late_child), 0);
    for (int i = 0; i < 5; i++)
        CHECK_EQ(fork_and_wait(), 0);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, allocator, NULL) == 0);
    for (int i = 0; i < 20; i++)
        CHECK_EQ(fork_and_wait(), 0);
    stop = 1;
    pthread_join(t, NULL);
    alarm(0);
    CHECK_EQ(compat_early_calls[0], 25);
    CHECK_EQ(compat_early_calls[1], 25);
    CHECK_EQ(late_calls[0], 25);
    CHECK_EQ(late_calls[1], 25);
}

int main(void)
{
    compat_start();
    RUN(test_handlers_allocate);
    return th_done();
}
