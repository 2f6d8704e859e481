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
 *    live peak so far (the cache bounded by its 64 MiB alone broke this:
 *    W8 peaked 15 MiB above what its chunks needed), and at least a third
 *    of the allocations are served from the cache.
 */
#include "harness.h"

#include <memkit.h>

#include "internal.h"

#define MiB ((size_t)1 << 20)

static size_t peak_live;

static void figures(size_t *live, size_t *cache)
{
    size_t count;
    mki_huge_figures(&count, live, cache);
    if (*live > peak_live)
        peak_live = *live;
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
    mk_ctx *c = mk_ctx_new(NULL, "huge", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    mk_trim(); /* an empty cache to start from */
    size_t live, cache, cache0;
    figures(&live, &cache0);
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

    /* W8's pattern */
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

int main(void)
{
    RUN(test_bound_and_reuse);
    return th_done();
}
