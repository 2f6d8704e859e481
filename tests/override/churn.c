/* SPDX-License-Identifier: MIT */
/*
 * override/churn.c - thread churn through malloc: 10,000 short threads,
 * 4 alive at a time, each of which allocates, frees chunks that earlier
 * threads left, and exits while still owning chunks that later threads
 * (or the main thread) will free.
 *
 * Every thread: takes up to 8 chunks from a shared queue (left there by
 * earlier threads, so their owners are usually dead: frees into orphaned
 * heaps), checks their pattern and frees them; does some malloc/free of
 * its own (small chunks, a large one now and then); then leaves 8 new
 * chunks in the queue and exits.  The main thread joins the threads in
 * order and, at fixed points, empties the queue itself.
 *
 * What it proves: a thread that exits with live chunks leaves them valid
 * (patterns intact when a later thread frees them); its heap, orphaned,
 * is adopted or swept and goes back, so churn neither leaks nor grows:
 *  - resident memory after 10,000 threads is within 8 MiB of what it was
 *    after the first 200.  Both are measured with the queue emptied and
 *    after malloc_trim(0), so that free units that the purge policy has
 *    not yet given back (up to a few MiB per segment, and how many depends
 *    on scheduling) do not count: what is left is what heaps hold.  Why 8
 *    MiB: the live data is at most the queue (256 chunks, < 1.5 MiB with
 *    the large ones); a leak of even one 4 KiB page per thread would be
 *    ~38 MiB over the 9,800 later threads, while what heaps keep for reuse
 *    and glibc's cache of thread stacks stay within a few MiB (measured:
 *    about 1 MiB of growth, flat from 10,000 to 60,000 threads);
 *  - memkit's own figures agree (linked build): committed bytes grow by
 *    less than 4 MiB, bookkeeping bytes (context and page descriptors,
 *    which RSS would hardly show) by less than 256 KiB;
 *  - every chunk allocated was freed exactly once (counts match) and no
 *    thread failed an allocation.
 * A second test: worker threads exit leaving 32 MiB of chunks that the
 * main thread frees alone; malloc_trim(0) must then give that memory back
 * though no thread exits any more to sweep the orphaned heaps.
 *
 * Usage: override_churn [threads]  (default 10000).  Fixed seeds.
 */
#include "harness.h"

#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#ifdef OVR_LINKED
#include <memkit.h>
#endif

enum { ALIVE = 4, QCAP = 256, TAKE = 8, LEAVE = 8, FIRST = 200 };

typedef struct item {
    unsigned char *p;
    size_t n;
    uint64_t id;
} item;

/* The queue of chunks left by exited threads (a mutex-guarded ring). */
static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static item queue[QCAP];
static unsigned qhead, qcount;

typedef struct result {
    int bad;     /* pattern errors and failed allocations */
    int left;    /* chunks put in the queue */
    int freed;   /* chunks taken from the queue and freed */
} result;
static result *results; /* one per thread */

static int take(item *out)
{
    int ok = 0;
    pthread_mutex_lock(&qlock);
    if (qcount) {
        *out = queue[qhead];
        qhead = (qhead + 1) % QCAP;
        qcount--;
        ok = 1;
    }
    pthread_mutex_unlock(&qlock);
    return ok;
}

static int put(item it)
{
    int ok = 0;
    pthread_mutex_lock(&qlock);
    if (qcount < QCAP) {
        queue[(qhead + qcount) % QCAP] = it;
        qcount++;
        ok = 1;
    }
    pthread_mutex_unlock(&qlock);
    return ok;
}

static int check_free(item it)
{
    int bad = th_verify(it.p, it.n, it.id) != (size_t)-1;
    if (bad)
        fprintf(stderr, "chunk id %llu (%zu bytes) broken\n",
                (unsigned long long)it.id, it.n);
    free(it.p);
    return bad;
}

static void *churner(void *arg)
{
    long me = (long)(intptr_t)arg;
    result *res = &results[me];
    th_rng r = {0xc4u + (uint64_t)me * 0x9E3779B97F4A7C15ull};
    item it;
    for (int i = 0; i < TAKE && take(&it); i++) {
        res->bad += check_free(it);
        res->freed++;
    }
    /* some work of its own */
    void *mine[16];
    for (int i = 0; i < 16; i++) {
        size_t n = 1 + (size_t)th_below(&r, 2048);
        mine[i] = malloc(n);
        if (!mine[i]) {
            res->bad++;
            return NULL;
        }
        memset(mine[i], i, n);
    }
    for (int i = 0; i < 16; i += 2)
        free(mine[i]);
    /* leave chunks for later threads; one thread in 8 leaves a large one */
    for (int i = 0; i < LEAVE; i++) {
        size_t n = (me % 8 == 0 && i == 0) ? 40000
                                           : 1 + (size_t)th_below(&r, 3000);
        it.p = malloc(n);
        if (!it.p) {
            res->bad++;
            break;
        }
        it.n = n;
        it.id = ((uint64_t)me << 8) | (uint64_t)i;
        th_fill(it.p, n, it.id);
        if (put(it))
            res->left++;
        else
            res->bad += check_free(it);
    }
    for (int i = 1; i < 16; i += 2)
        free(mine[i]);
    return NULL;
}

/* The main thread empties the queue; returns the number freed. */
static int drain_all(int *bad)
{
    int n = 0;
    item it;
    while (take(&it)) {
        *bad += check_free(it);
        n++;
    }
    return n;
}

static long nthreads;

static void test_churn(void)
{
    results = calloc((size_t)nthreads, sizeof *results);
    REQUIRE_NOT_NULL(results);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 128 * 1024);
    pthread_t th[ALIVE];
    int main_bad = 0, main_freed = 0, create_failed = 0;
    size_t rss_first = 0;
#ifdef OVR_LINKED
    mk_process_figures first = {0}, last;
#endif
    for (long i = 0; i < nthreads + ALIVE; i++) {
        if (i >= ALIVE) /* keep ALIVE running: join the oldest */
            pthread_join(th[i % ALIVE], NULL);
        if (i - ALIVE + 1 == FIRST) {
            /* the first 200 have ended (the ones after them still run):
             * the reference point */
            main_freed += drain_all(&main_bad);
            malloc_trim(0);
            rss_first = th_rss_bytes();
#ifdef OVR_LINKED
            mk_process_stats(&first);
#endif
        }
        if (i < nthreads &&
            pthread_create(&th[i % ALIVE], &attr, churner, (void *)(intptr_t)i))
            create_failed++;
    }
    pthread_attr_destroy(&attr);
    main_freed += drain_all(&main_bad);
    malloc_trim(0);
    size_t rss_last = th_rss_bytes();
    CHECK_EQ(create_failed, 0);
    CHECK_EQ(main_bad, 0);

    long left = 0, freed = main_freed, bad = 0;
    for (long i = 0; i < nthreads; i++) {
        left += results[i].left;
        freed += results[i].freed;
        bad += results[i].bad;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(left, freed); /* every chunk left was freed once */
    CHECK_GT(main_freed, 0);
    CHECK_GT(freed - main_freed, nthreads); /* threads freed most */

    printf("  rss after %d threads %zu KiB, after %ld threads %zu KiB\n",
           FIRST, rss_first / 1024, nthreads, rss_last / 1024);
    CHECK_GT(rss_first, 0u);
    CHECK_LT(rss_last, rss_first + 8 * 1024 * 1024);
#ifdef OVR_LINKED
    mk_process_stats(&last);
    printf("  committed %zu -> %zu KiB, bookkeeping %zu -> %zu KiB\n",
           first.os_committed / 1024, last.os_committed / 1024,
           first.meta_bytes / 1024, last.meta_bytes / 1024);
    CHECK_LT(last.os_committed, first.os_committed + 4 * 1024 * 1024);
    CHECK_LT(last.meta_bytes, first.meta_bytes + 256 * 1024);
#endif
    free(results);
}

/* ---- orphans freed by a thread that never exits ------------------------- */

/*
 * A pool of worker threads leaves its results (chunks) to the main thread
 * and exits; the main thread frees them all and goes on alone.  Nothing
 * else will ever exit to sweep the orphaned heaps, so once everything is
 * freed malloc_trim(0) must give their memory back (mk_trim: "every page
 * memkit holds empty").  32 threads x 2,000 chunks of 512 bytes: 32 MiB.
 */
enum { OT = 32, ON = 2000, OSZ = 512 };
static void *orphan_chunks[OT][ON];

static void *leave_results(void *arg)
{
    long t = (long)(intptr_t)arg;
    for (int i = 0; i < ON; i++) {
        orphan_chunks[t][i] = malloc(OSZ);
        if (orphan_chunks[t][i])
            memset(orphan_chunks[t][i], (int)t, OSZ);
    }
    return NULL;
}

static void test_orphans_freed_by_survivor(void)
{
    malloc_trim(0);
    size_t rss0 = th_rss_bytes();
#ifdef OVR_LINKED
    mk_process_figures f0, f1;
    mk_process_stats(&f0);
#endif
    pthread_t th[OT];
    for (long t = 0; t < OT; t++)
        REQUIRE(pthread_create(&th[t], NULL, leave_results,
                               (void *)(intptr_t)t) == 0);
    for (int t = 0; t < OT; t++)
        pthread_join(th[t], NULL);
    int bad = 0;
    for (int t = 0; t < OT; t++)
        for (int i = 0; i < ON; i++) {
            unsigned char *p = orphan_chunks[t][i];
            bad += !p || p[0] != t || p[OSZ - 1] != t;
            free(p);
        }
    CHECK_EQ(bad, 0);
    malloc_trim(0);
    size_t rss1 = th_rss_bytes();
    printf("  rss %zu KiB before, %zu KiB after the workers' 32 MiB were "
           "freed and trimmed\n", rss0 / 1024, rss1 / 1024);
    CHECK_LT(rss1, rss0 + 8 * 1024 * 1024);
#ifdef OVR_LINKED
    mk_process_stats(&f1);
    printf("  committed %zu -> %zu KiB\n", f0.os_committed / 1024,
           f1.os_committed / 1024);
    CHECK_LT(f1.os_committed, f0.os_committed + 4 * 1024 * 1024);
#endif
}

int main(int argc, char **argv)
{
    nthreads = th_arg_long(argc, argv, 1, "OVR_THREADS", 10000);
    if (nthreads < FIRST + 1)
        nthreads = FIRST + 1;
    RUN(test_churn);
    RUN(test_orphans_freed_by_survivor);
    return th_done();
}
