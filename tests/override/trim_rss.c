/* SPDX-License-Identifier: MIT */
/*
 * override/trim_rss.c - the purge modes really give resident memory back
 * through the drop-in: a plain program (the C library only)
 * run under LD_PRELOAD=libmemkit-malloc.so with MEMKIT_PURGE set by ctest,
 * one registration per mode.
 *
 * For blocks of 1 KiB, 64 KiB and 4 MiB in turn (small chunks in pages,
 * large runs in segments, huge mappings): malloc 256 MiB of them and write
 * every byte, free them all, then
 *  - dontneed, unmap: with no further call into the allocator, resident
 *    memory falls by at least 240 MiB within a deadline (the background
 *    purge pass after MEMKIT_PURGE_DELAY_MS, 50 ms here);
 *  - off: resident memory does not fall by itself: after three delays
 *    the 1 KiB and 64 KiB blocks' pages are all still resident (within 16
 *    MiB of the peak); of the 4 MiB blocks (huge: a mapping each) the
 *    mappings the huge cache holds stay resident (at least 48 MiB: the
 *    cache keeps up to 256 MiB, and no more than the live chunks are
 *    below their peak; beyond that a freed mapping is unmapped in every
 *    mode, as glibc unmaps its mmap'ed chunks);
 *  - free: MADV_FREE'd pages stay resident until the kernel needs them,
 *    but empty segments beyond the few kept for reuse are unmapped: what
 *    falls by itself is printed, not asserted;
 *  - off and free: then malloc_trim(0) returns 1 and resident memory has
 *    fallen by at least 240 MiB (malloc_trim calls mk_trim, which gives
 *    back everything free whatever the policy: an explicit request,
 *    documented in memkit.h);
 * and after that the same blocks are allocated again and checked to be
 * usable (written and read back: a purged page is correct when reused;
 * nothing is assumed about its contents).
 *
 * And, in dontneed mode, the huge cache's merges (found by review): a
 * cached mapping that was purged next to one that is resident must not
 * hide the resident one's pages from later purges (they were counted as
 * uncommitted and stayed resident for good).
 *
 * About 2 s a mode.
 */
#include "harness.h"

#include <malloc.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)
#define TOTAL (256 * MiB)
#define DROP (240 * MiB)
#define DELAY_MS 50

static void *blocks[TOTAL / 1024];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* malloc TOTAL bytes in blocks of @size, every byte written; returns the
 * number of blocks (those before a failed malloc). */
static size_t grow(size_t size, int id)
{
    size_t n = TOTAL / size;
    for (size_t i = 0; i < n; i++) {
        blocks[i] = malloc(size);
        REQUIRE_RET(blocks[i] != NULL, i);
        memset(blocks[i], id + (int)(i % 7), size);
    }
    return n;
}

static void shrink(size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(blocks[i]);
}

/* How far resident memory fell from @peak to @now (negative: it grew). */
static long long fell(size_t peak, size_t now)
{
    return (long long)peak - (long long)now;
}

static void one_size(const char *mode, size_t size, int id)
{
    int on_its_own = !strcmp(mode, "dontneed") || !strcmp(mode, "unmap");
    int off = !strcmp(mode, "off");
    const long long drop = (long long)DROP;
    malloc_trim(0);
    size_t base = th_rss_bytes();
    size_t n = grow(size, id);
    size_t peak = th_rss_bytes();
    CHECK_GE(peak, base + TOTAL - 8 * MiB);
    double t0 = now_s();
    shrink(n);

    /* no call into the allocator from here until the RSS checks end */
    size_t rss = th_rss_bytes();
    double t = -1;
    if (on_its_own) {
        while (now_s() - t0 < 5.0) {
            rss = th_rss_bytes();
            if (fell(peak, rss) >= drop) {
                t = now_s() - t0;
                break;
            }
            sleep_ms(5);
        }
        CHECK_GE(fell(peak, rss), drop);
        CHECK(t >= 0);
        printf("  %-8s %7zu B blocks: peak %zu MiB, %lld MiB back after "
               "%.0f ms, without a call\n", mode, size, peak / MiB,
               fell(peak, rss) / (long long)MiB, t * 1000);
    } else {
        sleep_ms(3 * DELAY_MS);
        rss = th_rss_bytes();
        if (off && size < 4 * MiB)
            CHECK_LE(fell(peak, rss), (long long)(16 * MiB)); /* all kept */
        else if (off)
            CHECK_GE(rss, base + 48 * MiB); /* the huge cache's mappings */
        int r = malloc_trim(0);
        CHECK_EQ(r, 1);
        size_t after = th_rss_bytes();
        CHECK_GE(fell(peak, after), drop);
        printf("  %-8s %7zu B blocks: peak %zu MiB, %lld MiB back after 3 "
               "delays, %lld MiB after malloc_trim(0)\n", mode, size,
               peak / MiB, fell(peak, rss) / (long long)MiB,
               fell(peak, after) / (long long)MiB);
    }

    /* reuse: the purged memory is usable again */
    n = grow(size, id + 1);
    for (size_t i = 0; i < n; i += 97) {
        const unsigned char *c = blocks[i];
        unsigned char want = (unsigned char)(id + 1 + (int)(i % 7));
        CHECK(c[0] == want && c[size / 2] == want && c[size - 1] == want);
    }
    shrink(n);
}

static const char *mode_name(void)
{
    const char *m = getenv("MEMKIT_PURGE");
    return m ? m : "dontneed";
}

/* A 16 MiB mapping, freed (cached), split by two 8 MiB requests c and d
 * (adjacent), both written; c freed and purged by the policy; d freed (it
 * meets c in the cache); e takes 8 MiB of the pair.  Within a few delays
 * only e's pages may stay resident. */
static void test_huge_merge(void)
{
    if (strcmp(mode_name(), "dontneed") != 0)
        return;
    malloc_trim(0);
    size_t base = th_rss_bytes();
    size_t eight = 8 * MiB - 4096; /* with its header page: 8 MiB */
    char *x = malloc(16 * MiB - 4096);
    REQUIRE_NOT_NULL(x);
    memset(x, 1, 16 * MiB - 4096);
    free(x);
    char *c = malloc(eight), *d = malloc(eight);
    REQUIRE(c && d);
    memset(c, 2, eight);
    memset(d, 3, eight);
    free(c);
    sleep_ms(6 * DELAY_MS); /* c's mapping purged */
    free(d);
    char *e = malloc(eight);
    REQUIRE_NOT_NULL(e);
    memset(e, 4, eight);
    double t0 = now_s();
    size_t rss = th_rss_bytes();
    while (now_s() - t0 < 3.0 && rss > base + 8 * MiB + 3 * MiB) {
        sleep_ms(10);
        rss = th_rss_bytes();
    }
    printf("  huge merge: %zu MiB resident above the start with 8 MiB "
           "live\n", (rss - base) / MiB);
    CHECK_LE(rss, base + 8 * MiB + 3 * MiB);
    free(e);
}

static void test_1k(void) { one_size(mode_name(), 1024, 10); }
static void test_64k(void) { one_size(mode_name(), 64 * 1024, 20); }
static void test_4m(void) { one_size(mode_name(), 4 * MiB, 30); }

int main(void)
{
    const char *d = getenv("MEMKIT_PURGE_DELAY_MS");
    if (!d || atoi(d) != DELAY_MS) {
        printf("run with MEMKIT_PURGE_DELAY_MS=%d (ctest sets it)\n",
               DELAY_MS);
        return 1;
    }
    RUN(test_1k);
    RUN(test_64k);
    RUN(test_4m);
    RUN(test_huge_merge);
    return th_done();
}
