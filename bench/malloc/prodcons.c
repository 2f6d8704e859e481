/* SPDX-License-Identifier: MIT */
/*
 * prodcons.c - W6 (b), producer/consumer pairs: `threads` / 2 pairs; in
 * each, the producer allocates objects of random sizes (16..1024 bytes),
 * stamps them and passes them through a queue to the consumer, which reads
 * them back and frees them - every free is a cross-thread free, the
 * pattern of a pipeline (a network thread allocates messages, a worker
 * retires them).  With threads=1, one thread plays both parts in turn
 * through the same queue: it produces QUEUE_CAP / 4 objects, then consumes
 * them (same-thread frees, the reference).
 *
 * The queue is a bounded single-producer single-consumer ring of QUEUE_CAP
 * pointers with acquire/release indices on their own cache lines, in
 * mmap'ed memory outside every allocator - the same code for every
 * allocator.  A thread that finds it full (or empty) spins briefly, then
 * yields the CPU: on a machine with fewer cores than threads a pure spin
 * would burn the time slice its partner needs.
 *
 * Timed: from the barrier that releases every thread until all are joined;
 * ops = objects passed (one malloc and one free each), `ops` in all,
 * divided evenly among the pairs.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "wl.h"

#define MAX_PAIRS 32
#define QUEUE_CAP 1024u /* a power of two */

typedef struct queue {
    _Alignas(64) atomic_size_t head; /* next to pop (consumer) */
    _Alignas(64) atomic_size_t tail; /* next to push (producer) */
    _Alignas(64) void *slot[QUEUE_CAP];
} queue;

typedef struct pair {
    queue *q;
    int idx;
    uint64_t ops, seed;
    uint64_t check, bad;
    const char *error;
    pthread_t prod, cons;
} __attribute__((aligned(64))) pair;

static pthread_barrier_t start_bar;

static inline void backoff(unsigned *spins)
{
    if (++*spins < 64) {
        wl_cpu_relax();
    } else {
        *spins = 0;
        sched_yield();
    }
}

static inline void push(queue *q, void *o)
{
    size_t t = atomic_load_explicit(&q->tail, memory_order_relaxed);
    unsigned spins = 0;
    while (t - atomic_load_explicit(&q->head, memory_order_acquire) == QUEUE_CAP)
        backoff(&spins);
    q->slot[t & (QUEUE_CAP - 1)] = o;
    atomic_store_explicit(&q->tail, t + 1, memory_order_release);
}

static inline void *pop(queue *q)
{
    size_t h = atomic_load_explicit(&q->head, memory_order_relaxed);
    unsigned spins = 0;
    while (atomic_load_explicit(&q->tail, memory_order_acquire) == h)
        backoff(&spins);
    void *o = q->slot[h & (QUEUE_CAP - 1)];
    atomic_store_explicit(&q->head, h + 1, memory_order_release);
    return o;
}

/* Allocate and stamp one object; NULL if malloc failed. */
static inline void *produce(const pair *pr, uint64_t *rng, uint64_t i)
{
    size_t size = wl_small_size(rng);
    void *o = malloc(size);
    if (BENCH_UNLIKELY(!o))
        return NULL;
    wl_stamp(o, size, (uint64_t)pr->idx << 56 | i << 11 | size);
    return o;
}

static inline void consume(pair *pr, void *o)
{
    uint64_t v;
    memcpy(&v, o, 8);
    size_t size = (size_t)(v & 0x7ff);
    wl_unstamp(o, size < 16 ? 16 : size, &pr->check, &pr->bad);
    free(o);
}

static void *producer_main(void *arg)
{
    pair *pr = arg;
    uint64_t rng = wl_rng_seed(pr->seed, (uint64_t)pr->idx);
    pthread_barrier_wait(&start_bar);
    for (uint64_t i = 0; i < pr->ops; i++) {
        void *o = produce(pr, &rng, i);
        if (!o) {
            pr->error = "malloc returned NULL";
            o = NULL; /* the consumer still expects ops items */
        }
        push(pr->q, o);
    }
    return NULL;
}

static void *consumer_main(void *arg)
{
    pair *pr = arg;
    pthread_barrier_wait(&start_bar);
    for (uint64_t i = 0; i < pr->ops; i++) {
        void *o = pop(pr->q);
        if (o)
            consume(pr, o);
    }
    return NULL;
}

/* threads=1: one thread, both parts in turn, through the same queue. */
static void *alone_main(void *arg)
{
    pair *pr = arg;
    uint64_t rng = wl_rng_seed(pr->seed, (uint64_t)pr->idx);
    pthread_barrier_wait(&start_bar);
    for (uint64_t i = 0; i < pr->ops;) {
        uint64_t n = 0;
        for (; n < QUEUE_CAP / 4 && i < pr->ops; n++, i++) {
            void *o = produce(pr, &rng, i);
            if (!o) {
                pr->error = "malloc returned NULL";
                return NULL;
            }
            push(pr->q, o);
        }
        while (n--)
            consume(pr, pop(pr->q));
    }
    return NULL;
}

void wl_prodcons(const wl_params *p, wl_result *r)
{
    const int threads = p->threads ? (int)p->threads : 2;
    const int npairs = threads == 1 ? 1 : threads / 2;
    static pair pairs[MAX_PAIRS];
    if ((threads > 1 && threads % 2) || npairs > MAX_PAIRS) {
        r->error = "prodcons: threads must be 1 or even (<= 64)";
        return;
    }
    pthread_barrier_init(&start_bar, NULL, (unsigned)threads + 1);
    for (int i = 0; i < npairs; i++) {
        void *q = mmap(NULL, sizeof(queue), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (q == MAP_FAILED) {
            r->error = "mmap failed";
            return;
        }
        pairs[i] = (pair){.q = q, .idx = i, .ops = p->ops / (uint64_t)npairs, .seed = p->seed};
        int bad;
        if (threads == 1)
            bad = pthread_create(&pairs[i].prod, NULL, alone_main, &pairs[i]);
        else
            bad = pthread_create(&pairs[i].prod, NULL, producer_main, &pairs[i]) ||
                  pthread_create(&pairs[i].cons, NULL, consumer_main, &pairs[i]);
        if (bad) {
            r->error = "pthread_create failed";
            return;
        }
    }
    pthread_barrier_wait(&start_bar);
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < npairs; i++) {
        pthread_join(pairs[i].prod, NULL);
        if (threads > 1)
            pthread_join(pairs[i].cons, NULL);
    }
    r->ns = bench_now_ns() - t0;
    for (int i = 0; i < npairs; i++) {
        r->ops += pairs[i].ops;
        r->check += pairs[i].check;
        r->bad += pairs[i].bad;
        if (pairs[i].error)
            r->error = pairs[i].error;
    }
}
