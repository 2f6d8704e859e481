/* SPDX-License-Identifier: MIT */
/*
 * unit/sizeclass.c - the size-class table and lookup (page/sizeclass.[ch]):
 * mki_class_of(n) is the smallest class >= n for every n in 1..32768 (and
 * class 0 for n = 0); the direct table agrees with it up to 1040; the
 * table is strictly increasing, ends at MKI_SMALL_MAX, has exactly four
 * classes per doubling from 64 to 256 bytes, then 320 384 448 528 and
 * 640 768 896 1040 (no chunk is 512 or 1024 bytes, strides the hardware
 * handles badly), and above 1040 only
 * classes that fill a 64 KiB page to its last 16 bytes, every class but 24
 * is a multiple of 16 (the alignment rule); malloc's table
 * (mki_class_of_a16) gives the smallest class that is a multiple of 16, and
 * mki_class_malloc_size asks 17..24 bytes as 32; the worst-case internal
 * waste is below 20% from 64 bytes to 8 KiB and below 7% from 1 to 4 KiB;
 * no request above 1 KiB costs more in a full 64 KiB page than under the
 * old four-per-doubling classes, and sqlite3's page (4,368 bytes) and
 * journal chunk (1,032) sizes cost at most 16 bytes over the request;
 * mki_class_page_units gives a power of two of units that holds at least
 * one chunk, at most 64, doubling from a class's first page (8 chunks),
 * and a context's floor from half of it held on, up to 1 KiB chunks.
 */
#include "harness.h"

#include "page/sizeclass.h"

static void test_table_shape(void)
{
    CHECK_EQ(mki_class_size[0], 16u); /* a link and a double-free key */
    CHECK_EQ(mki_class_size[MKI_NCLASS - 1], MKI_SMALL_MAX);
    for (unsigned c = 1; c < MKI_NCLASS; c++)
        CHECK_LT(mki_class_size[c - 1], mki_class_size[c]);
    /* the classes held inline in a context are exactly those <= 1 KiB */
    CHECK_EQ(mki_class_size[MKI_NCLASS_DIRECT - 1], MKI_DIRECT_MAX);
    CHECK_GT(mki_class_size[MKI_NCLASS_DIRECT], MKI_DIRECT_MAX);
    for (unsigned c = 0; c < MKI_NCLASS; c++) {
        uint32_t s = mki_class_size[c];
        CHECK_EQ(s % 8, 0u);
        if (s != 24)
            CHECK_EQ(s % 16, 0u);
    }
}

static void test_four_per_doubling(void)
{
    for (uint32_t lo = 64; lo < 256; lo *= 2) {
        unsigned n = 0;
        for (unsigned c = 0; c < MKI_NCLASS; c++)
            if (mki_class_size[c] > lo && mki_class_size[c] <= 2 * lo)
                n++;
        if (n != 4)
            th_fail(__FILE__, __LINE__, "(%u, %u] holds %u classes, not 4",
                    lo, 2 * lo, n);
        th_checks++;
    }
    /* then 320 384 448 528 | 640 768 896 1040: a 512-byte request takes
     * 528 bytes and a 1 KiB one 1040 (glibc's chunk sizes for them), not
     * 512 and 1024 */
    CHECK_EQ(mki_class_size[mki_class_of(449)], 528u);
    CHECK_EQ(mki_class_size[mki_class_of(512)], 528u);
    CHECK_EQ(mki_class_size[mki_class_of_a16(512)], 528u);
    CHECK_EQ(mki_class_size[mki_class_of(528)], 528u);
    CHECK_EQ(mki_class_size[mki_class_of(529)], 640u);
    CHECK_EQ(mki_class_size[mki_class_of(897)], 1040u);
    CHECK_EQ(mki_class_size[mki_class_of(1024)], 1040u);
    CHECK_EQ(mki_class_size[mki_class_of_a16(1024)], 1040u);
    CHECK_EQ(mki_class_size[MKI_NCLASS_DIRECT - 1], 1040u);
    for (unsigned c = 0; c < MKI_NCLASS; c++)
        CHECK(mki_class_size[c] != 512u && mki_class_size[c] != 1024u);
}

/* Above 1040 every class is 64 KiB / k rounded down to 16 bytes (a full
 * page of it leaves less than 16 bytes a chunk unused), and no request
 * gets fewer chunks a 64 KiB page than under the old classes. */
static void test_counts_above_1k(void)
{
    for (unsigned c = MKI_NCLASS_DIRECT; c < MKI_NCLASS; c++) {
        uint32_t s = mki_class_size[c], k = (uint32_t)(MKI_PAGE_MAX / s);
        th_checks++;
        if (s != 16 * (4096 / k))
            th_fail(__FILE__, __LINE__, "class %u (%u B) is not 16 * floor(4096 / %u)", c,
                    s, k);
    }
    /* the old classes above 1 KiB: four per doubling, 1280 .. 32768 */
    static const uint32_t old[] = {1280,  1536,  1792,  2048,  2560,  3072,  3584,
                                   4096,  5120,  6144,  7168,  8192,  10240, 12288,
                                   14336, 16384, 20480, 24576, 28672, 32768};
    int fewer = 0;
    for (size_t n = MKI_DIRECT_MAX + 1; n <= MKI_SMALL_MAX; n++) {
        unsigned o = 0;
        while (old[o] < n)
            o++;
        size_t now = MKI_PAGE_MAX / mki_class_size[mki_class_of(n)];
        size_t before = MKI_PAGE_MAX / old[o];
        if (now < before && fewer++ < 10)
            printf("  %zu bytes: %zu chunks a 64 KiB page, %zu before\n", n, now, before);
    }
    CHECK_EQ(fewer, 0);
    /* the sizes sqlite3 :memory: asks (bench W7) */
    CHECK_EQ(mki_class_size[mki_class_of(4368)], 4368u);
    CHECK_EQ(mki_class_size[mki_class_of(1032)], 1040u);
    CHECK_EQ(mki_class_size[mki_class_of(4300)], 4368u);
    CHECK_EQ(mki_class_size[mki_class_of(1025)], 1040u);
}

static void test_class_of_every_size(void)
{
    CHECK_EQ(mki_class_of(0), 0u);
    int reported = 0;
    for (size_t n = 1; n <= MKI_SMALL_MAX; n++) {
        unsigned c = mki_class_of(n);
        int ok = c < MKI_NCLASS && mki_class_size[c] >= n &&
                 (c == 0 || mki_class_size[c - 1] < n);
        th_checks++;
        if (!ok && reported++ < 10)
            th_fail(__FILE__, __LINE__, "mki_class_of(%zu) = %u (size %u)", n,
                    c, c < MKI_NCLASS ? mki_class_size[c] : 0);
        else if (!ok)
            th_failures++, th_test_failed++;
        if (n <= MKI_DIRECT_MAX && mki_class_of_direct(n) != c) {
            th_checks++;
            th_fail(__FILE__, __LINE__, "mki_class_of_direct(%zu) = %u, "
                    "mki_class_of = %u", n, mki_class_of_direct(n), c);
        }
    }
    CHECK_EQ(mki_class_of_direct(0), 0u);
}

/* malloc's classes: every request up to 1 KiB gets the smallest class
 * that holds it and is a multiple of 16; on the slow paths, the size that
 * leads mki_class_of to the same class. */
static void test_malloc_classes(void)
{
    for (size_t n = 0; n <= MKI_DIRECT_MAX; n++) {
        unsigned c = mki_class_of_a16(n), want = 0;
        while (mki_class_size[want] < n || mki_class_size[want] % 16)
            want++;
        th_checks++;
        if (c != want)
            th_fail(__FILE__, __LINE__, "mki_class_of_a16(%zu) = %u, not %u",
                    n, c, want);
        th_checks++;
        if (mki_class_of(mki_class_malloc_size(n)) != want)
            th_fail(__FILE__, __LINE__, "mki_class_malloc_size(%zu) = %zu "
                    "lands in class %u, not %u", n, mki_class_malloc_size(n),
                    mki_class_of(mki_class_malloc_size(n)), want);
    }
    CHECK_EQ(mki_class_malloc_size(16), 16u);
    CHECK_EQ(mki_class_malloc_size(17), 32u);
    CHECK_EQ(mki_class_malloc_size(24), 32u);
    CHECK_EQ(mki_class_malloc_size(25), 25u);
    CHECK_EQ(mki_class_malloc_size(100000), 100000u);
}

/* The documented worst case: from 64 bytes to 8 KiB, < 20% of a chunk is
 * waste (above 8 KiB the 64 KiB page sets it: test_counts_above_1k). */
static void test_waste(void)
{
    double worst = 0;
    size_t worst_n = 0;
    for (size_t n = 65; n <= 8192; n++) {
        double cls = mki_class_size[mki_class_of(n)];
        double w = (cls - (double)n) / cls;
        if (w > worst) {
            worst = w;
            worst_n = n;
        }
    }
    printf("  worst waste from 64 B to 8 KiB: %.1f%% at %zu bytes\n", worst * 100,
           worst_n);
    CHECK(worst < 0.20);
    worst = 0;
    for (size_t n = MKI_DIRECT_MAX + 1; n <= 4096; n++) {
        double cls = mki_class_size[mki_class_of(n)];
        double w = (cls - (double)n) / cls;
        if (w > worst) {
            worst = w;
            worst_n = n;
        }
    }
    printf("  worst waste from 1 to 4 KiB: %.1f%% at %zu bytes\n", worst * 100, worst_n);
    CHECK(worst < 0.067);
}

static int is_pow2(uint32_t x) { return x && !(x & (x - 1)); }

static void test_page_units(void)
{
    for (unsigned c = 0; c < MKI_NCLASS; c++) {
        /* a class's pages double from its first, which holds 8 chunks
         * when 64 KiB can (at least one unit), up to 64 KiB */
        uint32_t first = mki_class_page_units(c, 0, 0, 0), prev = 0, u = first;
        size_t chunk = mki_class_size[c];
        th_checks++;
        if ((size_t)first * MKI_UNIT < (chunk * 8 < MKI_PAGE_MAX ? chunk * 8 : chunk) ||
            (first > 1 && (size_t)first * MKI_UNIT / 2 >= chunk * 8 &&
             chunk * 8 <= MKI_PAGE_MAX))
            th_fail(__FILE__, __LINE__, "class %u (%zu B): first page %u units",
                    c, chunk, first);
        for (int k = 0; k < 10; k++) {
            th_checks++;
            if (!is_pow2(u) || u > MKI_PAGE_MAX_UNITS ||
                (size_t)u * MKI_UNIT < chunk || u < prev ||
                (prev && u != (2 * prev < MKI_PAGE_MAX_UNITS ? 2 * prev : MKI_PAGE_MAX_UNITS) &&
                 (size_t)u * MKI_UNIT > chunk * 8))
                th_fail(__FILE__, __LINE__, "class %u (%zu B): after %u units, %u",
                        c, chunk, prev, u);
            prev = u;
            u = mki_class_page_units(c, u, 0, 0);
        }
        /* a class in heavy use gets the biggest pages */
        CHECK_EQ(prev, MKI_PAGE_MAX_UNITS);
    }
    /* a context's first page of a small class is one unit */
    CHECK_EQ(mki_class_page_units(0, 0, 0, 0), 1u);
    CHECK_EQ(mki_class_page_units(mki_class_of(64), 0, 0, 0), 1u);
    CHECK_EQ(mki_class_page_units(mki_class_of(64), 1, 0, 0), 2u);
    /* a page of a class up to 1 KiB is at least a 64th of the small pages
     * the context holds; above 1 KiB, a class's pages follow its own use */
    CHECK_EQ(mki_class_page_units(mki_class_of(64), 0, 1 << 20, 0), 16u);
    for (unsigned c = 0; c < MKI_NCLASS; c++)
        CHECK_EQ(mki_class_page_units(c, 0, (size_t)4 << 20, 0),
                 c < MKI_NCLASS_DIRECT ? MKI_PAGE_MAX_UNITS : mki_class_page_units(c, 0, 0, 0));
    CHECK(mki_class_page_units(mki_class_of(2048), 0, (size_t)4 << 20, 0) < MKI_PAGE_MAX_UNITS);
    /* a floor (mk_ctx_opts.block_size) counts from half of it held on, for
     * the classes up to 1 KiB only */
    const size_t floor = MKI_PAGE_MAX;
    CHECK_EQ(mki_class_page_units(mki_class_of(64), 0, floor / 2 - 1, floor), 1u);
    CHECK_EQ(mki_class_page_units(mki_class_of(64), 0, floor / 2, floor), MKI_PAGE_MAX_UNITS);
    CHECK_EQ(mki_class_page_units(mki_class_of(64), 1, floor / 2, floor), MKI_PAGE_MAX_UNITS);
    CHECK_EQ(mki_class_page_units(mki_class_of(64), 0, 2048, 4096), 4u);
    CHECK_EQ(mki_class_page_units(mki_class_of(2048), 0, floor, floor),
             mki_class_page_units(mki_class_of(2048), 0, floor, 0));
}

int main(void)
{
    RUN(test_table_shape);
    RUN(test_four_per_doubling);
    RUN(test_counts_above_1k);
    RUN(test_class_of_every_size);
    RUN(test_malloc_classes);
    RUN(test_waste);
    RUN(test_page_units);
    return th_done();
}
