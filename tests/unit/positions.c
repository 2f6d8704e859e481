/* SPDX-License-Identifier: MIT */
/*
 * unit/positions.c - the position test of small pages (page/page.h,
 * mki_page_pos_*): "is this address the start of a chunk the page has
 * handed out?" with one multiply, on which every free of the release build
 * relies to refuse an interior pointer.
 *
 * What it proves, for every size class and every SLAB slot size from 16 to
 * 64 KiB in steps of 8 (a slab slot is a multiple of its alignment, at
 * least 8): in a page of 64 KiB (the largest page that keeps the test; a
 * bigger page has pos_magic 0) and with `extend` after 0, 1, some and all
 * of its chunks, mki_page_is_chunk and mki_page_is_chunk_exact say yes for
 * exactly the offsets k * size below extend, for every offset of the page
 * (and the exact test no for offsets past the page); mki_page_pos_grow
 * moves the limit by one chunk; a page above 64 KiB falls back to the
 * division.  A page's memory is never touched: only addresses are formed.
 */
#include "harness.h"

#include "page/page.h"
#include "page/sizeclass.h"

static char *const base = (char *)(uintptr_t)0x7f0000400000ull;

/* Every offset of a @bytes page of @size chunks, @n of them handed out. */
static int check_page(uint32_t size, size_t bytes, uint32_t n)
{
    mki_page pg;
    memset(&pg, 0, sizeof pg);
    pg.kind = MKI_PAGE_SMALL;
    pg.chunk_size = size;
    pg.size = bytes;
    pg.start = base;
    pg.capacity = (uint32_t)(bytes / size);
    pg.end = base + (size_t)pg.capacity * size;
    pg.extend = base + (size_t)n * size;
    mki_page_pos_init(&pg);
    int bad = 0;
    for (size_t off = 0; off < bytes + 64 && bad < 3; off++) {
        int want = off < bytes && off % size == 0 && off / size < n;
        int exact = mki_page_is_chunk_exact(&pg, base + off);
        int fast = off < bytes ? mki_page_is_chunk(&pg, base + off) : want;
        if (bytes > MKI_PAGE_MAX)
            fast = want; /* (the inline test is not for such pages) */
        if (exact != want || fast != want) {
            th_fail(__FILE__, __LINE__, "size %u, %zu-byte page, %u handed out: "
                    "offset %zu: inline %d exact %d, expected %d", size, bytes,
                    n, off, fast, exact, want);
            bad++;
        }
        th_checks++;
    }
    return bad;
}

static void check_size(uint32_t size)
{
    size_t bytes = MKI_PAGE_MAX;
    if (size > bytes)
        return;
    uint32_t cap = (uint32_t)(bytes / size);
    uint32_t ns[] = {0, 1, cap / 2, cap > 0 ? cap - 1 : 0, cap};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        if (check_page(size, bytes, ns[i]))
            return;
}

static void test_every_class(void)
{
    for (unsigned c = 0; c < MKI_NCLASS; c++)
        check_size(mki_class_size[c]);
}

static void test_every_slab_slot(void)
{
    /* (slow to walk every offset for all 8190 sizes: every size up to 1 KiB,
     * then a spread, always including the powers of two and their
     * neighbours) */
    for (uint32_t s = 16; s <= 1024; s += 8)
        check_size(s);
    for (uint32_t s = 1032; s <= MKI_PAGE_MAX; s += 8 * 97)
        check_size(s);
    for (uint32_t p = 2048; p <= MKI_PAGE_MAX; p *= 2) {
        check_size(p - 8);
        check_size(p);
        check_size(p + 8 <= MKI_PAGE_MAX ? p + 8 : p);
    }
}

static void test_grow(void)
{
    mki_page pg;
    memset(&pg, 0, sizeof pg);
    pg.kind = MKI_PAGE_SMALL;
    pg.chunk_size = 48;
    pg.size = 4096;
    pg.start = pg.extend = base;
    pg.capacity = 4096 / 48;
    pg.end = base + pg.capacity * 48;
    mki_page_pos_init(&pg);
    CHECK(!mki_page_is_chunk(&pg, base));
    for (uint32_t k = 0; k < 10; k++) {
        pg.extend += 48;
        mki_page_pos_grow(&pg, 1);
        CHECK(mki_page_is_chunk(&pg, base + k * 48));
        CHECK(!mki_page_is_chunk(&pg, base + (k + 1) * 48));
        CHECK(!mki_page_is_chunk(&pg, base + k * 48 + 16));
    }
    /* a run of chunks at once (the refill's, general.c): 10 .. 16 */
    pg.extend += 7 * 48;
    mki_page_pos_grow(&pg, 7);
    for (uint32_t k = 10; k < 17; k++) {
        CHECK(mki_page_is_chunk(&pg, base + k * 48));
        CHECK(!mki_page_is_chunk(&pg, base + k * 48 + 8));
    }
    CHECK(!mki_page_is_chunk(&pg, base + 17 * 48));
}

static void test_big_page_divides(void)
{
    /* a slab page of 3 chunks of 40 KiB: no multiply, the division */
    CHECK_EQ(check_page(40960, 3 * 40960, 2), 0);
}

int main(void)
{
    RUN(test_every_class);
    RUN(test_every_slab_slot);
    RUN(test_grow);
    RUN(test_big_page_divides);
    return th_done();
}
