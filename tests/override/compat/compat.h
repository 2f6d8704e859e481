/* SPDX-License-Identifier: MIT */
/*
 * compat.h - what the glibc-compatibility tests of the drop-in share
 * (tests/override/compat/: the drop-in runs every correct program as
 * glibc does).
 *
 * Each test is one plain C program, run three ways (CMakeLists.txt): under
 * LD_PRELOAD=libmemkit-malloc.so, linked with libmemkit-malloc, and with
 * neither, on glibc's own malloc: the control.  A check that fails on
 * glibc tests the wrong thing, so every check holds on glibc too; a check
 * of memkit's own figures (mallinfo2, its committed bytes) runs only where
 * memkit is the allocator.
 *
 * COMPAT_EXPECT (set by ctest: "memkit" or "glibc") says which allocator
 * the run is meant to have; compat_start() checks that it has it, through
 * the one sign a program can read without memkit's header: whether the
 * process has memkit's API (mk_ctx_new) at all.
 */
#ifndef MK_TEST_COMPAT_H
#define MK_TEST_COMPAT_H

#include "harness.h"

#include <dlfcn.h>

static int compat_memkit; /* 1: memkit is the allocator of this run */

static void compat_start(void)
{
    const char *want = getenv("COMPAT_EXPECT");
    compat_memkit = dlsym(RTLD_DEFAULT, "mk_ctx_new") != NULL;
    th_checks++;
    if (!want || strcmp(want, compat_memkit ? "memkit" : "glibc") != 0)
        th_fail(__FILE__, __LINE__, "this run has %s's malloc, but "
                "COMPAT_EXPECT=%s", compat_memkit ? "memkit" : "glibc",
                want ? want : "(unset)");
    printf("allocator: %s\n", compat_memkit ? "memkit" : "glibc");
}

/* Threads of this process (the entries of /proc/self/task). */
static int compat_threads(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    int n = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    fclose(f);
    return n;
}

/* A value the compiler cannot see through (a size it must not fold). */
static size_t compat_opaque(size_t n)
{
    volatile size_t v = n;
    return v;
}

#endif /* MK_TEST_COMPAT_H */
