/* SPDX-License-Identifier: MIT */
/*
 * api/current.c - the per-thread current context: mk_ctx_current starts as
 * the thread's own top-level GENERAL context named "thread"; mk_ctx_switch
 * returns the previous one; each thread has its own (checked from a second
 * thread); deleting the current context falls back to the thread default;
 * mk_realloc(NULL, n) allocates in the current context.
 */
#include "harness.h"
#include "option.h"

#include <memkit.h>
#include <pthread.h>
#include <string.h>

static void test_default(void)
{
    mk_ctx *c = mk_ctx_current();
    REQUIRE_NOT_NULL(c);
    CHECK_PTR_EQ(mk_ctx_current(), c); /* stable */
    CHECK_STR_EQ(mk_ctx_name(c), "thread");
    CHECK_EQ(mk_ctx_kind(c), MK_GENERAL);
    CHECK_NULL(mk_ctx_parent(c));
    void *p = mk_alloc(c, 40);
    REQUIRE_NOT_NULL(p);
    CHECK_PTR_EQ(mk_ctx_of(p), c);
    mk_free(p);
}

static void test_switch(void)
{
    mk_ctx *def = mk_ctx_current();
    mk_ctx *a = mk_ctx_new(NULL, "a", MK_GENERAL, NULL);
    mk_ctx *b = mk_ctx_new(a, "b", MK_GENERAL, NULL);
    REQUIRE(a && b);
    CHECK_PTR_EQ(mk_ctx_switch(a), def);
    CHECK_PTR_EQ(mk_ctx_current(), a);
    void *p = mk_realloc(NULL, 10);
    REQUIRE_NOT_NULL(p);
    CHECK_PTR_EQ(mk_ctx_of(p), a);
    CHECK_PTR_EQ(mk_ctx_switch(b), a);
    CHECK_PTR_EQ(mk_ctx_current(), b);
    void *q = mk_realloc(NULL, 100000);
    REQUIRE_NOT_NULL(q);
    CHECK_PTR_EQ(mk_ctx_of(q), b);
    CHECK_PTR_EQ(mk_ctx_switch(def), b);
    CHECK_PTR_EQ(mk_ctx_current(), def);
    mk_free(p);
    mk_free(q);

    /* deleting the current context: the thread default comes back */
    mk_ctx_switch(b);
    mk_ctx_delete(a); /* takes b too */
    CHECK_PTR_EQ(mk_ctx_current(), def);

    /* switching to NULL also means the thread default */
    mk_ctx *c = mk_ctx_new(NULL, "c", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    mk_ctx_switch(c);
    CHECK_PTR_EQ(mk_ctx_switch(NULL), c);
    CHECK_PTR_EQ(mk_ctx_current(), def);
    mk_ctx_delete(c);
}

/* ---- a second thread ------------------------------------------------------ */

typedef struct thread_result {
    mk_ctx *main_ctx;  /* main's current context at thread start */
    mk_ctx *seen;      /* the thread's mk_ctx_current() */
    mk_ctx *own;       /* a context the thread switched to */
    int name_ok, alloc_ok, switch_ok, realloc_ok, restore_ok;
} thread_result;

static void *second_thread(void *arg)
{
    thread_result *r = arg;
    r->seen = mk_ctx_current();
    r->name_ok = r->seen && strcmp(mk_ctx_name(r->seen), "thread") == 0 &&
                 mk_ctx_parent(r->seen) == NULL;
    char *s = r->seen ? mk_strdup(r->seen, "in the second thread") : NULL;
    r->alloc_ok = s && mk_ctx_of(s) == r->seen;
    mk_free(s);
    r->own = mk_ctx_new(NULL, "second", MK_GENERAL, NULL);
    r->switch_ok = r->own && mk_ctx_switch(r->own) == r->seen &&
                   mk_ctx_current() == r->own;
    void *p = mk_realloc(NULL, 64);
    r->realloc_ok = p && mk_ctx_of(p) == r->own;
    mk_free(p);
    r->restore_ok = mk_ctx_switch(NULL) == r->own &&
                    mk_ctx_current() == r->seen;
    mk_ctx_delete(r->own);
    return NULL;
}

static void test_per_thread(void)
{
    mk_ctx *mine = mk_ctx_new(NULL, "main-current", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(mine);
    mk_ctx *prev = mk_ctx_switch(mine);

    thread_result r;
    memset(&r, 0, sizeof r);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, second_thread, &r) == 0);
    pthread_join(t, NULL);

    CHECK_NOT_NULL(r.seen);
    CHECK(r.seen != mine);  /* the main thread's switch is not seen */
    CHECK(r.seen != prev);  /* nor the main thread's default */
    CHECK(r.name_ok);
    CHECK(r.alloc_ok);
    CHECK(r.switch_ok);
    CHECK(r.realloc_ok);
    CHECK(r.restore_ok);
    /* and the second thread's switches did not touch ours */
    CHECK_PTR_EQ(mk_ctx_current(), mine);

    CHECK_PTR_EQ(mk_ctx_switch(prev), mine);
    mk_ctx_delete(mine);
    CHECK_PTR_EQ(mk_ctx_current(), prev);
}

/* Two threads at once, each switching many times. */
static void *switcher(void *arg)
{
    int *ok = arg;
    mk_ctx *def = mk_ctx_current();
    mk_ctx *c[4];
    *ok = def != NULL;
    for (int i = 0; i < 4; i++) {
        c[i] = mk_ctx_new(NULL, "sw", MK_GENERAL, NULL);
        if (!c[i]) {
            *ok = 0;
            return NULL;
        }
    }
    mk_ctx *expect_prev = def;
    for (int i = 0; i < 20000; i++) {
        mk_ctx *next = c[i % 4];
        if (mk_ctx_switch(next) != expect_prev)
            *ok = 0;
        void *p = mk_realloc(NULL, (size_t)(i % 200));
        if (!p || mk_ctx_of(p) != next)
            *ok = 0;
        mk_free(p);
        expect_prev = next;
    }
    mk_ctx_switch(NULL);
    for (int i = 0; i < 4; i++)
        mk_ctx_delete(c[i]);
    if (mk_ctx_current() != def)
        *ok = 0;
    return NULL;
}

static void test_threads_switching(void)
{
    pthread_t t[2];
    int ok[2] = {0, 0};
    for (int i = 0; i < 2; i++)
        REQUIRE(pthread_create(&t[i], NULL, switcher, &ok[i]) == 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CHECK(ok[0]);
    CHECK(ok[1]);
}

/* A thread exits while a BUMP child of its default context holds a chunk
 * another thread still uses: the default context must stay (BUMP counts no
 * chunks, so the default context's own figures say "empty"). */
static char *handed;
static void *make_bump_child(void *arg)
{
    (void)arg;
    mk_ctx *arena = mk_ctx_new(mk_ctx_current(), "arena", MK_BUMP, NULL);
    if (arena) {
        handed = mk_alloc(arena, 100);
        if (handed)
            strcpy(handed, "still mine");
    }
    return NULL;
}

static void test_exit_keeps_bump_child(void)
{
    long old = th_option("purge_delay_ms");
    mk_option_set("purge_delay_ms", 0); /* freed memory would go at once */
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, make_bump_child, NULL) == 0);
    pthread_join(t, NULL);
    REQUIRE_NOT_NULL(handed);
    mk_trim();
    mk_ctx *arena = mk_ctx_of(handed);
    REQUIRE_NOT_NULL(arena);
    CHECK_STR_EQ(mk_ctx_name(arena), "arena");
    CHECK_STR_EQ(handed, "still mine");
    mk_ctx_delete(mk_ctx_parent(arena)); /* the exited thread's context */
    mk_option_set("purge_delay_ms", old);
}

int main(void)
{
    RUN(test_default);
    RUN(test_switch);
    RUN(test_per_thread);
    RUN(test_threads_switching);
    RUN(test_exit_keeps_bump_child);
    return th_done();
}
