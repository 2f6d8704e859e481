/* SPDX-License-Identifier: MIT */
/*
 * unit/meta.c - memkit's bookkeeping store (page/meta.c): mki_meta_alloc
 * returns zeroed, 16-byte aligned, distinct blocks for sizes 1..1024 and
 * NULL (ENOMEM) for 0 and > 1024; a freed block is reused for the same
 * rounded size, zeroed again; the store grows from the OS 64 KiB at a time
 * (mki_meta_bytes) and an injected OS failure gives NULL without growth.
 */
#include "harness.h"

#include "internal.h"

static void test_sizes(void)
{
    for (size_t n = 1; n <= 1024; n++) {
        unsigned char *p = mki_meta_alloc(n);
        REQUIRE_NOT_NULL(p);
        CHECK_EQ((uintptr_t)p % 16, 0u);
        if (!th_all_zero(p, n))
            th_fail(__FILE__, __LINE__, "meta block of %zu not zeroed", n);
        th_checks++;
        memset(p, 0xff, n);
        mki_meta_free(p, n);
    }
    errno = 0;
    CHECK_NULL(mki_meta_alloc(0));
    CHECK_ERRNO(ENOMEM);
    errno = 0;
    CHECK_NULL(mki_meta_alloc(1025));
    CHECK_ERRNO(ENOMEM);
    mki_meta_free(NULL, 16); /* ignored */
}

static void test_distinct_and_reuse(void)
{
    enum { N = 3000 };
    static unsigned char *p[N];
    for (int i = 0; i < N; i++) {
        size_t n = 16 + (size_t)(i % 7) * 40;
        p[i] = mki_meta_alloc(n);
        REQUIRE_NOT_NULL(p[i]);
        memset(p[i], i & 0xff, n);
    }
    for (int i = 0; i < N; i++) {
        size_t n = 16 + (size_t)(i % 7) * 40;
        CHECK(p[i][0] == (i & 0xff) && p[i][n - 1] == (i & 0xff));
    }
    /* reuse: freed blocks come back (zeroed) before the store grows */
    size_t meta = mki_meta_bytes();
    for (int i = 0; i < N; i++)
        mki_meta_free(p[i], 16 + (size_t)(i % 7) * 40);
    for (int i = 0; i < N; i++) {
        size_t n = 16 + (size_t)(i % 7) * 40;
        p[i] = mki_meta_alloc(n);
        REQUIRE_NOT_NULL(p[i]);
        if (!th_all_zero(p[i], n))
            th_fail(__FILE__, __LINE__, "reused block not zeroed");
        th_checks++;
    }
    CHECK_EQ(mki_meta_bytes(), meta);
    for (int i = 0; i < N; i++)
        mki_meta_free(p[i], 16 + (size_t)(i % 7) * 40);
}

static void test_growth_and_failure(void)
{
    size_t meta = mki_meta_bytes(), committed = mki_os_committed();
    /* 1 KiB blocks until the store grows once */
    enum { N = 200 };
    static void *p[N];
    int grew_at = -1;
    for (int i = 0; i < N; i++) {
        p[i] = mki_meta_alloc(1024);
        REQUIRE_NOT_NULL(p[i]);
        if (mki_meta_bytes() != meta) {
            grew_at = i;
            break;
        }
    }
    CHECK_GE(grew_at, 0);
    CHECK_EQ(mki_meta_bytes(), meta + ((size_t)64 << 10));
    CHECK_EQ(mki_os_committed(), committed + ((size_t)64 << 10));

    /* the next growth fails under injection: NULL, nothing counted */
    int failed = 0;
    for (int i = grew_at + 1; i < N; i++) {
        size_t m = mki_meta_bytes(), c = mki_os_committed(),
               r = mki_os_reserved();
        mki_os_fail_at(1, 0);
        errno = 0;
        p[i] = mki_meta_alloc(1024);
        int err = errno;
        mki_os_fail_at(0, 0);
        if (!p[i]) {
            failed = 1;
            CHECK_EQ(err, ENOMEM);
            CHECK_EQ(mki_meta_bytes(), m);
            CHECK_EQ(mki_os_committed(), c);
            CHECK_EQ(mki_os_reserved(), r);
            /* and the commit failing (2nd request) too */
            mki_os_fail_at(2, 0);
            CHECK_NULL(mki_meta_alloc(1024));
            mki_os_fail_at(0, 0);
            CHECK_EQ(mki_os_reserved(), r);
            CHECK_EQ(mki_os_committed(), c);
            p[i] = mki_meta_alloc(1024); /* works again */
            CHECK_NOT_NULL(p[i]);
            break;
        }
    }
    CHECK(failed);
    for (int i = 0; i < N; i++)
        if (p[i])
            mki_meta_free(p[i], 1024);
}

int main(void)
{
    RUN(test_sizes);
    RUN(test_distinct_and_reuse);
    RUN(test_growth_and_failure);
    return th_done();
}
