/* SPDX-License-Identifier: MIT */
/*
 * api/rest.c - the pages a GENERAL reset leaves resting (ctx/general.c,
 * page/segment.c): past the 1 MiB a reset keeps, the pages that served the
 * round stay the context's, counted in mk_stats.bytes_resting; the next
 * round takes them before it cuts a page; its reset gives back those it
 * did not take; the purge (mk_trim here) decommits them while they rest,
 * and a round after that finds them committed again with its data intact;
 * a free of a chunk from before the reset is reported; a resting page whose
 * memory cannot be committed again goes back, and the allocation fails
 * cleanly; a context under a limit rests nothing; delete and mk_ctx_trim give them all back; and a
 * purge running beside a thread that wakes and rests pages loses nothing.
 * Instrumented contexts (ASan, Valgrind) keep the simple rule: the test
 * says so and checks that they rest nothing.
 */
#include "harness.h"

#include <errno.h>
#include <memkit.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "reports.h"

enum { CHUNK = 1000, MAXN = 16384 };
static void *ps[MAXN];

static mk_stats stats(mk_ctx *c)
{
    mk_stats st;
    CHECK_EQ(mk_ctx_stats(c, &st, 0), 0);
    return st;
}

/* @n chunks of CHUNK bytes in @c, each filled from @seed. */
static void fill(mk_ctx *c, int n, uint64_t seed)
{
    for (int i = 0; i < n; i++) {
        ps[i] = mk_alloc(c, CHUNK);
        REQUIRE_NOT_NULL(ps[i]);
        th_fill(ps[i], CHUNK, seed + (uint64_t)i);
    }
}

static void check(int n, uint64_t seed)
{
    for (int i = 0; i < n; i++)
        CHECK_PATTERN(ps[i], CHUNK, seed + (uint64_t)i);
}

/* A plain context rests pages; an instrumented one (every context of an
 * ASan or Valgrind run) does not, and the other tests stop there. */
static int rests(mk_ctx *c)
{
    return c->fast_kind == MK_GENERAL;
}

/* A new GENERAL context named @name whose resets rest pages; NULL (none
 * left) when contexts are instrumented, which the tests that need resting
 * pages then skip (test_rest_and_wake checks what they do instead). */
static mk_ctx *resting_ctx(const char *name)
{
    mk_ctx *c = mk_ctx_new(NULL, name, MK_GENERAL, NULL);
    REQUIRE_RET(c != NULL, NULL);
    if (!rests(c)) {
        mk_ctx_delete(c);
        return NULL;
    }
    return c;
}

/* Bytes of the pages contexts hold, not resting (segments come and go
 * with their headers: not counted). */
static size_t page_bytes(void)
{
    mki_malloc_figures f;
    memset(&f, 0, sizeof f);
    mki_segment_figures(&f);
    return f.page_bytes;
}

static void test_rest_and_wake(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "rest", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    int n = 8192; /* some 8 MiB */
    fill(c, n, 1);
    mk_stats full = stats(c);
    mk_ctx_reset(c);
    mk_stats st = stats(c);
    CHECK_EQ(st.chunks, 0u);
    CHECK_EQ(st.bytes_used, 0u);
    if (!rests(c)) {
        printf("  instrumented context: nothing rests\n");
        CHECK_EQ(st.bytes_resting, 0u);
        CHECK_LE(st.bytes_reserved, (size_t)1 << 20);
        mk_ctx_delete(c);
        return;
    }
    CHECK_LE(st.bytes_reserved - st.bytes_resting, (size_t)1 << 20);
    CHECK_GT(st.bytes_resting, (size_t)6 << 20);
    CHECK_EQ(st.bytes_reserved, full.bytes_reserved); /* nothing went back */
    CHECK_LE(st.bytes_resting, st.bytes_free);
    /* the same round again: it takes the resting pages (a page or two
     * more: the first round's pages grew from 1 KiB, the second's are the
     * size the kept megabyte asks for: sizeclass.c) */
    size_t cuts = mki_segment_cuts();
    fill(c, n, 2);
    CHECK_LE(mki_segment_cuts(), cuts + 2);
    check(n, 2);
    st = stats(c);
    CHECK_EQ(st.bytes_resting, 0u); /* all woken, or given back */
    CHECK_LE(st.bytes_reserved, full.bytes_reserved + ((size_t)128 << 10));
    mk_ctx_reset(c);
    /* and from then on, every page a round needs is kept or resting */
    size_t held = stats(c).bytes_reserved;
    cuts = mki_segment_cuts();
    fill(c, n, 3);
    CHECK_EQ(mki_segment_cuts(), cuts);
    check(n, 3);
    CHECK_EQ(stats(c).bytes_reserved, held);
    mk_ctx_reset(c);
    /* the figures say so, in print and JSON */
    char buf[4096];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    REQUIRE_NOT_NULL(f);
    mk_ctx_stats_print(c, f);
    fclose(f);
    char want[64];
    snprintf(want, sizeof want, "(%zu bytes resting)", stats(c).bytes_resting);
    CHECK(strstr(buf, want) != NULL);
    f = fmemopen(buf, sizeof buf, "w");
    REQUIRE_NOT_NULL(f);
    CHECK_EQ(mk_ctx_stats_json(c, f), 0);
    fclose(f);
    snprintf(want, sizeof want, "\"bytes_resting\":%zu", stats(c).bytes_resting);
    CHECK(strstr(buf, want) != NULL);
    /* a smaller round: the pages it did not wake go back at its reset */
    fill(c, 2048, 4); /* some 2 MiB */
    mk_ctx_reset(c);
    st = stats(c);
    CHECK_LE(st.bytes_reserved, (size_t)3 << 20);
    CHECK_LE(st.bytes_resting, (size_t)2 << 20);
    /* mk_ctx_trim gives back the kept and the resting pages */
    mk_ctx_trim(c);
    st = stats(c);
    CHECK_EQ(st.bytes_resting, 0u);
    CHECK_EQ(st.bytes_reserved, 0u);
    mk_ctx_delete(c);
}

/* The purge takes a resting page's memory and leaves the page with its
 * context; the next round finds it committed again. */
static void test_purged_while_resting(void)
{
    mk_ctx *c = resting_ctx("purged");
    if (!c)
        return;
    int n = 8192;
    fill(c, n, 4);
    mk_ctx_reset(c);
    mk_trim(); /* (whatever the delay) */
    size_t c0 = mki_os_committed();
    fill(c, n, 5);
    mk_ctx_reset(c);
    mk_stats st = stats(c);
    REQUIRE(st.bytes_resting > (size_t)6 << 20);
    size_t c1 = mki_os_committed();
    CHECK_GE(c1, c0); /* (nothing was decommitted by the round) */
    size_t cuts = mki_segment_cuts();
    size_t gave = mk_trim();
    size_t c2 = mki_os_committed();
    printf("  resting %zu bytes; committed %zu -> %zu (mk_trim: %zu)\n",
           st.bytes_resting, c1, c2, gave);
    /* the resting pages' OS pages, less those they share with kept ones */
    CHECK_GE(c1 - c2, st.bytes_resting - ((size_t)64 << 10));
    st = stats(c);
    CHECK_GT(st.bytes_resting, (size_t)6 << 20); /* still the context's */
    fill(c, n, 6);
    CHECK_EQ(mki_segment_cuts(), cuts); /* woken, not cut */
    check(n, 6);
    CHECK_GE(mki_os_committed(), c2 + st.bytes_resting);
    mk_ctx_delete(c);
}

/* A chunk of the last round in a page that rests now: its free is
 * reported (no position of a resting page is a chunk's), and so is its
 * free after the purge took the page's memory. */
static void test_stale_free_reported(void)
{
    mk_ctx *c = resting_ctx("stale");
    if (!c)
        return;
    int n = 4096;
    fill(c, n, 7);
    mk_ctx_reset(c);
    void *stale = NULL;
    for (int i = 0; i < n && !stale; i++)
        if (mki_page_of(ps[i])->flags & MKI_PF_REST)
            stale = ps[i];
    REQUIRE_NOT_NULL(stale);
    for (int round = 0; round < 2; round++) {
        th_reports_begin();
        mk_free(stale);
        CHECK_EQ(th_reports_end(), 1);
        CHECK(strstr(th_report, "mk_free(): invalid pointer") != NULL);
        CHECK(strstr(th_report, "\"stale\"") != NULL);
        if (round == 0)
            printf("  %s\n", th_report);
        mk_trim(); /* decommitted: the same report */
    }
    /* the page wakes as a page with nothing handed out */
    fill(c, n, 8);
    check(n, 8);
    mk_ctx_delete(c);
}

/* A context under a limit, its own or an ancestor's, rests nothing (its
 * resting pages would count against its other pages and its siblings'). */
static void test_limited_rests_nothing(void)
{
    mk_ctx *top = mk_ctx_new(NULL, "top", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(top);
    REQUIRE(mk_ctx_set_limit(top, (size_t)64 << 20) == 0);
    mk_ctx *c = mk_ctx_new(top, "under", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    fill(c, 4096, 9);
    mk_ctx_reset(c);
    mk_stats st = stats(c);
    CHECK_EQ(st.bytes_resting, 0u);
    CHECK_LE(st.bytes_reserved, (size_t)1 << 20);
    mk_ctx_delete(top);
}

/* A resting page the purge took whose memory cannot be committed again
 * (OS failures injected): it goes back, and so does every other one, and
 * the allocation fails with ENOMEM when no page can be had; with the OS
 * answering again, the context works on. */
static void test_wake_commit_fails(void)
{
    size_t pages0 = page_bytes();
    mk_ctx *c = resting_ctx("oom");
    if (!c)
        return;
    int n = 8192;
    fill(c, n, 20);
    mk_ctx_reset(c);
    fill(c, n, 21);
    mk_ctx_reset(c);
    mk_trim(); /* the resting pages' memory goes */
    mk_stats st = stats(c);
    REQUIRE(st.bytes_resting > (size_t)6 << 20);
    size_t kept = st.bytes_reserved - st.bytes_resting;
    mki_os_fail_at(1, 1); /* every OS request fails from now */
    int got = 0;
    void *p;
    errno = 0;
    while ((p = mk_alloc(c, CHUNK)) != NULL && got < n)
        ps[got++] = p;
    int err = errno;
    mki_os_fail_at(0, 0);
    CHECK(p == NULL);
    CHECK_EQ(err, ENOMEM);
    /* the kept pages served what they hold; no resting page is left */
    CHECK_GT(got, 0);
    CHECK_LE((size_t)got * CHUNK, kept);
    st = stats(c);
    CHECK_EQ(st.bytes_resting, 0u);
    CHECK_EQ(st.bytes_reserved, kept);
    fill(c, n, 22); /* and it works on */
    check(n, 22);
    mk_ctx_delete(c);
    CHECK_EQ(page_bytes(), pages0);
}

/* Delete gives every resting page back: the pages in use are as before. */
static void test_delete_gives_back(void)
{
    size_t live0 = page_bytes();
    mk_ctx *c = mk_ctx_new(NULL, "gone", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    fill(c, 8192, 10);
    mk_ctx_reset(c);
    fill(c, 1024, 11); /* some woken, the others still resting */
    mk_ctx_delete(c);
    CHECK_EQ(page_bytes(), live0);
}

/* One thread resets and refills a context round after round, the rounds
 * of changing sizes; another purges all the while (mk_trim), so that some
 * wakes and rests meet a purge that holds the pages.  Every round's data
 * must be intact, and the end must hold what the start held. */
static atomic_int stop;

static void *purger(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop))
        mk_trim();
    return NULL;
}

static void test_purge_beside(void)
{
    size_t live0 = page_bytes();
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, purger, NULL) == 0);
    mk_ctx *c = mk_ctx_new(NULL, "beside", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    th_rng r = {12};
    for (int round = 0; round < 60; round++) {
        int n = 1024 + (int)th_below(&r, 6144);
        fill(c, n, 100 * (uint64_t)round);
        check(n, 100 * (uint64_t)round);
        mk_ctx_reset(c);
    }
    atomic_store(&stop, 1);
    pthread_join(t, NULL);
    mk_ctx_delete(c);
    CHECK_EQ(page_bytes(), live0);
}

int main(void)
{
    RUN(test_rest_and_wake);
    RUN(test_purged_while_resting);
    RUN(test_stale_free_reported);
    RUN(test_wake_commit_fails);
    RUN(test_limited_rests_nothing);
    RUN(test_delete_gives_back);
    RUN(test_purge_beside);
    return th_done();
}
