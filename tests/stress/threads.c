/* SPDX-License-Identifier: MIT */
/*
 * stress/threads.c - cross-thread frees.  2..4 threads (default 4), each
 * owning a GENERAL context, allocate chunks (mostly small, some large, a
 * few huge), fill them with a pattern naming the owner and a sequence
 * number, and pass most of them to another thread through mutex-protected
 * queues; the receiver checks the pattern and mk_ctx_of, and frees the
 * chunk: a remote free, queued for the owner to collect.  Each thread also
 * keeps a few chunks of its own, frees and resizes them locally.
 *
 * At the end every thread, after all frees everywhere are done, allocates
 * in its own context until it has collected the remote frees (mk_ctx_stats
 * counts uncollected ones as used), frees that probe, and checks its
 * context shows 0 chunks and 0 bytes used.  Then the contexts are deleted
 * and, after mk_trim, the OS layer's committed bytes are back to the
 * baseline.  Fixed seeds; iterations per thread from argv[1] or
 * MEMKIT_TEST_ITERS, threads from argv[2] or MEMKIT_TEST_THREADS.
 */
#include "harness.h"

#include <memkit.h>
#include <pthread.h>
#include <stdatomic.h>

#include "internal.h"

enum { MAXT = 64, QCAP = 512, LOCAL = 64 }; /* MAXT: for a many-core run */

typedef struct msg {
    char *p;
    size_t size;
    uint64_t id; /* owner << 48 | sequence */
} msg;

typedef struct queue {
    pthread_mutex_t lock;
    msg ring[QCAP];
    int head, count;
} queue;

typedef struct worker {
    int index;
    mk_ctx *ctx;
    long sent, received, local_frees, errors;
    int collected_ok;
    size_t left_chunks, left_used;
} worker;

static int nthreads = 4;
static long iters = 100000;
static queue queues[MAXT];
static worker workers[MAXT];
static mk_ctx *_Atomic ctx_of_thread[MAXT];
static atomic_int producing;
static pthread_barrier_t barrier;

#define WFAIL(w, ...)                                                       \
    do {                                                                    \
        if ((w)->errors++ < 5) {                                            \
            fprintf(stderr, "thread %d: ", (w)->index);                     \
            fprintf(stderr, __VA_ARGS__);                                   \
            fputc('\n', stderr);                                            \
        }                                                                   \
    } while (0)

static int push(int to, msg m)
{
    queue *q = &queues[to];
    pthread_mutex_lock(&q->lock);
    int ok = q->count < QCAP;
    if (ok) {
        q->ring[(q->head + q->count) % QCAP] = m;
        q->count++;
    }
    pthread_mutex_unlock(&q->lock);
    return ok;
}

static int pop(int from, msg *m)
{
    queue *q = &queues[from];
    pthread_mutex_lock(&q->lock);
    int ok = q->count > 0;
    if (ok) {
        *m = q->ring[q->head];
        q->head = (q->head + 1) % QCAP;
        q->count--;
    }
    pthread_mutex_unlock(&q->lock);
    return ok;
}

static void check_chunk(worker *w, const msg *m, const char *when)
{
    size_t bad = th_verify(m->p, m->size, m->id);
    if (bad != (size_t)-1)
        WFAIL(w, "%s: chunk %llx (%zu bytes at %p) corrupted at %zu", when,
              (unsigned long long)m->id, m->size, (void *)m->p, bad);
    int owner = (int)(m->id >> 48);
    if (mk_ctx_of(m->p) != atomic_load(&ctx_of_thread[owner]))
        WFAIL(w, "%s: mk_ctx_of(%p) is not thread %d's context", when,
              (void *)m->p, owner);
    if (mk_usable_size(m->p) < m->size)
        WFAIL(w, "%s: usable size %zu < %zu", when, mk_usable_size(m->p),
              m->size);
}

/* Take what others sent us: check, free (remote frees). */
static int drain(worker *w, int max)
{
    msg m;
    int n = 0;
    while (n < max && pop(w->index, &m)) {
        check_chunk(w, &m, "received");
        mk_free(m.p);
        w->received++;
        n++;
    }
    return n;
}

static size_t random_size(th_rng *r)
{
    uint64_t x = th_below(r, 10000);
    if (x < 9000)
        return 1 + (size_t)th_below(r, 256);
    if (x < 9800)
        return 257 + (size_t)th_below(r, 8000);
    if (x < 9980)
        return 8257 + (size_t)th_below(r, 250000);
    return ((size_t)1 << 20) + (size_t)th_below(r, (size_t)1 << 20);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    th_rng r = {0x1234567ull + (uint64_t)w->index * 0x9E3779B97F4A7C15ull};
    w->ctx = mk_ctx_new(NULL, "worker", MK_GENERAL, NULL);
    atomic_store(&ctx_of_thread[w->index], w->ctx);
    pthread_barrier_wait(&barrier); /* every context exists */
    if (!w->ctx) {
        WFAIL(w, "mk_ctx_new failed");
        atomic_fetch_sub(&producing, 1);
        pthread_barrier_wait(&barrier);
        return NULL;
    }
    msg local[LOCAL];
    memset(local, 0, sizeof local);
    uint64_t seq = 0;

    for (long it = 0; it < iters; it++) {
        msg m;
        m.size = random_size(&r);
        m.id = ((uint64_t)w->index << 48) | seq++;
        m.p = mk_alloc(w->ctx, m.size);
        if (!m.p) {
            WFAIL(w, "mk_alloc(%zu) failed", m.size);
            continue;
        }
        th_fill(m.p, m.size, m.id);
        if (th_below(&r, 100) < 85 && nthreads > 1) {
            int to = (int)th_below(&r, (uint64_t)nthreads - 1);
            if (to >= w->index)
                to++;
            int tries = 0;
            while (!push(to, m)) {
                drain(w, QCAP); /* make room in the system; no deadlock */
                if (++tries > 1000) {
                    check_chunk(w, &m, "unsent");
                    mk_free(m.p);
                    w->local_frees++;
                    m.p = NULL;
                    break;
                }
                sched_yield();
            }
            if (m.p)
                w->sent++;
        } else {
            /* keep it; the one it replaces is freed or resized locally */
            msg *slot = &local[th_below(&r, LOCAL)];
            if (slot->p) {
                check_chunk(w, slot, "local");
                if (th_below(&r, 4) == 0) {
                    size_t n = random_size(&r);
                    char *q = mk_realloc(slot->p, n);
                    if (!q) {
                        WFAIL(w, "mk_realloc failed");
                    } else {
                        msg t = {q, slot->size < n ? slot->size : n, slot->id};
                        check_chunk(w, &t, "realloc");
                        mk_free(q);
                    }
                } else {
                    mk_free(slot->p);
                }
                w->local_frees++;
            }
            *slot = m;
        }
        drain(w, 8);
    }
    for (int i = 0; i < LOCAL; i++)
        if (local[i].p) {
            check_chunk(w, &local[i], "local at end");
            mk_free(local[i].p);
            w->local_frees++;
        }
    atomic_fetch_sub(&producing, 1);
    /* keep receiving until nobody produces and our queue is empty */
    for (;;) {
        int done = atomic_load(&producing) == 0;
        int n = drain(w, QCAP);
        if (done && n == 0)
            break;
        if (n == 0)
            sched_yield();
    }
    pthread_barrier_wait(&barrier); /* every free everywhere is done */

    /* Collect: allocate until the stats show only our probe chunks (the
     * allocation slow path takes in the remote frees). */
    enum { PROBES = 4096 };
    static _Thread_local void *probe[PROBES];
    int np = 0;
    mk_stats st;
    mk_ctx_stats(w->ctx, &st, 0);
    while (st.chunks != (size_t)np && np < PROBES) {
        probe[np] = mk_alloc(w->ctx, np % 2 ? 28000 : 24);
        if (!probe[np])
            break;
        np++;
        mk_ctx_stats(w->ctx, &st, 0);
    }
    w->collected_ok = st.chunks == (size_t)np;
    for (int i = 0; i < np; i++)
        mk_free(probe[i]);
    mk_ctx_stats(w->ctx, &st, 0);
    w->left_chunks = st.chunks;
    w->left_used = st.bytes_used;
    return NULL;
}

static void test_cross_thread_frees(void)
{
    size_t base = mki_os_committed(), meta0 = mki_meta_bytes();
    pthread_t t[MAXT];
    atomic_store(&producing, nthreads);
    pthread_barrier_init(&barrier, NULL, (unsigned)nthreads);
    for (int i = 0; i < nthreads; i++) {
        pthread_mutex_init(&queues[i].lock, NULL);
        workers[i].index = i;
        REQUIRE(pthread_create(&t[i], NULL, worker_main, &workers[i]) == 0);
    }
    for (int i = 0; i < nthreads; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&barrier);

    long sent = 0, received = 0;
    for (int i = 0; i < nthreads; i++) {
        worker *w = &workers[i];
        printf("  thread %d: sent %ld, received %ld, local frees %ld, "
               "errors %ld\n", i, w->sent, w->received, w->local_frees,
               w->errors);
        CHECK_EQ(w->errors, 0L);
        CHECK(w->collected_ok);
        CHECK_EQ(w->left_chunks, 0u);
        CHECK_EQ(w->left_used, 0u);
        sent += w->sent;
        received += w->received;
    }
    CHECK_EQ(sent, received);
    if (nthreads > 1)
        CHECK_GT(received, iters / 2); /* most frees were remote */

    /* the owners are gone: their contexts are deleted from here */
    for (int i = 0; i < nthreads; i++)
        mk_ctx_delete(workers[i].ctx);
    mk_trim();
    size_t now = mki_os_committed(), meta1 = mki_meta_bytes();
    printf("  committed: baseline %zu, now %zu (meta %zu -> %zu)\n", base, now,
           meta0, meta1);
    CHECK_LE(now, base + (meta1 - meta0));
}

int main(int argc, char **argv)
{
    iters = th_arg_long(argc, argv, 1, "MEMKIT_TEST_ITERS", iters);
    nthreads = (int)th_arg_long(argc, argv, 2, "MEMKIT_TEST_THREADS", nthreads);
    if (nthreads < 1 || nthreads > MAXT)
        nthreads = 4;
    printf("%d threads, %ld iterations each\n", nthreads, iters);
    RUN(test_cross_thread_frees);
    return th_done();
}
