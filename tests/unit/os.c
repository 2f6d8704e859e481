/* SPDX-License-Identifier: MIT */
/*
 * unit/os.c - the OS layer (os/os.h, os/os_posix.c): mki_os_reserve gives
 * aligned, writable, zeroed address space and counts it as reserved;
 * commit/decommit move the committed counter by what they are told;
 * release undoes both; decommitted pages read back as zero; every request
 * counts in mki_os_calls; failure injection (mki_os_fail_at): the n-th
 * request fails once, or every request from the n-th on (repeat), reserve
 * and commit alike, with ENOMEM and no change to the counters; n = 0
 * switches it off.  mki_os_now_ns is monotonic.  The probe of moved
 * pages (mki_os_moves_costly) answers 0 or 1, can be set, and unmaps
 * only its own pages, whatever other threads map meanwhile (it once
 * unmapped the range its pages had left, where another thread's mapping
 * could have landed); mki_os_huge_pages_work agrees with the system's
 * setting.
 */
#include "harness.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
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

/* Threads that map, fill, check and unmap 64 KiB, and start and join a
 * thread, over and over, while the main thread probes: a probe that
 * unmapped another's memory makes one of them fault or read a wrong
 * byte. */
static atomic_int probing = 1;
static atomic_long mapping_bad;

static void *idle_thread(void *arg) { return arg; }

static void *mapper(void *arg)
{
    unsigned char tag = (unsigned char)(uintptr_t)arg;
    while (atomic_load(&probing)) {
        unsigned char *m = mmap(NULL, 65536, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            continue;
        for (size_t o = 0; o < 65536; o += 4096)
            m[o] = tag;
        sched_yield();
        for (size_t o = 0; o < 65536; o += 4096)
            if (m[o] != tag)
                atomic_fetch_add(&mapping_bad, 1);
        munmap(m, 65536);
        pthread_t t;
        if (pthread_create(&t, NULL, idle_thread, NULL) == 0)
            pthread_join(t, NULL);
    }
    return NULL;
}

static void test_moves_probe(void)
{
    int costly = mki_os_moves_costly();
    printf("  a moved page %s here\n", costly ? "faults at its next touch" : "costs no fault");
    CHECK(costly == 0 || costly == 1);
    mki_os_moves_costly_set(1);
    CHECK_EQ(mki_os_moves_costly(), 1);
    mki_os_moves_costly_set(0);
    CHECK_EQ(mki_os_moves_costly(), 0);

    pthread_t th[2];
    atomic_store(&probing, 1);
    for (int i = 0; i < 2; i++)
        REQUIRE(pthread_create(&th[i], NULL, mapper, (void *)(uintptr_t)(0x5a + i)) == 0);
    for (int i = 0; i < 300; i++) {
        mki_os_moves_costly_set(-1); /* measure again */
        int c = mki_os_moves_costly();
        CHECK(c == 0 || c == 1);
    }
    atomic_store(&probing, 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    CHECK_EQ(atomic_load(&mapping_bad), 0);
    mki_os_moves_costly_set(-1);
}

static void test_huge_pages_work(void)
{
    int w = mki_os_huge_pages_work();
    CHECK(w == 0 || w == 1);
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char line[128] = "";
    if (f) {
        if (!fgets(line, sizeof line, f))
            line[0] = 0;
        fclose(f);
    }
    int want = strstr(line, "[always]") != NULL || strstr(line, "[madvise]") != NULL;
    CHECK_EQ(w, want);
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
    RUN(test_moves_probe);
    RUN(test_huge_pages_work);
    return th_done();
}
