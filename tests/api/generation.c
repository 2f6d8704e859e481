/* SPDX-License-Identifier: MIT */
/*
 * api/generation.c - the MK_GENERATION kind: any size, individual free,
 * blocks that go back as soon as every chunk in them is freed.
 *   - opts: block_size below 1 KiB or above 1 MiB is EINVAL; a chosen
 *     block size is the size of the first block;
 *   - any size (0 .. several MiB): mk_ctx_of, usable size (the size plus
 *     less than 24 bytes of rounding in the release build, the request
 *     when instrumented), contents intact; mk_alloc_aligned up to 1 MiB;
 *   - alignment: mk_alloc's rule (16, or 8 for requests up to 8 and of
 *     17..24 bytes) for every chunk;
 *   - per-chunk overhead: an 8-byte header at most beyond the rounding to
 *     the alignment (release build);
 *   - realloc keeps the contents, growing and shrinking; the newest chunk
 *     grows in place (release); size 0 gives a valid chunk;
 *   - a block goes back the moment its last chunk is freed (statistics:
 *     blocks and bytes; OS committed bytes fall after mk_trim), and not
 *     before; the block being filled is kept and reused;
 *   - a FIFO pattern (allocate, free the oldest) keeps memory bounded;
 *   - large chunks (> 64 KiB) take a page of their own and huge ones
 *     (> 1 MiB) a segment, both given back at once when freed;
 *   - reset keeps one block, which the next allocations reuse.
 * Double free is only detected by the checking build: wrong/checks.c.
 */
#include "harness.h"

#include <memkit.h>

#include "internal.h"

static int instrumented;

static mk_stats get(const mk_ctx *c)
{
    mk_stats st;
    memset(&st, 0xee, sizeof st);
    CHECK_EQ(mk_ctx_stats(c, &st, 0), 0);
    return st;
}

static mk_ctx *gen_new(const char *name, size_t block)
{
    mk_ctx_opts o = {.block_size = block};
    return mk_ctx_new(NULL, name, MK_GENERATION, &o);
}

static void test_opts(void)
{
    const size_t bad[] = {1, 512, 1023, ((size_t)1 << 20) + 1, (size_t)1 << 30};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        mk_ctx *c = gen_new("bad", bad[i]);
        CHECK_NULL(c);
        CHECK_ERRNO(EINVAL);
        if (c)
            mk_ctx_delete(c);
    }
    mk_ctx *c = mk_ctx_new(NULL, "plain", MK_GENERATION, NULL);
    REQUIRE_NOT_NULL(c);
    CHECK_NOT_NULL(mk_alloc(c, 10));
    mk_stats st = get(c);
    CHECK_EQ(st.blocks, 1u);
    /* the default first block: small (a power of two, 1 .. 64 KiB) */
    CHECK_GE(st.bytes_reserved, (size_t)1024);
    CHECK_LE(st.bytes_reserved, (size_t)64 << 10);
    CHECK_EQ(st.bytes_reserved & (st.bytes_reserved - 1), 0u);
    mk_ctx_delete(c);
    c = gen_new("64k", (size_t)64 << 10);
    REQUIRE_NOT_NULL(c);
    CHECK_NOT_NULL(mk_alloc(c, 10));
    st = get(c);
    CHECK_EQ(st.blocks, 1u);
    CHECK_EQ(st.bytes_reserved, (size_t)64 << 10);
    mk_ctx_delete(c);
}

static void test_any_size(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "sizes", MK_GENERATION, NULL);
    REQUIRE_NOT_NULL(c);
    const size_t sizes[] = {0,    1,     8,     15,     16,     17,   24,
                            100,  1000,  4000,  16000,  60000,  65536,
                            70000, 100000, 1000000, (size_t)1 << 20,
                            ((size_t)1 << 20) + 1, (size_t)5 << 20};
    enum { NS = sizeof sizes / sizeof sizes[0] };
    char *p[NS];
    for (int i = 0; i < NS; i++) {
        p[i] = mk_alloc(c, sizes[i]);
        REQUIRE_NOT_NULL(p[i]);
        CHECK_PTR_EQ(mk_ctx_of(p[i]), c);
        CHECK_EQ((uintptr_t)p[i] % (sizes[i] <= 8 ||
                                    (sizes[i] >= 17 && sizes[i] <= 24) ? 8 : 16),
                 0u);
        size_t u = mk_usable_size(p[i]);
        if (instrumented) {
            CHECK_EQ(u, sizes[i]);
        } else {
            CHECK_GE(u, sizes[i]);
            if (sizes[i] <= 60000) /* in a block: rounding, no more */
                CHECK_LT(u, sizes[i] + 24);
        }
        th_fill(p[i], sizes[i], (uint64_t)i);
    }
    for (int i = 0; i < NS; i++)
        CHECK_PATTERN(p[i], sizes[i], (uint64_t)i);
    mk_stats st = get(c);
    CHECK_EQ(st.chunks, (size_t)NS);
    size_t used = 0;
    for (int i = 0; i < NS; i++)
        used += mk_usable_size(p[i]);
    if (instrumented)
        CHECK_EQ(st.bytes_used, used);
    else /* a block's bytes up to its fill point: headers included */
        CHECK_GE(st.bytes_used, used);
    for (int i = 0; i < NS; i += 2)
        mk_free(p[i]);
    for (int i = 1; i < NS; i += 2)
        CHECK_PATTERN(p[i], sizes[i], (uint64_t)i);
    for (int i = 1; i < NS; i += 2)
        mk_free(p[i]);
    st = get(c);
    CHECK_EQ(st.chunks, 0u);
    CHECK_EQ(st.bytes_used, 0u);
    CHECK_LE(st.blocks, 1u); /* only the block being filled stays */

    /* aligned */
    const size_t aligns[] = {16, 32, 64, 256, 4096, 65536, (size_t)1 << 20};
    for (int i = 0; i < 7; i++) {
        char *q = mk_alloc_aligned(c, 100, aligns[i]);
        REQUIRE_NOT_NULL(q);
        CHECK_EQ((uintptr_t)q % aligns[i], 0u);
        CHECK_PTR_EQ(mk_ctx_of(q), c);
        memset(q, 0x11, 100);
        char *r = mk_alloc_aligned(c, 300000, aligns[i]);
        REQUIRE_NOT_NULL(r);
        CHECK_EQ((uintptr_t)r % aligns[i], 0u);
        memset(r, 0x22, 300000);
        mk_free(q);
        mk_free(r);
    }
    errno = 0;
    CHECK_NULL(mk_alloc_aligned(c, 10, 48));
    CHECK_ERRNO(EINVAL);
    errno = 0;
    CHECK_NULL(mk_alloc(c, (size_t)-1 / 2));
    CHECK_ERRNO(ENOMEM);
    mk_ctx_delete(c);
}

/*
 * memkit.h: "a chunk is aligned to 16 bytes, except that a request of 8
 * bytes or less is aligned to 8 and a request of 17..24 bytes is aligned
 * to 8": for every chunk of a block, whatever the sizes before it, and for
 * mk_alloc_aligned(.., 16).
 */
static void test_alignment(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "align16", MK_GENERATION, NULL);
    REQUIRE_NOT_NULL(c);
    th_rng r = {5};
    int bad = 0;
    for (int i = 0; i < 5000; i++) {
        size_t n = (size_t)th_below(&r, 3000);
        char *p = mk_alloc(c, n);
        REQUIRE_NOT_NULL(p);
        size_t want = (n <= 8 || (n >= 17 && n <= 24)) ? 8 : 16;
        if ((uintptr_t)p % want && bad++ < 5)
            th_fail(__FILE__, __LINE__, "chunk %d of %zu bytes at %p is not "
                    "%zu-aligned", i, n, (void *)p, want);
        char *q = mk_alloc_aligned(c, n, 16);
        REQUIRE_NOT_NULL(q);
        if ((uintptr_t)q % 16 && bad++ < 5)
            th_fail(__FILE__, __LINE__, "mk_alloc_aligned(%zu, 16) gave %p",
                    n, (void *)q);
        if (i % 3 == 0)
            mk_free(p);
    }
    th_checks++;
    mk_ctx_delete(c);
}

/* Per-chunk overhead: an 8-byte header at most, beyond the rounding of
 * the size to the alignment (consecutive chunks of a block lie at most
 * size + 8 + 15 bytes apart). */
static void test_overhead(void)
{
    if (instrumented) {
        th_note("skipped in this build: instrumented chunks carry a tail");
        return;
    }
    const size_t sizes[] = {16, 24, 40, 64, 100, 1000};
    for (int k = 0; k < 6; k++) {
        mk_ctx *c = gen_new("dense", (size_t)64 << 10);
        REQUIRE_NOT_NULL(c);
        char *prev = mk_alloc(c, sizes[k]);
        REQUIRE_NOT_NULL(prev);
        int pairs = 0;
        for (int i = 0; i < 40; i++) {
            char *p = mk_alloc(c, sizes[k]);
            REQUIRE_NOT_NULL(p);
            if (mki_page_of(p) == mki_page_of(prev)) {
                CHECK((uintptr_t)p > (uintptr_t)prev);
                CHECK_LE((size_t)(p - prev), sizes[k] + 8 + 15);
                pairs++;
            }
            prev = p;
        }
        CHECK_GE(pairs, 20);
        mk_stats st = get(c);
        CHECK_EQ(st.blocks, 1u);
        CHECK_EQ(st.chunks, 41u);
        mk_ctx_delete(c);
    }
}

static void test_realloc(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "realloc", MK_GENERATION, NULL);
    REQUIRE_NOT_NULL(c);
    char *keep = mk_alloc(c, 50);
    REQUIRE_NOT_NULL(keep);
    th_fill(keep, 50, 1);
    char *p = mk_alloc(c, 100);
    REQUIRE_NOT_NULL(p);
    th_fill(p, 100, 2);
    char *q = mk_realloc(p, 200); /* the newest chunk: grows in place */
    REQUIRE_NOT_NULL(q);
    if (!instrumented)
        CHECK_PTR_EQ(q, p);
    CHECK_PATTERN(q, 100, 2);
    CHECK_GE(mk_usable_size(q), 200u);
    th_fill(q, 200, 3);
    const size_t steps[] = {10, 3000, 70000, 2000000, 500, 0, 40};
    size_t have = 200;
    uint64_t id = 3;
    for (int i = 0; i < 7; i++) {
        char *r = mk_realloc(q, steps[i]);
        REQUIRE_NOT_NULL(r);
        CHECK_PTR_EQ(mk_ctx_of(r), c);
        CHECK_GE(mk_usable_size(r), steps[i]);
        size_t kept = have < steps[i] ? have : steps[i];
        CHECK_PATTERN(r, kept, id);
        th_fill(r, steps[i], ++id);
        have = steps[i];
        q = r;
    }
    CHECK_PATTERN(keep, 50, 1);
    mk_stats st = get(c);
    CHECK_EQ(st.chunks, 2u);
    mk_free(q);
    mk_free(keep);
    st = get(c);
    CHECK_EQ(st.chunks, 0u);
    mk_ctx_delete(c);
}

/* ---- blocks go back --------------------------------------------------------- */

enum { MAXC = 4096 };

static void test_block_returns_when_empty(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "blocks", MK_GENERATION, NULL);
    REQUIRE_NOT_NULL(c);
    static char *ch[MAXC];
    static mki_page *blk[MAXC];
    int n = 0;
    /* blocks double in size: fill until there are 7 */
    while (n < MAXC) {
        ch[n] = mk_alloc(c, 1000);
        REQUIRE_NOT_NULL(ch[n]);
        memset(ch[n], n & 0xff, 1000);
        blk[n] = mki_page_of(ch[n]);
        n++;
        if (get(c).blocks == 7)
            break;
    }
    REQUIRE(n < MAXC);
    /* the oldest block of 16 KiB or more (whole OS pages) that is not the
     * one being filled */
    mki_page *victim = NULL;
    for (int i = 0; i < n && !victim; i++)
        if (blk[i]->size >= 16384 && blk[i] != blk[n - 1])
            victim = blk[i];
    REQUIRE(victim != NULL);
    size_t victim_size = victim->size;
    int first = -1, count = 0;
    for (int i = 0; i < n; i++)
        if (blk[i] == victim) {
            if (first < 0)
                first = i;
            count++;
        }
    printf("  %d chunks in 7 blocks; one of %zu bytes holds %d\n", n,
           victim_size, count);
    REQUIRE(count >= 2);
    mk_trim();
    mk_stats before = get(c);
    size_t committed0 = mki_os_committed();
    for (int i = first; i < first + count - 1; i++)
        mk_free(ch[i]);
    mk_stats mid = get(c);
    CHECK_EQ(mid.blocks, before.blocks); /* one chunk still holds it */
    CHECK_EQ(mid.bytes_reserved, before.bytes_reserved);
    CHECK_EQ(mid.chunks, before.chunks - (size_t)(count - 1));
    mk_free(ch[first + count - 1]);
    mk_stats after = get(c);
    CHECK_EQ(after.blocks, before.blocks - 1);
    CHECK_EQ(after.bytes_reserved, before.bytes_reserved - victim_size);
    CHECK_EQ(after.chunks, before.chunks - (size_t)count);
    mk_trim();
    size_t committed1 = mki_os_committed();
    printf("  committed %zu -> %zu after the block went and mk_trim\n",
           committed0, committed1);
    CHECK_LE(committed1 + victim_size, committed0);
    /* the others are intact */
    for (int i = 0; i < n; i++)
        if (blk[i] != victim && ((unsigned char *)ch[i])[999] != (i & 0xff))
            th_fail(__FILE__, __LINE__, "chunk %d corrupted", i);
    th_checks++;

    /* the current block, emptied, stays and is reused */
    mki_page *cur = blk[n - 1];
    for (int i = 0; i < n; i++)
        if (blk[i] != victim && blk[i] != cur)
            mk_free(ch[i]);
    mk_stats st = get(c);
    CHECK_EQ(st.blocks, 1u);
    for (int i = 0; i < n; i++)
        if (blk[i] == cur)
            mk_free(ch[i]);
    st = get(c);
    CHECK_EQ(st.blocks, 1u);
    CHECK_EQ(st.chunks, 0u);
    char *again = mk_alloc(c, 1000);
    REQUIRE_NOT_NULL(again);
    CHECK_PTR_EQ(mki_page_of(again), cur);
    CHECK_EQ(get(c).blocks, 1u);
    mk_ctx_delete(c);
}

static void test_fifo_bounded(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "fifo", MK_GENERATION, NULL);
    REQUIRE_NOT_NULL(c);
    enum { LIVE = 2000, ROUNDS = 300000 };
    static char *ring[LIVE];
    static size_t ring_size[LIVE];
    th_rng r = {42};
    size_t max_reserved = 0, max_live = 0, live = 0;
    size_t base = mki_os_committed(), max_committed = 0;
    for (long i = 0; i < ROUNDS; i++) {
        int s = (int)(i % LIVE);
        if (ring[s]) {
            if (((unsigned char *)ring[s])[ring_size[s] - 1] != (unsigned char)s)
                th_fail(__FILE__, __LINE__, "chunk in slot %d corrupted", s);
            mk_free(ring[s]);
            live -= ring_size[s];
        }
        ring_size[s] = 1 + (size_t)th_below(&r, 2000);
        ring[s] = mk_alloc(c, ring_size[s]);
        REQUIRE_NOT_NULL(ring[s]);
        ring[s][0] = 1;
        ((unsigned char *)ring[s])[ring_size[s] - 1] = (unsigned char)s;
        live += ring_size[s];
        if (live > max_live)
            max_live = live;
        if (i % 1000 == 999) {
            mk_stats st = get(c);
            if (st.bytes_reserved > max_reserved)
                max_reserved = st.bytes_reserved;
            size_t com = mki_os_committed() - base;
            if (com > max_committed)
                max_committed = com;
        }
    }
    th_checks++;
    printf("  FIFO: live at most %zu bytes, reserved at most %zu, committed "
           "at most +%zu\n", max_live, max_reserved, max_committed);
    /* live data plus the block being filled and the one being emptied */
    CHECK_LE(max_reserved, 2 * max_live + ((size_t)512 << 10));
    CHECK_LE(max_committed, 2 * max_live + ((size_t)1 << 20));
    for (int s = 0; s < LIVE; s++)
        mk_free(ring[s]);
    mk_stats st = get(c);
    CHECK_EQ(st.chunks, 0u);
    CHECK_LE(st.blocks, 1u);
    mk_ctx_delete(c);
}

static void test_large_and_huge(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "large", MK_GENERATION, NULL);
    REQUIRE_NOT_NULL(c);
    char *small = mk_alloc(c, 100);
    REQUIRE_NOT_NULL(small);
    mk_stats st0 = get(c);
    char *big = mk_alloc(c, 200000);
    REQUIRE_NOT_NULL(big);
    memset(big, 3, 200000);
    mk_stats st1 = get(c);
    CHECK_EQ(st1.blocks, st0.blocks + 1);
    CHECK_GE(st1.bytes_reserved, st0.bytes_reserved + 200000);
    CHECK_PTR_EQ(mk_ctx_of(big), c);
    mk_trim(); /* no cached huge mapping to reuse */
    size_t segs = mki_segment_count();
    char *huge = mk_alloc(c, (size_t)3 << 20);
    REQUIRE_NOT_NULL(huge);
    memset(huge, 4, (size_t)3 << 20);
    CHECK_EQ(mki_segment_count(), segs + 1);
    CHECK_PTR_EQ(mk_ctx_of(huge), c);
    CHECK_GE(mk_usable_size(huge), (size_t)3 << 20);
    mk_stats st2 = get(c);
    CHECK_EQ(st2.chunks, 3u);
    size_t committed = mki_os_committed();
    mk_free(huge);
    mk_trim(); /* a freed huge mapping is cached until then */
    CHECK_EQ(mki_segment_count(), segs);
    CHECK_LE(mki_os_committed() + ((size_t)3 << 20), committed);
    mk_free(big);
    mk_stats st3 = get(c);
    CHECK_EQ(st3.blocks, st0.blocks);
    CHECK_EQ(st3.chunks, 1u);
    /* realloc across the boundaries */
    char *p = mk_realloc(small, 300000);
    REQUIRE_NOT_NULL(p);
    p = mk_realloc(p, (size_t)2 << 20);
    REQUIRE_NOT_NULL(p);
    p = mk_realloc(p, 64);
    REQUIRE_NOT_NULL(p);
    CHECK_EQ(get(c).chunks, 1u);
    mk_free(p);
    mk_ctx_delete(c);
}

static void test_reset_keeps_one_block(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "reset", MK_GENERATION, NULL);
    REQUIRE_NOT_NULL(c);
    for (int i = 0; i < 2000; i++)
        CHECK_NOT_NULL(mk_alloc(c, 500));
    CHECK_NOT_NULL(mk_alloc(c, 500000));
    CHECK_GE(get(c).blocks, 5u);
    mk_ctx_reset(c);
    mk_stats st = get(c);
    CHECK_EQ(st.blocks, 1u);
    CHECK_EQ(st.chunks, 0u);
    size_t kept = st.bytes_reserved;
    /* the kept block is used before a new one is opened */
    for (size_t used = 0; used + 600 < kept; used += 560)
        CHECK_NOT_NULL(mk_alloc(c, 500));
    CHECK_EQ(get(c).blocks, 1u);
    mk_ctx_delete(c);
}

int main(void)
{
    instrumented = mki_instrument_active();
    printf("instrumented contexts: %s\n", instrumented ? "yes" : "no");
    RUN(test_opts);
    RUN(test_any_size);
    RUN(test_alignment);
    RUN(test_overhead);
    RUN(test_realloc);
    RUN(test_block_returns_when_empty);
    RUN(test_fifo_bounded);
    RUN(test_large_and_huge);
    RUN(test_reset_keeps_one_block);
    return th_done();
}
