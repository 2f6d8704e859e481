/* SPDX-License-Identifier: MIT */
/*
 * api/page_traffic.c - how often a GENERAL context cuts a page from the
 * shared pool (mki_segment_cuts), where it need not:
 *   - a class whose use swings past its current page and back, in a loop
 *     (a producer fills, a consumer frees in order), keeps the larger of
 *     its two pages once both are empty, so that the swings stop cutting
 *     pages (they cut one a swing when the small page came back current);
 *   - a ring of as many chunks as the class's first page holds, allocating
 *     before it frees, settles on the larger page its overflow took;
 *   - a context refilled after its reset with what it held before (under
 *     1 MiB) is served by the pages the reset kept: no page is cut;
 *   - a page that held nothing since the last reset goes at the next;
 *   - a free-oldest ring through malloc's path reuses the chunk freed last
 *     (a full page that gets a chunk back leads its class when the current
 *     page has no freed chunk to give).
 */
#include "harness.h"

#include <memkit.h>

#include "internal.h"

static void test_swing_keeps_larger_page(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "swing", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    /* four classes, each swinging between a few chunks and 48 of them;
     * they share the context's one spare page, and 48 fit one page of each */
    static const size_t sizes[] = {100, 200, 500, 1000};
    enum { MAXN = 4 * 48 };
    void *ps[MAXN];
    size_t sz[MAXN];
    th_rng r = {7};
    size_t cuts0 = 0;
    for (int round = 0; round < 400; round++) {
        if (round == 100) /* the pages have grown to what the swings need */
            cuts0 = mki_segment_cuts();
        int n = 0;
        for (int k = 0; k < 4; k++) {
            int m = th_below(&r, 2) ? 48 : 4 + (int)th_below(&r, 8);
            for (int i = 0; i < m; i++, n++) {
                sz[n] = sizes[k];
                ps[n] = mk_alloc(c, sz[n]);
                REQUIRE_NOT_NULL(ps[n]);
                th_fill(ps[n], sz[n], (uint64_t)(round * MAXN + n));
            }
        }
        for (int i = 0; i < n; i++) { /* oldest first */
            CHECK_PATTERN(ps[i], sz[i], (uint64_t)(round * MAXN + i));
            mk_free(ps[i]);
        }
    }
    size_t cuts = mki_segment_cuts() - cuts0;
    printf("  pages cut in 300 rounds: %zu\n", cuts);
    CHECK_LE(cuts, 4u);
    mk_ctx_delete(c);
}

/* A ring of as many chunks as the class's first page holds (8 of 128 B,
 * a 1 KiB page), each new chunk allocated before the oldest is freed: the
 * ninth goes to a second, larger page, and once that one has emptied the
 * ring must settle there, every chunk from one page, instead of moving
 * back to the first page at each turn (which took five slow paths every
 * nine operations). */
static void test_ring_settles_on_larger_page(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "ring", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    enum { MAXN = 64, WARM = 100, OPS = 1000 };
    void *ring[MAXN];
    REQUIRE_NOT_NULL(ring[0] = mk_alloc(c, 128));
    mki_page *first = mki_page_of(ring[0]);
    /* as many as the first page holds (8 in the release build; an
     * instrumented context's chunks are larger) */
    const int N = (int)first->capacity;
    REQUIRE(N >= 2 && N <= MAXN);
    for (int i = 1; i < N; i++) {
        REQUIRE_NOT_NULL(ring[i] = mk_alloc(c, 128));
        CHECK_PTR_EQ(mki_page_of(ring[i]), first);
    }
    mki_page *settled = NULL;
    int other = 0;
    for (int k = 0, head = 0; k < OPS; k++) {
        void *p = mk_alloc(c, 128);
        REQUIRE_NOT_NULL(p);
        if (k == WARM)
            settled = mki_page_of(p);
        else if (k > WARM)
            other += mki_page_of(p) != settled;
        mk_free(ring[head]);
        ring[head] = p;
        head = (head + 1) % N;
    }
    CHECK_EQ(other, 0);
    CHECK(settled != NULL && settled->capacity > (uint32_t)N);
    mk_ctx_delete(c);
}

static void test_reset_refill_cuts_nothing(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "refill", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    static const size_t sizes[] = {16, 48, 200, 1000, 2500, 9000};
    for (int round = 0; round < 5; round++) {
        size_t cuts0 = mki_segment_cuts();
        for (int i = 0; i < 300; i++) /* some 640 KiB in six classes */
            REQUIRE_NOT_NULL(mk_alloc(c, sizes[i % 6]));
        size_t cuts = mki_segment_cuts() - cuts0;
        printf("  round %d: pages cut %zu\n", round, cuts);
        /* (the second round may cut one page a class: a class that took
         * several pages below 64 KiB keeps its largest, and grows to one
         * page: general.c, reset_pages) */
        if (round > 1)
            CHECK_EQ(cuts, 0u);
        else if (round == 1)
            CHECK_LE(cuts, 6u);
        else
            CHECK_GT(cuts, 6u);
        mk_ctx_reset(c);
    }
    mk_ctx_delete(c);
}

/* A reset keeps one page of a class whose pages are below 64 KiB: 16
 * chunks of 1 KiB a round fill a 16 KiB page (15 chunks) and start a 32 KiB
 * one; the reset keeps the 32 KiB page, which serves every round from then
 * on (kept, both were walked at every reset, and every round changed page),
 * and no round cuts a page. */
static void test_reset_drops_unused_page(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "rounds", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    mk_stats st;
    for (int round = 0; round < 4; round++) {
        size_t cuts0 = mki_segment_cuts();
        for (int i = 0; i < 16; i++)
            REQUIRE_NOT_NULL(mk_alloc(c, 1024));
        if (round > 0)
            CHECK_EQ(mki_segment_cuts(), cuts0);
        mk_ctx_reset(c);
        CHECK_EQ(mk_ctx_stats(c, &st, 0), 0);
        CHECK_EQ(st.blocks, 1u);
        CHECK_EQ(st.bytes_reserved, (size_t)32 << 10);
    }
    mk_ctx_delete(c);
}

/* An allocation as malloc's path makes it (heap.c, heap_pop): the pop,
 * else the refill, which hands out never-used chunks a run at a time
 * (mk_alloc hands them out one at a time inline).  An instrumented context
 * (under Valgrind) has neither: mk_alloc serves it. */
static void *alloc_as_malloc(mk_ctx *c, size_t n)
{
    if (c->fast_kind != MK_GENERAL)
        return mk_alloc(c, n);
    mki_general *g = (mki_general *)c;
    mki_page *pg = mki_general_page_for(g, n);
    void *p = mki_general_pop(pg);
    return p ? p : mki_general_refill(g, pg, n);
}

/* A free-oldest ring of 1 KiB chunks over several pages (free the oldest,
 * then allocate), through malloc's path: each allocation takes the chunk
 * freed just before it, as glibc's tcache gives it, so the loop walks
 * memory in order.  The freed chunk's page was full; it leads its class
 * because the current page has no freed chunk, only never-used ones: past
 * `extend`, or on its free list from the refill's run (general.c,
 * holds_freed; with the run's chunks counted as freed, 46 allocations in
 * 3,000 took another). */
static void test_ring_reuses_chunk_freed_last(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "fifo", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    enum { N = 300, OPS = 3000 }; /* 300 KiB live: 64 KiB pages at the end */
    void *ring[N];
    for (int i = 0; i < N; i++)
        REQUIRE_NOT_NULL(ring[i] = alloc_as_malloc(c, 1000));
    int same = 0;
    for (int k = 0; k < OPS; k++) {
        void *old = ring[k % N];
        mk_free(old);
        void *p = alloc_as_malloc(c, 1000);
        REQUIRE_NOT_NULL(p);
        same += p == old;
        ring[k % N] = p;
    }
    printf("  the chunk freed last taken %d times in %d\n", same, OPS);
    CHECK_EQ(same, OPS);
    mk_ctx_delete(c);
}

int main(void)
{
    RUN(test_swing_keeps_larger_page);
    RUN(test_ring_settles_on_larger_page);
    RUN(test_reset_refill_cuts_nothing);
    RUN(test_reset_drops_unused_page);
    RUN(test_ring_reuses_chunk_freed_last);
    return th_done();
}
