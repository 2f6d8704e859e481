/* SPDX-License-Identifier: MIT */
/*
 * larson.c - W6 (a), a Larson-style server (after Larson and Krishnan's
 * benchmark of the same name): each of `threads` threads holds `live`
 * objects of random sizes (16..1024 bytes) and, `ops` / threads times,
 * frees a random one and allocates a replacement; every HAND_EVERY
 * operations it hands HAND_BATCH of its objects (replaced by new ones) to
 * the next thread, which frees them - the cross-thread free of a server
 * whose requests are allocated by one thread and retired by another.  With
 * one thread the batch goes to itself (same-thread frees, the reference).
 *
 * Hand-off: each thread has a mailbox (a mutex and an array of MB_CAP
 * pointers, in mmap'ed memory outside every allocator); the sender appends
 * a whole batch under the lock (if the mailbox is full it frees the batch
 * itself), and the owner empties its mailbox every HAND_EVERY operations,
 * freeing what it found.  The lock is taken once per batch, the same for
 * every allocator, so it weighs little beside the 2 x HAND_EVERY calls
 * into the allocator between two hand-offs.
 *
 * Timed: from the moment all threads have their initial objects (filled
 * untimed, behind a barrier) until every thread has emptied its mailbox,
 * freed its objects and been joined.  ops = the mallocs of the timed phase
 * (each is matched by a free).  Each object carries its size in its stamp
 * (wl.h), so whichever thread frees it can check both ends.
 */
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "wl.h"

#define MAX_THREADS 64
#define MB_CAP 4096
#define HAND_EVERY 256
#define HAND_BATCH 32

typedef struct mailbox {
    pthread_mutex_t mu;
    size_t n;
    void *items[MB_CAP];
} mailbox;

typedef struct larson_thread {
    int idx, nthreads;
    uint64_t ops, live, seed;
    void **slots;  /* live objects (mmap'ed) */
    void **local;  /* scratch for a mailbox's contents (mmap'ed) */
    uint64_t check, bad, mallocs;
    const char *error;
    pthread_t th;
} __attribute__((aligned(64))) larson_thread;

static mailbox *boxes;
static pthread_barrier_t start_bar, end_bar;

/* A stamp value carrying the object's size (<= 1024 < 2^11). */
static inline uint64_t stamp_value(int t, uint64_t seq, size_t size)
{
    return (uint64_t)t << 56 | seq << 11 | size;
}

static inline void release(void *o, uint64_t *check, uint64_t *bad)
{
    uint64_t v;
    memcpy(&v, o, 8);
    size_t size = (size_t)(v & 0x7ff);
    if (size < 16)
        size = 16;
    wl_unstamp(o, size, check, bad);
    free(o);
}

static inline void *make(larson_thread *t, uint64_t *rng, uint64_t *seq)
{
    size_t size = wl_small_size(rng);
    void *o = malloc(size);
    if (BENCH_UNLIKELY(!o))
        return NULL;
    wl_stamp(o, size, stamp_value(t->idx, (*seq)++, size));
    t->mallocs++;
    return o;
}

static void drain(larson_thread *t)
{
    mailbox *mb = &boxes[t->idx];
    pthread_mutex_lock(&mb->mu);
    size_t n = mb->n;
    memcpy(t->local, mb->items, n * sizeof(void *));
    mb->n = 0;
    pthread_mutex_unlock(&mb->mu);
    for (size_t k = 0; k < n; k++)
        release(t->local[k], &t->check, &t->bad);
}

static void *larson_main(void *arg)
{
    larson_thread *t = arg;
    uint64_t rng = wl_rng_seed(t->seed, (uint64_t)t->idx), seq = 0;
    const size_t live = (size_t)t->live;
    for (size_t k = 0; k < live; k++) {
        if (!(t->slots[k] = make(t, &rng, &seq))) {
            t->error = "malloc returned NULL";
            break;
        }
    }
    t->mallocs = 0; /* the fill is not timed */
    pthread_barrier_wait(&start_bar);
    if (t->error)
        goto done;

    mailbox *next = &boxes[(t->idx + 1) % t->nthreads];
    size_t cursor = 0;
    void *batch[HAND_BATCH];
    while (t->mallocs < t->ops) {
        for (int i = 0; i < HAND_EVERY; i++) {
            size_t k = (size_t)(wl_rng(&rng) % live);
            release(t->slots[k], &t->check, &t->bad);
            if (!(t->slots[k] = make(t, &rng, &seq))) {
                t->error = "malloc returned NULL";
                goto done;
            }
        }
        for (int i = 0; i < HAND_BATCH; i++) {
            batch[i] = t->slots[cursor];
            if (!(t->slots[cursor] = make(t, &rng, &seq))) {
                t->error = "malloc returned NULL";
                goto done;
            }
            if (++cursor == live)
                cursor = 0;
        }
        pthread_mutex_lock(&next->mu);
        int fits = next->n + HAND_BATCH <= MB_CAP;
        if (fits) {
            memcpy(next->items + next->n, batch, sizeof batch);
            next->n += HAND_BATCH;
        }
        pthread_mutex_unlock(&next->mu);
        if (!fits)
            for (int i = 0; i < HAND_BATCH; i++)
                release(batch[i], &t->check, &t->bad);
        drain(t);
    }
done:
    pthread_barrier_wait(&end_bar); /* no hand-offs after this */
    drain(t);
    for (size_t k = 0; k < live; k++)
        if (t->slots[k])
            release(t->slots[k], &t->check, &t->bad);
    return NULL;
}

static void *map(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void wl_larson(const wl_params *p, wl_result *r)
{
    const int n = p->threads ? (int)p->threads : 1;
    const uint64_t live = p->live ? p->live : 8192;
    if (n > MAX_THREADS) {
        r->error = "larson: too many threads";
        return;
    }
    static larson_thread th[MAX_THREADS];
    boxes = map(sizeof(mailbox) * (size_t)n);
    if (!boxes) {
        r->error = "mmap failed";
        return;
    }
    pthread_barrier_init(&start_bar, NULL, (unsigned)n + 1);
    pthread_barrier_init(&end_bar, NULL, (unsigned)n);
    for (int i = 0; i < n; i++) {
        pthread_mutex_init(&boxes[i].mu, NULL);
        th[i] = (larson_thread){.idx = i, .nthreads = n, .ops = p->ops / (uint64_t)n,
                                .live = live, .seed = p->seed};
        th[i].slots = map(live * sizeof(void *));
        th[i].local = map(MB_CAP * sizeof(void *));
        if (!th[i].slots || !th[i].local) {
            r->error = "mmap failed";
            return;
        }
    }
    for (int i = 0; i < n; i++) {
        if (pthread_create(&th[i].th, NULL, larson_main, &th[i]) != 0) {
            r->error = "pthread_create failed";
            return; /* the barrier would never open: main.c exits */
        }
    }
    pthread_barrier_wait(&start_bar);
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < n; i++)
        pthread_join(th[i].th, NULL);
    r->ns = bench_now_ns() - t0;
    for (int i = 0; i < n; i++) {
        r->ops += th[i].mallocs;
        r->check += th[i].check;
        r->bad += th[i].bad;
        if (th[i].error)
            r->error = th[i].error;
    }
}
