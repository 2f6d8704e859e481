/* SPDX-License-Identifier: MIT */
/*
 * unit/prefetch.c - which frees prefetch the chunk four on (ctx.h,
 * mki_prefetch_frees): a thread's flag follows the context that last took
 * a page on it, set while that context holds MKI_PREFETCH_FROM bytes or
 * more.  A thread starts without it; a context growing past the bound
 * turns it on at the page that crosses it, not before; a small context
 * taking a page turns it off again; another thread's flag is its own.
 */
#include "harness.h"

#include <memkit.h>
#include <pthread.h>
#include <stdatomic.h>

#include "internal.h"

static size_t held(mk_ctx *c) { return atomic_load(&c->held); }

static void *other_thread(void *arg)
{
    (void)arg;
    unsigned char before = mki_prefetch_frees;
    mk_ctx *c = mk_ctx_new(NULL, "other", MK_GENERAL, NULL);
    void *p = mk_alloc(c, 64);
    unsigned char after = mki_prefetch_frees;
    mk_free(p);
    mk_ctx_delete(c);
    return (void *)(uintptr_t)(before | after << 1);
}

static void test_follows_context(void)
{
    CHECK(mki_prefetch_frees == 0);
    mk_ctx *big = mk_ctx_new(NULL, "big", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(big);
    enum { N = 2048 };
    static void *p[N];
    int crossed = -1;
    for (int i = 0; i < N && crossed < 0; i++) {
        size_t before = held(big);
        p[i] = mk_alloc(big, 16384);
        REQUIRE_NOT_NULL(p[i]);
        if (held(big) == before)
            continue; /* no page taken: the flag was not touched */
        if (held(big) < MKI_PREFETCH_FROM)
            CHECK(mki_prefetch_frees == 0);
        else
            crossed = i;
    }
    REQUIRE(crossed >= 0);
    CHECK(mki_prefetch_frees == 1);

    /* another thread's flag is its own, and stays off in a small context */
    pthread_t t;
    void *r;
    REQUIRE(pthread_create(&t, NULL, other_thread, NULL) == 0);
    REQUIRE(pthread_join(t, &r) == 0);
    CHECK((uintptr_t)r == 0);
    CHECK(mki_prefetch_frees == 1);

    /* a small context's first page turns it off */
    mk_ctx *small = mk_ctx_new(NULL, "small", MK_GENERAL, NULL);
    void *q = mk_alloc(small, 64);
    REQUIRE_NOT_NULL(q);
    CHECK(held(small) < MKI_PREFETCH_FROM);
    CHECK(mki_prefetch_frees == 0);

    mk_free(q);
    mk_ctx_delete(small);
    for (int i = 0; i <= crossed; i++)
        mk_free(p[i]);
    mk_ctx_delete(big);
}

int main(void)
{
    RUN(test_follows_context);
    return th_done();
}
