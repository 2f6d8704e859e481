/* SPDX-License-Identifier: MIT */
/*
 * api/limit.c - per-context limits (mk_ctx_set_limit, mk_ctx_limit) and
 * their charges across mk_ctx_set_parent:
 *  - the server case: each request a context with a limit; a runaway
 *    request fails cleanly with ENOMEM (its refusals counted) while the
 *    others go on, and it deletes cleanly;
 *  - every kind, small, large and huge chunks, a huge mk_realloc that
 *    would pass the limit (refused, the chunk intact);
 *  - limits nest (an ancestor's limit refuses a descendant's page), 0
 *    removes a limit, a limit below what is held refuses new pages;
 *  - the charge is exact: it equals the subtree's bytes_reserved after
 *    allocations, frees, resets and deletes (nothing drifts);
 *  - a move that would pass a new ancestor's limit fails and changes
 *    nothing; a move elsewhere carries the charges;
 *  - four threads filling a thread-safe pool in a limited context stop at
 *    the limit together.
 */
#include "harness.h"

#include <errno.h>
#include <memkit.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static size_t reserved(mk_ctx *c)
{
    mk_stats st;
    mk_ctx_stats(c, &st, 1);
    return st.bytes_reserved;
}

static size_t charged(mk_ctx *c)
{
    size_t ch = 0;
    mk_ctx_limit(c, &ch, NULL);
    return ch;
}

static size_t refused(mk_ctx *c)
{
    size_t r = 0;
    mk_ctx_limit(c, NULL, &r);
    return r;
}

static void test_bad_args(void)
{
    errno = 0;
    CHECK_EQ(mk_ctx_set_limit(NULL, MiB), -1);
    CHECK_ERRNO(EINVAL);
    size_t ch = 7, r = 7;
    CHECK_EQ(mk_ctx_limit(NULL, &ch, &r), 0u);
    CHECK_EQ(ch, 0u);
    CHECK_EQ(r, 0u);
}

/* Allocate @n-byte chunks in @c until one fails; returns how many. */
static size_t fill(mk_ctx *c, size_t n)
{
    size_t k = 0;
    for (;;) {
        errno = 0;
        char *p = mk_alloc(c, n);
        if (!p)
            break;
        memset(p, 0x5a, n < 64 ? n : 64);
        k++;
        if (k > 10000000)
            break; /* (the limit did nothing: fail below) */
    }
    return k;
}

static void test_server_requests(void)
{
    mk_ctx *server = mk_ctx_new(NULL, "server", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(server);
    mk_ctx *req[4];
    for (int i = 0; i < 4; i++) {
        req[i] = mk_ctx_new(server, "request", MK_GENERAL, NULL);
        REQUIRE_NOT_NULL(req[i]);
        CHECK_EQ(mk_ctx_set_limit(req[i], MiB), 0);
    }
    /* request 0 runs away */
    size_t got = fill(req[0], 200);
    CHECK_ERRNO(ENOMEM);
    CHECK_GT(got, 1000u);
    CHECK_LT(got, 10000000u);
    CHECK_LE(reserved(req[0]), MiB);
    CHECK_GE(reserved(req[0]), MiB / 2);
    CHECK_EQ(charged(req[0]), reserved(req[0]));
    CHECK_GE(refused(req[0]), 1u);
    /* it stays usable for what fits in what it holds... */
    errno = 0;
    CHECK_NULL(mk_alloc(req[0], 200 * KiB)); /* a large chunk: refused */
    CHECK_ERRNO(ENOMEM);
    /* ...while the others go on */
    for (int i = 1; i < 4; i++) {
        for (int k = 0; k < 1000; k++)
            REQUIRE_NOT_NULL(mk_alloc(req[i], 300));
        CHECK_EQ(refused(req[i]), 0u);
    }
    char buf[512] = "";
    FILE *f = fmemopen(buf, sizeof buf, "w");
    REQUIRE_NOT_NULL(f);
    mk_ctx_stats_print(req[0], f);
    fclose(f);
    CHECK_STR_HAS(buf, "; limit 1048576 bytes, ");
    mk_ctx_delete(req[0]); /* deletes cleanly */
    mk_stats st;
    CHECK_EQ(mk_ctx_stats(server, &st, 1), 0);
    CHECK_EQ(st.contexts, 4u);
    CHECK_EQ(st.chunks, 3000u);
    mk_ctx_delete(server);
}

static void test_every_kind(void)
{
    static const struct { mk_kind kind; mk_ctx_opts opts; size_t n; } cases[] = {
        {MK_GENERAL, {0}, 48},           {MK_GENERAL, {0}, 20000},
        {MK_GENERAL, {0}, 100000},       {MK_GENERAL, {0}, (size_t)3 << 20},
        {MK_SLAB, {.chunk_size = 64}, 64}, {MK_GENERATION, {0}, 100},
        {MK_GENERATION, {0}, 300000},    {MK_BUMP, {0}, 100},
        {MK_BUMP, {0}, 400000},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        mk_ctx *c = mk_ctx_new(NULL, "kind", cases[i].kind, &cases[i].opts);
        REQUIRE_NOT_NULL(c);
        size_t limit = 8 * MiB;
        CHECK_EQ(mk_ctx_set_limit(c, limit), 0);
        size_t got = fill(c, cases[i].n);
        CHECK_LT(got, 10000000u);
        CHECK_LE(reserved(c), limit);
        CHECK_EQ(charged(c), reserved(c));
        CHECK_GE(refused(c), 1u);
        CHECK_GE(got * cases[i].n, limit / 4);
        mk_ctx_reset(c);
        CHECK_EQ(charged(c), reserved(c)); /* (the page a reset keeps) */
        CHECK_GT(fill(c, cases[i].n), 0u); /* room again after the reset */
        mk_ctx_delete(c);
        printf("  kind %d, %zu-byte chunks: %zu before the limit\n",
               (int)cases[i].kind, cases[i].n, got);
    }
}

static void test_huge_realloc(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "grow", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    CHECK_EQ(mk_ctx_set_limit(c, 16 * MiB), 0);
    char *p = mk_alloc(c, 4 * MiB);
    REQUIRE_NOT_NULL(p);
    memset(p, 7, 4 * MiB);
    char *q = mk_realloc(p, 8 * MiB); /* fits */
    REQUIRE_NOT_NULL(q);
    CHECK_EQ(charged(c), reserved(c));
    errno = 0;
    CHECK_NULL(mk_realloc(q, 32 * MiB)); /* would pass it */
    CHECK_ERRNO(ENOMEM);
    CHECK_EQ(q[0], 7);
    CHECK_EQ(q[4 * MiB - 1], 7);
    CHECK_EQ(charged(c), reserved(c));
    mk_free(q);
    CHECK_EQ(charged(c), reserved(c));
    mk_ctx_delete(c);
}

static void test_nesting_and_removal(void)
{
    mk_ctx *top = mk_ctx_new(NULL, "top", MK_GENERAL, NULL);
    mk_ctx *mid = mk_ctx_new(top, "mid", MK_GENERAL, NULL);
    mk_ctx *leaf = mk_ctx_new(mid, "leaf", MK_GENERAL, NULL);
    REQUIRE(top && mid && leaf);
    CHECK_EQ(mk_ctx_set_limit(top, 2 * MiB), 0);
    CHECK_EQ(mk_ctx_set_limit(mid, 64 * MiB), 0); /* the tighter one rules */
    fill(leaf, 1000);
    CHECK_GE(refused(top), 1u);
    CHECK_EQ(refused(mid), 0u);
    CHECK_LE(reserved(top), 2 * MiB);
    CHECK_EQ(charged(top), reserved(top));
    CHECK_EQ(charged(mid), reserved(mid));
    /* 0 removes it: the leaf grows on */
    CHECK_EQ(mk_ctx_set_limit(top, 0), 0);
    CHECK_NOT_NULL(mk_alloc(leaf, 1 << 20));
    CHECK_EQ(mk_ctx_limit(top, NULL, NULL), 0u);
    /* a limit below what is held refuses every new page */
    CHECK_EQ(mk_ctx_set_limit(mid, MiB), 0);
    errno = 0;
    CHECK_NULL(mk_alloc(leaf, 100000));
    CHECK_ERRNO(ENOMEM);
    /* deleting the leaf gives its charge back to mid */
    mk_ctx_delete(leaf);
    CHECK_EQ(charged(mid), reserved(mid));
    CHECK_NOT_NULL(mk_alloc(mid, 1000));
    mk_ctx_delete(top);
}

static void test_reparent(void)
{
    mk_ctx *small = mk_ctx_new(NULL, "small", MK_GENERAL, NULL);
    mk_ctx *big = mk_ctx_new(NULL, "big", MK_GENERAL, NULL);
    mk_ctx *work = mk_ctx_new(NULL, "work", MK_GENERAL, NULL);
    mk_ctx *part = mk_ctx_new(work, "part", MK_GENERAL, NULL);
    REQUIRE(small && big && work && part);
    for (int i = 0; i < 3000; i++)
        REQUIRE_NOT_NULL(mk_alloc(part, 200));
    size_t held = reserved(work);
    CHECK_GT(held, 500 * KiB);
    CHECK_EQ(mk_ctx_set_limit(small, held / 2), 0);
    CHECK_EQ(mk_ctx_set_limit(big, 4 * held), 0);
    errno = 0;
    CHECK_EQ(mk_ctx_set_parent(work, small), -1); /* no room */
    CHECK_ERRNO(ENOMEM);
    CHECK_NULL(mk_ctx_parent(work));
    CHECK_EQ(charged(small), 0u);
    CHECK_EQ(mk_ctx_set_parent(work, big), 0);
    CHECK_EQ(charged(big), held);
    /* within big's tree: part moves up beside work, big keeps the charge */
    size_t part_held = reserved(part);
    CHECK_EQ(mk_ctx_set_limit(work, part_held + held / 8), 0);
    CHECK_EQ(mk_ctx_set_parent(part, big), 0);
    CHECK_EQ(charged(big), held);
    CHECK_EQ(charged(work), reserved(work));
    /* and back under work, whose limit has the room */
    CHECK_EQ(mk_ctx_set_parent(part, work), 0);
    CHECK_EQ(charged(work), reserved(work));
    CHECK_EQ(charged(big), reserved(big));
    mk_ctx_delete(big);
    CHECK_EQ(charged(small), 0u);
    mk_ctx_delete(small);
}

/* ---- threads: a thread-safe pool in a limited context ----------------------- */

static mk_pool *shared;
static _Atomic size_t objects;

static void *filler(void *arg)
{
    (void)arg;
    for (;;) {
        void *o = mk_pool_alloc(shared);
        if (!o)
            break;
        memset(o, 1, 48);
        atomic_fetch_add(&objects, 1);
    }
    return NULL;
}

static void test_threads(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "pool-home", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    CHECK_EQ(mk_ctx_set_limit(c, 4 * MiB), 0);
    shared = mk_pool_new_in(c, "objs", 48, 0, MK_POOL_THREADSAFE);
    REQUIRE_NOT_NULL(shared);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        REQUIRE(pthread_create(&t[i], NULL, filler, NULL) == 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    CHECK_LE(charged(c), 4 * MiB);
    CHECK_GE(refused(c), 4u);
    CHECK_GE(atomic_load(&objects) * 48, MiB);
    CHECK_EQ(charged(c), reserved(c));
    int was = mk_silence_errors(1); /* (its objects are left on purpose) */
    mk_pool_delete(shared);
    mk_silence_errors(was);
    CHECK_EQ(charged(c), reserved(c));
    mk_ctx_delete(c);
}

int main(void)
{
    RUN(test_bad_args);
    RUN(test_server_requests);
    RUN(test_every_kind);
    RUN(test_huge_realloc);
    RUN(test_nesting_and_removal);
    RUN(test_reparent);
    RUN(test_threads);
    return th_done();
}
