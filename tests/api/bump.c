/* SPDX-License-Identifier: MIT */
/*
 * api/bump.c - the MK_BUMP kind: any size, no header, no individual free.
 *   - opts: block_size below 1 KiB or above 1 MiB is EINVAL;
 *   - every chunk is 16-aligned; in the release build chunks follow each
 *     other with no header (the next chunk starts at the size rounded to
 *     16), and mk_ctx_stats counts the bytes bumped;
 *   - size 0 gives unique pointers;
 *   - mk_free is a no-op (release build): nothing is reused, contents stay;
 *   - mk_realloc returns NULL with errno ENOTSUP and leaves the chunk as it
 *     was;
 *   - mk_usable_size is 0 in the release build (no sizes kept) and the
 *     requested size when instrumented;
 *   - mk_alloc_aligned to 64, 4096, 64 KiB; and to 1 MiB and 4 MiB, which
 *     need memory of their own above 1 MiB: mk_ctx_of finds them, mk_free
 *     of them is a no-op;
 *   - big chunks: above 256 KiB a block of their own (the current block
 *     keeps filling), above 1 MiB a segment of their own;
 *   - reset keeps one block (the next chunks reuse it) and returns the
 *     rest: OS committed bytes after mk_trim back to the baseline plus that
 *     block; delete returns every block.
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
    CHECK_EQ(st.bytes_free, st.bytes_reserved - st.bytes_used);
    return st;
}

static size_t round16(size_t n) { return n ? (n + 15) & ~(size_t)15 : 16; }

static void test_opts(void)
{
    const size_t bad[] = {1, 1000, ((size_t)1 << 20) + 1, (size_t)1 << 24};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mk_ctx_opts o = {.block_size = bad[i]};
        errno = 0;
        mk_ctx *c = mk_ctx_new(NULL, "bad", MK_BUMP, &o);
        CHECK_NULL(c);
        CHECK_ERRNO(EINVAL);
        if (c)
            mk_ctx_delete(c);
    }
    mk_ctx_opts o = {.block_size = (size_t)32 << 10};
    mk_ctx *c = mk_ctx_new(NULL, "32k", MK_BUMP, &o);
    REQUIRE_NOT_NULL(c);
    CHECK_NOT_NULL(mk_alloc(c, 100));
    mk_stats st = get(c);
    CHECK_EQ(st.blocks, 1u);
    CHECK_EQ(st.bytes_reserved, (size_t)32 << 10);
    mk_ctx_delete(c);
}

static void test_alignment_and_layout(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "layout", MK_BUMP, NULL);
    REQUIRE_NOT_NULL(c);
    th_rng r = {3};
    char *prev = NULL;
    size_t prev_n = 0, bumped = 0, requested = 0;
    int adjacent = 0;
    for (int i = 0; i < 5000; i++) {
        size_t n = (size_t)th_below(&r, 300);
        char *p = mk_alloc(c, n);
        REQUIRE_NOT_NULL(p);
        if ((uintptr_t)p % 16)
            th_fail(__FILE__, __LINE__, "chunk of %zu bytes at %p", n,
                    (void *)p);
        CHECK_PTR_EQ(mk_ctx_of(p), c);
        if (!instrumented && prev && mki_page_of(p) == mki_page_of(prev)) {
            CHECK_PTR_EQ(p, prev + round16(prev_n)); /* no header */
            adjacent++;
        }
        th_fill(p, n, (uint64_t)i);
        prev = p;
        prev_n = n;
        bumped += round16(n);
        requested += n;
    }
    if (!instrumented)
        CHECK_GE(adjacent, 4900);
    mk_stats st = get(c);
    printf("  %zu bytes bumped in %zu blocks (%zu reserved); stats used %zu\n",
           bumped, st.blocks, st.bytes_reserved, st.bytes_used);
    if (instrumented) {
        CHECK_EQ(st.bytes_used, requested);
        CHECK_EQ(st.chunks, 5000u);
    } else {
        /* the tail of a block left unused when a chunk did not fit is not
         * counted as used */
        CHECK_EQ(st.bytes_used, bumped);
        CHECK_EQ(st.chunks, 0u);
    }
    mk_ctx_delete(c);
}

static void test_size_zero(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "zero", MK_BUMP, NULL);
    REQUIRE_NOT_NULL(c);
    char *a = mk_alloc(c, 0), *b = mk_alloc(c, 0), *d = mk_alloc(c, 1);
    REQUIRE(a && b && d);
    CHECK(a != b && b != d && a != d);
    CHECK_EQ((uintptr_t)a % 16, 0u);
    CHECK_EQ((uintptr_t)b % 16, 0u);
    mk_ctx_delete(c);
}

static void test_free_is_noop(void)
{
    if (mk_checking()) {
        th_note("skipped in this build: reported there: wrong/checks.c");
        return;
    }
    mk_ctx *c = mk_ctx_new(NULL, "nofree", MK_BUMP, NULL);
    REQUIRE_NOT_NULL(c);
    char *p[100];
    for (int i = 0; i < 100; i++) {
        p[i] = mk_alloc(c, 64);
        REQUIRE_NOT_NULL(p[i]);
        th_fill(p[i], 64, (uint64_t)i);
    }
    mk_stats before = get(c);
    for (int i = 0; i < 100; i += 2)
        mk_free(p[i]); /* nothing happens */
    mk_free(NULL);
    mk_stats after = get(c);
    CHECK_EQ(after.bytes_used, before.bytes_used);
    CHECK_EQ(after.chunks, before.chunks);
    CHECK_EQ(after.blocks, before.blocks);
    /* nothing is reused */
    for (int i = 0; i < 100; i++) {
        char *q = mk_alloc(c, 64);
        REQUIRE_NOT_NULL(q);
        for (int j = 0; j < 100; j++)
            if (q == p[j])
                th_fail(__FILE__, __LINE__, "chunk %d reused", j);
        memset(q, 0xaa, 64);
    }
    th_checks++;
    for (int i = 1; i < 100; i += 2)
        CHECK_PATTERN(p[i], 64, (uint64_t)i);
    if (!instrumented) /* the freed ones too: untouched */
        for (int i = 0; i < 100; i += 2)
            CHECK_PATTERN(p[i], 64, (uint64_t)i);
    mk_ctx_delete(c);
}

static void test_realloc_unsupported(void)
{
    if (mk_checking()) {
        th_note("skipped in this build: reported there: wrong/checks.c");
        return;
    }
    mk_ctx *c = mk_ctx_new(NULL, "norealloc", MK_BUMP, NULL);
    REQUIRE_NOT_NULL(c);
    const size_t to[] = {0, 10, 64, 100, 100000, (size_t)3 << 20};
    char *p = mk_alloc(c, 64);
    REQUIRE_NOT_NULL(p);
    th_fill(p, 64, 5);
    for (int i = 0; i < 6; i++) {
        errno = 0;
        CHECK_NULL(mk_realloc(p, to[i]));
        CHECK_ERRNO(ENOTSUP);
    }
    CHECK_PATTERN(p, 64, 5);
    char *big = mk_alloc(c, (size_t)2 << 20);
    REQUIRE_NOT_NULL(big);
    errno = 0;
    CHECK_NULL(mk_realloc(big, 10));
    CHECK_ERRNO(ENOTSUP);
    CHECK_PTR_EQ(mk_ctx_of(p), c);
    mk_ctx_delete(c);
}

static void test_usable_size(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "usable", MK_BUMP, NULL);
    REQUIRE_NOT_NULL(c);
    const size_t sizes[] = {0, 1, 16, 100, 5000, 300000, (size_t)2 << 20};
    for (int i = 0; i < 7; i++) {
        char *p = mk_alloc(c, sizes[i]);
        REQUIRE_NOT_NULL(p);
        CHECK_EQ(mk_usable_size(p), instrumented ? sizes[i] : 0u);
    }
    CHECK_EQ(mk_usable_size(NULL), 0u);
    mk_ctx_delete(c);
}

static void check_aligned(const size_t *aligns, int na, const size_t *sizes,
                          int ns)
{
    mk_ctx *c = mk_ctx_new(NULL, "aligned", MK_BUMP, NULL);
    REQUIRE_NOT_NULL(c);
    for (int a = 0; a < na; a++)
        for (int s = 0; s < ns; s++) {
            char *p = mk_alloc_aligned(c, sizes[s], aligns[a]);
            REQUIRE_NOT_NULL(p);
            if ((uintptr_t)p % aligns[a])
                th_fail(__FILE__, __LINE__, "%zu bytes aligned to %zu: %p",
                        sizes[s], aligns[a], (void *)p);
            if (mk_ctx_of(p) != c)
                th_fail(__FILE__, __LINE__, "%zu bytes aligned to %zu at %p: "
                        "mk_ctx_of gives %p", sizes[s], aligns[a], (void *)p,
                        (void *)mk_ctx_of(p));
            th_checks++;
            memset(p, a * 8 + s, sizes[s]);
            /* a small chunk after it is fine */
            char *q = mk_alloc(c, 24);
            REQUIRE_NOT_NULL(q);
            CHECK_EQ((uintptr_t)q % 16, 0u);
            memset(q, 0, 24);
            if (((unsigned char *)p)[sizes[s] - 1] != (unsigned char)(a * 8 + s))
                th_fail(__FILE__, __LINE__, "aligned chunk overwritten");
        }
    th_checks++;
    mk_ctx_delete(c);
}

/* Alignments whose padding keeps the chunk in an ordinary block (the
 * chunk plus its padding fits in 1 MiB). */
static void test_aligned(void)
{
    const size_t aligns[] = {16, 32, 64, 256, 4096, (size_t)64 << 10};
    const size_t sizes[] = {1, 64, 1000, 70000, 400000, 900000};
    check_aligned(aligns, 6, sizes, 6);
    mk_ctx *c = mk_ctx_new(NULL, "aligned", MK_BUMP, NULL);
    REQUIRE_NOT_NULL(c);
    errno = 0;
    CHECK_NULL(mk_alloc_aligned(c, 10, 24));
    CHECK_ERRNO(EINVAL);
    mk_ctx_delete(c);
}

/*
 * A chunk whose size plus padding needs a block above 1 MiB (alignment of
 * 1 MiB or 4 MiB, or a 3 MiB chunk aligned to 64 KiB) is found by
 * mk_ctx_of, and mk_free of it is the usual no-op (in a child: a chunk
 * missing from the page map would crash it).
 */
static void free_far_aligned(void *arg)
{
    (void)arg;
    mk_ctx *c = mk_ctx_new(NULL, "far", MK_BUMP, NULL);
    char *p = mk_alloc_aligned(c, 1000, (size_t)1 << 20);
    if (!p)
        _exit(3);
    mk_free(p); /* a no-op on a bump chunk */
    _exit(0);
}

static void test_aligned_in_huge_block(void)
{
    const size_t aligns[] = {(size_t)64 << 10, (size_t)1 << 20,
                             (size_t)4 << 20};
    const size_t sizes[] = {1, 64, 1000, 70000, 400000, (size_t)3 << 20};
    check_aligned(aligns, 3, sizes, 6);
    if (mk_checking())
        return;
    char out[1024];
    int st = th_run_child(free_far_aligned, NULL, out, sizeof out);
    th_checks++;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        th_fail(__FILE__, __LINE__, "mk_free of a 1 MiB-aligned bump chunk: "
                "child status 0x%x (signal %d), stderr \"%s\"", st,
                WIFSIGNALED(st) ? WTERMSIG(st) : 0, out);
}

static void test_big_chunks(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "big", MK_BUMP, NULL);
    REQUIRE_NOT_NULL(c);
    char *a = mk_alloc(c, 100);
    REQUIRE_NOT_NULL(a);
    mk_stats st0 = get(c);
    /* > 256 KiB: a block of its own, the current block keeps filling */
    char *big = mk_alloc(c, 300000);
    REQUIRE_NOT_NULL(big);
    memset(big, 1, 300000);
    char *b = mk_alloc(c, 100);
    REQUIRE_NOT_NULL(b);
    if (!instrumented)
        CHECK_PTR_EQ(b, a + 112);
    else
        CHECK_PTR_EQ(mki_page_of(b), mki_page_of(a));
    mk_stats st1 = get(c);
    CHECK_EQ(st1.blocks, st0.blocks + 1);
    CHECK_GE(st1.bytes_reserved, st0.bytes_reserved + 300000);
    /* > 1 MiB: a segment of its own */
    mk_trim(); /* no cached huge mapping to reuse */
    size_t segs = mki_segment_count();
    char *huge = mk_alloc(c, (size_t)3 << 20);
    REQUIRE_NOT_NULL(huge);
    memset(huge, 2, (size_t)3 << 20);
    CHECK_EQ(mki_segment_count(), segs + 1);
    CHECK_PTR_EQ(mk_ctx_of(huge), c);
    char *d = mk_alloc(c, 100);
    REQUIRE_NOT_NULL(d);
    CHECK_PTR_EQ(mki_page_of(d), mki_page_of(a));
    /* a chunk larger than the largest block: 1 MiB + 1 */
    char *e = mk_alloc(c, ((size_t)1 << 20) + 1);
    REQUIRE_NOT_NULL(e);
    memset(e, 3, ((size_t)1 << 20) + 1);
    mk_stats st2 = get(c);
    CHECK_EQ(st2.blocks, st0.blocks + 3);
    CHECK_EQ(((unsigned char *)big)[299999], 1);
    CHECK_EQ(((unsigned char *)huge)[((size_t)3 << 20) - 1], 2);
    mk_ctx_delete(c);
    mk_trim(); /* freed huge mappings are cached until then */
    CHECK_LE(mki_segment_count(), segs);
}

static void test_reset_and_delete(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "reset", MK_BUMP, NULL);
    REQUIRE_NOT_NULL(c);
    for (int round = 0; round < 3; round++) {
        mk_trim();
        size_t base = mki_os_committed(), meta0 = mki_meta_bytes();
        size_t segs = mki_segment_count();
        size_t total = 0;
        th_rng r = {7 + (uint64_t)round};
        while (total < ((size_t)30 << 20)) {
            size_t n = th_below(&r, 100) ? (size_t)th_below(&r, 4000)
                                          : (size_t)th_below(&r, 3 << 20);
            char *p = mk_alloc(c, n);
            REQUIRE_NOT_NULL(p);
            memset(p, 0x77, n);
            total += n;
        }
        mk_stats st = get(c);
        CHECK_GE(st.blocks, 10u);
        CHECK_GE(mki_os_committed(), base + total / 2);
        mk_ctx_reset(c);
        st = get(c);
        CHECK_EQ(st.blocks, 1u);
        CHECK_EQ(st.bytes_used, 0u);
        CHECK_EQ(st.chunks, 0u);
        CHECK_LE(st.bytes_reserved, (size_t)1 << 20);
        mk_trim();
        size_t now = mki_os_committed();
        size_t headers = (mki_segment_count() > segs ? mki_segment_count() - segs : 0) *
                         MKI_SEG_HEADER_UNITS * MKI_UNIT;
        printf("  round %d: %zu MiB bumped; after reset + trim committed %zu, "
               "baseline %zu, kept %zu\n", round, total >> 20, now, base,
               st.bytes_reserved);
        CHECK_LE(now, base + st.bytes_reserved + headers +
                          (mki_meta_bytes() - meta0));
        /* the kept block serves the next chunks */
        mk_stats kept = st;
        char *p = mk_alloc(c, 1000);
        REQUIRE_NOT_NULL(p);
        st = get(c);
        CHECK_EQ(st.blocks, 1u);
        CHECK_EQ(st.bytes_reserved, kept.bytes_reserved);
    }
    mk_ctx_delete(c);
    /* delete: everything */
    mk_trim();
    size_t base = mki_os_committed(), meta0 = mki_meta_bytes();
    size_t segs = mki_segment_count();
    c = mk_ctx_new(NULL, "delete", MK_BUMP, NULL);
    REQUIRE_NOT_NULL(c);
    for (int i = 0; i < 20000; i++)
        CHECK_NOT_NULL(mk_alloc(c, (size_t)(i % 2000)));
    CHECK_NOT_NULL(mk_alloc(c, (size_t)5 << 20));
    CHECK_GE(get(c).blocks, 5u);
    mk_ctx_delete(c);
    mk_trim();
    CHECK_LE(mki_os_committed(), base + (mki_meta_bytes() - meta0));
    CHECK_LE(mki_segment_count(), segs);
}

int main(void)
{
    instrumented = mki_instrument_active();
    printf("instrumented contexts: %s\n", instrumented ? "yes" : "no");
    RUN(test_opts);
    RUN(test_alignment_and_layout);
    RUN(test_size_zero);
    RUN(test_free_is_noop);
    RUN(test_realloc_unsupported);
    RUN(test_usable_size);
    RUN(test_aligned);
    RUN(test_aligned_in_huge_block);
    RUN(test_big_chunks);
    RUN(test_reset_and_delete);
    return th_done();
}
