/* SPDX-License-Identifier: MIT */
/*
 * api/options.c - run-time options and the error settings of the release
 * library: mk_option_get/mk_option_set ("purge_delay_ms": default, range,
 * effect; unknown names and out-of-range values give -1, EINVAL; a value
 * of -1, purge_delay_ms's "never", reads back as 0 and -1, told apart
 * from an error by the return value alone),
 * mk_checking (0 in libmemkit), mk_silence_errors (returns the previous
 * setting), mk_set_error_handler (accepted and reset; the checking build's
 * tests in wrong/ show it at work).
 */
#include "harness.h"
#include "option.h"

#include <memkit.h>
#include <stdlib.h>

static void test_purge_delay(void)
{
    errno = 0;
    long def = th_option("purge_delay_ms");
    if (!getenv("MEMKIT_PURGE_DELAY_MS"))
        CHECK_EQ(def, 100L); /* the documented default */
    CHECK_GE(def, -1L);

    const long good[] = {-1, 0, 1, 250, 3600000};
    for (int i = 0; i < 5; i++) {
        CHECK_EQ(mk_option_set("purge_delay_ms", good[i]), 0);
        long v = -42;
        errno = 0;
        CHECK_EQ(mk_option_get("purge_delay_ms", &v), 0);
        CHECK_EQ(v, good[i]);
        CHECK_ERRNO(0); /* (-1 is a value here, not an error) */
    }
    const long bad[] = {-2, -1000, 3600001, 0x7fffffffL, -0x7fffffffL};
    CHECK_EQ(mk_option_set("purge_delay_ms", 42), 0);
    for (int i = 0; i < 5; i++) {
        errno = 0;
        CHECK_EQ(mk_option_set("purge_delay_ms", bad[i]), -1);
        CHECK_ERRNO(EINVAL);
        CHECK_EQ(th_option("purge_delay_ms"), 42L); /* unchanged */
    }
    CHECK_EQ(mk_option_set("purge_delay_ms", def), 0);
    CHECK_EQ(th_option("purge_delay_ms"), def);
}

static void test_unknown(void)
{
    const char *names[] = {"", "nope", "purge_delay", "purge_delay_ms ",
                           "PURGE_DELAY_MS", "MEMKIT_PURGE_DELAY_MS"};
    for (int i = 0; i < 6; i++) {
        long v = 12345;
        errno = 0;
        CHECK_EQ(mk_option_get(names[i], &v), -1);
        CHECK_ERRNO(EINVAL);
        CHECK_EQ(v, 12345L); /* untouched */
        errno = 0;
        CHECK_EQ(mk_option_set(names[i], 1), -1);
        CHECK_ERRNO(EINVAL);
    }
    long v = 0;
    errno = 0;
    CHECK_EQ(mk_option_get(NULL, &v), -1);
    CHECK_ERRNO(EINVAL);
    errno = 0;
    CHECK_EQ(mk_option_get("purge_delay_ms", NULL), -1);
    CHECK_ERRNO(EINVAL);
    errno = 0;
    CHECK_EQ(mk_option_set(NULL, 0), -1);
    CHECK_ERRNO(EINVAL);
}

/* purge_delay_ms = 0: a segment that becomes empty goes back at once;
 * -1: it is kept until mk_trim. */
static void test_purge_delay_effect(void)
{
    long def = th_option("purge_delay_ms");
    mk_process_figures a, b;

    CHECK_EQ(mk_option_set("purge_delay_ms", -1), 0);
    mk_trim();
    mk_process_stats(&a);
    mk_ctx *c = mk_ctx_new(NULL, "keep", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    for (int i = 0; i < 100; i++)
        CHECK_NOT_NULL(mk_alloc(c, 30000));
    mk_ctx_delete(c);
    mk_process_stats(&b);
    CHECK_GT(b.segments, a.segments);    /* kept for reuse */
    CHECK_GT(b.os_committed, a.os_committed);
    mk_trim();
    mk_process_stats(&b);
    CHECK_LE(b.segments, a.segments);

    CHECK_EQ(mk_option_set("purge_delay_ms", 0), 0);
    mk_process_stats(&a);
    c = mk_ctx_new(NULL, "drop", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    for (int i = 0; i < 100; i++)
        CHECK_NOT_NULL(mk_alloc(c, 30000));
    mk_ctx_delete(c);
    mk_process_stats(&b);
    CHECK_LE(b.segments, a.segments);    /* gone at once, no trim */
    CHECK_LE(b.os_committed, a.os_committed + b.meta_bytes - a.meta_bytes);
    CHECK_EQ(mk_option_set("purge_delay_ms", def), 0);
}

static int handler_calls;
static void handler(const char *msg, void *arg)
{
    (void)msg;
    (void)arg;
    handler_calls++;
}

static void test_error_settings(void)
{
    CHECK_EQ(mk_checking(), MEMKIT_TEST_EXPECT_CHECK);
    int prev = mk_silence_errors(1);
    CHECK_EQ(prev, 0);              /* off by default */
    CHECK_EQ(mk_silence_errors(0), 1);
    CHECK_EQ(mk_silence_errors(5), 0);
    CHECK_EQ(mk_silence_errors(0), 1); /* any non-zero means on */

    mk_set_error_handler(handler, &handler_calls);
    /* correct use reports nothing */
    mk_ctx *c = mk_ctx_new(NULL, "ok", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    void *p = mk_alloc(c, 10);
    mk_free(p);
    mk_ctx_delete(c);
    CHECK_EQ(handler_calls, 0);
    mk_set_error_handler(NULL, NULL);
}

/* MEMKIT_PURGE_DELAY_MS is set for this test (CMakeLists.txt): the
 * environment is read before the first get or set, and a value the program
 * sets is not overridden by it later. */
static void test_environment_then_program(void)
{
    const char *env = getenv("MEMKIT_PURGE_DELAY_MS");
    if (!env) {
        th_note("MEMKIT_PURGE_DELAY_MS not set: run through ctest");
        return;
    }
    CHECK_EQ(th_option("purge_delay_ms"), atol(env));
    CHECK_EQ(mk_option_set("purge_delay_ms", 7), 0);
    mk_ctx *c = mk_ctx_new(NULL, "first", MK_GENERAL, NULL); /* first use */
    REQUIRE_NOT_NULL(c);
    void *p = mk_alloc(c, 100);
    CHECK_NOT_NULL(p);
    CHECK_EQ(th_option("purge_delay_ms"), 7L);
    mk_ctx_delete(c);
}

int main(void)
{
    RUN(test_environment_then_program); /* first: before any other use */
    RUN(test_purge_delay);
    RUN(test_unknown);
    RUN(test_purge_delay_effect);
    RUN(test_error_settings);
    return th_done();
}
