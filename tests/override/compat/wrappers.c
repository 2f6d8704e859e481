/* SPDX-License-Identifier: MIT */
/*
 * compat/wrappers.c - a malloc wrapper preloaded before the allocator that
 * forwards to its __libc_* names (compat/forward.c, as glibc's
 * libc_malloc_debug.so and leak tracers do) works: every name the
 * allocator exports does its own work and never calls back into the
 * process's malloc, calloc... (which are the wrapper's).
 *
 * The run has LD_PRELOAD=libcompat_forward.so first (CMakeLists.txt,
 * PRELOAD_FIRST): under memkit, preloaded or linked, the __libc_* names
 * are memkit's; on glibc, glibc's (the control).  The wrapper stops the
 * program with status 3 and a line if one of its names is re-entered.
 * Then the other direct names that glibc builds on each other:
 * reallocarray (realloc) and malloc_info (mallinfo2).
 */
#include "compat.h"

#include <malloc.h>

static unsigned long wrapper_calls(void)
{
    unsigned long (*fn)(void) =
        (unsigned long (*)(void))dlsym(RTLD_DEFAULT, "forward_calls");
    return fn ? fn() : 0;
}

static void test_every_forwarded_name(void)
{
    REQUIRE(dlsym(RTLD_DEFAULT, "forward_calls") != NULL);
    unsigned long before = wrapper_calls();
    for (size_t n = 1; n < 3000000; n = n * 5 + 3) {
        char *p = malloc(compat_opaque(n));
        REQUIRE_NOT_NULL(p);
        p[0] = p[n - 1] = 1;
        p = realloc(p, compat_opaque(2 * n)); /* (moves, grows in place) */
        REQUIRE_NOT_NULL(p);
        CHECK_EQ(p[0], 1);
        free(p);
        p = calloc(compat_opaque(n), 1);
        REQUIRE_NOT_NULL(p);
        CHECK(th_all_zero(p, n));
        free(p);
        p = memalign(compat_opaque(256), compat_opaque(n));
        REQUIRE_NOT_NULL(p);
        CHECK_EQ((uintptr_t)p % 256, 0u);
        free(p);
        p = valloc(compat_opaque(n));
        REQUIRE_NOT_NULL(p);
        CHECK_EQ((uintptr_t)p % 4096, 0u);
        free(p);
        p = pvalloc(compat_opaque(n));
        REQUIRE_NOT_NULL(p);
        CHECK_EQ((uintptr_t)p % 4096, 0u);
        free(p);
    }
    CHECK_EQ(mallopt(M_TOP_PAD, 4096), 1);
    /* the wrapper ran for each of them: this was the test it meant */
    CHECK_GE(wrapper_calls(), before + 6 * 9);
}

static void test_names_built_on_others(void)
{
    /* reallocarray is realloc's, malloc_info mallinfo2's, in glibc too */
    char *p = reallocarray(NULL, compat_opaque(10), 100);
    REQUIRE_NOT_NULL(p);
    p = reallocarray(p, compat_opaque(20), 1000);
    REQUIRE_NOT_NULL(p);
    free(p);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    REQUIRE_NOT_NULL(f);
    CHECK_EQ(malloc_info(0, f), 0);
    fclose(f);
    REQUIRE_NOT_NULL(buf);
    CHECK_STR_HAS(buf, "<malloc version=");
    free(buf);
}

int main(void)
{
    compat_start();
    RUN(test_every_forwarded_name);
    RUN(test_names_built_on_others);
    return th_done();
}
