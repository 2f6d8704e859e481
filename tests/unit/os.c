/*
 * unit/os.c - the OS layer (os/os.h, os/os_posix.c): mki_os_reserve gives
 * aligned, writable, zeroed address space and counts it as reserved;
 * commit/decommit move the committed counter by what they are told;
 * release undoes both; decommitted pages read back as zero; every request
 * counts in mki_os_calls; failure injection (mki_os_fail_at): the n-th
 * request fails once, or every request from the n-th on (repeat), reserve
 * and commit alike, with ENOMEM and no change to the counters; n = 0
 * switches it off.  mki_os_now_ns is monotonic.
 */
#include "harness.h"

#include <time.h>

#include "internal.h"

static void test_reserve_release(void)
{
    const size_t aligns[] = {4096, 65536, (size_t)1 << 20, (size_t)4 << 20,
                             (size_t)32 << 20};
    const size_t sizes[] = {4096, 3 * 4096, (size_t)1 << 20, (size_t)5 << 20};
    for (int a = 0; a < 5; a++)
        for (int s = 0; s < 4; s++) {
            size_t r0 = mki_os_reserved(), c0 = mki_os_committed();
            size_t calls = mki_os_calls();
            char *p = mki_os_reserve(sizes[s], aligns[a]);
            REQUIRE_NOT_NULL(p);
            CHECK_EQ((uintptr_t)p % aligns[a], 0u);
            CHECK_EQ(mki_os_reserved(), r0 + sizes[s]);
            CHECK_EQ(mki_os_committed(), c0); /* reserved, not committed */
            CHECK_GT(mki_os_calls(), calls);
            CHECK(th_all_zero(p, sizes[s]));   /* fresh memory is zero */
            memset(p, 0x77, sizes[s]);         /* and writable */
            mki_os_release(p, sizes[s], 0);
            CHECK_EQ(mki_os_reserved(), r0);
            CHECK_EQ(mki_os_committed(), c0);
        }
}

static void test_commit_decommit(void)
{
    size_t r0 = mki_os_reserved(), c0 = mki_os_committed();
    size_t size = (size_t)1 << 20;
    char *p = mki_os_reserve(size, 4096);
    REQUIRE_NOT_NULL(p);
    CHECK_EQ(mki_os_commit(p, 64 << 10), 0);
    CHECK_EQ(mki_os_committed(), c0 + (64 << 10));
    CHECK_EQ(mki_os_commit(p + (64 << 10), 8192), 0);
    CHECK_EQ(mki_os_committed(), c0 + (64 << 10) + 8192);
    memset(p, 0xab, (64 << 10) + 8192);

    /* decommit: contents lost (zero on next touch), counter by `account` */
    size_t calls = mki_os_calls();
    mki_os_decommit(p, 16 << 10, 16 << 10, MKI_OS_DONTNEED);
    CHECK_EQ(mki_os_committed(), c0 + (48 << 10) + 8192);
    CHECK_GT(mki_os_calls(), calls);
    CHECK(th_all_zero(p, 16 << 10));
    CHECK_EQ((unsigned char)p[16 << 10], 0xabu); /* the rest is kept */

    /* the caller may account less than the range (partly counted) */
    mki_os_decommit(p + (16 << 10), 8192, 1024, MKI_OS_DONTNEED);
    CHECK_EQ(mki_os_committed(), c0 + (47 << 10) + 8192);

    /* MADV_FREE: contents may stay or go; the counter follows at once */
    mki_os_decommit(p + (32 << 10), 8192, 8192, MKI_OS_FREE);
    CHECK_EQ(mki_os_committed(), c0 + (39 << 10) + 8192);

    /* release with the committed rest */
    mki_os_release(p, size, (39 << 10) + 8192);
    CHECK_EQ(mki_os_committed(), c0);
    CHECK_EQ(mki_os_reserved(), r0);
}

/* A part of a reservation can be released on its own. */
static void test_partial_release(void)
{
    size_t r0 = mki_os_reserved();
    char *p = mki_os_reserve((size_t)8 << 20, (size_t)4 << 20);
    REQUIRE_NOT_NULL(p);
    mki_os_release(p + ((size_t)4 << 20), (size_t)4 << 20, 0);
    CHECK_EQ(mki_os_reserved(), r0 + ((size_t)4 << 20));
    memset(p, 1, (size_t)4 << 20);
    mki_os_release(p, (size_t)4 << 20, 0);
    CHECK_EQ(mki_os_reserved(), r0);
}

static void test_fail_once(void)
{
    size_t r0 = mki_os_reserved(), c0 = mki_os_committed();
    mki_os_fail_at(1, 0);
    errno = 0;
    CHECK_NULL(mki_os_reserve(4096, 4096));
    CHECK_ERRNO(ENOMEM);
    CHECK_EQ(mki_os_reserved(), r0);
    /* only once */
    char *p = mki_os_reserve(65536, 4096);
    REQUIRE_NOT_NULL(p);

    /* the 3rd request from now: reserve, commit, then commit fails */
    mki_os_fail_at(3, 0);
    char *q = mki_os_reserve(4096, 4096);
    CHECK_NOT_NULL(q);
    CHECK_EQ(mki_os_commit(p, 4096), 0);
    errno = 0;
    CHECK_EQ(mki_os_commit(p + 4096, 4096), -1);
    CHECK_ERRNO(ENOMEM);
    CHECK_EQ(mki_os_committed(), c0 + 4096); /* the failed one not counted */
    CHECK_EQ(mki_os_commit(p + 4096, 4096), 0);
    CHECK_EQ(mki_os_committed(), c0 + 8192);

    /* a decommit is a request that can fail: it then changes nothing
     * (the memory stays committed, counted, usable) */
    mki_os_fail_at(1, 0);
    p[0] = 42;
    CHECK_EQ(mki_os_decommit(p, 8192, 8192, MKI_OS_DONTNEED), -1);
    CHECK_EQ(mki_os_committed(), c0 + 8192);
    CHECK_EQ(p[0], 42);
    CHECK_EQ(mki_os_decommit(p, 8192, 8192, MKI_OS_DONTNEED), 0);
    CHECK_EQ(mki_os_committed(), c0);
    CHECK_EQ(mki_os_commit(p, 8192), 0); /* (counted again, for below) */
    /* release never fails and is not counted as a request */
    mki_os_fail_at(1, 0);
    mki_os_release(q, 4096, 0);
    errno = 0;
    CHECK_EQ(mki_os_commit(p, 4096), -1); /* the injection was still armed */
    CHECK_ERRNO(ENOMEM);

    /* off */
    mki_os_fail_at(5, 0);
    mki_os_fail_at(0, 0);
    for (int i = 0; i < 10; i++)
        CHECK_EQ(mki_os_commit(p, 4096), 0);
    mki_os_release(p, 65536, 10 * 4096 + 8192);
    CHECK_EQ(mki_os_committed(), c0);
    CHECK_EQ(mki_os_reserved(), r0);
}

static void test_fail_repeat(void)
{
    size_t r0 = mki_os_reserved(), c0 = mki_os_committed();
    char *p = mki_os_reserve(65536, 4096);
    REQUIRE_NOT_NULL(p);
    mki_os_fail_at(2, 1);
    CHECK_EQ(mki_os_commit(p, 4096), 0); /* the 1st still works */
    for (int i = 0; i < 20; i++) {
        errno = 0;
        CHECK_NULL(mki_os_reserve(4096, 4096));
        CHECK_ERRNO(ENOMEM);
        errno = 0;
        CHECK_EQ(mki_os_commit(p, 4096), -1);
        CHECK_ERRNO(ENOMEM);
    }
    CHECK_EQ(mki_os_committed(), c0 + 4096);
    mki_os_fail_at(0, 0);
    char *q = mki_os_reserve(4096, 4096);
    CHECK_NOT_NULL(q);
    CHECK_EQ(mki_os_commit(p + 4096, 4096), 0);
    if (q)
        mki_os_release(q, 4096, 0);
    mki_os_release(p, 65536, 8192);
    CHECK_EQ(mki_os_committed(), c0);
    CHECK_EQ(mki_os_reserved(), r0);
}

/* An impossible reservation fails cleanly. */
static void test_impossible(void)
{
    size_t r0 = mki_os_reserved();
    errno = 0;
    CHECK_NULL(mki_os_reserve(SIZE_MAX - 4095, 4096));
    CHECK_ERRNO(ENOMEM);
    errno = 0;
    CHECK_NULL(mki_os_reserve((size_t)1 << 62, (size_t)1 << 62));
    CHECK_ERRNO(ENOMEM);
    CHECK_EQ(mki_os_reserved(), r0);
}

static void test_now(void)
{
    unsigned long long a = mki_os_now_ns();
    unsigned long long b = mki_os_now_ns();
    CHECK_GT(a, 0ull);
    CHECK_GE(b, a);
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
    unsigned long long c = mki_os_now_ns();
    CHECK_GE(c - b, 1000000ull);
}

int main(void)
{
    RUN(test_reserve_release);
    RUN(test_commit_decommit);
    RUN(test_partial_release);
    RUN(test_fail_once);
    RUN(test_fail_repeat);
    RUN(test_impossible);
    RUN(test_now);
    return th_done();
}
