/* SPDX-License-Identifier: MIT */
/*
 * stress/pool_threads.c - a MK_POOL_THREADSAFE typed pool shared by 2..64
 * threads (argv[2] or MEMKIT_TEST_THREADS; default 2) with cross-thread
 * frees.  The pool is created by the main thread, which then only watches.
 * Each worker allocates objects (iterations from argv[1] or
 * MEMKIT_TEST_ITERS), fills them with a pattern naming the thread and a
 * sequence number, and passes most of them to another worker through a
 * mutex-protected queue; the receiver verifies the pattern and frees the
 * object (mk_pool_free, or mk_free for one in four): a free into a slab
 * owned by another thread.  Each worker also keeps a few objects of its own
 * and frees them locally.
 *
 * At the end, after every free everywhere is done, each worker allocates
 * probe objects until its own slab shows only the probes (its allocation
 * slow path has taken in the other threads' frees), and frees the probes.
 * After the workers are joined, mk_pool_stats shows 0 objects.  Then a
 * second generation of threads each leaves objects in the pool and exits;
 * the main thread verifies and frees them (frees into slabs of dead
 * threads), and mk_pool_delete reports no leak (an error handler counts
 * reports; it must not be called).  Finally, after mk_trim, the OS layer's
 * committed bytes are back to the baseline.  Fixed seeds.
 *
 * test_pool_thread_churn: 400 threads, two alive at a time, each takes
 * objects from a thread-safe pool, frees half and leaves half for the main
 * thread to free: the pool must not keep a slab per thread that ever used
 * it (a new thread takes over the slab of one that exited: pool.c, shard
 * numbers; found by the soak test, whose RSS grew by one slab per thread).
 */
#include "harness.h"

#include <memkit.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "internal.h"

enum { MAXT = 64, QCAP = 256, LOCAL = 32, LEFT = 100 }; /* MAXT: for a many-core run */

typedef struct item {
    uint64_t id;   /* thread << 48 | sequence */
    uint64_t words[5];
} item;

MK_POOL_DECLARE(item, item)

typedef struct queue {
    pthread_mutex_t lock;
    item *ring[QCAP];
    int head, count;
} queue;

typedef struct worker {
    int index;
    long sent, received, local_frees, errors;
    int collected_ok;
    size_t left_chunks;
    item *left[LEFT];
} worker;

static int nthreads = 2;
static long iters = 100000;
static item_pool *pool;
static queue queues[MAXT];
static worker workers[MAXT];
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

static void fill(item *o, uint64_t id)
{
    o->id = id;
    for (int i = 0; i < 5; i++)
        o->words[i] = th_pattern_word(id, (size_t)i);
}

static int intact(const item *o)
{
    for (int i = 0; i < 5; i++)
        if (o->words[i] != th_pattern_word(o->id, (size_t)i))
            return 0;
    return 1;
}

static int push(int to, item *o)
{
    queue *q = &queues[to];
    pthread_mutex_lock(&q->lock);
    int ok = q->count < QCAP;
    if (ok) {
        q->ring[(q->head + q->count) % QCAP] = o;
        q->count++;
    }
    pthread_mutex_unlock(&q->lock);
    return ok;
}

static item *pop(int from)
{
    queue *q = &queues[from];
    item *o = NULL;
    pthread_mutex_lock(&q->lock);
    if (q->count > 0) {
        o = q->ring[q->head];
        q->head = (q->head + 1) % QCAP;
        q->count--;
    }
    pthread_mutex_unlock(&q->lock);
    return o;
}

static void check_obj(worker *w, const item *o, const char *when)
{
    if (!intact(o))
        WFAIL(w, "%s: object %llx at %p corrupted", when,
              (unsigned long long)o->id, (const void *)o);
    if ((uintptr_t)o % 8)
        WFAIL(w, "%s: object %p misaligned", when, (const void *)o);
    mk_ctx *c = mk_ctx_of(o);
    if (!c || mk_ctx_kind(c) != MK_SLAB)
        WFAIL(w, "%s: mk_ctx_of(%p) is not a slab", when, (const void *)o);
}

/* Free what others sent us: remote frees. */
static int drain(worker *w, int max)
{
    int n = 0;
    item *o;
    while (n < max && (o = pop(w->index)) != NULL) {
        check_obj(w, o, "received");
        if (o->id % 4 == 0)
            mk_free(o); /* finds the pool's slab itself */
        else
            item_free(pool, o);
        w->received++;
        n++;
    }
    return n;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    th_rng r = {0xabcdefull + (uint64_t)w->index * 0x9E3779B97F4A7C15ull};
    item *local[LOCAL] = {0};
    uint64_t seq = 0;
    pthread_barrier_wait(&barrier);

    for (long it = 0; it < iters; it++) {
        item *o = item_alloc(pool);
        if (!o) {
            WFAIL(w, "item_alloc failed");
            continue;
        }
        fill(o, ((uint64_t)w->index << 48) | seq++);
        if (th_below(&r, 100) < 80) {
            int to = (int)th_below(&r, (uint64_t)nthreads - 1);
            if (to >= w->index)
                to++;
            int tries = 0;
            while (!push(to, o)) {
                drain(w, QCAP); /* make room in the system; no deadlock */
                if (++tries > 1000) {
                    check_obj(w, o, "unsent");
                    item_free(pool, o);
                    w->local_frees++;
                    o = NULL;
                    break;
                }
                sched_yield();
            }
            if (o)
                w->sent++;
        } else {
            item **slot = &local[th_below(&r, LOCAL)];
            if (*slot) {
                check_obj(w, *slot, "local");
                item_free(pool, *slot);
                w->local_frees++;
            }
            *slot = o;
        }
        drain(w, 4);
    }
    for (int i = 0; i < LOCAL; i++)
        if (local[i]) {
            check_obj(w, local[i], "local at end");
            item_free(pool, local[i]);
            w->local_frees++;
        }
    atomic_fetch_sub(&producing, 1);
    for (;;) {
        int done = atomic_load(&producing) == 0;
        int n = drain(w, QCAP);
        if (done && n == 0)
            break;
        if (n == 0)
            sched_yield();
    }
    pthread_barrier_wait(&barrier); /* every free everywhere is done */

    /* Collect: allocate until this thread's slab shows only the probes. */
    enum { PROBES = 1 << 17 };
    item **probe = malloc(PROBES * sizeof *probe);
    if (!probe) {
        WFAIL(w, "malloc");
        return NULL;
    }
    int np = 0;
    mk_stats st = {0};
    mk_ctx *mine = NULL;
    while (np < PROBES) {
        probe[np] = item_alloc(pool);
        if (!probe[np])
            break;
        mine = mk_ctx_of(probe[np]);
        np++;
        mk_ctx_stats(mine, &st, 0);
        if (st.chunks == (size_t)np)
            break;
    }
    w->collected_ok = mine && st.chunks == (size_t)np;
    for (int i = 0; i < np; i++)
        item_free(pool, probe[i]);
    free(probe);
    if (mine) {
        mk_ctx_stats(mine, &st, 0);
        w->left_chunks = st.chunks;
    }
    return NULL;
}

/* Second generation: leave objects behind and exit. */
static void *leaver_main(void *arg)
{
    worker *w = arg;
    for (int i = 0; i < LEFT; i++) {
        w->left[i] = item_alloc(pool);
        if (w->left[i])
            fill(w->left[i], ((uint64_t)(w->index + 8) << 48) | (uint64_t)i);
    }
    return NULL;
}

static int reports;
static char last_report[256];

static void on_error(const char *msg, void *arg)
{
    (void)arg;
    reports++;
    snprintf(last_report, sizeof last_report, "%s", msg);
}

static void test_pool_cross_thread(void)
{
    mk_trim();
    size_t base = mki_os_committed(), meta0 = mki_meta_bytes();
    pool = item_pool_new("shared-items", MK_POOL_THREADSAFE);
    REQUIRE_NOT_NULL(pool);
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
        sent += w->sent;
        received += w->received;
    }
    CHECK_EQ(sent, received);
    CHECK_GT(received, iters / 2); /* most frees were remote */
    mk_stats st;
    CHECK_EQ(mk_pool_stats((mk_pool *)pool, &st), 0);
    printf("  pool after the workers: %zu objects, %zu contexts, %zu blocks\n",
           st.chunks, st.contexts, st.blocks);
    CHECK_EQ(st.chunks, 0u);
    CHECK_EQ(st.bytes_used, 0u);
    CHECK_GE(st.contexts, (size_t)nthreads); /* a slab per worker */

    /* objects left by threads that exited stay valid; freed from here */
    for (int i = 0; i < nthreads; i++)
        REQUIRE(pthread_create(&t[i], NULL, leaver_main, &workers[i]) == 0);
    for (int i = 0; i < nthreads; i++)
        pthread_join(t[i], NULL);
    CHECK_EQ(mk_pool_stats((mk_pool *)pool, &st), 0);
    CHECK_EQ(st.chunks, (size_t)nthreads * LEFT);
    for (int i = 0; i < nthreads; i++)
        for (int j = 0; j < LEFT; j++) {
            item *o = workers[i].left[j];
            REQUIRE_NOT_NULL(o);
            if (!intact(o) || o->id != (((uint64_t)(i + 8) << 48) | (uint64_t)j))
                th_fail(__FILE__, __LINE__, "object %d of exited thread %d "
                        "corrupted", j, i);
            item_free(pool, o);
        }
    th_checks++;

    /* delete: no leak report */
    reports = 0;
    mk_set_error_handler(on_error, NULL);
    item_pool_delete(pool);
    mk_set_error_handler(NULL, NULL);
    if (reports)
        th_fail(__FILE__, __LINE__, "%d reports at delete, last: %s", reports,
                last_report);
    th_checks++;
    mk_trim();
    size_t now = mki_os_committed(), meta1 = mki_meta_bytes();
    printf("  committed: baseline %zu, now %zu (meta +%zu)\n", base, now,
           meta1 - meta0);
    CHECK_LE(now, base + (meta1 - meta0));
}

enum { CHURN_THREADS = 400, CHURN_OBJS = 40 };

static item *churn_left[CHURN_THREADS][CHURN_OBJS / 2];

static void *churner_main(void *arg)
{
    intptr_t k = (intptr_t)arg;
    item *mine[CHURN_OBJS];
    for (int i = 0; i < CHURN_OBJS; i++) {
        mine[i] = item_alloc(pool);
        if (mine[i])
            fill(mine[i], ((uint64_t)(k + 16) << 48) | (uint64_t)i);
    }
    for (int i = 0; i < CHURN_OBJS; i++) {
        if (i % 2)
            churn_left[k][i / 2] = mine[i]; /* for the main thread */
        else if (mine[i])
            item_free(pool, mine[i]);
    }
    return NULL;
}

static void test_pool_thread_churn(void)
{
    pool = item_pool_new("churned-items", MK_POOL_THREADSAFE);
    REQUIRE_NOT_NULL(pool);
    pthread_t t[2];
    for (int k = 0; k < CHURN_THREADS; k += 2) {
        for (int j = 0; j < 2; j++)
            REQUIRE(pthread_create(&t[j], NULL, churner_main,
                                   (void *)(intptr_t)(k + j)) == 0);
        for (int j = 0; j < 2; j++)
            pthread_join(t[j], NULL);
        /* the main thread frees what they left (into slabs of exited
         * threads), and the next pair takes those slabs over */
        for (int j = 0; j < 2; j++)
            for (int i = 0; i < CHURN_OBJS / 2; i++) {
                item *o = churn_left[k + j][i];
                REQUIRE_NOT_NULL(o);
                if (!intact(o) || o->id != (((uint64_t)(k + j + 16) << 48) |
                                            (uint64_t)(2 * i + 1)))
                    th_fail(__FILE__, __LINE__, "object of thread %d "
                            "corrupted", k + j);
                item_free(pool, o);
            }
    }
    mk_stats st;
    CHECK_EQ(mk_pool_stats((mk_pool *)pool, &st), 0);
    printf("  after %d threads: %zu slabs, %zu blocks, %zu objects\n",
           CHURN_THREADS, st.contexts, st.blocks, st.chunks);
    /* the creator's slab and one per thread alive at once */
    CHECK_LE(st.contexts, 1u + 2u);
    /* (st.chunks counts the main thread's frees into the workers' slabs
     * that no thread has taken in yet: mk_pool_stats collects only the
     * caller's slab; the delete takes in every one) */
    reports = 0;
    mk_set_error_handler(on_error, NULL);
    item_pool_delete(pool); /* collects every slab: no leak */
    mk_set_error_handler(NULL, NULL);
    if (reports)
        th_fail(__FILE__, __LINE__, "%d reports at delete, last: %s", reports,
                last_report);
    th_checks++;
}

int main(int argc, char **argv)
{
    iters = th_arg_long(argc, argv, 1, "MEMKIT_TEST_ITERS", iters);
    nthreads = (int)th_arg_long(argc, argv, 2, "MEMKIT_TEST_THREADS", nthreads);
    if (nthreads < 2 || nthreads > MAXT)
        nthreads = 2;
    printf("%d threads, %ld iterations each, checking build %d\n", nthreads,
           iters, mk_checking());
    RUN(test_pool_cross_thread);
    RUN(test_pool_thread_churn);
    return th_done();
}
