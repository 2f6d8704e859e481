/* SPDX-License-Identifier: MIT */
/*
 * api/os_memory.c - memory goes back to the OS: after mk_ctx_delete of a
 * context (with children) that held 100 MiB in mixed sizes (small, large,
 * huge), the OS layer's committed bytes return to their baseline
 *   1. after mk_trim(), with the default purge delay;
 *   2. with purge_delay_ms = 0 and no mk_trim() (empty segments go at once);
 *   3. after mk_ctx_reset (which keeps at most 1 MiB of pages) and mk_trim().
 * memkit's bookkeeping memory (mki_meta_bytes: page descriptors, context
 * structs) is kept for reuse by design (page/meta.c) and never returned:
 * the first round allows exactly its growth; later rounds reuse it, so
 * they must come back to the baseline exactly.
 */
#include "harness.h"
#include "option.h"

#include <memkit.h>

#include "internal.h"

enum { MAXCHUNKS = 200000 };
static void *chunks[MAXCHUNKS];

/* Fill @ctx (and two children) with about @total bytes in mixed sizes:
 * 50% small (8 B..32 KiB), 35% large (32 KiB..1 MiB), 15% huge. */
static size_t build(mk_ctx *ctx, size_t total, uint64_t seed, int *nout)
{
    mk_ctx *kids[2] = {mk_ctx_new(ctx, "kid0", MK_GENERAL, NULL),
                       mk_ctx_new(ctx, "kid1", MK_GENERAL, NULL)};
    mk_ctx *where[3] = {ctx, kids[0], kids[1]};
    th_rng r = {seed};
    size_t held = 0, small = 0, large = 0, huge = 0;
    int n = 0;
    while (held < total && n < MAXCHUNKS) {
        size_t sz;
        if (small < total / 2) {
            sz = 8 + (size_t)th_below(&r, th_below(&r, 8) ? 512 : 32768);
            small += sz;
        } else if (large < total * 35 / 100) {
            sz = 32769 + (size_t)th_below(&r, (1 << 20) - 32769);
            large += sz;
        } else {
            sz = ((size_t)1 << 20) + 1 + (size_t)th_below(&r, (size_t)6 << 20);
            huge += sz;
        }
        mk_ctx *c = where[th_below(&r, 3)];
        if (!c)
            c = ctx;
        void *p = mk_alloc(c, sz);
        if (!p) {
            th_fail(__FILE__, __LINE__, "mk_alloc(%zu) failed", sz);
            break;
        }
        ((char *)p)[0] = 1;
        ((char *)p)[sz - 1] = 2;
        chunks[n++] = p;
        held += sz;
    }
    /* free some of the small ones, so pages are partly used at the end */
    for (int i = 0; i < n; i += 3)
        if (mk_usable_size(chunks[i]) <= 32768) {
            mk_free(chunks[i]);
            chunks[i] = NULL;
        }
    *nout = n;
    return held;
}

static void report(const char *when, size_t base, size_t now, size_t meta0,
                   size_t meta1)
{
    printf("  %s: committed %zu (baseline %zu, meta %zu -> %zu)\n", when, now,
           base, meta0, meta1);
}

static void test_delete_then_trim(void)
{
    for (int round = 0; round < 2; round++) {
        size_t base = mki_os_committed(), meta0 = mki_meta_bytes();
        mk_ctx *ctx = mk_ctx_new(NULL, "hundred", MK_GENERAL, NULL);
        REQUIRE_NOT_NULL(ctx);
        int n;
        size_t held = build(ctx, (size_t)100 << 20, 1234, &n);
        CHECK_GE(held, (size_t)100 << 20);
        CHECK_GE(mki_os_committed(), base + held * 9 / 10);
        mk_ctx_delete(ctx);
        mk_trim();
        size_t now = mki_os_committed(), meta1 = mki_meta_bytes();
        report("deleted + trimmed", base, now, meta0, meta1);
        CHECK_LE(now, base + (meta1 - meta0));
        if (round > 0)
            CHECK_LE(now, base);
        CHECK_EQ(mki_segment_count(), 0u);
    }
}

/* purge_delay_ms = 0: no trim needed. */
static void test_delete_no_delay(void)
{
    long old = th_option("purge_delay_ms");
    CHECK_EQ(mk_option_set("purge_delay_ms", 0), 0);
    for (int round = 0; round < 2; round++) {
        size_t base = mki_os_committed(), meta0 = mki_meta_bytes();
        size_t segs = mki_segment_count();
        mk_ctx *ctx = mk_ctx_new(NULL, "nodelay", MK_GENERAL, NULL);
        REQUIRE_NOT_NULL(ctx);
        int n;
        build(ctx, (size_t)100 << 20, 99 + (uint64_t)round, &n);
        mk_ctx_delete(ctx);
        size_t now = mki_os_committed(), meta1 = mki_meta_bytes();
        report("deleted, delay 0, no trim", base, now, meta0, meta1);
        CHECK_LE(now, base + (meta1 - meta0));
        CHECK_LE(mki_segment_count(), segs);
    }
    CHECK_EQ(mk_option_set("purge_delay_ms", old), 0);
}

/* Reset keeps at most 1 MiB of pages and leaves the others that served the
 * round resting; with trim (every purge mode takes resting pages too) all
 * but the kept pages is back. */
static void test_reset_then_trim(void)
{
    mk_ctx *ctx = mk_ctx_new(NULL, "reset", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(ctx);
    int n;
    build(ctx, (size_t)20 << 20, 7, &n); /* warm the bookkeeping */
    mk_ctx_reset(ctx);
    mk_trim();
    size_t base = mki_os_committed();
    build(ctx, (size_t)100 << 20, 8, &n);
    mk_ctx_reset(ctx);
    mk_trim();
    size_t now = mki_os_committed();
    report("reset + trimmed", base, now, 0, 0);
    mk_stats st;
    mk_ctx_stats(ctx, &st, 1);
    CHECK_EQ(st.contexts, 1u);
    CHECK_EQ(st.chunks, 0u);
    CHECK_LE(st.bytes_reserved - st.bytes_resting, (size_t)1 << 20);
    /* (a third of the 50 MiB of small chunks went to it, not to a child;
     * an instrumented context rests nothing) */
    if (!mki_instrument_active())
        CHECK_GT(st.bytes_resting, (size_t)8 << 20);
    CHECK_LE(now, base + st.bytes_reserved - st.bytes_resting);
    /* and the context is usable */
    void *p = mk_alloc(ctx, 1000);
    CHECK_NOT_NULL(p);
    mk_ctx_delete(ctx);
}

int main(void)
{
    RUN(test_delete_then_trim);
    RUN(test_delete_no_delay);
    RUN(test_reset_then_trim);
    return th_done();
}
