/* SPDX-License-Identifier: MIT */
/*
 * api/null_ctx.c - the one rule for NULL contexts (memkit.h, "NULL
 * contexts"): allocation calls and mk_ctx_on_reset fail with EINVAL;
 * delete, reset, trim and set_owner do nothing; queries answer for no
 * context; mk_ctx_new's NULL parent and mk_ctx_switch(NULL) keep their
 * own meaning.  Built against the release and the checking library: the
 * rule is the same in both.
 */
#include "harness.h"

#include <errno.h>
#include <memkit.h>
#include <stdio.h>

static void test_allocation_fails(void)
{
    errno = 0;
    CHECK_NULL(mk_alloc(NULL, 24));
    CHECK_ERRNO(EINVAL);
    errno = 0;
    CHECK_NULL(mk_alloc(NULL, 0));
    CHECK_ERRNO(EINVAL);
    errno = 0;
    CHECK_NULL(mk_alloc(NULL, 1u << 20)); /* a large one too */
    CHECK_ERRNO(EINVAL);
    errno = 0;
    CHECK_NULL(mk_alloc_zero(NULL, 100));
    CHECK_ERRNO(EINVAL);
    errno = 0;
    CHECK_NULL(mk_alloc_aligned(NULL, 100, 64));
    CHECK_ERRNO(EINVAL);
    errno = 0;
    CHECK_NULL(mk_alloc_aligned(NULL, 100, 8));
    CHECK_ERRNO(EINVAL);
    errno = 0;
    CHECK_NULL(mk_alloc_array(NULL, 4, 8));
    CHECK_ERRNO(EINVAL);
    errno = 0;
    CHECK_NULL(mk_strdup(NULL, "x"));
    CHECK_ERRNO(EINVAL);
}

static void nothing(void *arg) { (void)arg; }

static void test_on_reset_fails(void)
{
    errno = 0;
    CHECK_EQ(mk_ctx_on_reset(NULL, nothing, NULL), -1);
    CHECK_ERRNO(EINVAL);
    errno = 0;
    CHECK_EQ(mk_ctx_set_parent(NULL, NULL), -1);
    CHECK_ERRNO(EINVAL);
}

static void test_ending_calls_do_nothing(void)
{
    mk_ctx_delete(NULL);
    mk_ctx_reset(NULL);
    CHECK_EQ(mk_ctx_trim(NULL), 0);
    mk_ctx_set_owner(NULL);
    /* and a real context is untouched by them */
    mk_ctx *c = mk_ctx_new(NULL, "c", MK_GENERAL, NULL);
    CHECK_NOT_NULL(c);
    void *p = mk_alloc(c, 32);
    CHECK_NOT_NULL(p);
    mk_ctx_reset(NULL);
    mk_stats st;
    CHECK_EQ(mk_ctx_stats(c, &st, 0), 0);
    CHECK_EQ(st.chunks, 1);
    mk_ctx_delete(c);
}

static void test_queries(void)
{
    mk_stats st;
    errno = 0;
    CHECK_EQ(mk_ctx_stats(NULL, &st, 1), -1);
    CHECK_ERRNO(EINVAL);
    errno = 0;
    CHECK_EQ(mk_ctx_stats_json(NULL, stdout), -1);
    CHECK_ERRNO(EINVAL);
    CHECK_NULL(mk_ctx_name(NULL));
    CHECK_NULL(mk_ctx_parent(NULL));
    CHECK_EQ((int)mk_ctx_kind(NULL), -1);
    char buf[64] = "";
    FILE *f = fmemopen(buf, sizeof buf, "w");
    CHECK_NOT_NULL(f);
    mk_ctx_stats_print(NULL, f);
    fclose(f);
    CHECK_STR_EQ(buf, "");
}

static void test_null_with_a_meaning(void)
{
    mk_ctx *top = mk_ctx_new(NULL, "top", MK_GENERAL, NULL);
    CHECK_NOT_NULL(top);
    CHECK_NULL(mk_ctx_parent(top));
    CHECK_STR_EQ(mk_ctx_name(top), "top");
    CHECK_EQ((int)mk_ctx_kind(top), MK_GENERAL);
    mk_ctx *prev = mk_ctx_switch(top);
    CHECK_PTR_EQ(mk_ctx_current(), top);
    mk_ctx_switch(NULL); /* the thread's heap */
    mk_ctx *heap = mk_ctx_current();
    CHECK_NOT_NULL(heap);
    CHECK(heap != top);
    mk_ctx_switch(prev);
    mk_ctx_delete(top);
}

int main(void)
{
    RUN(test_allocation_fails);
    RUN(test_on_reset_fails);
    RUN(test_ending_calls_do_nothing);
    RUN(test_queries);
    RUN(test_null_with_a_meaning);
    return th_done();
}
