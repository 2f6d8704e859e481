/* SPDX-License-Identifier: MIT */
/*
 * api/remote_stats.c - one rule for statistics of chunks freed by another
 * thread: a chunk counts as freed as soon as mk_free
 * returns, whichever thread called it, for every kind and every size, in
 * the release and in the checking build (api_remote_stats and
 * api_remote_stats_check run this file on each).  Before the fix the
 * checking build counted a small GENERAL chunk as freed but a large one, a
 * huge one and any GENERATION chunk as live (a GENERATION chunk showed
 * chunks=1, bytes_used=0); the release build counted them all as live.
 *
 * For each case, two contexts run the same steps: allocate a chunk to keep
 * and a chunk to free; one context has its owner free it, the other has
 * another thread free it.  Their figures must then be the same, and count
 * one chunk.  (GENERATION counts a block's bytes up to its fill point, by
 * its own documented rule: the same in both contexts.)
 */
#include "harness.h"

#include <memkit.h>
#include <pthread.h>

static void *free_it(void *p)
{
    mk_free(p);
    return NULL;
}

static void free_elsewhere(void *p)
{
    pthread_t t;
    if (pthread_create(&t, NULL, free_it, p) != 0) {
        th_fail(__FILE__, __LINE__, "pthread_create");
        return;
    }
    pthread_join(t, NULL);
}

typedef struct kcase {
    const char *what;
    mk_kind kind;
    size_t chunk_size; /* MK_SLAB */
    size_t size;
} kcase;

static mk_ctx *make(const kcase *k, mk_ctx *parent)
{
    mk_ctx_opts o = {.chunk_size = k->chunk_size};
    return mk_ctx_new(parent, k->what, k->kind, k->kind == MK_SLAB ? &o : NULL);
}

/* Allocate a chunk to keep and one to free in @c; free the second by the
 * owner or by another thread; return the one kept. */
static void *keep_one(mk_ctx *c, const kcase *k, int elsewhere)
{
    void *keep = mk_alloc(c, k->size), *gone = mk_alloc(c, k->size);
    if (!keep || !gone) {
        th_fail(__FILE__, __LINE__, "%s: allocation failed", k->what);
        return keep;
    }
    memset(keep, 1, k->size);
    memset(gone, 2, k->size);
    if (elsewhere)
        free_elsewhere(gone);
    else
        mk_free(gone);
    return keep;
}

static void same(const kcase *k, const mk_stats *a, const mk_stats *b,
                 int line)
{
    th_checks++;
    if (a->chunks != 1 || b->chunks != 1 || a->bytes_used != b->bytes_used ||
        a->blocks != b->blocks || a->bytes_reserved != b->bytes_reserved ||
        b->bytes_free != b->bytes_reserved - b->bytes_used)
        th_fail(__FILE__, line, "%s: owner free: chunks %zu used %zu blocks "
                "%zu reserved %zu; free by another thread: chunks %zu used "
                "%zu blocks %zu reserved %zu", k->what, a->chunks,
                a->bytes_used, a->blocks, a->bytes_reserved, b->chunks,
                b->bytes_used, b->blocks, b->bytes_reserved);
}

static void run(const kcase *k)
{
    mk_ctx *own = make(k, NULL), *other = make(k, NULL);
    REQUIRE(own && other);
    void *a = keep_one(own, k, 0), *b = keep_one(other, k, 1);
    mk_stats sa, sb;
    CHECK_EQ(mk_ctx_stats(own, &sa, 0), 0);
    CHECK_EQ(mk_ctx_stats(other, &sb, 0), 0);
    same(k, &sa, &sb, __LINE__);
    mk_free(a);
    mk_free(b);
    CHECK_EQ(mk_ctx_stats(other, &sb, 0), 0);
    CHECK_EQ(sb.chunks, 0u);
    CHECK_EQ(sb.bytes_used, 0u);
    mk_ctx_delete(own);
    mk_ctx_delete(other);

    /* the same through the recursive walk of a parent */
    mk_ctx *p1 = mk_ctx_new(NULL, "parent", MK_GENERAL, NULL);
    mk_ctx *p2 = mk_ctx_new(NULL, "parent", MK_GENERAL, NULL);
    REQUIRE(p1 && p2);
    mk_ctx *c1 = make(k, p1), *c2 = make(k, p2);
    REQUIRE(c1 && c2);
    keep_one(c1, k, 0);
    keep_one(c2, k, 1);
    CHECK_EQ(mk_ctx_stats(p1, &sa, 1), 0);
    CHECK_EQ(mk_ctx_stats(p2, &sb, 1), 0);
    same(k, &sa, &sb, __LINE__);
    mk_ctx_delete(p1);
    mk_ctx_delete(p2);
}

static void test_every_kind_and_size(void)
{
    static const kcase cases[] = {
        {"general small", MK_GENERAL, 0, 100},
        {"general 2 KiB", MK_GENERAL, 0, 2000},
        {"general large", MK_GENERAL, 0, 40000},
        {"general 1 MiB", MK_GENERAL, 0, (size_t)1 << 20},
        {"general huge", MK_GENERAL, 0, (size_t)3 << 20},
        {"generation small", MK_GENERATION, 0, 100},
        {"generation large", MK_GENERATION, 0, 200000},
        {"slab", MK_SLAB, 48, 48},
        {"slab large", MK_SLAB, 100000, 100000},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run(&cases[i]);
}

/* A thread-safe pool: the calling thread's slab follows the same rule. */
static void *pool_free_it(void *arg)
{
    void **pv = arg;
    mk_pool_free(pv[0], pv[1]);
    return NULL;
}

static void test_pool(void)
{
    static const unsigned flags[] = {0, MK_POOL_THREADSAFE};
    for (int f = 0; f < 2; f++) {
        mk_pool *pool = mk_pool_new("remote", 40, 0, flags[f]);
        REQUIRE_NOT_NULL(pool);
        void *keep = mk_pool_alloc(pool), *gone = mk_pool_alloc(pool);
        REQUIRE(keep && gone);
        void *pv[2] = {pool, gone};
        pthread_t t;
        REQUIRE(pthread_create(&t, NULL, pool_free_it, pv) == 0);
        pthread_join(t, NULL);
        mk_stats st;
        CHECK_EQ(mk_pool_stats(pool, &st), 0);
        CHECK_EQ(st.chunks, 1u);
        mk_pool_free(pool, keep);
        CHECK_EQ(mk_pool_stats(pool, &st), 0);
        CHECK_EQ(st.chunks, 0u);
        mk_pool_delete(pool);
    }
}

int main(void)
{
    printf("checking build: %d\n", mk_checking());
    RUN(test_every_kind_and_size);
    RUN(test_pool);
    return th_done();
}
