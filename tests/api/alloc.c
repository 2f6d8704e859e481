/* SPDX-License-Identifier: MIT */
/*
 * api/alloc.c - the chunk functions: mk_alloc, mk_alloc_zero,
 * mk_alloc_aligned (every power of two up to 1 MiB and a few above; bad
 * alignments), mk_alloc_array (overflow), mk_strdup, mk_realloc (grow,
 * shrink, NULL, size 0), mk_free (NULL), mk_usable_size (>= requested, and
 * usable without touching a neighbour), mk_ctx_of; chunk sizes across the
 * spectrum (small classes, large 32 KiB..1 MiB, huge 5 and 100 MiB).
 */
#include "harness.h"

#include <memkit.h>

static mk_ctx *ctx;

static mk_stats stats_of(mk_ctx *c)
{
    mk_stats st;
    memset(&st, 0xff, sizeof st);
    CHECK_EQ(mk_ctx_stats(c, &st, 0), 0);
    return st;
}

/* ---- mk_alloc / mk_free / mk_ctx_of ---------------------------------------- */

static void test_alloc_basic(void)
{
    char *p = mk_alloc(ctx, 100);
    REQUIRE_NOT_NULL(p);
    memset(p, 'x', 100);
    CHECK_PTR_EQ(mk_ctx_of(p), ctx);
    CHECK_GE(mk_usable_size(p), 100u);
    mk_free(p);
    CHECK_EQ(stats_of(ctx).chunks, 0u);

    CHECK_NULL(mk_ctx_of(NULL));
    CHECK_EQ(mk_usable_size(NULL), 0u);
    mk_stats before = stats_of(ctx);
    mk_free(NULL); /* ignored */
    mk_stats after = stats_of(ctx);
    CHECK_EQ(after.chunks, before.chunks);
    CHECK_EQ(after.blocks, before.blocks);
}

/* Size 0: unique, freeable pointers. */
static void test_alloc_zero_size(void)
{
    enum { N = 1000 };
    static void *ps[N];
    for (int i = 0; i < N; i++) {
        ps[i] = mk_alloc(ctx, 0);
        REQUIRE_NOT_NULL(ps[i]);
        CHECK_PTR_EQ(mk_ctx_of(ps[i]), ctx);
        for (int j = 0; j < i; j += 97)
            CHECK(ps[j] != ps[i]);
    }
    /* pairwise distinct: sort-free check through their stats */
    CHECK_EQ(stats_of(ctx).chunks, (size_t)N);
    for (int i = 1; i < N; i++)
        CHECK(ps[i] != ps[i - 1]);
    for (int i = 0; i < N; i++)
        mk_free(ps[i]);
    CHECK_EQ(stats_of(ctx).chunks, 0u);

    void *a = mk_alloc_zero(ctx, 0), *b = mk_alloc_aligned(ctx, 0, 64),
         *c = mk_alloc_array(ctx, 0, 16), *d = mk_alloc_array(ctx, 16, 0);
    CHECK(a && b && c && d);
    CHECK(a != b && a != c && a != d && b != c && b != d && c != d);
    CHECK_EQ((uintptr_t)b % 64, 0u);
    mk_free(a);
    mk_free(b);
    mk_free(c);
    mk_free(d);
    CHECK_EQ(stats_of(ctx).chunks, 0u);
}

/* Many live chunks of many sizes: no two overlap, contents survive. */
static void test_alloc_many_no_overlap(void)
{
    enum { N = 3000 };
    static void *ps[N];
    static size_t sz[N];
    for (int i = 0; i < N; i++) {
        sz[i] = (size_t)(i * 37) % 3000;
        ps[i] = mk_alloc(ctx, sz[i]);
        REQUIRE_NOT_NULL(ps[i]);
        th_fill(ps[i], sz[i], (uint64_t)i);
    }
    for (int i = 0; i < N; i += 2)
        mk_free(ps[i]);
    for (int i = 0; i < N; i += 2) {
        ps[i] = mk_alloc(ctx, sz[i]);
        REQUIRE_NOT_NULL(ps[i]);
        th_fill(ps[i], sz[i], (uint64_t)i);
    }
    for (int i = 0; i < N; i++) {
        CHECK_PATTERN(ps[i], sz[i], (uint64_t)i);
        mk_free(ps[i]);
    }
    CHECK_EQ(stats_of(ctx).chunks, 0u);
}

/* ---- mk_alloc_zero --------------------------------------------------------- */

static void test_alloc_zero(void)
{
    const size_t sizes[] = {1,      7,      8,      24,        100,
                            1024,   1025,   4000,   32768,     32769,
                            100000, 1 << 20, (1 << 20) + 1, 3u << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        /* dirty memory of that size first, so reuse is exercised */
        for (int k = 0; k < 3; k++) {
            unsigned char *d = mk_alloc(ctx, n);
            REQUIRE_NOT_NULL(d);
            memset(d, 0xa5, n);
            mk_free(d);
        }
        unsigned char *z = mk_alloc_zero(ctx, n);
        REQUIRE_NOT_NULL(z);
        if (!th_all_zero(z, n))
            th_fail(__FILE__, __LINE__, "mk_alloc_zero(%zu) not zeroed", n);
        th_checks++;
        CHECK_PTR_EQ(mk_ctx_of(z), ctx);
        mk_free(z);
    }
}

/* ---- mk_alloc_array --------------------------------------------------------- */

static void test_alloc_array(void)
{
    unsigned *a = mk_alloc_array(ctx, 1000, sizeof(unsigned));
    REQUIRE_NOT_NULL(a);
    CHECK(th_all_zero(a, 1000 * sizeof(unsigned)));
    CHECK_GE(mk_usable_size(a), 1000 * sizeof(unsigned));
    for (unsigned i = 0; i < 1000; i++)
        a[i] = i;
    mk_free(a);

    mk_stats before = stats_of(ctx);
    const size_t bad[][2] = {
        {SIZE_MAX, 2},
        {2, SIZE_MAX},
        {SIZE_MAX / 2 + 1, 2},
        {(size_t)1 << 32, (size_t)1 << 32},
        {SIZE_MAX, SIZE_MAX},
        {((size_t)1 << 62) + 1, 4},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        CHECK_NULL(mk_alloc_array(ctx, bad[i][0], bad[i][1]));
        CHECK_ERRNO(ENOMEM);
    }
    mk_stats after = stats_of(ctx);
    CHECK_EQ(after.chunks, before.chunks);
    CHECK_EQ(after.bytes_reserved, before.bytes_reserved);
}

/* ---- mk_strdup ------------------------------------------------------------ */

static void test_strdup(void)
{
    char *e = mk_strdup(ctx, "");
    REQUIRE_NOT_NULL(e);
    CHECK_STR_EQ(e, "");
    CHECK_PTR_EQ(mk_ctx_of(e), ctx);

    const char *lit = "hello, memkit";
    char *h = mk_strdup(ctx, lit);
    REQUIRE_NOT_NULL(h);
    CHECK(h != lit);
    CHECK_STR_EQ(h, lit);

    static char big[70000];
    for (size_t i = 0; i + 1 < sizeof big; i++)
        big[i] = (char)('a' + i % 26);
    char *b = mk_strdup(ctx, big);
    REQUIRE_NOT_NULL(b);
    CHECK_STR_EQ(b, big);
    CHECK_GE(mk_usable_size(b), sizeof big);
    mk_free(e);
    mk_free(h);
    mk_free(b);
    CHECK_EQ(stats_of(ctx).chunks, 0u);
}

/* ---- mk_alloc_aligned -------------------------------------------------------- */

static void test_aligned_powers(void)
{
    for (size_t align = 1; align <= ((size_t)1 << 20); align <<= 1) {
        const size_t sizes[] = {0, 1, 8, 24, 100, align, align + 1,
                                3 * align / 2, 40000};
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            size_t n = sizes[i];
            char *p = mk_alloc_aligned(ctx, n, align);
            if (!p) {
                th_fail(__FILE__, __LINE__,
                        "mk_alloc_aligned(%zu, %zu) = NULL", n, align);
                continue;
            }
            if ((uintptr_t)p % align)
                th_fail(__FILE__, __LINE__, "mk_alloc_aligned(%zu, %zu) = %p"
                        " misaligned", n, align, (void *)p);
            th_checks++;
            CHECK_GE(mk_usable_size(p), n);
            CHECK_PTR_EQ(mk_ctx_of(p), ctx);
            th_fill(p, n, align + n);
            /* a second one must not overlap the first */
            char *q = mk_alloc_aligned(ctx, n, align);
            REQUIRE_NOT_NULL(q);
            CHECK_EQ((uintptr_t)q % align, 0u);
            th_fill(q, n, ~(align + n));
            CHECK_PATTERN(p, n, align + n);
            mk_free(p);
            CHECK_PATTERN(q, n, ~(align + n));
            mk_free(q);
        }
    }
    CHECK_EQ(stats_of(ctx).chunks, 0u);
}

/* Alignments above 1 MiB up to the segment size (4 MiB), small and huge. */
static void test_aligned_large(void)
{
    const size_t aligns[] = {(size_t)2 << 20, (size_t)4 << 20};
    const size_t sizes[] = {1, 100000, (size_t)3 << 20, (size_t)5 << 20};
    for (size_t a = 0; a < 2; a++) {
        for (size_t i = 0; i < 4; i++) {
            char *p = mk_alloc_aligned(ctx, sizes[i], aligns[a]);
            REQUIRE_NOT_NULL(p);
            CHECK_EQ((uintptr_t)p % aligns[a], 0u);
            CHECK_GE(mk_usable_size(p), sizes[i]);
            CHECK_PTR_EQ(mk_ctx_of(p), ctx);
            p[0] = 1;
            p[sizes[i] - 1] = 2;
            mk_free(p);
        }
    }
    CHECK_EQ(stats_of(ctx).chunks, 0u);
}

static void test_aligned_bad(void)
{
    const size_t bad[] = {0, 3, 5, 6, 12, 24, 48, 100, 1000, 4097,
                          ((size_t)1 << 20) + 1, SIZE_MAX, SIZE_MAX - 1,
                          ((size_t)1 << 63) + 1};
    mk_stats before = stats_of(ctx);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        CHECK_NULL(mk_alloc_aligned(ctx, 64, bad[i]));
        CHECK_ERRNO(EINVAL);
    }
    mk_stats after = stats_of(ctx);
    CHECK_EQ(after.chunks, before.chunks);
}

/* ---- mk_usable_size --------------------------------------------------------- */

/* For many sizes: usable >= requested, and the whole usable size may be
 * written without touching a neighbour. */
static void test_usable_size(void)
{
    enum { K = 8 };
    void *ps[K];
    for (size_t n = 0; n <= 70000; n += (n < 2048 ? 1 : n < 16384 ? 61 : 997)) {
        for (int k = 0; k < K; k++) {
            ps[k] = mk_alloc(ctx, n);
            REQUIRE_NOT_NULL(ps[k]);
            size_t u = mk_usable_size(ps[k]);
            if (u < n)
                th_fail(__FILE__, __LINE__, "usable %zu < requested %zu", u, n);
            th_checks++;
            th_fill(ps[k], u, n * K + (size_t)k);
        }
        for (int k = 0; k < K; k++) {
            CHECK_PATTERN(ps[k], mk_usable_size(ps[k]), n * K + (size_t)k);
            mk_free(ps[k]);
        }
    }
    const size_t big[] = {(1 << 20) - 1, 1 << 20, (1 << 20) + 1,
                          (size_t)5 << 20};
    for (size_t i = 0; i < 4; i++) {
        void *p = mk_alloc(ctx, big[i]);
        REQUIRE_NOT_NULL(p);
        CHECK_GE(mk_usable_size(p), big[i]);
        mk_free(p);
    }
    CHECK_EQ(stats_of(ctx).chunks, 0u);
}

/* ---- mk_realloc -------------------------------------------------------------- */

static void test_realloc_grow_shrink(void)
{
    const size_t steps[] = {1,      10,      24,      100,     1000,
                            5000,   32768,   40000,   300000,  1 << 20,
                            (size_t)3 << 20, (size_t)9 << 20};
    const size_t nsteps = sizeof steps / sizeof steps[0];
    char *p = mk_alloc(ctx, steps[0]);
    REQUIRE_NOT_NULL(p);
    th_fill(p, steps[0], 7);
    /* grow: the old content is kept, the new tail is writable */
    for (size_t i = 1; i < nsteps; i++) {
        char *q = mk_realloc(p, steps[i]);
        REQUIRE_NOT_NULL(q);
        CHECK_PTR_EQ(mk_ctx_of(q), ctx);
        CHECK_GE(mk_usable_size(q), steps[i]);
        CHECK_PATTERN(q, steps[i - 1], 7);
        th_fill(q, steps[i], 7);
        p = q;
    }
    /* shrink: the first `size` bytes are kept */
    for (size_t i = nsteps - 1; i-- > 0;) {
        char *q = mk_realloc(p, steps[i]);
        REQUIRE_NOT_NULL(q);
        CHECK_PTR_EQ(mk_ctx_of(q), ctx);
        CHECK_GE(mk_usable_size(q), steps[i]);
        CHECK_PATTERN(q, steps[i], 7);
        p = q;
    }
    mk_free(p);
    CHECK_EQ(stats_of(ctx).chunks, 0u);
}

/* Realloc to the same size, and by one byte either side, every class. */
static void test_realloc_small_steps(void)
{
    for (size_t n = 1; n < 5000; n += 13) {
        char *p = mk_alloc(ctx, n);
        REQUIRE_NOT_NULL(p);
        th_fill(p, n, n);
        p = mk_realloc(p, n);
        REQUIRE_NOT_NULL(p);
        CHECK_PATTERN(p, n, n);
        p = mk_realloc(p, n + 1);
        REQUIRE_NOT_NULL(p);
        CHECK_PATTERN(p, n, n);
        p = mk_realloc(p, n - 1);
        REQUIRE_NOT_NULL(p);
        CHECK_PATTERN(p, n - 1, n);
        mk_free(p);
    }
    CHECK_EQ(stats_of(ctx).chunks, 0u);
}

static void test_realloc_null_and_zero(void)
{
    /* NULL: allocates in the calling thread's current context */
    char *p = mk_realloc(NULL, 100);
    REQUIRE_NOT_NULL(p);
    CHECK_PTR_EQ(mk_ctx_of(p), mk_ctx_current());
    mk_free(p);

    mk_ctx *prev = mk_ctx_switch(ctx);
    p = mk_realloc(NULL, 200);
    REQUIRE_NOT_NULL(p);
    CHECK_PTR_EQ(mk_ctx_of(p), ctx);
    mk_ctx_switch(prev);

    /* size 0: a valid, freeable pointer in the same context */
    char *z = mk_realloc(p, 0);
    REQUIRE_NOT_NULL(z);
    CHECK_PTR_EQ(mk_ctx_of(z), ctx);
    CHECK_EQ(stats_of(ctx).chunks, 1u);
    mk_free(z);
    CHECK_EQ(stats_of(ctx).chunks, 0u);

    /* size 0 of a large and a huge chunk */
    const size_t big[] = {100000, (size_t)2 << 20};
    for (int i = 0; i < 2; i++) {
        p = mk_alloc(ctx, big[i]);
        REQUIRE_NOT_NULL(p);
        z = mk_realloc(p, 0);
        REQUIRE_NOT_NULL(z);
        CHECK_PTR_EQ(mk_ctx_of(z), ctx);
        CHECK_EQ(stats_of(ctx).chunks, 1u);
        mk_free(z);
    }
    CHECK_EQ(stats_of(ctx).chunks, 0u);
}

/* A chunk of a child context stays in the child when resized. */
static void test_realloc_keeps_context(void)
{
    mk_ctx *kid = mk_ctx_new(ctx, "kid", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(kid);
    char *p = mk_alloc(kid, 10);
    REQUIRE_NOT_NULL(p);
    const size_t sizes[] = {5000, 100000, (size_t)2 << 20, 50, 0};
    for (int i = 0; i < 5; i++) {
        p = mk_realloc(p, sizes[i]);
        REQUIRE_NOT_NULL(p);
        CHECK_PTR_EQ(mk_ctx_of(p), kid);
    }
    mk_stats st;
    mk_ctx_stats(kid, &st, 0);
    CHECK_EQ(st.chunks, 1u);
    CHECK_EQ(stats_of(ctx).chunks, 0u);
    mk_ctx_delete(kid);
}

/* A large chunk whose first bytes the program never wrote, moved by a
 * realloc into a small chunk: the new chunk is live.  Each round leaves the
 * double-free keys of many small pages in freed memory (2,000 chunks of
 * 256 bytes in a context, freed, the context deleted), cuts 0-byte chunks
 * aligned to 64 KiB (large pages) there, and reallocates them to 236
 * bytes, in pages whose descriptors are the ones just freed.  Before large
 * chunks were handed out with their second word cleared, the first round's
 * moved chunk already read as "a freed chunk" to mk_ctx_of (which reports
 * it and aborts) and its free as a double free. */
static void test_realloc_unwritten_large(void)
{
    enum { ROUNDS = 20, SMALL = 2000, LARGE = 8 };
    static void *small[SMALL];
    mk_ctx *b = mk_ctx_new(NULL, "b", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(b);
    for (int r = 0; r < ROUNDS; r++) {
        mk_ctx *a = mk_ctx_new(NULL, "a", MK_GENERAL, NULL);
        REQUIRE_NOT_NULL(a);
        for (int i = 0; i < SMALL; i++)
            REQUIRE_NOT_NULL(small[i] = mk_alloc(a, 256));
        for (int i = 0; i < SMALL; i++)
            mk_free(small[i]);
        mk_ctx_delete(a);
        void *large[LARGE];
        for (int i = 0; i < LARGE; i++)
            REQUIRE_NOT_NULL(large[i] = mk_alloc_aligned(b, 0, 65536));
        for (int i = 0; i < LARGE; i++) {
            void *q = mk_realloc(large[i], 236);
            REQUIRE_NOT_NULL(q);
            CHECK_PTR_EQ(mk_ctx_of(q), b);
            mk_free(q);
        }
    }
    CHECK_EQ(stats_of(b).chunks, 0u);
    mk_ctx_delete(b);
}

/* ---- the spectrum of chunk sizes --------------------------------------------- */

static void test_spectrum(void)
{
    const size_t sizes[] = {
        /* small classes and their neighbours */
        1, 8, 9, 16, 17, 24, 25, 32, 48, 64, 65, 80, 128, 129, 256, 512,
        1000, 1024, 1025, 2048, 4096, 8192, 16384, 20000, 32767, 32768,
        /* large */
        32769, 40000, 65536, 65537, 100000, 262144, 500000, 1048575,
        1048576,
        /* huge */
        1048577, (size_t)5 << 20, (size_t)100 << 20};
    const size_t n = sizeof sizes / sizeof sizes[0];
    static char *ps[64];
    for (size_t i = 0; i < n; i++) {
        ps[i] = mk_alloc(ctx, sizes[i]);
        REQUIRE_NOT_NULL(ps[i]);
        CHECK_PTR_EQ(mk_ctx_of(ps[i]), ctx);
        CHECK_GE(mk_usable_size(ps[i]), sizes[i]);
        th_fill(ps[i], sizes[i], i);
    }
    mk_stats st = stats_of(ctx);
    CHECK_EQ(st.chunks, n);
    size_t want = 0;
    for (size_t i = 0; i < n; i++)
        want += mk_usable_size(ps[i]);
    CHECK_EQ(st.bytes_used, want);
    CHECK_GE(st.bytes_reserved, want);
    for (size_t i = 0; i < n; i++) {
        CHECK_PATTERN(ps[i], sizes[i], i);
        mk_free(ps[i]);
    }
    st = stats_of(ctx);
    CHECK_EQ(st.chunks, 0u);
    CHECK_EQ(st.bytes_used, 0u);
}

int main(void)
{
    ctx = mk_ctx_new(NULL, "alloc", MK_GENERAL, NULL);
    if (!ctx) {
        fprintf(stderr, "mk_ctx_new failed\n");
        return 1;
    }
    RUN(test_alloc_basic);
    RUN(test_alloc_zero_size);
    RUN(test_alloc_many_no_overlap);
    RUN(test_alloc_zero);
    RUN(test_alloc_array);
    RUN(test_strdup);
    RUN(test_aligned_powers);
    RUN(test_aligned_large);
    RUN(test_aligned_bad);
    RUN(test_usable_size);
    RUN(test_realloc_grow_shrink);
    RUN(test_realloc_small_steps);
    RUN(test_realloc_null_and_zero);
    RUN(test_realloc_keeps_context);
    RUN(test_realloc_unwritten_large);
    RUN(test_spectrum);
    mk_ctx_delete(ctx);
    return th_done();
}
