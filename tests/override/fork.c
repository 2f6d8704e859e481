/* SPDX-License-Identifier: MIT */
/*
 * override/fork.c - fork() from a multi-threaded program in the middle of
 * allocation.
 *
 * Four threads malloc, fill, check and free in a tight loop (small, large
 * and now and then huge chunks) and publish some of their chunks in a
 * shared table.  Meanwhile the main thread forks 40 times.  Each child,
 * which has only the forking thread, must be able to use malloc at once,
 * whatever locks the parent's threads held at the fork:
 *  - it checks and frees every chunk the table holds (chunks the parent's
 *    threads allocated before the fork: frees into heaps whose threads do
 *    not exist in the child);
 *  - it mallocs, reallocs and frees a lot (every regime), checking
 *    contents;
 *  - it starts a thread that does the same (a new heap in the child) and
 *    joins it; every fifth child also forks a grandchild that mallocs;
 *  - it exits with _exit(0), or a status that says what went wrong.
 * The parent checks every child's exit status.  A deadlock (a lock the
 * fork left held) would hang the child: each child has alarm(20), so it
 * dies of SIGALRM and the parent reports it; the parent has alarm(100)
 * for itself.  After the forks, the parent's threads stop and check that
 * they saw no broken pattern: the fork handlers did not disturb them.
 *
 * The table has its own mutex, which the main thread holds across fork()
 * (as a program's own pthread_atfork handler would), so the child reads a
 * consistent table.
 *
 * A second test: a thread the child starts runs on the stack of one of the
 * parent's threads (glibc reuses them) and so has its thread pointer; it
 * must still not take that parent thread's heap for its own (a realloc of
 * the parent thread's chunk moves into the child thread's context).
 * Linked with libmemkit-malloc (memkit.h: mk_ctx_of).  Fixed seeds.
 */
#include "harness.h"

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <memkit.h>

enum { THREADS = 4, FORKS = 40, PUB = 16, CHILD_OPS = 10000 };

typedef struct item {
    unsigned char *p;
    size_t n;
    uint64_t id;
} item;

static pthread_mutex_t pub_lock = PTHREAD_MUTEX_INITIALIZER;
static item published[THREADS][PUB];
static atomic_int stop;
static long thread_bad[THREADS];
static long thread_loops[THREADS];

/* The pattern of @id in the first and the last 256 bytes of a chunk (the
 * whole chunk when smaller): what a chunk handed out twice, or a header
 * overwritten, would break, at a cost that does not grow with the size. */
static void fill_ends(unsigned char *p, size_t n, uint64_t id)
{
    size_t head = n < 512 ? n : 256;
    th_fill(p, head, id);
    if (head < n)
        th_fill(p + n - 256, 256, ~id);
}

static int ends_ok(const unsigned char *p, size_t n, uint64_t id)
{
    size_t head = n < 512 ? n : 256;
    return th_verify(p, head, id) == (size_t)-1 &&
           (head == n || th_verify(p + n - 256, 256, ~id) == (size_t)-1);
}

/* After a realloc of a chunk of @old bytes to @now: what fill_ends wrote
 * and the resize kept is intact. */
static int kept_ok(const unsigned char *q, size_t old, size_t now, uint64_t id)
{
    size_t head = old < 512 ? old : 256;
    if (th_verify(q, head < now ? head : now, id) != (size_t)-1)
        return 0;
    return head == old || now < old ||
           th_verify(q + old - 256, 256, ~id) == (size_t)-1;
}

/* Mostly small chunks; one in 32 large, one in 512 huge. */
static size_t rand_size(th_rng *r)
{
    uint64_t k = th_below(r, 512);
    if (k == 0)
        return 1048577 + (size_t)th_below(r, 524288); /* huge */
    if (k < 16)
        return 32769 + (size_t)th_below(r, 100000);   /* large */
    return 1 + (size_t)th_below(r, 4096);             /* small */
}

static void *worker(void *arg)
{
    int me = (int)(intptr_t)arg;
    th_rng r = {0xf0f0u + (uint64_t)me * 1000003};
    item local[64];
    memset(local, 0, sizeof local);
    uint64_t id = ((uint64_t)me + 1) << 40;
    long loops = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        int s = (int)th_below(&r, 64);
        if (local[s].p) {
            if (!ends_ok(local[s].p, local[s].n, local[s].id))
                thread_bad[me]++;
            if (th_below(&r, 4) == 0) { /* publish it instead of freeing */
                int k = (int)th_below(&r, PUB);
                pthread_mutex_lock(&pub_lock);
                item old = published[me][k];
                published[me][k] = local[s];
                pthread_mutex_unlock(&pub_lock);
                if (old.p) {
                    if (!ends_ok(old.p, old.n, old.id))
                        thread_bad[me]++;
                    free(old.p);
                }
            } else {
                free(local[s].p);
            }
            local[s].p = NULL;
        }
        size_t n = rand_size(&r);
        unsigned char *p = malloc(n);
        if (!p) {
            thread_bad[me]++;
            continue;
        }
        local[s] = (item){p, n, id++};
        fill_ends(p, n, local[s].id);
        loops++;
    }
    for (int s = 0; s < 64; s++)
        if (local[s].p) {
            if (!ends_ok(local[s].p, local[s].n, local[s].id))
                thread_bad[me]++;
            free(local[s].p);
        }
    thread_loops[me] = loops;
    return NULL;
}

/* ---- the child ---------------------------------------------------------- */

/* Exit statuses of a child: what went wrong. */
enum { CH_OK = 0, CH_PUBLISHED = 10, CH_OWN = 11, CH_THREAD = 12,
       CH_GRANDCHILD = 13, CH_NOT_MEMKIT = 14 };

/* Malloc, realloc, free and check @ops times; 0 if all went well. */
static int child_work(uint64_t seed, int ops)
{
    th_rng r = {seed};
    item slot[32];
    memset(slot, 0, sizeof slot);
    int bad = 0;
    for (int i = 0; i < ops; i++) {
        int s = (int)th_below(&r, 32);
        if (slot[s].p) {
            bad |= !ends_ok(slot[s].p, slot[s].n, slot[s].id);
            if (th_below(&r, 4) == 0) {
                size_t m = rand_size(&r);
                unsigned char *q = realloc(slot[s].p, m);
                if (!q)
                    return 1;
                bad |= !kept_ok(q, slot[s].n, m, slot[s].id);
                fill_ends(q, m, slot[s].id);
                slot[s].p = q;
                slot[s].n = m;
                continue;
            }
            free(slot[s].p);
        }
        size_t n = rand_size(&r);
        slot[s].p = (i & 7) ? malloc(n) : calloc(1, n);
        if (!slot[s].p)
            return 1;
        if (!(i & 7))
            bad |= !th_all_zero(slot[s].p, n);
        slot[s].n = n;
        slot[s].id = seed + (uint64_t)i;
        fill_ends(slot[s].p, n, slot[s].id);
    }
    for (int s = 0; s < 32; s++)
        if (slot[s].p) {
            bad |= !ends_ok(slot[s].p, slot[s].n, slot[s].id);
            free(slot[s].p);
        }
    return bad;
}

static void *child_thread(void *arg)
{
    return (void *)(intptr_t)child_work((uint64_t)(intptr_t)arg, CHILD_OPS / 4);
}

static void child_main(int round)
{
    alarm(20); /* a deadlock kills the child, the parent reports it */
    /* the parent's threads' chunks: still valid, freed from here */
    for (int t = 0; t < THREADS; t++)
        for (int k = 0; k < PUB; k++) {
            item it = published[t][k];
            if (!it.p)
                continue;
            if (!ends_ok(it.p, it.n, it.id))
                _exit(CH_PUBLISHED);
            free(it.p);
        }
    void *probe = malloc(100);
    if (!probe || mk_ctx_of(probe) != mk_ctx_current())
        _exit(CH_NOT_MEMKIT);
    free(probe);
    if (child_work(0xc41d00ull + (uint64_t)round * 77777, CHILD_OPS))
        _exit(CH_OWN);
    pthread_t t;
    void *ret = (void *)1;
    if (pthread_create(&t, NULL, child_thread,
                       (void *)(intptr_t)(0xabc000 + round)) != 0 ||
        pthread_join(t, &ret) != 0 || ret != NULL)
        _exit(CH_THREAD);
    if (round % 5 == 0) {
        pid_t g = fork();
        if (g == 0)
            _exit(child_work(0x9a9a00ull + (uint64_t)round, CHILD_OPS / 4)
                      ? 1 : 0);
        int st = 0;
        if (g < 0 || waitpid(g, &st, 0) != g || !WIFEXITED(st) ||
            WEXITSTATUS(st) != 0)
            _exit(CH_GRANDCHILD);
    }
    _exit(CH_OK);
}

/* ---- the parent --------------------------------------------------------- */

static void test_fork_mid_allocation(void)
{
    alarm(100); /* the whole test; a deadlock here fails it */
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        REQUIRE(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0);
    struct timespec pause = {0, 5 * 1000 * 1000};
    int ok = 0;
    for (int round = 0; round < FORKS; round++) {
        nanosleep(&pause, NULL); /* let the threads get going */
        fflush(stdout);
        pthread_mutex_lock(&pub_lock);
        pid_t pid = fork();
        if (pid == 0) {
            pthread_mutex_unlock(&pub_lock);
            child_main(round);
        }
        pthread_mutex_unlock(&pub_lock);
        if (pid < 0) {
            th_fail(__FILE__, __LINE__, "fork %d failed: %s", round,
                    strerror(errno));
            continue;
        }
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        th_checks++;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
            ok++;
        else if (WIFSIGNALED(st))
            th_fail(__FILE__, __LINE__, "child %d died of signal %d%s", round,
                    WTERMSIG(st),
                    WTERMSIG(st) == SIGALRM ? " (deadlock: alarm)" : "");
        else
            th_fail(__FILE__, __LINE__, "child %d exited with status %d",
                    round, WEXITSTATUS(st));
    }
    atomic_store(&stop, 1);
    long loops = 0;
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        CHECK_EQ(thread_bad[t], 0);
        loops += thread_loops[t];
    }
    for (int t = 0; t < THREADS; t++)
        for (int k = 0; k < PUB; k++)
            if (published[t][k].p) {
                CHECK(ends_ok(published[t][k].p, published[t][k].n,
                              published[t][k].id));
                free(published[t][k].p);
            }
    CHECK_EQ(ok, FORKS);
    /* the threads were busy while the forks happened */
    CHECK_GT(loops, (long)FORKS * THREADS);
    printf("  %d forks, %ld allocations by the threads meanwhile\n", FORKS,
           loops);
    alarm(0);
}

/* ---- a child's thread on a parent's thread's stack ---------------------- */

/*
 * In a forked child, glibc's stack cache holds the stacks of the parent's
 * other threads (they do not exist in the child), so a thread the child
 * starts usually runs on one of them and has that thread's thread pointer,
 * which memkit takes as a thread's identity (mki_tid).  Such a thread must
 * not take the parent thread's heap for its own: that heap may have been in
 * the middle of an allocation at the fork, which is why the child never
 * reuses it (heap.c).  So a realloc that does not fit must move a chunk of
 * that heap into the caller's context, as for any other thread's chunk.
 */
static pthread_barrier_t stack_bar;
static pthread_t stack_parent;
static unsigned char *stack_chunk;
static mk_ctx *stack_parent_heap;

static void *stack_parent_thread(void *arg)
{
    (void)arg;
    stack_parent = pthread_self();
    stack_chunk = malloc(100);
    if (stack_chunk)
        th_fill(stack_chunk, 100, 4242);
    stack_parent_heap = mk_ctx_current();
    pthread_barrier_wait(&stack_bar); /* ready: main forks */
    pthread_barrier_wait(&stack_bar); /* the child has run */
    return NULL;
}

/* Bits of the child's exit status. */
enum { ST_REUSED = 1, ST_WRONG_CTX = 2, ST_CONTENTS = 4, ST_SAME_HEAP = 8,
       ST_FAILED = 16 };

static void *stack_child_thread(void *arg)
{
    (void)arg;
    int st = pthread_equal(pthread_self(), stack_parent) ? ST_REUSED : 0;
    mk_ctx *mine = mk_ctx_current();
    unsigned char *q = realloc(stack_chunk, 5000); /* does not fit */
    if (!q || !mine)
        return (void *)(intptr_t)ST_FAILED;
    if (mk_ctx_of(q) != mine)
        st |= ST_WRONG_CTX;
    if (th_verify(q, 100, 4242) != (size_t)-1)
        st |= ST_CONTENTS;
    if (mine == stack_parent_heap)
        st |= ST_SAME_HEAP;
    free(q);
    return (void *)(intptr_t)st;
}

static void stack_child(void *arg)
{
    (void)arg;
    alarm(20);
    pthread_t t;
    void *ret = (void *)(intptr_t)ST_FAILED;
    if (pthread_create(&t, NULL, stack_child_thread, NULL) != 0 ||
        pthread_join(t, &ret) != 0)
        ret = (void *)(intptr_t)ST_FAILED;
    _exit((int)(intptr_t)ret);
}

static void test_child_thread_on_parent_stack(void)
{
    REQUIRE(pthread_barrier_init(&stack_bar, NULL, 2) == 0);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, stack_parent_thread, NULL) == 0);
    pthread_barrier_wait(&stack_bar);
    char out[1024];
    int st = th_run_child(stack_child, NULL, out, sizeof out);
    pthread_barrier_wait(&stack_bar);
    pthread_join(t, NULL);
    pthread_barrier_destroy(&stack_bar);
    REQUIRE(WIFEXITED(st));
    int bits = WEXITSTATUS(st);
    if (!(bits & ST_REUSED))
        th_note("the child's thread did not run on the parent thread's "
                "stack: the checks ran without the condition they are for");
    CHECK_EQ(bits & ST_FAILED, 0);
    CHECK_EQ(bits & ST_CONTENTS, 0);
    CHECK_EQ(bits & ST_SAME_HEAP, 0);
    /* the chunk moved into the child's thread's own context */
    CHECK_EQ(bits & ST_WRONG_CTX, 0);
}

int main(void)
{
    RUN(test_child_thread_on_parent_stack);
    RUN(test_fork_mid_allocation);
    return th_done();
}
