/* SPDX-License-Identifier: MIT */
/*
 * api/oom.c - out of memory, by injected OS failure (mki_os_fail_at):
 * the first allocation in a fresh context, a large chunk, a huge chunk, an
 * aligned chunk, a realloc that must move, mk_ctx_new and mk_ctx_on_reset
 * each return NULL (or -1) with errno ENOMEM; the OS counters and the
 * context's figures show nothing leaked; the next call works.  Also the
 * repeat mode (every request fails) and switching injection off.
 *
 * The process holds no other memkit memory, so after deleting every
 * context and mk_trim() no segment is left and the next page must come
 * from the OS (asserted, since the scenarios depend on it).
 */
#include "harness.h"

#include <memkit.h>

#include "internal.h"

typedef struct counters {
    size_t reserved, committed, segments, chunks, blocks, bytes_reserved;
} counters;

static counters take(mk_ctx *ctx)
{
    counters c;
    mk_stats st = {0};
    if (ctx)
        mk_ctx_stats(ctx, &st, 1);
    c.reserved = mki_os_reserved();
    c.committed = mki_os_committed();
    c.segments = mki_segment_count();
    c.chunks = st.chunks;
    c.blocks = st.blocks;
    c.bytes_reserved = st.bytes_reserved;
    return c;
}

static void check_same(const counters *a, const counters *b, const char *what,
                       int line)
{
    th_checks++;
    if (a->reserved != b->reserved || a->committed != b->committed ||
        a->segments != b->segments || a->chunks != b->chunks ||
        a->blocks != b->blocks || a->bytes_reserved != b->bytes_reserved)
        th_fail(__FILE__, line,
                "%s leaked: reserved %zu -> %zu, committed %zu -> %zu, "
                "segments %zu -> %zu, chunks %zu -> %zu, blocks %zu -> %zu",
                what, a->reserved, b->reserved, a->committed, b->committed,
                a->segments, b->segments, a->chunks, b->chunks, a->blocks,
                b->blocks);
}

/* Start from nothing: no segment held (meta memory is never returned and
 * is not part of the figures compared below, except through committed
 * bytes, which a failed call must not change either). */
static void clean_slate(void)
{
    mki_os_fail_at(0, 0);
    mk_trim();
    CHECK_EQ(mki_segment_count(), 0u);
}

/*
 * Make the @n-th OS request and every one after it fail, call @alloc; the
 * call must fail cleanly or, if it needed fewer than @n requests, succeed.
 * Returns 1 if it failed.  The result (when it succeeded) is freed.  (Every
 * one after: a mapping that fails makes memkit give back what it holds
 * idle and try again, page/purge.c, mki_purge_reclaim, which a single
 * failure would not show.)
 */
typedef void *(*alloc_fn)(mk_ctx *ctx);

static int try_failing(mk_ctx *ctx, long n, alloc_fn alloc, const char *what,
                       int line)
{
    counters a = take(ctx);
    mki_os_fail_at(n, 1);
    errno = 0;
    void *p = alloc(ctx);
    int err = errno;
    mki_os_fail_at(0, 0);
    if (p) {
        mk_free(p);
        return 0;
    }
    th_checks++;
    if (err != ENOMEM)
        th_fail(__FILE__, line, "%s with request %ld failing: errno %d (%s), "
                "expected ENOMEM", what, n, err, strerror(err));
    counters b = take(ctx);
    check_same(&a, &b, what, line);
    return 1;
}

/* Fail request 1, 2, 3, ... until the call needs fewer requests than that:
 * every failure must be clean, the first must fail, the call right after a
 * failure must work, and the call must finally succeed.  @prepare (may be
 * NULL) restores the starting state before each try; it may replace the
 * context.  Returns the number of OS requests the call made. */
static long fail_each_request(mk_ctx **ctxp, alloc_fn alloc, const char *what,
                              void (*prepare)(mk_ctx **), int line)
{
    long n;
    for (n = 1; n < 20; n++) {
        if (prepare)
            prepare(ctxp);
        if (!try_failing(*ctxp, n, alloc, what, line))
            break;
        void *p = alloc(*ctxp);
        th_checks++;
        if (!p)
            th_fail(__FILE__, line, "%s: the call after a failure failed",
                    what);
        mk_free(p);
    }
    th_checks++;
    if (n == 1)
        th_fail(__FILE__, line, "%s: made no OS request from a clean slate",
                what);
    if (n == 20)
        th_fail(__FILE__, line, "%s: never succeeded", what);
    return n - 1;
}

static void *alloc_small(mk_ctx *ctx) { return mk_alloc(ctx, 64); }
static void *alloc_mid(mk_ctx *ctx) { return mk_alloc(ctx, 3000); }
static void *alloc_large(mk_ctx *ctx) { return mk_alloc(ctx, 200000); }
static void *alloc_huge(mk_ctx *ctx) { return mk_alloc(ctx, (size_t)5 << 20); }
static void *alloc_zero_huge(mk_ctx *ctx)
{
    return mk_alloc_zero(ctx, (size_t)3 << 20);
}
static void *alloc_aligned_large(mk_ctx *ctx)
{
    return mk_alloc_aligned(ctx, 100, (size_t)64 << 10);
}
static void *alloc_aligned_huge(mk_ctx *ctx)
{
    return mk_alloc_aligned(ctx, 100, (size_t)1 << 20);
}

/* Give back what the context does not use, so that its next page needs
 * the OS (large and huge chunks go back when freed). */
static void trim_slate(mk_ctx **ctxp)
{
    (void)ctxp;
    mk_trim();
}

/* A new context on a clean slate (a small chunk's page stays with its
 * context after the chunk is freed, so the context must go). */
static void fresh_context(mk_ctx **ctxp)
{
    mk_ctx_delete(*ctxp);
    clean_slate();
    *ctxp = mk_ctx_new(NULL, "fresh", MK_GENERAL, NULL);
}

static void test_first_alloc_fresh_context(void)
{
    clean_slate();
    mk_ctx *ctx = mk_ctx_new(NULL, "fresh", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(ctx);
    counters a = take(ctx);
    mki_os_fail_at(1, 0);
    errno = 0;
    void *p = mk_alloc(ctx, 64);
    int err = errno;
    mki_os_fail_at(0, 0);
    CHECK_NULL(p);
    CHECK_EQ(err, ENOMEM);
    counters b = take(ctx);
    check_same(&a, &b, "first small chunk", __LINE__);
    p = mk_alloc(ctx, 64);
    REQUIRE_NOT_NULL(p);
    th_fill(p, 64, 1);
    CHECK_PATTERN(p, 64, 1);
    CHECK_PTR_EQ(mk_ctx_of(p), ctx);
    mk_ctx_delete(ctx);

    /* every request of a first allocation in turn, on a clean slate */
    clean_slate();
    ctx = mk_ctx_new(NULL, "fresh2", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(ctx);
    long reqs = fail_each_request(&ctx, alloc_small, "first small chunk",
                                  fresh_context, __LINE__);
    CHECK_GE(reqs, 2L); /* a segment: reserve, commit */
    mk_ctx_delete(ctx);

    clean_slate();
    ctx = mk_ctx_new(NULL, "fresh3", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(ctx);
    fail_each_request(&ctx, alloc_mid, "first 3000-byte chunk",
                      fresh_context, __LINE__);
    mk_ctx_delete(ctx);
}

static void test_large(void)
{
    clean_slate();
    mk_ctx *ctx = mk_ctx_new(NULL, "large", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(ctx);
    /* a live small chunk: the large one comes from a segment in use */
    char *keep = mk_alloc(ctx, 100);
    REQUIRE_NOT_NULL(keep);
    th_fill(keep, 100, 5);
    fail_each_request(&ctx, alloc_large, "large chunk", trim_slate, __LINE__);
    fail_each_request(&ctx, alloc_aligned_large, "64 KiB-aligned chunk",
                      trim_slate, __LINE__);
    CHECK_PATTERN(keep, 100, 5);
    mk_stats st;
    mk_ctx_stats(ctx, &st, 0);
    CHECK_EQ(st.chunks, 1u);
    mk_ctx_delete(ctx);

    /* and from a clean slate (a new segment) */
    clean_slate();
    ctx = mk_ctx_new(NULL, "large2", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(ctx);
    fail_each_request(&ctx, alloc_large, "large chunk, new segment",
                      trim_slate, __LINE__);
    mk_ctx_delete(ctx);
}

static void test_huge(void)
{
    clean_slate();
    mk_ctx *ctx = mk_ctx_new(NULL, "huge", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(ctx);
    char *keep = mk_alloc(ctx, 1000);
    REQUIRE_NOT_NULL(keep);
    th_fill(keep, 1000, 6);
    /* trim_slate: a freed huge mapping is cached for reuse; without a
     * trim the next attempt would take it and make no OS request */
    long reqs = fail_each_request(&ctx, alloc_huge, "huge chunk", trim_slate,
                                  __LINE__);
    CHECK_GE(reqs, 2L); /* reserve, commit */
    fail_each_request(&ctx, alloc_zero_huge, "zeroed huge chunk", trim_slate,
                      __LINE__);
    fail_each_request(&ctx, alloc_aligned_huge, "1 MiB-aligned chunk",
                      trim_slate, __LINE__);
    CHECK_PATTERN(keep, 1000, 6);
    mk_ctx_delete(ctx);
}

/* A realloc that must move fails: NULL, ENOMEM, the chunk untouched. */
static void test_realloc(void)
{
    clean_slate();
    mk_ctx *ctx = mk_ctx_new(NULL, "realloc", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(ctx);
    char *p = mk_alloc(ctx, 5000);
    REQUIRE_NOT_NULL(p);
    th_fill(p, 5000, 77);
    const size_t to[] = {200000, (size_t)6 << 20};
    for (int i = 0; i < 2; i++) {
        mk_trim();
        counters a = take(ctx);
        mki_os_fail_at(1, 0);
        errno = 0;
        void *q = mk_realloc(p, to[i]);
        int err = errno;
        mki_os_fail_at(0, 0);
        CHECK_NULL(q);
        CHECK_EQ(err, ENOMEM);
        counters b = take(ctx);
        check_same(&a, &b, "realloc", __LINE__);
        CHECK_PTR_EQ(mk_ctx_of(p), ctx);
        CHECK_PATTERN(p, 5000, 77);
    }
    p = mk_realloc(p, (size_t)6 << 20);
    REQUIRE_NOT_NULL(p);
    CHECK_PATTERN(p, 5000, 77);
    mk_ctx_delete(ctx);
}

/* mk_ctx_new needs OS memory only when its bookkeeping store runs out:
 * create contexts with every call failing its first OS request until one
 * does need the OS; that one must fail cleanly. */
static void test_ctx_new(void)
{
    clean_slate();
    enum { MAX = 5000 };
    static mk_ctx *made[MAX];
    int n = 0, failed = 0;
    while (n < MAX) {
        size_t committed = mki_os_committed(), meta = mki_meta_bytes();
        mki_os_fail_at(1, 0);
        errno = 0;
        mk_ctx *c = mk_ctx_new(NULL, "many", MK_GENERAL, NULL);
        int err = errno;
        mki_os_fail_at(0, 0);
        if (!c) {
            failed = 1;
            CHECK_EQ(err, ENOMEM);
            CHECK_EQ(mki_os_committed(), committed);
            CHECK_EQ(mki_meta_bytes(), meta);
            break;
        }
        /* it made no OS request, so the injected failure was not used */
        CHECK_EQ(mki_meta_bytes(), meta);
        made[n++] = c;
    }
    CHECK(failed);
    /* the next one works, and every context made is usable */
    mk_ctx *c = mk_ctx_new(NULL, "after", MK_GENERAL, NULL);
    CHECK_NOT_NULL(c);
    void *p = c ? mk_alloc(c, 10) : NULL;
    CHECK_NOT_NULL(p);
    mk_ctx_delete(c);
    for (int i = 0; i < n; i++)
        mk_ctx_delete(made[i]);
}

static int cb_runs;
static void count_cb(void *arg)
{
    (void)arg;
    cb_runs++;
}

/* mk_ctx_on_reset records are bookkeeping too. */
static void test_on_reset(void)
{
    clean_slate();
    mk_ctx *ctx = mk_ctx_new(NULL, "cb", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(ctx);
    int ok = 0, failed = 0;
    for (int i = 0; i < 100000; i++) {
        mki_os_fail_at(1, 0);
        errno = 0;
        int r = mk_ctx_on_reset(ctx, count_cb, NULL);
        int err = errno;
        mki_os_fail_at(0, 0);
        if (r != 0) {
            failed = 1;
            CHECK_EQ(r, -1);
            CHECK_EQ(err, ENOMEM);
            break;
        }
        ok++;
    }
    CHECK(failed);
    CHECK_EQ(mk_ctx_on_reset(ctx, count_cb, NULL), 0);
    cb_runs = 0;
    mk_ctx_delete(ctx);
    CHECK_EQ(cb_runs, ok + 1); /* the failed one was not registered */
}

/* repeat mode: every request from the n-th on fails, until switched off. */
static void test_repeat(void)
{
    clean_slate();
    mk_ctx *ctx = mk_ctx_new(NULL, "repeat", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(ctx);
    counters a = take(ctx);
    mki_os_fail_at(1, 1);
    for (int round = 0; round < 5; round++) {
        const size_t sizes[] = {16, 3000, 32768, 200000, (size_t)2 << 20,
                                (size_t)50 << 20};
        for (int i = 0; i < 6; i++) {
            errno = 0;
            void *p = mk_alloc(ctx, sizes[i]);
            CHECK_NULL(p);
            CHECK_ERRNO(ENOMEM);
            if (p)
                mk_free(p);
        }
        errno = 0;
        CHECK_NULL(mk_alloc_aligned(ctx, 10, 4096));
        CHECK_ERRNO(ENOMEM);
    }
    /* mk_ctx_new fails once its store needs the OS, and keeps failing */
    static mk_ctx *made[5000];
    int n = 0, fails = 0;
    for (int i = 0; i < 5000 && fails < 3; i++) {
        mk_ctx *c = mk_ctx_new(ctx, "kid", MK_GENERAL, NULL);
        if (c)
            made[n++] = c;
        else
            fails++;
    }
    CHECK_EQ(fails, 3);
    /* the children made work until they need a page */
    if (n > 0) {
        errno = 0;
        CHECK_NULL(mk_alloc(made[0], 8));
        CHECK_ERRNO(ENOMEM);
    }
    counters b = take(ctx);
    CHECK_EQ(b.reserved, a.reserved);
    CHECK_EQ(b.committed, a.committed);
    CHECK_EQ(b.chunks, 0u);
    CHECK_EQ(b.blocks, 0u);

    mki_os_fail_at(0, 0); /* off: everything works again */
    const size_t sizes[] = {16, 3000, 32768, 200000, (size_t)2 << 20};
    for (int i = 0; i < 5; i++) {
        void *p = mk_alloc(ctx, sizes[i]);
        CHECK_NOT_NULL(p);
        if (p) {
            th_fill(p, sizes[i], (uint64_t)i);
            CHECK_PATTERN(p, sizes[i], (uint64_t)i);
        }
        if (n > 0)
            CHECK_NOT_NULL(mk_alloc(made[n - 1], sizes[i]));
    }
    mk_ctx *c = mk_ctx_new(ctx, "after", MK_GENERAL, NULL);
    CHECK_NOT_NULL(c);
    mk_ctx_delete(ctx);

    /* repeat from a later request: the first ones still succeed */
    clean_slate();
    ctx = mk_ctx_new(NULL, "later", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(ctx);
    mki_os_fail_at(3, 1);
    int got = 0;
    for (int i = 0; i < 10; i++) {
        void *p = mk_alloc(ctx, (size_t)2 << 20); /* 2 requests each */
        if (p)
            got++;
    }
    mki_os_fail_at(0, 0);
    CHECK_EQ(got, 1);
    CHECK_NOT_NULL(mk_alloc(ctx, (size_t)2 << 20));
    mk_ctx_delete(ctx);
}

/* After all this, deleting everything returns every byte (but, under
 * Valgrind, the OS page check/instrument.c keeps for good as Memcheck's
 * anchor). */
static void test_nothing_left(void)
{
    clean_slate();
    size_t kept = mki_meta_bytes() + (mki_valgrind_on ? MKI_OS_PAGE : 0);
    CHECK_EQ(mki_os_committed(), kept);
    if (!MK_CONFIG_CHECK) /* the checking build also reserves a registry */
        CHECK_EQ(mki_os_reserved(), kept);
}

int main(void)
{
    RUN(test_first_alloc_fresh_context);
    RUN(test_large);
    RUN(test_huge);
    RUN(test_realloc);
    RUN(test_ctx_new);
    RUN(test_on_reset);
    RUN(test_repeat);
    RUN(test_nothing_left);
    return th_done();
}
