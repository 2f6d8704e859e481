/* SPDX-License-Identifier: MIT */
/*
 * api/general_pages.c - the size of a GENERAL context's pages of small
 * chunks, and mk_ctx_opts.block_size, which sets a floor for them:
 *   - opts: block_size below 1 KiB or above 64 KiB is EINVAL; 1 KiB ..
 *     64 KiB is taken (rounded up to a power of two);
 *   - by default a class's first page is small (eight chunks, at least
 *     1 KiB), also after the context holds 64 KiB;
 *   - with a floor, the first pages are as small until the context holds
 *     half the floor in small pages; from then on each new page of a class
 *     up to 1 KiB is the floor (64 KiB, and 4 KiB for a block_size of
 *     3,000), and a class above 1 KiB keeps its own sizing (eight chunks
 *     of 2 KiB: below 64 KiB);
 *   - a thread heap (mk_ctx_current in a new thread) has a 64 KiB floor.
 * The figures are bytes_reserved before and after an allocation that needs
 * a new page (mk_ctx_stats), so they hold in instrumented builds too, whose
 * chunks are larger but whose first pages are as small.
 */
#include "harness.h"

#include <memkit.h>
#include <pthread.h>

static size_t reserved(const mk_ctx *c)
{
    mk_stats st;
    memset(&st, 0xee, sizeof st);
    CHECK_EQ(mk_ctx_stats(c, &st, 0), 0);
    return st.bytes_reserved;
}

/* Bytes of the page that allocating @size in @c took (0: none). */
static size_t page_taken(mk_ctx *c, size_t size)
{
    size_t before = reserved(c);
    void *p = mk_alloc(c, size);
    CHECK_NOT_NULL(p);
    return reserved(c) - before;
}

static mk_ctx *general_new(size_t block)
{
    mk_ctx_opts o = {.block_size = block};
    return mk_ctx_new(NULL, "pages", MK_GENERAL, &o);
}

static void test_opts(void)
{
    const size_t bad[] = {1, 512, 1023, 65537, (size_t)1 << 20};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        mk_ctx *c = general_new(bad[i]);
        CHECK_NULL(c);
        CHECK_ERRNO(EINVAL);
        if (c)
            mk_ctx_delete(c);
    }
    const size_t good[] = {1024, 3000, 4096, 65536};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        mk_ctx *c = general_new(good[i]);
        CHECK_NOT_NULL(c);
        if (c) {
            CHECK_NOT_NULL(mk_alloc(c, 100));
            mk_ctx_delete(c);
        }
    }
}

/* 16 bytes first, then 8 KiB chunks (whose page is 64 KiB anyway): what
 * the next class's first page is, once the context holds 64 KiB. */
static void first_then_after(mk_ctx *c, size_t *first, size_t *after)
{
    *first = page_taken(c, 16);
    CHECK_EQ(page_taken(c, 8192), (size_t)65536);
    *after = page_taken(c, 48);
}

static void test_default_pages_small(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "default", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    size_t first, after;
    first_then_after(c, &first, &after);
    CHECK_GT(first, (size_t)0);
    CHECK_LT(first, (size_t)4096);
    CHECK_GT(after, (size_t)0);
    CHECK_LT(after, (size_t)4096);
    mk_ctx_delete(c);
}

static void test_floor_64k(void)
{
    mk_ctx *c = general_new(65536);
    REQUIRE_NOT_NULL(c);
    size_t first, after;
    first_then_after(c, &first, &after);
    CHECK_GT(first, (size_t)0);
    CHECK_LT(first, (size_t)4096); /* below half the floor: small */
    CHECK_EQ(after, (size_t)65536);
    size_t above = page_taken(c, 2000); /* (a class above 1 KiB) */
    CHECK_GT(above, (size_t)0);
    CHECK_LT(above, (size_t)65536);
    /* and a class that outgrows its small page gets the floor next */
    size_t grown = 0;
    for (int i = 0; i < 4096 && grown == 0; i++)
        grown = page_taken(c, 16);
    CHECK_EQ(grown, (size_t)65536);
    mk_ctx_delete(c);
}

static void test_floor_rounded(void)
{
    mk_ctx *c = general_new(3000); /* a 4 KiB floor from 2 KiB held on */
    REQUIRE_NOT_NULL(c);
    size_t held = 0, last = 0;
    const size_t sizes[] = {16, 32, 48, 64, 80, 96, 112, 128};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t before = reserved(c);
        size_t got = page_taken(c, sizes[i]);
        if (got == 0)
            continue; /* (an instrumented build's class already held) */
        if (before >= 2048)
            CHECK_GE(got, (size_t)4096);
        else
            CHECK_LT(got, (size_t)4096);
        held = before + got;
        last = got;
    }
    CHECK_GE(held, (size_t)2048 + 4096); /* the floor was reached */
    CHECK_GE(last, (size_t)4096);
    mk_ctx_delete(c);
}

static void *heap_thread(void *arg)
{
    size_t *out = arg;
    mk_ctx *h = mk_ctx_current();
    REQUIRE_RET(h != NULL, NULL);
    first_then_after(h, &out[0], &out[1]);
    return NULL;
}

static void test_thread_heap_floor(void)
{
    size_t got[2] = {0, 0};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, heap_thread, got) == 0);
    pthread_join(t, NULL);
    CHECK_LT(got[0], (size_t)4096);
    CHECK_EQ(got[1], (size_t)65536);
}

int main(void)
{
    RUN(test_opts);
    RUN(test_default_pages_small);
    RUN(test_floor_64k);
    RUN(test_floor_rounded);
    RUN(test_thread_heap_floor);
    return th_done();
}
