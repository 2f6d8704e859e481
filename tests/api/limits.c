/* SPDX-License-Identifier: MIT */
/*
 * api/limits.c - huge and overflowing sizes: SIZE_MAX, SIZE_MAX - 15,
 * 2^62, PTRDIFF_MAX (and a few more) through every allocating function
 * return NULL with errno ENOMEM, never wrap around to a small chunk, leak
 * nothing (process and context figures unchanged), and leave the context
 * usable; mk_alloc_aligned(SIZE_MAX - 100, 64) and absurd alignments too.
 */
#include "harness.h"

#include <memkit.h>

static mk_ctx *ctx;

static const size_t huge_sizes[] = {
    SIZE_MAX,         SIZE_MAX - 1,        SIZE_MAX - 15,
    SIZE_MAX - 4096,  SIZE_MAX / 2,        SIZE_MAX / 2 + 1,
    (size_t)1 << 62,  ((size_t)1 << 62) + 1, (size_t)PTRDIFF_MAX,
    (size_t)PTRDIFF_MAX + 1, (size_t)1 << 50, ((size_t)1 << 63) - 4095,
};
#define NHUGE (sizeof huge_sizes / sizeof huge_sizes[0])

typedef struct snapshot {
    mk_process_figures proc;
    mk_stats ctx;
} snapshot;

static snapshot snap(void)
{
    snapshot s;
    mk_process_stats(&s.proc);
    mk_ctx_stats(ctx, &s.ctx, 1);
    return s;
}

/* Nothing was taken from the OS or from the context. */
static void check_unchanged(const snapshot *a, const snapshot *b, int line)
{
    th_checks++;
    if (a->proc.os_reserved != b->proc.os_reserved ||
        a->proc.os_committed != b->proc.os_committed ||
        a->proc.segments != b->proc.segments ||
        a->ctx.chunks != b->ctx.chunks ||
        a->ctx.blocks != b->ctx.blocks ||
        a->ctx.bytes_reserved != b->ctx.bytes_reserved)
        th_fail(__FILE__, line,
                "leak: reserved %zu -> %zu, committed %zu -> %zu, segments "
                "%zu -> %zu, chunks %zu -> %zu, blocks %zu -> %zu",
                a->proc.os_reserved, b->proc.os_reserved,
                a->proc.os_committed, b->proc.os_committed,
                a->proc.segments, b->proc.segments, a->ctx.chunks,
                b->ctx.chunks, a->ctx.blocks, b->ctx.blocks);
}

/* The context still allocates, frees and reports after a failure. */
static void check_usable(int line)
{
    const size_t sizes[] = {0, 16, 300, 5000, 50000, (size_t)2 << 20};
    void *p[6];
    for (int i = 0; i < 6; i++) {
        p[i] = mk_alloc(ctx, sizes[i]);
        th_checks++;
        if (!p[i]) {
            th_fail(__FILE__, line, "context unusable: mk_alloc(%zu) = NULL",
                    sizes[i]);
            continue;
        }
        th_fill(p[i], sizes[i], (uint64_t)i);
    }
    for (int i = 0; i < 6; i++) {
        if (!p[i])
            continue;
        CHECK_PATTERN(p[i], sizes[i], (uint64_t)i);
        mk_free(p[i]);
    }
}

#define EXPECT_ENOMEM(call, n)                                              \
    do {                                                                    \
        errno = 0;                                                          \
        void *r_ = (call);                                                  \
        th_checks++;                                                        \
        if (r_ != NULL || errno != ENOMEM)                                  \
            th_fail(__FILE__, __LINE__, "%s with n = %zu (0x%zx): %p, "     \
                    "errno %d; expected NULL, ENOMEM", #call, (size_t)(n),  \
                    (size_t)(n), r_, errno);                                \
        if (r_)                                                             \
            mk_free(r_);                                                    \
    } while (0)

static void test_alloc_huge(void)
{
    snapshot a = snap();
    for (size_t i = 0; i < NHUGE; i++) {
        size_t n = huge_sizes[i];
        EXPECT_ENOMEM(mk_alloc(ctx, n), n);
        EXPECT_ENOMEM(mk_alloc_zero(ctx, n), n);
        EXPECT_ENOMEM(mk_alloc_aligned(ctx, n, 16), n);
        EXPECT_ENOMEM(mk_alloc_aligned(ctx, n, 64), n);
        EXPECT_ENOMEM(mk_alloc_aligned(ctx, n, 4096), n);
        EXPECT_ENOMEM(mk_alloc_aligned(ctx, n, (size_t)1 << 20), n);
        EXPECT_ENOMEM(mk_alloc_array(ctx, 1, n), n);
        EXPECT_ENOMEM(mk_alloc_array(ctx, n, 1), n);
    }
    EXPECT_ENOMEM(mk_alloc_aligned(ctx, SIZE_MAX - 100, 64), SIZE_MAX - 100);
    snapshot b = snap();
    check_unchanged(&a, &b, __LINE__);
    check_usable(__LINE__);
}

/* An alignment no address space can satisfy is a failure of memory, not
 * of arguments: a power of two, so ENOMEM. */
static void test_absurd_alignment(void)
{
    snapshot a = snap();
    const size_t aligns[] = {(size_t)1 << 63, (size_t)1 << 62,
                             (size_t)1 << 50};
    for (int i = 0; i < 3; i++) {
        EXPECT_ENOMEM(mk_alloc_aligned(ctx, 16, aligns[i]), aligns[i]);
        EXPECT_ENOMEM(mk_alloc_aligned(ctx, SIZE_MAX, aligns[i]), aligns[i]);
    }
    snapshot b = snap();
    check_unchanged(&a, &b, __LINE__);
    check_usable(__LINE__);
}

/* mk_realloc to a huge size: NULL, ENOMEM, the chunk untouched and still
 * owned by its context. */
static void test_realloc_huge(void)
{
    const size_t start[] = {10, 1000, 40000, (size_t)3 << 20};
    for (int s = 0; s < 4; s++) {
        char *p = mk_alloc(ctx, start[s]);
        REQUIRE_NOT_NULL(p);
        th_fill(p, start[s], 99);
        snapshot a = snap();
        for (size_t i = 0; i < NHUGE; i++) {
            errno = 0;
            void *q = mk_realloc(p, huge_sizes[i]);
            th_checks++;
            if (q != NULL || errno != ENOMEM)
                th_fail(__FILE__, __LINE__, "mk_realloc(%zu-byte chunk, %zu) "
                        "= %p, errno %d", start[s], huge_sizes[i], q, errno);
        }
        snapshot b = snap();
        check_unchanged(&a, &b, __LINE__);
        CHECK_PTR_EQ(mk_ctx_of(p), ctx);
        CHECK_PATTERN(p, start[s], 99);
        mk_free(p);
    }
    check_usable(__LINE__);
}

/* n * size overflowing in every way. */
static void test_array_overflow(void)
{
    snapshot a = snap();
    const size_t pairs[][2] = {
        {SIZE_MAX, 2},
        {(size_t)1 << 32, (size_t)1 << 32},
        {((size_t)1 << 32) + 1, ((size_t)1 << 32) - 1},
        {3, SIZE_MAX / 3 + 1},
        {SIZE_MAX, SIZE_MAX},
        {(size_t)PTRDIFF_MAX, 3},
    };
    for (int i = 0; i < 6; i++)
        EXPECT_ENOMEM(mk_alloc_array(ctx, pairs[i][0], pairs[i][1]),
                      pairs[i][0]);
    snapshot b = snap();
    check_unchanged(&a, &b, __LINE__);
    check_usable(__LINE__);
}

/* Repeated failures leave nothing behind either. */
static void test_repeated(void)
{
    check_usable(__LINE__);
    snapshot a = snap();
    for (int i = 0; i < 10000; i++) {
        void *p = mk_alloc(ctx, huge_sizes[(size_t)i % NHUGE]);
        if (p) {
            th_fail(__FILE__, __LINE__, "huge allocation succeeded");
            mk_free(p);
            break;
        }
    }
    th_checks++;
    snapshot b = snap();
    check_unchanged(&a, &b, __LINE__);
}

int main(void)
{
    ctx = mk_ctx_new(NULL, "limits", MK_GENERAL, NULL);
    if (!ctx)
        return 1;
    RUN(test_alloc_huge);
    RUN(test_absurd_alignment);
    RUN(test_realloc_huge);
    RUN(test_array_overflow);
    RUN(test_repeated);
    mk_ctx_delete(ctx);
    return th_done();
}
