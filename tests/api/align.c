/* SPDX-License-Identifier: MIT */
/*
 * api/align.c - the documented alignment rule for every size class:
 * a chunk is aligned to 16 bytes, except requests of 8 bytes or less and
 * of 17..24 bytes, which are aligned to 8.  Checked for every request size
 * 0..33000 (so every class and every class boundary exactly), for large and
 * huge sizes, through mk_alloc, mk_alloc_zero and mk_realloc (whose result
 * is a chunk of the new size); and size 0 gives unique freeable pointers.
 */
#include "harness.h"

#include <memkit.h>

static mk_ctx *ctx;

/* The alignment the rule promises for a request of @n bytes. */
static size_t promised(size_t n)
{
    if (n <= 8 || (n >= 17 && n <= 24))
        return 8;
    return 16;
}

static int bad_count;

static void check_chunk(const char *how, size_t n, const void *p, int line)
{
    th_checks++;
    if (!p) {
        th_fail(__FILE__, line, "%s(%zu) = NULL", how, n);
        return;
    }
    size_t a = promised(n);
    if ((uintptr_t)p % a != 0) {
        if (bad_count++ < 20)
            th_fail(__FILE__, line, "%s(%zu) = %p: not %zu-byte aligned",
                    how, n, p, a);
        else
            th_failures++, th_test_failed++;
    }
    if (mk_usable_size(p) < n) {
        if (bad_count++ < 20)
            th_fail(__FILE__, line, "%s(%zu): usable size %zu", how, n,
                    mk_usable_size(p));
        else
            th_failures++, th_test_failed++;
    }
}

/* Every size 0..33000 through mk_alloc.  Chunks of sizes up to 4 KiB stay
 * live so that each class is checked at many offsets in its pages, not only
 * at the first chunk; bigger ones are freed at once. */
static void test_every_size(void)
{
    enum { LIMIT = 33000, KEEP = 4096 };
    static void *live[KEEP + 1][3];
    for (size_t n = 0; n <= LIMIT; n++) {
        void *p[3];
        for (int k = 0; k < 3; k++) {
            p[k] = mk_alloc(ctx, n);
            check_chunk("mk_alloc", n, p[k], __LINE__);
            if (p[k])
                memset(p[k], (int)(n & 0xff), n);
        }
        for (int k = 0; k < 3; k++) {
            if (n <= KEEP)
                live[n][k] = p[k];
            else
                mk_free(p[k]);
        }
    }
    for (size_t n = 0; n <= KEEP; n++)
        for (int k = 0; k < 3; k++) {
            const unsigned char *c = live[n][k];
            if (c && n && (c[0] != (n & 0xff) || c[n - 1] != (n & 0xff)))
                th_fail(__FILE__, __LINE__, "chunk of %zu bytes overwritten", n);
            mk_free(live[n][k]);
        }
    mk_stats st;
    mk_ctx_stats(ctx, &st, 0);
    CHECK_EQ(st.chunks, 0u);
}

/* Sizes above the small classes: large and huge. */
static void test_large_huge(void)
{
    const size_t sizes[] = {33001,  40000,   65535,   65536,    65537,
                            100001, 262145,  524287,  1048575,  1048576,
                            1048577, 1500001, (size_t)4 << 20,
                            ((size_t)4 << 20) + 1, (size_t)9 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *p = mk_alloc(ctx, sizes[i]);
        check_chunk("mk_alloc", sizes[i], p, __LINE__);
        void *z = mk_alloc_zero(ctx, sizes[i]);
        check_chunk("mk_alloc_zero", sizes[i], z, __LINE__);
        mk_free(p);
        mk_free(z);
    }
}

/* mk_alloc_zero follows the same rule. */
static void test_alloc_zero_rule(void)
{
    for (size_t n = 0; n <= 2100; n++) {
        void *p = mk_alloc_zero(ctx, n);
        check_chunk("mk_alloc_zero", n, p, __LINE__);
        void *q = mk_alloc_zero(ctx, n);
        check_chunk("mk_alloc_zero", n, q, __LINE__);
        mk_free(p);
        mk_free(q);
    }
}

/* The chunk mk_realloc returns is a chunk of the new size: it follows the
 * rule for the new size, whatever the old one was (a 24-byte chunk resized
 * to 16 bytes must come back 16-aligned). */
static void test_realloc_rule(void)
{
    for (size_t from = 0; from <= 80; from++) {
        for (size_t to = 0; to <= 80; to++) {
            char *p = mk_alloc(ctx, from);
            if (!p) {
                th_fail(__FILE__, __LINE__, "mk_alloc(%zu) = NULL", from);
                continue;
            }
            th_fill(p, from, from);
            char *q = mk_realloc(p, to);
            if (!q) {
                th_fail(__FILE__, __LINE__, "mk_realloc(%zu -> %zu) = NULL",
                        from, to);
                mk_free(p);
                continue;
            }
            th_checks++;
            size_t a = promised(to);
            if ((uintptr_t)q % a != 0 || mk_usable_size(q) < to) {
                if (bad_count++ < 20)
                    th_fail(__FILE__, __LINE__,
                            "mk_realloc(%zu-byte chunk, %zu) = %p: not "
                            "%zu-byte aligned or too small", from, to,
                            (void *)q, a);
                else
                    th_failures++, th_test_failed++;
            }
            CHECK_PATTERN(q, from < to ? from : to, from);
            mk_free(q);
        }
    }
}

/* Size 0: unique and freeable, in a fresh context and after frees. */
static void test_zero_size_unique(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "zero", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    enum { N = 5000 };
    static uintptr_t ps[N];
    for (int i = 0; i < N; i++) {
        void *p = mk_alloc(c, 0);
        REQUIRE_NOT_NULL(p);
        ps[i] = (uintptr_t)p;
    }
    /* distinct: insertion-sort free check via a simple O(N log N) sort */
    for (int gap = N / 2; gap > 0; gap /= 2)
        for (int i = gap; i < N; i++)
            for (int j = i - gap; j >= 0 && ps[j] > ps[j + gap]; j -= gap) {
                uintptr_t t = ps[j];
                ps[j] = ps[j + gap];
                ps[j + gap] = t;
            }
    int dups = 0;
    for (int i = 1; i < N; i++)
        dups += ps[i] == ps[i - 1];
    CHECK_EQ(dups, 0);
    for (int i = 0; i < N; i++)
        mk_free((void *)ps[i]);
    mk_stats st;
    mk_ctx_stats(c, &st, 0);
    CHECK_EQ(st.chunks, 0u);
    mk_ctx_delete(c);
}

int main(void)
{
    ctx = mk_ctx_new(NULL, "align", MK_GENERAL, NULL);
    if (!ctx)
        return 1;
    RUN(test_every_size);
    RUN(test_large_huge);
    RUN(test_alloc_zero_rule);
    RUN(test_realloc_rule);
    RUN(test_zero_size_unique);
    mk_ctx_delete(ctx);
    return th_done();
}
