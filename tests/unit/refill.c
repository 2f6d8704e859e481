/* SPDX-License-Identifier: MIT */
/*
 * unit/refill.c - the run of never-used chunks that GENERAL's refill hands
 * out (ctx/general.c, extend_run; malloc's path and profiled contexts take
 * it, mk_alloc hands them out one at a time inline): the first chunk goes
 * to the caller, and the ones after it that start in the same OS page (32
 * in all at most) go on the free list in address order, each with its
 * double-free key, as a free leaves a chunk.  So the position test passes
 * for them and fails past the run; a free of one of them before it is
 * handed out is reported as a double free and changes nothing; the next
 * allocations pop them in order; and a page whose current chunk ends its
 * OS page threads nothing.
 */
#include "harness.h"

#include <memkit.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"
#include "reports.h"


static void test_run(size_t size)
{
    mk_ctx *c = mk_ctx_new(NULL, "run", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    if (c->fast_kind != MK_GENERAL) {
        /* instrumented (ASan, Valgrind): no refill, no runs; its chunks
         * are checked by a bitmap (check/instrument.c) */
        printf("  instrumented context: no runs to test\n");
        mk_ctx_delete(c);
        return;
    }
    char *first = mk_alloc(c, size); /* the page's first: the slow path */
    REQUIRE_NOT_NULL(first);
    mki_page *pg = mki_page_of(first);
    REQUIRE(pg && pg->kind == MKI_PAGE_SMALL && pg->free == NULL);
    size_t sz = pg->chunk_size;
    char *b = mki_general_refill((mki_general *)c, pg, size);
    CHECK(b == first + sz);
    /* the chunks after b that start in b's OS page, at most 31 */
    uintptr_t os_end = ((uintptr_t)b | (MKI_OS_PAGE - 1)) + 1;
    size_t want = 0;
    for (char *q = b + sz; q + sz <= pg->end && (uintptr_t)q + 16 <= os_end && want < 31;
         q += sz)
        want++;
    size_t n = 0;
    char *expect = b + sz;
    for (char *q = pg->free; q; q = *(char **)q, expect += sz, n++) {
        CHECK(q == expect);
        CHECK(mki_page_chunk_freed(pg, q));
        CHECK(mki_page_is_chunk(pg, q));
    }
    printf("  %zu-byte chunks: %zu threaded after the second\n", sz, n);
    CHECK_EQ(n, want);
    CHECK(pg->extend == b + (n + 1) * sz);
    CHECK(!mki_page_is_chunk(pg, pg->extend));
    CHECK_EQ(pg->used, 3u); /* first, b, and the current page's pin */
    if (n > 0) {
        /* a free of one of them is a double free, and nothing moves */
        char *q = b + sz, *head = pg->free;
        th_reports_begin();
        mk_free(q);
        CHECK_EQ(th_reports_end(), 1);
        CHECK(strstr(th_report, "double free of") != NULL);
        CHECK(pg->free == head);
        CHECK_EQ(pg->used, 3u);
        /* the next allocations take them in order */
        for (size_t k = 1; k <= n; k++)
            CHECK(mk_alloc(c, size) == b + k * sz);
        CHECK(pg->free == NULL);
    }
    mk_ctx_delete(c);
}

static void test_runs(void)
{
    static const size_t sizes[] = {16, 48, 100, 512, 1000, 3000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        test_run(sizes[i]);
}

int main(void)
{
    RUN(test_runs);
    return th_done();
}
