/* SPDX-License-Identifier: MIT */
/*
 * compat/mallopt.c - mallopt and malloc_info answer as glibc 2.36 does
 * (programs read mallopt's 0 as failure, so refusing every parameter
 * is not an option).
 *
 * glibc's mallopt returns 1 for every parameter and value, its own or not
 * (M_MMAP_THRESHOLD, M_ARENA_MAX, 12345...), except M_MXFAST above its
 * maximum (160 bytes on 64-bit; a negative value is a huge size): 0.
 * malloc_info(options != 0) returns EINVAL (the value, not errno);
 * malloc_info(0, fp) writes an XML document and returns 0.  The table
 * below is glibc's answer, so the glibc run of this test checks the table.
 */
#include "compat.h"

#include <malloc.h>

static void test_mallopt(void)
{
    static const int params[] = {M_MXFAST, M_TRIM_THRESHOLD, M_TOP_PAD,
                                 M_MMAP_THRESHOLD, M_MMAP_MAX,
                                 M_CHECK_ACTION, M_PERTURB, M_ARENA_TEST,
                                 M_ARENA_MAX, 0, 12345, -100};
    static const int values[] = {-1, 0, 1, 64, 160, 161, 1 << 20, 64 << 20,
                                 0x7fffffff};
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++)
        for (size_t j = 0; j < sizeof values / sizeof values[0]; j++) {
            int p = params[i], v = values[j];
            int want = p == M_MXFAST ? v >= 0 && v <= 160 : 1;
            int got = mallopt(p, v);
            th_checks++;
            if (got != want)
                th_fail(__FILE__, __LINE__, "mallopt(%d, %d) = %d, glibc: %d",
                        p, v, got, want);
        }
    /* what a program does: ask for its settings back to the defaults */
    CHECK_EQ(mallopt(M_MXFAST, 64), 1);
    CHECK_EQ(mallopt(M_ARENA_MAX, 1), 1);
    void *p = malloc(100);
    CHECK_NOT_NULL(p);
    free(p);
}

static void test_malloc_info(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    REQUIRE_NOT_NULL(f);
    errno = 0;
    CHECK_EQ(malloc_info(1, f), EINVAL);
    CHECK_EQ(errno, 0);
    CHECK_EQ(malloc_info(-1, f), EINVAL);
    CHECK_EQ(malloc_info(0, f), 0);
    fclose(f);
    REQUIRE_NOT_NULL(buf);
    CHECK_STR_HAS(buf, "<malloc version=");
    CHECK_STR_HAS(buf, "</malloc>");
    free(buf);
}

int main(void)
{
    compat_start();
    RUN(test_mallopt);
    RUN(test_malloc_info);
    return th_done();
}
