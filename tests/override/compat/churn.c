/* SPDX-License-Identifier: MIT */
/*
 * compat/churn.c - short-lived threads that leave memory behind do not make
 * the process grow.
 *
 * 10,000 threads, 4 alive at a time; each mallocs 200 blocks of 16 B to
 * 4 KiB (a fixed seed per thread), frees every other one and exits,
 * leaving the other 100 for the main thread, which frees them once it has
 * joined the thread: frees into the heap of a thread that has exited.
 * Required, in every run, 300 ms after the last free (three purge delays),
 * the program making no call meanwhile:
 *  - resident memory is at most 1 MiB above its level after the first 100
 *    threads (glibc: +0.4-0.8 MiB), and on memkit at most its free rule's
 *    margin more (free memory it keeps for reuse in a program that makes
 *    no further call, with no thread of its own: page/purge.c's free
 *    rule, 2 MiB to start with, learned up to 6 - 7 MiB here, where each
 *    thread takes memory back right after a free gave some);
 *  - on memkit, the pages its contexts hold (mallinfo2: uordblks, nothing
 *    being live) are at most 1 MiB: the heaps of the exited threads were
 *    taken in and deleted at the last free into each, without another
 *    thread exiting (they were 2-3.5 MiB); and the memory it holds
 *    committed beyond them (fordblks) is within the margin.
 * The growth at the moment of the last free is printed, not required.
 *
 * Usage: compat_churn [threads]  (default 10000).
 */
#include "compat.h"

#include <malloc.h>
#include <pthread.h>

enum { ALIVE = 4, BLOCKS = 200, FIRST = 100 };
#define MiB (1024.0 * 1024.0)
#define FREE_MARGIN 8.0 /* MiB: memkit's free rule, as learned here */

typedef struct worker {
    pthread_t t;
    unsigned seed;
    void *left[BLOCKS / 2];
} worker;

static long nthreads = 10000;

static void *work(void *arg)
{
    worker *w = arg;
    th_rng r = {w->seed};
    void *all[BLOCKS];
    for (int i = 0; i < BLOCKS; i++) {
        size_t n = 16 + (size_t)th_below(&r, 4096 - 16 + 1);
        all[i] = malloc(n);
        if (all[i])
            memset(all[i], i, n);
    }
    for (int i = 0; i < BLOCKS; i += 2) {
        free(all[i]);
        w->left[i / 2] = all[i + 1];
    }
    return NULL;
}

static void test_churn_stays_flat(void)
{
    worker ws[ALIVE];
    size_t rss_first = 0;
    int failed = 0;
    for (long i = 0; i < nthreads; i += ALIVE) {
        for (int k = 0; k < ALIVE; k++) {
            ws[k].seed = (unsigned)(i + k + 1);
            if (pthread_create(&ws[k].t, NULL, work, &ws[k]) != 0)
                failed++;
        }
        for (int k = 0; k < ALIVE; k++) {
            pthread_join(ws[k].t, NULL);
            for (int j = 0; j < BLOCKS / 2; j++) {
                failed += ws[k].left[j] == NULL;
                free(ws[k].left[j]);
            }
        }
        if (i + ALIVE == FIRST)
            rss_first = th_rss_bytes();
    }
    size_t rss_end = th_rss_bytes();
    struct mallinfo2 at_end = mallinfo2();
    usleep(300 * 1000);
    size_t rss_later = th_rss_bytes();
    CHECK_EQ(failed, 0);
    REQUIRE(rss_first > 0 && rss_end > 0 && rss_later > 0);
    double grew = ((double)rss_later - (double)rss_first) / MiB;
    printf("RSS after %d threads %.2f MiB; after %ld, at the last free "
           "%.2f MiB (%+.2f), 300 ms later %.2f MiB (%+.2f)\n", FIRST,
           rss_first / MiB, nthreads, rss_end / MiB,
           ((double)rss_end - (double)rss_first) / MiB, rss_later / MiB, grew);
    double may = compat_memkit ? 1.0 + FREE_MARGIN : 1.0;
    th_checks++;
    if (grew > may)
        th_fail(__FILE__, __LINE__, "RSS grew by %.2f MiB (at most %.0f)", grew, may);
    if (!compat_memkit)
        return;
    struct mallinfo2 mi = mallinfo2();
    double held = (double)(mi.fordblks + mi.uordblks) / MiB;
    printf("memkit at the last free: %.2f MiB committed, not in pages "
           "(fordblks), %.2f MiB in pages (uordblks); 300 ms later: %.2f "
           "and %.2f MiB\n", at_end.fordblks / MiB, at_end.uordblks / MiB,
           mi.fordblks / MiB, mi.uordblks / MiB);
    th_checks++;
    if (mi.uordblks / MiB > 1.0)
        th_fail(__FILE__, __LINE__, "memkit holds %.2f MiB of pages with "
                "nothing live (at most 1)", mi.uordblks / MiB);
    th_checks++;
    if (held > 1.0 + FREE_MARGIN)
        th_fail(__FILE__, __LINE__, "memkit holds %.2f MiB with nothing "
                "live (at most %.0f)", held, 1.0 + FREE_MARGIN);
}

int main(int argc, char **argv)
{
    compat_start();
    if (argc > 1)
        nthreads = atol(argv[1]);
    RUN(test_churn_stays_flat);
    return th_done();
}
