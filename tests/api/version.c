/* SPDX-License-Identifier: MIT */
/*
 * api/version.c - the version and the ABI check (memkit.h: MK_VERSION,
 * mk_version, MK_ABI_VERSION, mk_pool_new_abi; CHANGELOG.md, "ABI
 * policy").
 *
 * The inline pool front (mk_pool_front) is compiled into programs, so a
 * program built against one memkit.h must not run its inline mk_pool_get /
 * mk_pool_put on the pools of a library with another layout.  The header
 * makes mk_pool_new and mk_pool_new_in pass the layout it was compiled
 * with; the library creates no pool for another one:
 *   - mk_version() is the header's MK_VERSION (this test is built against
 *     the library's own header), and MK_VERSION is the three parts as one
 *     number;
 *   - the macros mk_pool_new / mk_pool_new_in create pools (the layout
 *     matches), and so do the exported functions behind them;
 *   - a layout of another ABI number, or another front size, is refused:
 *     one line through the error handler, NULL, errno EINVAL, and no pool;
 *     without a handler the process aborts after that line on stderr;
 *     with reports silenced, NULL and EINVAL without a line.
 * Fails if the check is removed (the mismatched calls would return pools).
 */
#include <memkit.h>

#include "harness.h"

static void test_version_number(void)
{
    CHECK_EQ(MK_VERSION,
             MK_VERSION_MAJOR * 10000 + MK_VERSION_MINOR * 100 + MK_VERSION_PATCH);
    CHECK_EQ(mk_version(), MK_VERSION);
    char s[32];
    snprintf(s, sizeof s, "%d.%d.%d", MK_VERSION_MAJOR, MK_VERSION_MINOR,
             MK_VERSION_PATCH);
    CHECK_STR_EQ(s, MK_VERSION_STRING);
}

static void test_matching_header_makes_pools(void)
{
    mk_pool *a = mk_pool_new("abi-a", 24, 0, 0); /* the macro */
    CHECK_NOT_NULL(a);
    mk_ctx *top = mk_ctx_new(NULL, "abi-top", MK_GENERAL, NULL);
    REQUIRE(top);
    mk_pool *b = mk_pool_new_in(top, "abi-b", 48, 0, MK_POOL_THREADSAFE);
    CHECK_NOT_NULL(b);
    mk_pool *c = (mk_pool_new)("abi-c", 16, 0, 0); /* the function */
    CHECK_NOT_NULL(c);
    mk_pool *d = (mk_pool_new_in)(top, "abi-d", 16, 0, 0);
    CHECK_NOT_NULL(d);
    if (a) {
        void *o = mk_pool_get(a);
        CHECK_NOT_NULL(o);
        mk_pool_put(a, o);
        mk_pool_delete(a);
    }
    if (c)
        mk_pool_delete(c);
    mk_ctx_delete(top); /* b and d with it */
}

static char last_msg[512];
static int reports;

static void record(const char *msg, void *arg)
{
    (void)arg;
    reports++;
    snprintf(last_msg, sizeof last_msg, "%s", msg);
}

/* A layout the library does not have: @abi_delta added to the ABI number,
 * @size_delta to the front's size. */
static size_t other_layout(size_t abi_delta, size_t size_delta)
{
    return (MK_ABI_VERSION + abi_delta) * 65536u + sizeof(mk_pool_front) +
           size_delta;
}

static void test_other_layout_refused(void)
{
    mk_set_error_handler(record, NULL);
    const size_t layouts[] = {other_layout(1, 0), other_layout(0, 8),
                              other_layout(0, (size_t)-8)};
    for (size_t i = 0; i < sizeof layouts / sizeof *layouts; i++) {
        reports = 0;
        last_msg[0] = '\0';
        errno = 0;
        mk_pool *p = mk_pool_new_abi(NULL, "stale", 24, 0, 0, layouts[i]);
        CHECK_NULL(p);
        CHECK_ERRNO(EINVAL);
        CHECK_EQ(reports, 1);
        CHECK_STR_HAS(last_msg, "memkit: mk_pool_new(): the program was "
                                "compiled with another memkit.h");
        CHECK_STR_HAS(last_msg, "rebuild it against this memkit");
        if (p)
            mk_pool_delete(p);
    }
    /* the _in form names itself, and adds nothing to the parent */
    mk_ctx *top = mk_ctx_new(NULL, "abi-parent", MK_GENERAL, NULL);
    REQUIRE(top);
    reports = 0;
    mk_pool *p = mk_pool_new_abi(top, "stale", 24, 0, 0, other_layout(1, 0));
    CHECK_NULL(p);
    CHECK_EQ(reports, 1);
    CHECK_STR_HAS(last_msg, "memkit: mk_pool_new_in(): ");
    mk_stats st;
    CHECK_EQ(mk_ctx_stats(top, &st, 1), 0);
    CHECK_EQ(st.contexts, 1);
    mk_ctx_delete(top);
    mk_set_error_handler(NULL, NULL);
}

static void test_silenced_refusal(void)
{
    int was = mk_silence_errors(1);
    errno = 0;
    CHECK_NULL(mk_pool_new_abi(NULL, "stale", 24, 0, 0, other_layout(1, 0)));
    CHECK_ERRNO(EINVAL);
    mk_silence_errors(was);
}

static void stale_program(void *arg)
{
    (void)arg;
    mk_pool_new_abi(NULL, "stale", 24, 0, 0, other_layout(0, 8));
}

static void test_other_layout_aborts_by_default(void)
{
    CHECK_DIES(stale_program, NULL,
               "memkit: mk_pool_new(): the program was compiled with another "
               "memkit.h");
}

int main(void)
{
    RUN(test_version_number);
    RUN(test_matching_header_makes_pools);
    RUN(test_other_layout_refused);
    RUN(test_silenced_refusal);
    RUN(test_other_layout_aborts_by_default);
    return th_done();
}
