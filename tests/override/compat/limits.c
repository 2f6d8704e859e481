/* SPDX-License-Identifier: MIT */
/*
 * compat/limits.c - the drop-in under a program's resource limits behaves
 * as glibc does: it takes from them only what the program uses.
 *
 * Each case runs in a child that sets the limit (as `ulimit` or systemd's
 * LimitDATA= would) and then execs this program again, so the allocator
 * starts under it:
 *  - RLIMIT_AS (`ulimit -v`) 1 GiB: a malloc of 60% of the limit works;
 *    blocks of 1 MiB fill at least 97% of it (glibc: 1,017 MiB) and of
 *    64 KiB at least 90%; after all are freed, malloc of half the limit
 *    works again;
 *  - RLIMIT_AS 2 GiB: a program starts at least 245 threads of 8 MiB
 *    stacks (glibc: 255);
 *  - RLIMIT_DATA 32 MiB: the program loads and mallocs; 320 MiB: 256 MiB
 *    in 64 KiB and in 1 KiB blocks filled, all freed, 2 s quiet, and a
 *    malloc of 128 MiB works (memory given back leaves the data limit);
 *  - mlockall(MCL_CURRENT | MCL_FUTURE) as an unprivileged user with an
 *    8 MiB lock limit works, and mallocs after it work (skipped where the
 *    test cannot drop to an unprivileged user); as root, the resident
 *    memory it locks stays under 8 MiB (glibc: about 2).
 * Figures are printed; the bounds hold on glibc too (the control run).
 */
#include "compat.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>

#define MiB ((size_t)1 << 20)

static char self[4096];

/* Run this program again with argument @arg under limit @res = @value
 * (RLIM_INFINITY: none); its exit status (77: skipped), -1 if it did
 * not exit. */
static int rerun(const char *arg, int res, rlim_t value)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (value != RLIM_INFINITY) {
            struct rlimit rl = {value, value};
            if (setrlimit(res, &rl) != 0)
                _exit(77);
        }
        execl(self, self, arg, (char *)NULL);
        _exit(126);
    }
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return -1;
    if (WIFSIGNALED(st))
        printf("  %s: killed by signal %d\n", arg, WTERMSIG(st));
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- the children: 0 when the case holds, 1 (and a line) when not ------- */

/* Fill with blocks of @block bytes until malloc fails; returns the bytes,
 * freeing everything. */
static size_t fill(size_t block)
{
    enum { MAX = 1 << 16 };
    char **b = mmap(NULL, MAX * sizeof *b, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED)
        return 0;
    size_t n = 0;
    while (n < MAX && (b[n] = malloc(compat_opaque(block))) != NULL) {
        memset(b[n], 1, 64); /* (a write to each: no lazy tricks) */
        n++;
    }
    for (size_t i = 0; i < n; i++)
        free(b[i]);
    munmap(b, MAX * sizeof *b);
    return n * block;
}

static int c_as(void)
{
    int bad = 0;
    size_t limit = (size_t)1 << 30;
    char *p = malloc(compat_opaque(limit / 10 * 6));
    printf("  malloc(60%% of 1 GiB): %s\n", p ? "ok" : "NULL");
    bad |= !p;
    if (p) {
        memset(p, 1, limit / 10 * 6);
        free(p);
    }
    size_t big = fill(MiB), mid = fill(64 << 10);
    printf("  filled %zu MiB in 1 MiB blocks, %zu MiB in 64 KiB blocks\n",
           big / MiB, mid / MiB);
    bad |= big < limit / 100 * 97 || mid < limit / 100 * 90;
    p = malloc(compat_opaque(limit / 2));
    printf("  after freeing it all, malloc(half of 1 GiB): %s\n", p ? "ok" : "NULL");
    bad |= !p;
    free(p);
    return bad;
}

/* (no malloc: glibc's would give each thread an arena of 64 MiB of
 * address space, and start 135) */
static void *parked(void *arg)
{
    pthread_mutex_t *m = arg;
    pthread_mutex_lock(m);
    pthread_mutex_unlock(m);
    return NULL;
}

static int c_as_threads(void)
{
    enum { MAX = 400 };
    static pthread_t t[MAX];
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&m);
    int n = 0;
    while (n < MAX && pthread_create(&t[n], NULL, parked, &m) == 0)
        n++;
    pthread_mutex_unlock(&m);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    printf("  %d threads under a 2 GiB address space limit\n", n);
    return n < 245;
}

static int c_data_small(void)
{
    char *p = malloc(compat_opaque(100));
    char *q = malloc(compat_opaque(4 * MiB));
    printf("  under a 32 MiB data limit: malloc(100) %s, malloc(4 MiB) %s\n",
           p ? "ok" : "NULL", q ? "ok" : "NULL");
    int bad = !p || !q;
    free(p);
    free(q);
    return bad;
}

static int refill(size_t block)
{
    enum { MAX = 1 << 18 };
    size_t n = 256 * MiB / block;
    char **b = calloc(MAX, sizeof *b); /* (the program's own data) */
    if (!b)
        return 1;
    for (size_t i = 0; i < n && i < MAX; i++) {
        b[i] = malloc(compat_opaque(block));
        if (!b[i]) {
            printf("  the 256 MiB fill failed at %zu MiB\n", i * block / MiB);
            return 1;
        }
        memset(b[i], 1, block);
    }
    for (size_t i = 0; i < n && i < MAX; i++)
        free(b[i]);
    free(b);
    sleep(2);
    char *p = malloc(compat_opaque(128 * MiB));
    printf("  %zu-byte blocks: 256 MiB filled and freed, 2 s later malloc(128 MiB): %s\n",
           block, p ? "ok" : "NULL");
    if (!p)
        return 1;
    memset(p, 1, 128 * MiB);
    free(p);
    return 0;
}

static int c_data_refill(void) { return refill(64 << 10) | refill(1024); }

/* The user to drop to: nobody, where this runs as root. */
static int unprivileged(void)
{
    if (geteuid() != 0)
        return 0;
    return setgid(65534) == 0 && setuid(65534) == 0 ? 0 : -1;
}

static int c_mlock_user(void)
{
    void *early = malloc(compat_opaque(100)); /* (the allocator is up) */
    if (unprivileged() != 0)
        return 77;
    int r = mlockall(MCL_CURRENT | MCL_FUTURE);
    printf("  unprivileged mlockall under an 8 MiB lock limit: %s\n",
           r == 0 ? "ok" : strerror(errno));
    if (r != 0)
        return 1;
    char *p = malloc(compat_opaque(1000)), *q = malloc(compat_opaque(100000));
    printf("  then malloc(1000) %s, malloc(100000) %s\n", p ? "ok" : "NULL",
           q ? "ok" : "NULL");
    free(early);
    free(p);
    free(q);
    return !p || !q;
}

static int c_mlock_root(void)
{
    void *early = malloc(compat_opaque(100));
    if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0)
        return 77;
    char *p = malloc(compat_opaque(1000));
    size_t rss = th_rss_bytes();
    printf("  mlockall as root: %.1f MiB resident\n", (double)rss / (double)MiB);
    free(p);
    free(early);
    return rss > 8 * MiB;
}

/* ---- the parent ---------------------------------------------------------- */

static void expect(const char *arg, int res, rlim_t value)
{
    int r = rerun(arg, res, value);
    if (r == 77) {
        printf("  %s: skipped (no such limit or user here)\n", arg);
        return;
    }
    th_checks++;
    if (r != 0)
        th_fail(__FILE__, __LINE__, "case %s: status %d", arg, r);
}

static void test_address_space(void)
{
    expect("as", RLIMIT_AS, (rlim_t)1 << 30);
    expect("as_threads", RLIMIT_AS, (rlim_t)2 << 30);
}

static void test_data(void)
{
    expect("data_small", RLIMIT_DATA, 32 * MiB);
    expect("data_refill", RLIMIT_DATA, 320 * MiB);
}

static void test_mlockall(void)
{
    expect("mlock_user", RLIMIT_MEMLOCK, 8 * MiB);
    if (geteuid() == 0)
        expect("mlock_root", RLIMIT_MEMLOCK, RLIM_INFINITY);
}

int main(int argc, char **argv)
{
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 1;
    self[n] = 0;
    if (argc > 1) {
        static const struct {
            const char *name;
            int (*fn)(void);
        } cases[] = {{"as", c_as},
                     {"as_threads", c_as_threads},
                     {"data_small", c_data_small},
                     {"data_refill", c_data_refill},
                     {"mlock_user", c_mlock_user},
                     {"mlock_root", c_mlock_root}};
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            if (strcmp(argv[1], cases[i].name) == 0)
                return cases[i].fn();
        return 2;
    }
    compat_start();
    RUN(test_address_space);
    RUN(test_data);
    RUN(test_mlockall);
    return th_done();
}
