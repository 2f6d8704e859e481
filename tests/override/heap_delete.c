/* SPDX-License-Identifier: MIT */
/*
 * override/heap_delete.c - a thread heap is deleted without memkit's heap
 * lock held (linked with libmemkit-malloc): deleting a context runs the
 * program's reset callbacks (mk_ctx_on_reset), and a callback may malloc
 * on a thread that has no heap any more (the exiting thread itself, in its
 * heap's destructor), which attaches a heap and takes that lock.
 *
 * What it proves: 50 threads each register a callback on their heap that
 * mallocs, writes and frees; each thread exits with its heap empty; with
 * MEMKIT_PURGE_THREAD=0 (set by CMake) no empty heap is kept for reuse, so
 * every heap is deleted in its thread's destructor; every callback runs
 * once and returns.  Then the same with heaps kept as orphans and swept
 * by mk_trim on the main thread.  alarm() turns a deadlock into a failure
 * (the previous build hung in the first thread's exit).  Under a second.
 */
#include "harness.h"

#include <memkit.h>
#include <pthread.h>
#include <stdatomic.h>

static atomic_int ran;

static void on_delete(void *arg)
{
    (void)arg;
    char *p = malloc(100); /* a thread with no heap: attaches one */
    if (p) {
        memset(p, 1, 100);
        free(p);
    }
    atomic_fetch_add(&ran, 1);
}

static void *worker(void *arg)
{
    (void)arg;
    void *p = malloc(64); /* the thread's heap exists */
    free(p);
    if (mk_ctx_on_reset(mk_ctx_current(), on_delete, NULL) != 0)
        return (void *)1;
    return NULL;
}

static void run_threads(int n)
{
    for (int i = 0; i < n; i++) {
        pthread_t t;
        void *r = NULL;
        REQUIRE(pthread_create(&t, NULL, worker, NULL) == 0);
        pthread_join(t, &r);
        CHECK(r == NULL);
    }
}

static void test_deleted_at_thread_exit(void)
{
    atomic_store(&ran, 0);
    run_threads(50);
    mk_trim(); /* (any heap kept after all: swept here) */
    CHECK_EQ(atomic_load(&ran), 50);
}

int main(void)
{
    alarm(10);
    RUN(test_deleted_at_thread_exit);
    return th_done();
}
