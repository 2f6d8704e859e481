/* SPDX-License-Identifier: MIT */
/*
 * api/huge_cache.c - the cache of freed huge mappings (page/huge.c) does
 * not raise the process's peak: what it holds, with what is live, never
 * passes the most the live huge chunks have held at once; and it still
 * serves the common case, a free followed by an allocation of a similar
 * size, from a cached mapping (no system call, no fault).
 *
 *  - 4 chunks of 8 MiB, 2 freed: both stay cached (the live chunks are 16
 *    MiB below their peak); an 8 MiB allocation takes one of them;
 *  - a 20 MiB allocation then passes the peak: the cache is emptied;
 *  - 300 rounds of a FIFO of 4 chunks of random sizes from 2 to 24 MiB
 *    (W8's pattern): after every malloc and free, live + cached <= the
 *    live peak so far (the cache bounded by a byte cap alone broke this:
 *    W8 peaked 15 MiB above what its chunks needed), and at least a third
 *    of the allocations are served from the cache (ctest also runs this
 *    one with MEMKIT_PURGE_DELAY_MS=1: api_huge_cache_purging);
 *  - where fresh mappings get 4 KiB pages (thp off here): a request larger
 *    than every cached mapping grows the largest with the pages of the
 *    others (moved, not faulted: the grown chunk holds what they held,
 *    where fresh pages would read zero), and such a mapping, now made of
 *    several kernel mappings, grows again (in place or moved) and
 *    reallocates;
 *  - a move that fails leaves fresh pages in its place, and the OS
 *    counters come back to where they started once all is freed;
 *  - a cached mapping a segment (4 MiB) or more longer than the request
 *    gives the rest of its pages to a cached mapping of their own, which
 *    serves the next request without faults;
 *  - a shorter rest of 2 MiB or more stays with the chunk (no system call)
 *    while the live chunks' such tails hold 16 MiB or less; past that it
 *    moves to the cache too;
 *  - where fresh mappings get huge pages (thp on, the system making them),
 *    nothing moves: that larger request gets a fresh mapping (zero) and
 *    the cache gives up a quarter of its size, and the rest of a longer
 *    cached mapping goes back to the OS, not to the cache;
 *  - 4 threads allocating, reallocating and freeing huge chunks of 1 -
 *    12 MiB, each page stamped and checked (gifts, splits and trims from
 *    several threads at once: no chunk shares a page with another, and
 *    the OS counters balance at the end);
 *  - run first, on a fresh process: when small chunks take fresh memory
 *    past the most memkit held, the cached huge mappings are shed (the
 *    peak rule), not only the segments' free units.
 */
#include "harness.h"
#include "option.h"

#include <memkit.h>

#include "internal.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>

#define MiB ((size_t)1 << 20)

/* TSan's shadow memory faults with the application's: no fault counts */
#if defined(__SANITIZE_THREAD__)
#define COUNT_FAULTS 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define COUNT_FAULTS 0
#endif
#endif
#ifndef COUNT_FAULTS
#define COUNT_FAULTS 1
#endif

static size_t peak_live;

static void figures(size_t *live, size_t *cache)
{
    size_t count;
    mki_huge_figures(&count, live, cache);
    if (*live > peak_live)
        peak_live = *live;
}

/* For a test that reads what a reused mapping held, counts its faults or
 * its cached bytes: an hour's purge delay until @restore, so that no pass
 * purges the cached mappings under it (the peak rule and mk_trim still
 * act).  With the delay of the environment, a pass empties them whenever
 * the test is held up past it (on a busy machine, with
 * MEMKIT_PURGE_DELAY_MS=1, test_gather failed 12 times in 40).  Returns the
 * delay to restore. */
static long hold_pages(void)
{
    long was = th_option("purge_delay_ms");
    CHECK_EQ(mk_option_set("purge_delay_ms", 3600000), 0);
    return was;
}

static void restore(long delay)
{
    CHECK_EQ(mk_option_set("purge_delay_ms", delay), 0);
}

/* A GENERAL context named @name for a test, the huge cache emptied (its
 * cached bytes now, the baseline, in *@cache0) and its pages held until
 * restore(*@delay) (hold_pages). */
static mk_ctx *start(const char *name, size_t *cache0, long *delay)
{
    mk_ctx *c = mk_ctx_new(NULL, name, MK_GENERAL, NULL);
    REQUIRE_RET(c != NULL, NULL);
    *delay = hold_pages();
    mk_trim();
    size_t live;
    figures(&live, cache0);
    return c;
}

/* live + cached within the live peak */
static void check_bound(const char *when)
{
    size_t live, cache;
    figures(&live, &cache);
    if (live + cache > peak_live)
        printf("  %s: live %zu + cached %zu > peak %zu\n", when, live, cache,
               peak_live);
    CHECK_LE(live + cache, peak_live);
}

static void test_bound_and_reuse(void)
{
    size_t live, cache, cache0;
    long delay;
    mk_ctx *c = start("huge", &cache0, &delay);
    REQUIRE_NOT_NULL(c);
    void *p[4];
    for (int i = 0; i < 4; i++) {
        p[i] = mk_alloc(c, 8 * MiB);
        REQUIRE_NOT_NULL(p[i]);
        memset(p[i], i + 1, 8 * MiB);
    }
    check_bound("four live");
    mk_free(p[0]);
    mk_free(p[1]);
    figures(&live, &cache);
    CHECK_GE(cache, cache0 + 16 * MiB); /* both kept */
    check_bound("two freed");
    void *q = mk_alloc(c, 8 * MiB);
    REQUIRE_NOT_NULL(q);
    size_t cache_after;
    figures(&live, &cache_after);
    CHECK_LE(cache_after + 8 * MiB, cache); /* one was taken */
    CHECK(q == p[0] || q == p[1]);
    check_bound("one reused");
    void *big = mk_alloc(c, 20 * MiB); /* past the peak */
    REQUIRE_NOT_NULL(big);
    memset(big, 9, 20 * MiB);
    figures(&live, &cache);
    CHECK_EQ(cache, 0u);
    check_bound("past the peak");
    mk_free(big);
    mk_free(q);
    mk_free(p[2]);
    mk_free(p[3]);
    check_bound("all freed");
    restore(delay); /* (held since start) */

    /* W8's pattern (with MEMKIT_PURGE_DELAY_MS=1: purged mappings, their
     * header page alone committed, in the cache) */
    void *ring[4] = {0};
    th_rng r = {42};
    int reused = 0, allocs = 0;
    for (int i = 0; i < 300; i++) {
        int k = i % 4;
        if (ring[k]) {
            mk_free(ring[k]);
            check_bound("ring free");
        }
        size_t sz = (2 + (size_t)th_below(&r, 23)) * MiB;
        figures(&live, &cache);
        ring[k] = mk_alloc(c, sz);
        REQUIRE_NOT_NULL(ring[k]);
        allocs++;
        size_t cache2;
        figures(&live, &cache2);
        if (cache2 < cache)
            reused++;
        for (size_t off = 0; off < sz; off += 4096)
            ((char *)ring[k])[off] = (char)i;
        check_bound("ring malloc");
    }
    printf("  %d of %d allocations from the cache\n", reused, allocs);
    CHECK_GE(reused * 3, allocs);
    for (int k = 0; k < 4; k++)
        mk_free(ring[k]);
    mk_ctx_delete(c);
}

/* memkit's OS counters after a trim: a test that gives back all it took
 * finds them where they were (no reserved or committed byte lost) */
typedef struct os_counts {
    size_t reserved, committed;
} os_counts;

static os_counts os_counts_trimmed(void)
{
    mk_trim();
    return (os_counts){mki_os_reserved(), mki_os_committed()};
}

static void check_os_counts(os_counts was)
{
    os_counts now = os_counts_trimmed();
    CHECK_EQ(now.committed, was.committed);
    CHECK_EQ(now.reserved, was.reserved);
}

static long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

/* Occupy the page after @p's mapping, so that it cannot grow in place
 * (NULL if that address was taken anyway). */
static void *block_after(void *p)
{
    mki_segment *s = mki_segment_of(p);
    void *at = (char *)s + s->size;
    void *q = mmap(at, 4096, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    return q == at ? q : NULL;
}

/* The regime of moved pages (page/huge.c: a fresh mapping would get 4 KiB
 * pages) for a test, until thp_restore: thp off.  Returns the option's
 * value to restore. */
static long thp_off(void)
{
    long was = th_option("thp");
    CHECK_EQ(mk_option_set("thp", 0), 0);
    return was;
}

static void thp_restore(long was) { CHECK_EQ(mk_option_set("thp", was), 0); }

static void test_gather(void)
{
    long thp = thp_off();
    mk_ctx *c = mk_ctx_new(NULL, "gather", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    long delay = hold_pages();
    os_counts was = os_counts_trimmed();
    char *a = mk_alloc(c, 6 * MiB), *b = mk_alloc(c, 6 * MiB),
         *d = mk_alloc(c, 6 * MiB);
    REQUIRE(a && b && d);
    memset(a, 0xaa, 6 * MiB);
    memset(b, 0xbb, 6 * MiB);
    memset(d, 0xdd, 6 * MiB);
    mk_free(a);
    mk_free(b); /* both cached: the live chunks are 12 MiB below their peak */

    /* 11 MiB: one of them, grown by the other's pages */
    long f0 = minor_faults();
    char *x = mk_alloc(c, 11 * MiB);
    REQUIRE_NOT_NULL(x);
    CHECK(x[0] == (char)0xaa || x[0] == (char)0xbb);
    CHECK(x[11 * MiB - 1] == (char)0xaa || x[11 * MiB - 1] == (char)0xbb);
    size_t zero_pages = 0;
    for (size_t off = 0; off < 11 * MiB; off += 4096)
        zero_pages += x[off] == 0;
    CHECK_EQ(zero_pages, 0u);
    memset(x, 0x11, 11 * MiB);
    long faults = minor_faults() - f0;
    printf("  11 MiB from two cached 6 MiB mappings: %ld faults (fresh: %zu)\n",
           faults, (size_t)(11 * MiB / 4096));
    if (COUNT_FAULTS)
        CHECK_LT(faults, (long)(11 * MiB / 4096 / 2));

    /* x's mapping is made of two kernel mappings: free it, then ask more,
     * with the address after it taken, so that it must move to grow */
    mk_free(x);
    void *wall = block_after(x);
    char *y = mk_alloc(c, 14 * MiB);
    REQUIRE_NOT_NULL(y);
    CHECK(y[0] == 0x11 || y[0] == (char)0xbb);
    for (size_t off = 0; off < 14 * MiB; off += 4096)
        y[off] = 0x22;
    if (wall)
        munmap(wall, 4096);

    /* a live chunk made of pieces reallocates (in place, or copied) */
    wall = block_after(y);
    char *z = mk_realloc(y, 30 * MiB);
    REQUIRE_NOT_NULL(z);
    CHECK(z[0] == 0x22 && z[14 * MiB - 4096] == 0x22);
    if (wall)
        munmap(wall, 4096);
    mk_free(z);
    mk_free(d);

    /* each OS request of such an allocation failing in turn: it succeeds
     * or fails cleanly, and where the move failed the chunk has fresh
     * pages there (the mapping grown, the other's pages not moved in) */
    int move_failed = 0;
    for (long n = 1; n <= 6; n++) {
        mk_trim(); /* (an empty cache again) */
        a = mk_alloc(c, 6 * MiB);
        b = mk_alloc(c, 6 * MiB);
        d = mk_alloc(c, 6 * MiB);
        REQUIRE(a && b && d);
        memset(a, 0xaa, 6 * MiB);
        memset(b, 0xbb, 6 * MiB);
        mk_free(a);
        mk_free(b);
        mki_os_fail_at(n, 0);
        x = mk_alloc(c, 11 * MiB);
        mki_os_fail_at(0, 0);
        if (x) {
            int head = x[0] == (char)0xaa || x[0] == (char)0xbb;
            move_failed |= head && x[11 * MiB - 1] == 0;
            memset(x, 0x33, 11 * MiB);
            CHECK(x[11 * MiB - 1] == 0x33);
            mk_free(x);
        }
        mk_free(d);
    }
    CHECK(move_failed);

    mk_ctx_delete(c);
    restore(delay);
    check_os_counts(was);
    thp_restore(thp);
}

static void test_split(void)
{
    size_t live, cache, cache0;
    long delay, thp = thp_off();
    mk_ctx *c = start("split", &cache0, &delay);
    REQUIRE_NOT_NULL(c);
    char *a = mk_alloc(c, 10 * MiB), *d = mk_alloc(c, 8 * MiB);
    REQUIRE(a && d);
    memset(a, 0xaa, 10 * MiB);
    mk_free(a); /* cached: 10 MiB and its header page */
    const size_t xn = 4 * MiB + 512 * 1024, yn = 5 * MiB;
    char *x = mk_alloc(c, xn);
    REQUIRE_NOT_NULL(x);
    CHECK(x == a);
    figures(&live, &cache);
    /* the chunk's mapping is cut to it (a sanitizer's redzone may add a
     * page or two); the 5.5 MiB past it, more than a segment, are cached */
    mki_segment *xs = mki_segment_of(x);
    CHECK_GE(xs->size, xn + 4096);
    CHECK_LE(xs->size, xn + 64 * 1024);
    CHECK_GE(cache - cache0, 11 * MiB / 2 - 64 * 1024);
    CHECK_LE(cache - cache0, 11 * MiB / 2 + 4096);
    long f0 = minor_faults();
    char *y = mk_alloc(c, yn); /* takes them */
    REQUIRE_NOT_NULL(y);
    CHECK(y[0] == (char)0xaa && y[yn - 1] == (char)0xaa);
    memset(y, 1, yn);
    long faults = minor_faults() - f0;
    if (COUNT_FAULTS)
        CHECK_LT(faults, 128);
    figures(&live, &cache);
    CHECK_EQ(cache, cache0);
    mk_free(x);
    mk_free(y);
    mk_free(d);
    mk_ctx_delete(c);
    restore(delay);
    thp_restore(thp);
}

/* Seven times: an 8 MiB chunk freed, then a 5.5 MiB one that takes its
 * cached mapping.  The 2.5 MiB past each of the first six stay with it
 * (15 MiB of tails: nothing moves, nothing is cached); the seventh's would
 * pass 16 MiB, so they go to the cache.  Freed, the chunks' mappings go
 * back to the cache whole. */
static void test_tail_budget(void)
{
    size_t live, cache, cache0;
    long delay, thp = thp_off();
    mk_ctx *c = start("tails", &cache0, &delay);
    REQUIRE_NOT_NULL(c);
    enum { N = 7 };
    const size_t xn = 5 * MiB + 512 * 1024;
    char *x[N];
    for (int i = 0; i < N; i++) {
        char *a = mk_alloc(c, 8 * MiB);
        REQUIRE_NOT_NULL(a);
        memset(a, 0xaa, 8 * MiB);
        size_t whole = mki_segment_of(a)->size;
        mk_free(a);
        REQUIRE_NOT_NULL(x[i] = mk_alloc(c, xn));
        CHECK(x[i] == a);
        memset(x[i], i, xn);
        mki_segment *xs = mki_segment_of(x[i]);
        figures(&live, &cache);
        if (i < N - 1) { /* kept: the whole mapping, nothing cached */
            CHECK_EQ(xs->size, whole);
            CHECK_EQ(cache, cache0);
        } else { /* over the budget: cut, its tail cached */
            CHECK_LE(xs->size, xn + 64 * 1024);
            CHECK_GE(cache - cache0, 5 * MiB / 2 - 64 * 1024);
        }
    }
    for (int i = 0; i < N; i++) {
        CHECK(x[i][0] == (char)i && x[i][xn - 1] == (char)i);
        mk_free(x[i]);
    }
    mk_ctx_delete(c);
    restore(delay);
    thp_restore(thp);
}

/* Where fresh mappings get huge pages and a moved page costs a fault of
 * its own (the OS layer's probe, set here both ways), nothing moves: a
 * request larger than every cached mapping is served fresh, the cache
 * giving up a quarter of its size (the oldest mapping's tail), and the
 * rest of a longer cached mapping goes back to the OS.  Where moves cost
 * nothing, or the system makes no huge pages, thp on keeps the moves (the
 * growth of the first case). */
static void no_moves(int costly)
{
    size_t live, cache, cache0;
    long delay, thp = th_option("thp");
    CHECK_EQ(mk_option_set("thp", 1), 0); /* (the default, whatever the
                                              environment says) */
    mki_os_moves_costly_set(costly);
    int fresh = costly && mki_os_huge_pages_work();
    mk_ctx *c = start("no moves", &cache0, &delay);
    REQUIRE_NOT_NULL(c);
    char *a = mk_alloc(c, 6 * MiB), *b = mk_alloc(c, 6 * MiB),
         *d = mk_alloc(c, 6 * MiB);
    REQUIRE(a && b && d);
    memset(a, 0xaa, 6 * MiB);
    memset(b, 0xbb, 6 * MiB);
    mk_free(a);
    mk_free(b); /* both cached */
    size_t before;
    figures(&live, &before);
    CHECK_GE(before - cache0, 12 * MiB);
    char *x = mk_alloc(c, 11 * MiB);
    REQUIRE_NOT_NULL(x);
    figures(&live, &cache);
    if (!fresh) { /* the largest cached mapping grew, with the other's
                     * pages (the 1 MiB it did not need stays cached) */
        CHECK(x[0] == (char)0xaa || x[0] == (char)0xbb);
        CHECK_LE(cache - cache0, 2 * MiB);
    } else {
        size_t zero_pages = 0;
        for (size_t off = 0; off < 11 * MiB; off += 4096)
            zero_pages += x[off] == 0;
        CHECK_EQ(zero_pages, (size_t)(11 * MiB / 4096)); /* fresh */
        size_t quarter = (11 * MiB + 4096) / 4;
        CHECK_GE(before - cache, quarter);
        CHECK_LE(before - cache, quarter + 8192);
    }
    mk_free(x);
    mk_free(d);

    /* a 10 MiB mapping cached, a 4.5 MiB request takes it: the 5.5 MiB
     * past the chunk go back to the OS (moved to the cache with thp off:
     * test_split) */
    mk_trim();
    figures(&live, &cache0);
    a = mk_alloc(c, 10 * MiB);
    d = mk_alloc(c, 8 * MiB);
    REQUIRE(a && d);
    memset(a, 0xaa, 10 * MiB);
    mk_free(a);
    const size_t xn = 4 * MiB + 512 * 1024;
    size_t committed = mki_os_committed();
    x = mk_alloc(c, xn);
    REQUIRE_NOT_NULL(x);
    CHECK(x == a);
    figures(&live, &cache);
    mki_segment *xs = mki_segment_of(x);
    CHECK_LE(xs->size, xn + 64 * 1024);
    if (fresh) {
        CHECK_EQ(cache, cache0);
        CHECK_LE(mki_os_committed() + 11 * MiB / 2 - 64 * 1024, committed);
    } else {
        CHECK_GE(cache - cache0, 11 * MiB / 2 - 64 * 1024);
    }
    CHECK(x[0] == (char)0xaa && x[xn - 1] == (char)0xaa);
    mk_free(x);
    mk_free(d);
    mk_ctx_delete(c);
    restore(delay);
    mki_os_moves_costly_set(-1);
    thp_restore(thp);
}

static void test_no_moves(void)
{
    int costly = mki_os_moves_costly();
    printf("  here a moved page %s at its next touch; huge pages %s\n",
           costly ? "costs a fault" : "costs no fault",
           mki_os_huge_pages_work() ? "made" : "not made");
    CHECK(costly == 0 || costly == 1);
    no_moves(1);
    no_moves(0);
}

/* ---- threads ---- */

#define HT_THREADS 4
#define HT_ROUNDS 120
#define HT_LIVE 3

typedef struct ht_arg {
    mk_ctx *ctx;
    unsigned idx;
    long bad; /* pages whose stamp was wrong */
    long nulls;
} ht_arg;

static uint64_t ht_stamp(unsigned t, unsigned round, size_t page)
{
    return ((uint64_t)t << 56) ^ ((uint64_t)round << 32) ^ page ^ 0x5a5a;
}

static void ht_write(char *p, size_t n, unsigned t, unsigned round)
{
    for (size_t o = 0; o + 8 <= n; o += 4096) {
        uint64_t w = ht_stamp(t, round, o >> 12);
        memcpy(p + o, &w, 8);
    }
}

static long ht_check(const char *p, size_t n, unsigned t, unsigned round)
{
    long bad = 0;
    for (size_t o = 0; o + 8 <= n; o += 4096) {
        uint64_t w;
        memcpy(&w, p + o, 8);
        bad += w != ht_stamp(t, round, o >> 12);
    }
    return bad;
}

static void *ht_main(void *arg)
{
    ht_arg *a = arg;
    th_rng r = {1000 + a->idx};
    char *p[HT_LIVE] = {0};
    size_t n[HT_LIVE] = {0};
    unsigned stamp[HT_LIVE] = {0};
    for (unsigned round = 1; round <= HT_ROUNDS; round++) {
        unsigned k = round % HT_LIVE;
        size_t sz = MiB + (size_t)th_below(&r, 11 * 1024) * 1024;
        if (p[k] && th_below(&r, 4) == 0) { /* grow or shrink it */
            char *q = mk_realloc(p[k], sz);
            if (!q) {
                a->nulls++;
                continue;
            }
            a->bad += ht_check(q, n[k] < sz ? n[k] : sz, a->idx, stamp[k]);
            p[k] = q;
        } else {
            if (p[k]) {
                a->bad += ht_check(p[k], n[k], a->idx, stamp[k]);
                mk_free(p[k]);
            }
            p[k] = mk_alloc(a->ctx, sz);
            if (!p[k]) {
                a->nulls++;
                continue;
            }
        }
        n[k] = sz;
        stamp[k] = round;
        ht_write(p[k], sz, a->idx, round);
    }
    for (unsigned k = 0; k < HT_LIVE; k++)
        if (p[k]) {
            a->bad += ht_check(p[k], n[k], a->idx, stamp[k]);
            mk_free(p[k]);
        }
    return NULL;
}

static void test_threads(void)
{
    ht_arg args[HT_THREADS];
    pthread_t th[HT_THREADS];
    mk_ctx *ctx[HT_THREADS];
    for (unsigned i = 0; i < HT_THREADS; i++) {
        ctx[i] = mk_ctx_new(NULL, "huge threads", MK_GENERAL, NULL);
        REQUIRE_NOT_NULL(ctx[i]);
        args[i] = (ht_arg){ctx[i], i, 0, 0};
    }
    os_counts was = os_counts_trimmed(); /* (after making the contexts:
                                            their bookkeeping stays) */
    for (unsigned i = 0; i < HT_THREADS; i++)
        REQUIRE(pthread_create(&th[i], NULL, ht_main, &args[i]) == 0);
    for (unsigned i = 0; i < HT_THREADS; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ(args[i].bad, 0);
        CHECK_EQ(args[i].nulls, 0);
    }
    /* (the contexts are the main thread's: the workers' frees wait on
     * their remote lists until an allocation or the delete takes them) */
    for (unsigned i = 0; i < HT_THREADS; i++)
        mk_ctx_delete(ctx[i]);
    check_os_counts(was);
}

/* Run first: the peak rule acts only past the most memkit ever held. */
static void test_shed(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "shed", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    long delay = hold_pages();
    char *h[3];
    for (int i = 0; i < 3; i++) {
        h[i] = mk_alloc(c, 8 * MiB);
        REQUIRE_NOT_NULL(h[i]);
        memset(h[i], i + 1, 8 * MiB);
    }
    mk_free(h[0]);
    mk_free(h[1]);
    size_t live, cache;
    figures(&live, &cache);
    CHECK_GE(cache, 16 * MiB); /* within the huge chunks' own peak */
    /* 24 MiB of small chunks: fresh memory past the most held */
    enum { N = 24 * 1024 };
    void **small = mk_alloc(c, N * sizeof(void *));
    REQUIRE_NOT_NULL(small);
    for (int i = 0; i < N; i++) {
        small[i] = mk_alloc(c, 1000);
        REQUIRE_NOT_NULL(small[i]);
        memset(small[i], 7, 1000);
    }
    figures(&live, &cache);
    printf("  huge cache after 24 MiB of small chunks: %zu KiB\n", cache >> 10);
    CHECK_LE(cache, 4 * MiB);
    for (int i = 0; i < N; i++)
        mk_free(small[i]);
    mk_free(small);
    mk_free(h[2]);
    mk_ctx_delete(c);
    restore(delay);
}

int main(void)
{
    RUN(test_shed);
    RUN(test_bound_and_reuse);
    RUN(test_gather);
    RUN(test_split);
    RUN(test_tail_budget);
    RUN(test_no_moves);
    RUN(test_threads);
    return th_done();
}
