/* SPDX-License-Identifier: MIT */
/*
 * compat/tsd.c - a malloc in a thread's last destructors leaks nothing.
 *
 * glibc runs pthread key destructors (C11 tss_t is a pthread key) in up to
 * four rounds, in key order; memkit releases a thread's heap from a key
 * destructor of its own, made at the first malloc, so a key made later
 * has its destructor run after memkit's in every round.  Each thread here
 * sets two such keys (a pthread key and a tss_t) whose destructors set
 * themselves again until the last round, then allocate: a block freed at
 * once, and one handed to the main thread, which frees it.  On memkit that
 * attached a heap nobody released, 1.5 KiB a thread (4,000 threads: +5.9
 * MiB; glibc +0.14 MiB).  Required: 300 ms after the last free, resident
 * memory is at most 1 MiB above its level after the first 100 threads,
 * and memkit holds at most 1 MiB with nothing live.
 */
#include "compat.h"

#include <malloc.h>
#include <pthread.h>
#include <threads.h>

enum { THREADS = 4000, ALIVE = 4, FIRST = 100, ROUNDS = 4 };
#define MiB (1024.0 * 1024.0)

static pthread_key_t key;
static tss_t tss;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *handed[THREADS * 2];
static int nhanded, late_mallocs;

static void late(void)
{
    free(malloc(compat_opaque(200)));
    void *p = malloc(compat_opaque(100));
    pthread_mutex_lock(&lock);
    if (p && nhanded < THREADS * 2)
        handed[nhanded++] = p;
    late_mallocs++;
    pthread_mutex_unlock(&lock);
}

/* value = the round it was set for; set again until the last round */
static void key_dtor(void *v)
{
    intptr_t round = (intptr_t)v;
    if (round < ROUNDS)
        pthread_setspecific(key, (void *)(round + 1));
    else
        late();
}

static void tss_dtor(void *v)
{
    intptr_t round = (intptr_t)v;
    if (round < ROUNDS)
        tss_set(tss, (void *)(round + 1));
    else
        late();
}

static void *work(void *arg)
{
    (void)arg;
    free(malloc(compat_opaque(64))); /* the thread's heap */
    pthread_setspecific(key, (void *)(intptr_t)1);
    tss_set(tss, (void *)(intptr_t)1);
    return NULL;
}

static void free_handed(void)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nhanded; i++)
        free(handed[i]);
    nhanded = 0;
    pthread_mutex_unlock(&lock);
}

static void test_last_round_malloc(void)
{
    free(malloc(compat_opaque(32))); /* memkit's key comes first */
    REQUIRE(pthread_key_create(&key, key_dtor) == 0);
    REQUIRE(tss_create(&tss, tss_dtor) == thrd_success);
    size_t rss_first = 0;
    for (int i = 0; i < THREADS; i += ALIVE) {
        pthread_t t[ALIVE];
        for (int k = 0; k < ALIVE; k++)
            REQUIRE(pthread_create(&t[k], NULL, work, NULL) == 0);
        for (int k = 0; k < ALIVE; k++)
            pthread_join(t[k], NULL);
        free_handed();
        if (i + ALIVE == FIRST)
            rss_first = th_rss_bytes();
    }
    CHECK_EQ(late_mallocs, THREADS * 2); /* both destructors' last rounds */
    usleep(300 * 1000);
    size_t rss = th_rss_bytes();
    double grew = ((double)rss - (double)rss_first) / MiB;
    printf("RSS after %d threads %.2f MiB, 300 ms after %d: %.2f MiB (%+.2f)\n",
           FIRST, rss_first / MiB, THREADS, rss / MiB, grew);
    th_checks++;
    if (grew > 1.0)
        th_fail(__FILE__, __LINE__, "RSS grew by %.2f MiB (at most 1)", grew);
    if (compat_memkit) {
        struct mallinfo2 mi = mallinfo2();
        double held = (double)(mi.fordblks + mi.uordblks) / MiB;
        printf("memkit holds %.2f MiB (fordblks + uordblks)\n", held);
        th_checks++;
        if (held > 1.0)
            th_fail(__FILE__, __LINE__, "memkit holds %.2f MiB with nothing "
                    "live (at most 1)", held);
    }
}

int main(void)
{
    compat_start();
    RUN(test_last_round_malloc);
    return th_done();
}
