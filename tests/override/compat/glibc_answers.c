/* SPDX-License-Identifier: MIT */
/*
 * compat/glibc_answers.c - two answers a program reads as glibc gives
 * them:
 *  - aligned_alloc with an alignment that is not a power of two (0, 3,
 *    24, 48): the running glibc's answer, which the test reads from
 *    gnu_get_libc_version: before 2.38 the alignment is rounded up to a
 *    power of two, as memalign does (2.36: a result); from 2.38 on,
 *    NULL with EINVAL;
 *  - mallinfo2's meanings: a block with a mapping of its own (64 MiB) is
 *    counted in hblkhd, not in uordblks, so the usual total uordblks +
 *    hblkhd counts it once (memkit counted it in both); arena is
 *    uordblks + fordblks where the allocator keeps nothing else in it.
 */
#include "compat.h"

#include <gnu/libc-version.h>
#include <malloc.h>

#define MiB ((size_t)1 << 20)

static int glibc_at_least(unsigned major, unsigned minor)
{
    unsigned a = 0, b = 0;
    if (sscanf(gnu_get_libc_version(), "%u.%u", &a, &b) < 1)
        return 0;
    return a > major || (a == major && b >= minor);
}

static void test_aligned_alloc_odd(void)
{
    static const size_t odd[] = {0, 3, 24, 48};
    int strict = glibc_at_least(2, 38);
    printf("glibc %s: %s\n", gnu_get_libc_version(),
           strict ? "EINVAL expected" : "rounded up expected");
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        errno = 0;
        void *p = aligned_alloc(compat_opaque(odd[i]), compat_opaque(100));
        if (strict) {
            CHECK_NULL(p);
            CHECK_ERRNO(EINVAL);
            continue;
        }
        REQUIRE_NOT_NULL(p);
        size_t want = 16;
        while (want < odd[i])
            want <<= 1;
        CHECK_EQ((uintptr_t)p % want, 0u);
        CHECK_GE(malloc_usable_size(p), 100u);
        free(p);
    }
}

static void test_mallinfo2_counts_once(void)
{
    struct mallinfo2 a = mallinfo2();
    char *big = malloc(compat_opaque(64 * MiB));
    REQUIRE_NOT_NULL(big);
    memset(big, 1, 64 * MiB);
    struct mallinfo2 b = mallinfo2();
    size_t before = a.uordblks + a.hblkhd, after = b.uordblks + b.hblkhd;
    printf("uordblks + hblkhd: %zu -> %zu (+%.1f MiB); hblkhd +%.1f MiB\n", before,
           after, (double)(after - before) / MiB, (double)(b.hblkhd - a.hblkhd) / MiB);
    CHECK_GE(b.hblkhd, a.hblkhd + 64 * MiB);
    CHECK_LT(after, before + 66 * MiB); /* once, not twice */
    CHECK_GE(after, before + 64 * MiB);
    CHECK_LE(b.uordblks, b.arena); /* (the heap's in-use part of it) */
    free(big);
}

int main(void)
{
    compat_start();
    RUN(test_aligned_alloc_odd);
    RUN(test_mallinfo2_counts_once);
    return th_done();
}
