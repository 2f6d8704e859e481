/* SPDX-License-Identifier: MIT */
/*
 * api/rss.c - resident memory follows real use: touching 160 MiB of chunks
 * (small, large, huge) raises the process RSS by about that much; after
 * mk_ctx_delete and mk_trim() it falls back near where it started.  Reads
 * /proc/self/statm, so it runs neither under the sanitizers nor Valgrind
 * (label no-sanitizer); Linux only.
 */
#include "harness.h"

#include <memkit.h>

static void touch(void *p, size_t n)
{
    memset(p, 0x5a, n);
}

static void test_rss_returns(void)
{
    size_t before = th_rss_bytes();
    REQUIRE(before > 0);
    mk_ctx *ctx = mk_ctx_new(NULL, "rss", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(ctx);
    size_t held = 0;
    th_rng r = {42};
    while (held < ((size_t)60 << 20)) { /* small */
        size_t n = 16 + (size_t)th_below(&r, 2000);
        void *p = mk_alloc(ctx, n);
        REQUIRE_NOT_NULL(p);
        touch(p, n);
        held += n;
    }
    while (held < ((size_t)110 << 20)) { /* large */
        size_t n = 40000 + (size_t)th_below(&r, 900000);
        void *p = mk_alloc(ctx, n);
        REQUIRE_NOT_NULL(p);
        touch(p, n);
        held += n;
    }
    while (held < ((size_t)160 << 20)) { /* huge */
        size_t n = ((size_t)2 << 20) + (size_t)th_below(&r, (size_t)8 << 20);
        void *p = mk_alloc(ctx, n);
        REQUIRE_NOT_NULL(p);
        touch(p, n);
        held += n;
    }
    size_t peak = th_rss_bytes();
    printf("  rss: before %zu KiB, peak %zu KiB\n", before >> 10, peak >> 10);
    CHECK_GE(peak, before + ((size_t)150 << 20));
    mk_ctx_delete(ctx);
    size_t trimmed = mk_trim();
    size_t after = th_rss_bytes();
    printf("  rss: after delete + trim %zu KiB (trim gave %zu KiB)\n",
           after >> 10, trimmed >> 10);
    /* back within 8 MiB of the start (bookkeeping, stdio) */
    CHECK_LE(after, before + ((size_t)8 << 20));
}

int main(void)
{
    RUN(test_rss_returns);
    return th_done();
}
