/* SPDX-License-Identifier: MIT */
/*
 * stress/soak.c - the soak test, on demand: 8 threads of mixed
 * context and malloc work for a long time (argv[1] or MEMKIT_SOAK_SECONDS,
 * 600 by default), the process's resident memory sampled every second.
 * Not part of `make test`: `make soak [SOAK_SECONDS=N]`, or
 * `ctest -C soak -L soak` in a build directory (the test is registered for
 * that ctest configuration only), or run build/tests/stress_soak N.
 *
 * Linked with libmemkit-malloc: malloc is memkit's drop-in, and the
 * context API is there too.  Each of the 8 worker slots runs a thread for
 * a few seconds, then the thread ends and a new one takes the slot over
 * (so heaps of exited threads, with blocks other threads still hold, are
 * adopted and swept all along).  A thread's work, at random:
 *   - malloc / calloc / realloc / free of sizes from 8 bytes to 2 MiB
 *     (mostly small), in a table of its own;
 *   - chunks in four contexts of the slot (GENERAL, SLAB, GENERATION,
 *     BUMP), which the next thread of the slot takes over with
 *     mk_ctx_set_owner; BUMP is reset now and then, GENERATION freed
 *     mostly oldest first;
 *   - objects of one thread-safe pool shared by all;
 *   - cross-thread frees: malloc blocks, GENERAL/SLAB/GENERATION chunks
 *     and pool objects are posted to another slot's mailbox, whose thread
 *     checks and frees them;
 *   - malloc_trim(0) now and then.
 * Every block carries a pattern at both ends, checked before it is freed,
 * reallocated or reset away.
 *
 * At the end everything is freed, the contexts and the pool deleted, and
 * the test requires: no pattern broken (and no report from memkit, which
 * would abort); resident memory not growing: the mean of the last 20% of
 * the samples at most 25% (+8 MiB) above the mean of the samples from 10%
 * to 30% of the run (after warm-up), the working set being the same
 * throughout.  It prints the samples every 10 s and a summary.
 */
#include "harness.h"

#include <malloc.h>
#include <memkit.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

enum {
    SLOTS = 8,
    MAXBLK = 1536,  /* malloc blocks a thread holds */
    MAXCHK = 1024,  /* chunks per context */
    MAILBOX = 1024,
    PAT = 64        /* patterned bytes at each end */
};

typedef struct blk {
    char *p;
    size_t n;
    uint64_t id;
} blk;

typedef struct mail {
    blk b;
    int kind; /* 0 malloc, 1 context chunk (mk_free), 2 pool object */
} mail;

typedef struct mailbox {
    pthread_mutex_t lock;
    mail m[MAILBOX];
    int n;
} mailbox;

typedef struct slot_state {
    mk_ctx *ctx[4];        /* GENERAL, SLAB, GENERATION, BUMP */
    blk chunks[4][MAXCHK];
    int nchunks[4];
    size_t gen_head;       /* GENERATION: oldest first */
    mailbox box;
} slot_state;

static slot_state slots[SLOTS];
static mk_pool *shared_pool;
static _Atomic int stop;
static _Atomic long errors, ops, remote_frees, threads_run;
static _Atomic long live_bytes; /* requested bytes live (the working set) */
#define LIVE(delta) \
    atomic_fetch_add_explicit(&live_bytes, (long)(delta), memory_order_relaxed)
static _Atomic uint64_t next_id = 1;
static double seconds = 600;

/* ---- patterns at both ends ----------------------------------------------------- */

/* The head: the first PAT bytes (or fewer); the tail: up to PAT bytes
 * after the head, at the end. */
static size_t head_len(size_t n) { return n < PAT ? n : PAT; }
static size_t tail_len(size_t n)
{
    size_t rest = n - head_len(n);
    return rest < PAT ? rest : PAT;
}

static void mark(blk *b)
{
    b->id = atomic_fetch_add_explicit(&next_id, 1, memory_order_relaxed);
    th_fill(b->p, head_len(b->n), b->id);
    size_t t = tail_len(b->n);
    th_fill(b->p + b->n - t, t, b->id ^ 0xabcdef);
}

static int intact(const blk *b)
{
    size_t t = tail_len(b->n);
    return th_verify(b->p, head_len(b->n), b->id) == (size_t)-1 &&
           th_verify(b->p + b->n - t, t, b->id ^ 0xabcdef) == (size_t)-1;
}

static void check(const blk *b, const char *what)
{
    if (!intact(b)) {
        if (atomic_fetch_add(&errors, 1) < 10)
            fprintf(stderr, "soak: %s: block %p of %zu bytes corrupted\n",
                    what, (void *)b->p, b->n);
    }
}

static size_t rand_size(th_rng *r)
{
    uint64_t x = th_below(r, 1000);
    if (x < 700)
        return 8 + (size_t)th_below(r, 248);
    if (x < 950)
        return 256 + (size_t)th_below(r, 4000);
    if (x < 995)
        return 4096 + (size_t)th_below(r, 60000);
    return 65536 + (size_t)th_below(r, (size_t)2 << 20);
}

/* ---- mail ------------------------------------------------------------------------- */

static void free_mail(const mail *m)
{
    check(&m->b, "a block another thread posted");
    LIVE(-(long)m->b.n);
    if (m->kind == 2)
        mk_pool_free(shared_pool, m->b.p);
    else if (m->kind == 1)
        mk_free(m->b.p);
    else
        free(m->b.p);
    atomic_fetch_add_explicit(&remote_frees, 1, memory_order_relaxed);
}

/* Post @b to another slot; if its box is full, free it here. */
static void post(int self, th_rng *r, blk b, int kind)
{
    int to = (self + 1 + (int)th_below(r, SLOTS - 1)) % SLOTS;
    mailbox *mb = &slots[to].box;
    pthread_mutex_lock(&mb->lock);
    if (mb->n < MAILBOX) {
        mb->m[mb->n++] = (mail){b, kind};
        pthread_mutex_unlock(&mb->lock);
        return;
    }
    pthread_mutex_unlock(&mb->lock);
    mail m = {b, kind};
    free_mail(&m);
}

static void drain(int self)
{
    mailbox *mb = &slots[self].box;
    mail local[MAILBOX];
    pthread_mutex_lock(&mb->lock);
    int n = mb->n;
    memcpy(local, mb->m, (size_t)n * sizeof local[0]);
    mb->n = 0;
    pthread_mutex_unlock(&mb->lock);
    for (int i = 0; i < n; i++)
        free_mail(&local[i]);
}

/* ---- one thread of a slot ------------------------------------------------------------ */

typedef struct worker_arg {
    int slot;
    uint64_t seed;
    double until; /* this thread ends then */
} worker_arg;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void ctx_op(int self, slot_state *st, th_rng *r)
{
    int k = (int)th_below(r, 4);
    mk_ctx *c = st->ctx[k];
    blk *tab = st->chunks[k];
    int *n = &st->nchunks[k];
    if (k == 3 && th_below(r, 2000) == 0) { /* BUMP: reset */
        for (int i = 0; i < *n; i++) {
            check(&tab[i], "before a BUMP reset");
            LIVE(-(long)tab[i].n);
        }
        mk_ctx_reset(c);
        *n = 0;
        return;
    }
    if (*n < MAXCHK && (th_below(r, 2) || *n == 0)) {
        size_t sz = k == 1 ? 64 : k == 3 ? 8 + (size_t)th_below(r, 300)
                                         : rand_size(r) % 20000;
        blk b = {mk_alloc(c, sz), sz, 0};
        if (!b.p) {
            atomic_fetch_add(&errors, 1);
            return;
        }
        mark(&b);
        LIVE(sz);
        tab[(*n)++] = b;
        return;
    }
    if (k == 3 || *n == 0)
        return;
    int i = k == 2 && th_below(r, 4) ? 0 : (int)th_below(r, (uint64_t)*n);
    blk b = tab[i];
    if (k == 2 && i == 0) /* GENERATION: oldest first (the table is FIFO) */
        memmove(tab, tab + 1, (size_t)(*n - 1) * sizeof *tab);
    else
        tab[i] = tab[*n - 1];
    (*n)--;
    if (th_below(r, 4) == 0) {
        post(self, r, b, 1);
    } else {
        check(&b, "a context chunk before its free");
        LIVE(-(long)b.n);
        mk_free(b.p);
    }
}

static void *worker(void *argp)
{
    worker_arg a = *(worker_arg *)argp;
    free(argp);
    slot_state *st = &slots[a.slot];
    th_rng r = {a.seed};
    for (int k = 0; k < 4; k++)
        mk_ctx_set_owner(st->ctx[k]); /* the slot's contexts: ours now */
    static __thread blk mine[MAXBLK];
    int n = 0;
    long local_ops = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        if ((local_ops & 255) == 0 && now_s() > a.until)
            break;
        local_ops++;
        uint64_t x = th_below(&r, 100);
        if (x < 35) { /* malloc / calloc */
            if (n == MAXBLK)
                continue;
            size_t sz = rand_size(&r);
            blk b = {th_below(&r, 8) ? malloc(sz) : calloc(1, sz), sz, 0};
            if (!b.p) {
                atomic_fetch_add(&errors, 1);
                continue;
            }
            mark(&b);
            LIVE(sz);
            mine[n++] = b;
        } else if (x < 60 && n) { /* free, or post for another to free */
            int i = (int)th_below(&r, (uint64_t)n);
            blk b = mine[i];
            mine[i] = mine[--n];
            if (th_below(&r, 3) == 0) {
                post(a.slot, &r, b, 0);
            } else {
                check(&b, "before free");
                LIVE(-(long)b.n);
                free(b.p);
            }
        } else if (x < 68 && n) { /* realloc */
            int i = (int)th_below(&r, (uint64_t)n);
            check(&mine[i], "before realloc");
            size_t sz = rand_size(&r), keep = sz < mine[i].n ? sz : mine[i].n;
            keep = keep < head_len(mine[i].n) ? keep : head_len(mine[i].n);
            char *q = realloc(mine[i].p, sz);
            if (!q) {
                atomic_fetch_add(&errors, 1);
                continue;
            }
            if (th_verify(q, keep, mine[i].id) != (size_t)-1)
                atomic_fetch_add(&errors, 1);
            LIVE((long)sz - (long)mine[i].n);
            mine[i].p = q;
            mine[i].n = sz;
            mark(&mine[i]);
        } else if (x < 92) {
            ctx_op(a.slot, st, &r);
        } else if (x < 98) { /* the shared pool */
            blk b = {mk_pool_alloc(shared_pool), 48, 0};
            if (!b.p) {
                atomic_fetch_add(&errors, 1);
                continue;
            }
            mark(&b);
            if (th_below(&r, 2)) {
                LIVE(48);
                post(a.slot, &r, b, 2);
            } else {
                mk_pool_free(shared_pool, b.p);
            }
        } else if (th_below(&r, 500) == 0) {
            malloc_trim(0);
        }
        if ((local_ops & 63) == 0)
            drain(a.slot);
    }
    /* leave: malloc blocks go to other threads (they stay valid after we
     * exit) or are freed; the slot's contexts wait for the next thread */
    for (int i = 0; i < n; i++) {
        if (th_below(&r, 2)) {
            post(a.slot, &r, mine[i], 0);
        } else {
            check(&mine[i], "at thread exit");
            LIVE(-(long)mine[i].n);
            free(mine[i].p);
        }
    }
    drain(a.slot);
    atomic_fetch_add(&ops, local_ops);
    atomic_fetch_add(&threads_run, 1);
    return NULL;
}

static int start(int slot, uint64_t seed, double until, pthread_t *t)
{
    worker_arg *a = malloc(sizeof *a);
    if (!a)
        return -1;
    *a = (worker_arg){slot, seed, until};
    return pthread_create(t, NULL, worker, a);
}

/* ---- the test --------------------------------------------------------------------------- */

static double mean(const double *v, int from, int to)
{
    double s = 0;
    for (int i = from; i < to; i++)
        s += v[i];
    return to > from ? s / (to - from) : 0;
}

static void test_soak(void)
{
    mk_ctx_opts so = {.chunk_size = 64};
    for (int i = 0; i < SLOTS; i++) {
        pthread_mutex_init(&slots[i].box.lock, NULL);
        slots[i].ctx[0] = mk_ctx_new(NULL, "soak-general", MK_GENERAL, NULL);
        slots[i].ctx[1] = mk_ctx_new(NULL, "soak-slab", MK_SLAB, &so);
        slots[i].ctx[2] = mk_ctx_new(NULL, "soak-generation", MK_GENERATION,
                                     NULL);
        slots[i].ctx[3] = mk_ctx_new(NULL, "soak-bump", MK_BUMP, NULL);
        for (int k = 0; k < 4; k++)
            REQUIRE_NOT_NULL(slots[i].ctx[k]);
    }
    shared_pool = mk_pool_new("soak-pool", 48, 0, MK_POOL_THREADSAFE);
    REQUIRE_NOT_NULL(shared_pool);

    int nsamples = (int)seconds + 2;
    double *rss = calloc((size_t)nsamples, sizeof *rss);
    REQUIRE_NOT_NULL(rss);
    pthread_t t[SLOTS];
    double t0 = now_s(), end = t0 + seconds;
    uint64_t seed = 0x50a4;
    for (int i = 0; i < SLOTS; i++) {
        double life = 2 + (double)th_below(&(th_rng){seed + (uint64_t)i}, 6);
        REQUIRE(start(i, seed++ * 7919, now_s() + life, &t[i]) == 0);
    }
    /* sample once a second; restart a slot's thread when it ends */
    int ns = 0;
    double next = t0 + 1;
    th_rng lr = {77};
    while (now_s() < end) {
        for (int i = 0; i < SLOTS; i++) {
            if (pthread_tryjoin_np(t[i], NULL) == 0) {
                double life = 2 + (double)th_below(&lr, 6);
                if (start(i, seed++ * 7919, now_s() + life, &t[i]) != 0) {
                    th_fail(__FILE__, __LINE__, "cannot start a thread");
                    atomic_store(&stop, 1);
                }
            }
        }
        if (now_s() >= next && ns < nsamples) {
            rss[ns++] = (double)th_rss_bytes() / (1 << 20);
            next += 1;
            if (ns % 10 == 0) {
                /* memkit's own view, to tell where resident memory is:
                 * committed, in pages held by contexts (uordblks less the
                 * huge chunks), in huge chunks, bookkeeping */
                mk_process_figures f;
                mk_process_stats(&f);
                struct mallinfo2 mi = mallinfo2();
                printf("  %4d s: RSS %7.1f MiB, live %.1f MiB, %ld threads "
                       "done, %ld errors; memkit: committed %.1f, pages "
                       "%.1f, huge %.1f, meta %.1f MiB, %zu segments\n", ns,
                       rss[ns - 1], (double)live_bytes / (1 << 20),
                       (long)threads_run, (long)errors,
                       (double)f.os_committed / (1 << 20),
                       (double)(mi.uordblks - mi.hblkhd) / (1 << 20),
                       (double)mi.hblkhd / (1 << 20),
                       (double)f.meta_bytes / (1 << 20), f.segments);
                fflush(stdout);
            }
        }
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < SLOTS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < SLOTS; i++)
        drain(i); /* what the last threads posted to each other */

    /* the end: the contexts come to this thread, everything goes */
    for (int i = 0; i < SLOTS; i++) {
        for (int k = 0; k < 4; k++) {
            mk_ctx_set_owner(slots[i].ctx[k]);
            for (int j = 0; j < slots[i].nchunks[k]; j++)
                check(&slots[i].chunks[k][j], "at the end");
            mk_ctx_delete(slots[i].ctx[k]);
        }
    }
    mk_pool_delete(shared_pool);
    mk_trim();

    int from = ns / 10, to = ns * 3 / 10, last = ns * 8 / 10;
    double early = mean(rss, from, to), late = mean(rss, last, ns);
    double peak = 0;
    for (int i = 0; i < ns; i++)
        peak = rss[i] > peak ? rss[i] : peak;
    mk_process_figures pf;
    mk_process_stats(&pf);
    printf("  %.0f s, %ld threads, %ld operations, %ld cross-thread frees, "
           "%ld errors\n  RSS: %.1f MiB (samples %d..%d), %.1f MiB (last "
           "20%%), peak %.1f MiB; after the end: %.1f MiB, memkit committed "
           "%.1f MiB\n", now_s() - t0, (long)threads_run, (long)ops,
           (long)remote_frees, (long)errors, early, from, to, late, peak,
           (double)th_rss_bytes() / (1 << 20),
           (double)pf.os_committed / (1 << 20));
    CHECK_EQ((long)errors, 0L);
    CHECK_GT(ns, 2);
    CHECK_GT((long)remote_frees, 0L);
    CHECK(late <= early * 1.25 + 8);
    free(rss);
}

int main(int argc, char **argv)
{
    seconds = (double)th_arg_long(argc, argv, 1, "MEMKIT_SOAK_SECONDS", 600);
    if (seconds < 5)
        seconds = 5;
    printf("soak: %.0f s, %d threads\n", seconds, SLOTS);
    RUN(test_soak);
    return th_done();
}
