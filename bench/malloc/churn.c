/* SPDX-License-Identifier: MIT */
/*
 * churn.c - W6 (c), thread churn: short-lived threads, created and joined
 * in a loop, `threads` at a time.  Each thread frees the objects the
 * previous round's neighbour left it (a dead thread's blocks, freed by
 * another thread), allocates PER_THREAD objects of random sizes (16..1024
 * bytes), frees all but every fourth, and leaves those (KEEP of them) to
 * the next round's neighbour: thread i of round r hands to thread
 * (i + 1) % threads of round r + 1.  This is the life of a thread pool
 * that is torn down and rebuilt, or of a program that spawns a thread per
 * task: what the allocator does when a thread starts (a heap to set up)
 * and when it exits (a heap to retire or adopt, blocks still live in it).
 *
 * The hand-off arrays live in mmap'ed memory outside every allocator, one
 * per thread slot, double-buffered by round parity; no lock is needed:
 * pthread_join orders a round's writes before the next round's reads.
 * Thread creation itself costs the same for every allocator up to what the
 * C library allocates for the thread (its TLS block goes through malloc in
 * glibc), which is a fair part of the workload.
 *
 * Timed: all rounds, including the final free of the last round's
 * leftovers.  ops = mallocs (each matched by a free); rounds =
 * ops / (threads x PER_THREAD).
 */
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "wl.h"

#define MAX_THREADS 64
#define PER_THREAD 256
#define KEEP (PER_THREAD / 4)

typedef struct churn_thread {
    int idx;
    uint64_t round, seed;
    void **in;  /* KEEP objects from the previous round (or NULLs) */
    void **out; /* KEEP objects for the next round */
    uint64_t check, bad;
    const char *error;
} __attribute__((aligned(64))) churn_thread;

static inline void release(void *o, uint64_t *check, uint64_t *bad)
{
    uint64_t v;
    memcpy(&v, o, 8);
    size_t size = (size_t)(v & 0x7ff);
    wl_unstamp(o, size < 16 ? 16 : size, check, bad);
    free(o);
}

static void *churn_main(void *arg)
{
    churn_thread *t = arg;
    void *mine[PER_THREAD];
    uint64_t rng = wl_rng_seed(t->seed, t->round * MAX_THREADS + (uint64_t)t->idx);
    for (int k = 0; k < KEEP; k++) {
        if (t->in[k])
            release(t->in[k], &t->check, &t->bad);
        t->in[k] = NULL;
    }
    for (int k = 0; k < PER_THREAD; k++) {
        size_t size = wl_small_size(&rng);
        void *o = malloc(size);
        if (BENCH_UNLIKELY(!o)) {
            t->error = "malloc returned NULL";
            while (k--)
                release(mine[k], &t->check, &t->bad);
            return NULL;
        }
        uint64_t seq = (t->round * MAX_THREADS + (uint64_t)t->idx) * PER_THREAD + (uint64_t)k;
        wl_stamp(o, size, seq << 11 | size); /* the size in the low 11 bits */
        mine[k] = o;
    }
    for (int k = 0, kept = 0; k < PER_THREAD; k++) {
        if (k % 4 == 3)
            t->out[kept++] = mine[k];
        else
            release(mine[k], &t->check, &t->bad);
    }
    return NULL;
}

void wl_churn(const wl_params *p, wl_result *r)
{
    const int n = p->threads ? (int)p->threads : 1;
    if (n > MAX_THREADS) {
        r->error = "churn: too many threads";
        return;
    }
    const uint64_t rounds = p->ops / ((uint64_t)n * PER_THREAD);
    static churn_thread th[MAX_THREADS];
    /* hand[parity][slot][k]: round r reads parity r % 2, writes the other */
    void **hand = mmap(NULL, 2 * (size_t)n * KEEP * sizeof(void *), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (hand == MAP_FAILED) {
        r->error = "mmap failed";
        return;
    }
#define HAND(par, slot) (hand + ((size_t)(par) * (size_t)n + (size_t)(slot)) * KEEP)
    pthread_t tid[MAX_THREADS];

    uint64_t t0 = bench_now_ns();
    for (uint64_t round = 0; round < rounds; round++) {
        int par = (int)(round % 2);
        for (int i = 0; i < n; i++) {
            th[i].idx = i;
            th[i].round = round;
            th[i].seed = p->seed;
            th[i].in = HAND(par, i);
            th[i].out = HAND(!par, (i + 1) % n);
            if (pthread_create(&tid[i], NULL, churn_main, &th[i]) != 0) {
                r->error = "pthread_create failed";
                return;
            }
        }
        for (int i = 0; i < n; i++)
            pthread_join(tid[i], NULL);
        for (int i = 0; i < n; i++)
            if (th[i].error)
                r->error = th[i].error;
        if (r->error)
            return;
    }
    for (size_t k = 0; k < 2 * (size_t)n * KEEP; k++)
        if (hand[k])
            release(hand[k], &th[0].check, &th[0].bad);
    r->ns = bench_now_ns() - t0;
    r->ops = rounds * (uint64_t)n * PER_THREAD;
    for (int i = 0; i < n; i++) {
        r->check += th[i].check;
        r->bad += th[i].bad;
    }
#undef HAND
}
