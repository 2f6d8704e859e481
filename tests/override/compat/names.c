/* SPDX-License-Identifier: MIT */
/*
 * compat/names.c - glibc's other names for its allocator are the drop-in's
 * too: no block ever crosses from one allocator to the other.
 *
 * glibc exports __libc_malloc, __libc_calloc, __libc_realloc, __libc_free,
 * __libc_memalign, __libc_valloc, __libc_pvalloc, __libc_mallopt and
 * __libc_mallinfo, and keeps cfree@GLIBC_2.2.5 for binaries built before
 * glibc 2.26.  Each is paired here with the standard function on the other
 * side (a block of __libc_malloc freed by free, a block of malloc freed by
 * __libc_free or cfree, ...): on memkit before they were interposed, the
 * pair aborted with "free(): invalid pointer".  The old cfree is reached
 * through its versioned name, as such a binary binds it.
 */
#include "compat.h"

#include <malloc.h>

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);
extern void *__libc_memalign(size_t align, size_t n);
extern void *__libc_valloc(size_t n);
extern void *__libc_pvalloc(size_t n);
extern int __libc_mallopt(int param, int value);
extern struct mallinfo __libc_mallinfo(void);

/* cfree as a binary built against glibc < 2.26 binds it */
__asm__(".symver old_cfree, cfree@GLIBC_2.2.5");
extern void old_cfree(void *p);

static void test_libc_names_with_standard_ones(void)
{
    for (size_t n = 1; n < 70000; n = n * 3 + 1) {
        char *p = __libc_malloc(compat_opaque(n));
        REQUIRE_NOT_NULL(p);
        memset(p, 1, n);
        CHECK_GE(malloc_usable_size(p), n);
        free(p);

        p = malloc(compat_opaque(n));
        REQUIRE_NOT_NULL(p);
        __libc_free(p);

        p = __libc_calloc(compat_opaque(n), 1);
        REQUIRE_NOT_NULL(p);
        CHECK(th_all_zero(p, n));
        p = realloc(p, compat_opaque(2 * n));
        REQUIRE_NOT_NULL(p);
        p = __libc_realloc(p, compat_opaque(n + 5));
        REQUIRE_NOT_NULL(p);
        free(p);

        p = malloc(compat_opaque(n));
        REQUIRE_NOT_NULL(p);
        p = __libc_realloc(p, compat_opaque(3 * n));
        REQUIRE_NOT_NULL(p);
        __libc_free(p);

        p = __libc_memalign(64, compat_opaque(n));
        REQUIRE_NOT_NULL(p);
        CHECK_EQ((uintptr_t)p % 64, 0u);
        free(p);
        p = __libc_valloc(compat_opaque(n));
        REQUIRE_NOT_NULL(p);
        CHECK_EQ((uintptr_t)p % 4096, 0u);
        free(p);
        p = __libc_pvalloc(compat_opaque(n));
        REQUIRE_NOT_NULL(p);
        CHECK_EQ((uintptr_t)p % 4096, 0u);
        CHECK_GE(malloc_usable_size(p), 4096u);
        free(p);
    }
    CHECK_EQ(__libc_mallopt(M_TOP_PAD, 4096), 1);
    /* __libc_mallinfo is the allocator's mallinfo: the same figures, which
     * count a live block */
    void *live = __libc_malloc(compat_opaque(200000));
    REQUIRE_NOT_NULL(live);
    memset(live, 1, 200000);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    struct mallinfo a = __libc_mallinfo(), b = mallinfo(); /* (glibc's own name) */
#pragma GCC diagnostic pop
    CHECK_EQ(a.arena, b.arena);
    CHECK_EQ(a.hblkhd, b.hblkhd);
    CHECK_EQ(a.uordblks, b.uordblks);
    CHECK_GE((long)a.uordblks + a.hblkhd, 200000);
    __libc_free(live);
}

static void test_cfree(void)
{
    for (size_t n = 1; n < 70000; n = n * 3 + 1) {
        void *p = malloc(compat_opaque(n));
        REQUIRE_NOT_NULL(p);
        old_cfree(p);
        p = calloc(1, compat_opaque(n));
        REQUIRE_NOT_NULL(p);
        old_cfree(p);
        p = __libc_malloc(compat_opaque(n));
        REQUIRE_NOT_NULL(p);
        old_cfree(p);
        th_checks++;
    }
}

int main(void)
{
    compat_start();
    RUN(test_libc_names_with_standard_ones);
    RUN(test_cfree);
    return th_done();
}
