/* SPDX-License-Identifier: MIT */
/*
 * api/trim.c - giving memory back on demand: mk_trim,
 * mk_ctx_trim and MK_CTX_RELEASE_ON_RESET.
 *
 * The purge policy is off for the whole program (set first thing in
 * main), so that nothing goes back on its own and every figure moves only
 * through the call under test; each test measures from a snapshot taken
 * after an mk_trim() that gives back what earlier tests left.  What is
 * proved:
 *  - mk_trim: after a tree with small, large and huge chunks is deleted,
 *    it gives everything back at once whatever the policy: committed bytes
 *    (and RSS, in the plain builds) fall back near the start and address
 *    space is unmapped; it returns the bytes it gave back, which is what
 *    committed and purged_bytes moved by; called again it returns 0.
 *  - mk_trim takes in the chunks other threads freed into the heap of a
 *    thread that has exited, so that heap's pages go back too.
 *  - mk_ctx_trim on a tree (GENERAL with SLAB, GENERATION and BUMP
 *    children): the spare pages and the empty current pages go back
 *    (blocks and reserved bytes fall, committed falls by what it returns),
 *    pages with live chunks stay, every live chunk keeps its bytes and can
 *    be freed afterwards, BUMP blocks stay; a second call returns 0; the
 *    contexts allocate again afterwards; NULL returns 0.
 *  - MK_CTX_RELEASE_ON_RESET, for each kind: right after mk_ctx_reset the
 *    committed bytes (and RSS) are back near where they were before the
 *    context grew, the context holds no block and is usable again; a
 *    context without the flag keeps them after reset (the control); with
 *    the flag, freeing large chunks and GENERATION chunks gives their
 *    pages back at once too, and freeing or resetting huge chunks.
 * Also built against the checking library (api_trim_check).
 */
#include "purge_util.h"

#include <pthread.h>

#define SLACK (2 * MiB)

/* A clean start: nothing free left anywhere. */
static pu_snap trimmed(void)
{
    mk_trim();
    return pu_now();
}

/* ---- mk_trim ------------------------------------------------------------- */

static void test_trim_everything(void)
{
    pu_snap base = trimmed();
    mk_ctx *top = mk_ctx_new(NULL, "top", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(top);
    mk_ctx *kid = mk_ctx_new(top, "kid", MK_GENERATION, NULL);
    REQUIRE_NOT_NULL(kid);
    size_t bytes = 0;
    for (size_t i = 0; bytes < 16 * MiB; i++) { /* small */
        size_t n = 16 + (i * 37) % 2000;
        void *p = mk_alloc(i % 2 ? top : kid, n);
        REQUIRE_NOT_NULL(p);
        memset(p, (int)i, n);
        bytes += n;
    }
    for (size_t i = 0; i < 128; i++) { /* large: 16 MiB */
        void *p = mk_alloc(top, 128 << 10);
        REQUIRE_NOT_NULL(p);
        memset(p, (int)i, 128 << 10);
    }
    for (size_t i = 0; i < 4; i++) { /* huge: 16 MiB */
        void *p = mk_alloc(top, 4 * MiB);
        REQUIRE_NOT_NULL(p);
        memset(p, (int)i, 4 * MiB);
    }
    pu_snap peak = pu_now();
    pu_print("peak", &peak);
    CHECK_GE(peak.f.os_committed, base.f.os_committed + 48 * MiB);
    mk_ctx_delete(top);
    pu_snap deleted = pu_now();
    pu_print("deleted", &deleted);
    CHECK_GE(deleted.f.os_committed, base.f.os_committed + 40 * MiB); /* off */

    size_t got = mk_trim();
    pu_snap after = pu_now();
    pu_print("mk_trim", &after);
    printf("  mk_trim returned %zu KiB\n", got >> 10);
    CHECK_GE(got, 40 * MiB);
    CHECK_LE(after.f.os_committed, base.f.os_committed + SLACK);
    if (PU_RSS)
        CHECK_LE(after.rss, base.rss + 2 * SLACK);
    CHECK_LE(after.f.os_reserved, base.f.os_reserved + 4 * MiB);
    CHECK_LE(after.f.segments, base.f.segments + 1);
    /* what it returns is what went back */
    CHECK_EQ(after.f.purged_bytes - deleted.f.purged_bytes, got);
    CHECK_GE(deleted.f.os_committed - after.f.os_committed, got - 64 * 1024);
    CHECK_LE(deleted.f.os_committed - after.f.os_committed, got + 64 * 1024);
    CHECK_GE(after.f.purge_passes, deleted.f.purge_passes + 1);
    CHECK_EQ(mk_trim(), (size_t)0);
}

/* A thread fills its heap with chunks and exits; main frees them. */
#define ORPHAN_CHUNKS 2048
static void *orphan_chunks[ORPHAN_CHUNKS];

static void *orphan_thread(void *arg)
{
    (void)arg;
    mk_ctx *heap = mk_ctx_current();
    for (size_t i = 0; heap && i < ORPHAN_CHUNKS; i++) {
        orphan_chunks[i] = mk_alloc(heap, 4000);
        if (orphan_chunks[i])
            th_fill(orphan_chunks[i], 4000, i);
    }
    return NULL;
}

static void test_trim_orphaned_heap(void)
{
    pu_snap base = trimmed();
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, orphan_thread, NULL) == 0);
    pthread_join(t, NULL);
    for (size_t i = 0; i < ORPHAN_CHUNKS; i++) {
        REQUIRE_NOT_NULL(orphan_chunks[i]);
        CHECK_PATTERN(orphan_chunks[i], 4000, i); /* valid after the exit */
    }
    pu_snap held = pu_now();
    CHECK_GE(held.f.os_committed, base.f.os_committed + 7 * MiB);
    for (size_t i = 0; i < ORPHAN_CHUNKS; i++)
        mk_free(orphan_chunks[i]); /* into the heap of an exited thread */
    pu_snap freed = pu_now();
    pu_print("freed", &freed);
    /* queued for a heap with no thread: nothing took them in yet */
    CHECK_GE(freed.f.os_committed, base.f.os_committed + 7 * MiB);
    size_t got = mk_trim();
    pu_snap after = pu_now();
    pu_print("mk_trim", &after);
    CHECK_GE(got, 7 * MiB);
    CHECK_LE(after.f.os_committed, base.f.os_committed + SLACK);
}

/* ---- mk_ctx_trim --------------------------------------------------------- */

static void test_ctx_trim(void)
{
    (void)trimmed();
    mk_ctx_opts so = {.chunk_size = 256};
    mk_ctx *top = mk_ctx_new(NULL, "top", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(top);
    mk_ctx *slab = mk_ctx_new(top, "slab", MK_SLAB, &so);
    mk_ctx *gen = mk_ctx_new(top, "gen", MK_GENERATION, NULL);
    mk_ctx *bump = mk_ctx_new(gen, "bump", MK_BUMP, NULL);
    REQUIRE(slab && gen && bump);

    /* GENERAL: classes 48, 700 and 3000 filled then emptied (their current
     * pages hold nothing; one emptied page is the spare); classes 24 and
     * 20000 keep live chunks */
    static void *gone[3][2000], *live[2][200];
    static const size_t gone_size[3] = {48, 700, 3000};
    static const size_t live_size[2] = {24, 20000};
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 2000; i++)
            REQUIRE_NOT_NULL(gone[c][i] = mk_alloc(top, gone_size[c]));
    for (int c = 0; c < 2; c++)
        for (int i = 0; i < 200; i++) {
            REQUIRE_NOT_NULL(live[c][i] = mk_alloc(top, live_size[c]));
            th_fill(live[c][i], live_size[c], (uint64_t)(c * 1000 + i));
        }
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 2000; i++)
            mk_free(gone[c][i]);
    /* SLAB, GENERATION: filled then emptied; BUMP: live */
    static void *s[4000], *g[1000], *b[1000];
    for (int i = 0; i < 4000; i++)
        REQUIRE_NOT_NULL(s[i] = mk_alloc(slab, 256));
    for (int i = 0; i < 1000; i++)
        REQUIRE_NOT_NULL(g[i] = mk_alloc(gen, 1000));
    for (int i = 0; i < 1000; i++) {
        REQUIRE_NOT_NULL(b[i] = mk_alloc(bump, 500));
        th_fill(b[i], 500, 5000 + (uint64_t)i);
    }
    for (int i = 0; i < 4000; i++)
        mk_free(s[i]);
    for (int i = 0; i < 1000; i++)
        mk_free(g[i]);

    mk_stats t0, t1, top0, top1, sl1, ge1, bu0, bu1;
    REQUIRE(mk_ctx_stats(top, &t0, 1) == 0);
    mk_ctx_stats(top, &top0, 0);
    mk_ctx_stats(bump, &bu0, 0);
    pu_snap before = pu_now();
    size_t got = mk_ctx_trim(top);
    pu_snap after = pu_now();
    mk_ctx_stats(top, &t1, 1);
    mk_ctx_stats(top, &top1, 0);
    mk_ctx_stats(slab, &sl1, 0);
    mk_ctx_stats(gen, &ge1, 0);
    mk_ctx_stats(bump, &bu1, 0);
    printf("  mk_ctx_trim: %zu bytes; blocks %zu -> %zu, reserved %zu -> %zu\n",
           got, t0.blocks, t1.blocks, t0.bytes_reserved, t1.bytes_reserved);
    CHECK_GT(got, (size_t)0);
    CHECK_EQ(before.f.os_committed - after.f.os_committed, got);
    CHECK_LT(t1.blocks, t0.blocks);
    CHECK_LE(t1.bytes_reserved + got, t0.bytes_reserved);
    CHECK_EQ(t1.chunks, t0.chunks);         /* live chunks untouched */
    CHECK_EQ(t1.bytes_used, t0.bytes_used);
    CHECK_EQ(top1.chunks, (size_t)400);
    CHECK_LT(top1.blocks, top0.blocks);
    CHECK_EQ(sl1.blocks, (size_t)0);        /* emptied: nothing kept */
    CHECK_EQ(ge1.blocks, (size_t)0);
    CHECK_EQ(bu1.blocks, bu0.blocks);       /* BUMP: until reset */
    CHECK_EQ(bu1.bytes_reserved, bu0.bytes_reserved);
    CHECK_EQ(mk_ctx_trim(top), (size_t)0);  /* nothing more */
    CHECK_EQ(mk_ctx_trim(NULL), (size_t)0);

    for (int c = 0; c < 2; c++)
        for (int i = 0; i < 200; i++)
            CHECK_PATTERN(live[c][i], live_size[c], (uint64_t)(c * 1000 + i));
    for (int i = 0; i < 1000; i++)
        CHECK_PATTERN(b[i], 500, 5000 + (uint64_t)i);
    /* every context allocates again, in the classes it gave back too */
    for (int c = 0; c < 3; c++) {
        void *p = mk_alloc(top, gone_size[c]);
        CHECK_NOT_NULL(p);
        if (p)
            th_fill(p, gone_size[c], 1);
        mk_free(p);
    }
    void *p = mk_alloc(slab, 256), *q = mk_alloc(gen, 1000);
    CHECK_NOT_NULL(p);
    CHECK_NOT_NULL(q);
    mk_free(p);
    mk_free(q);
    for (int c = 0; c < 2; c++)
        for (int i = 0; i < 200; i++)
            mk_free(live[c][i]);
    mk_stats end;
    mk_ctx_stats(top, &end, 0);
    CHECK_EQ(end.chunks, (size_t)0);
    mk_ctx_delete(top);
}

/* ---- MK_CTX_RELEASE_ON_RESET --------------------------------------------- */

static const char *const kind_names[] = {"general", "slab", "generation",
                                         "bump"};

/* Grow @ctx by about 32 MiB of touched chunks. */
static int grow(mk_ctx *ctx, mk_kind kind)
{
    size_t total = 0;
    for (size_t i = 0; total < 32 * MiB; i++) {
        size_t n = kind == MK_SLAB ? 256 :
                   kind == MK_GENERAL ? (i % 64 == 63 ? 200000 : 16 + i % 3000)
                                      : 64 + i % 8000;
        void *p = mk_alloc(ctx, n);
        if (!p)
            return -1;
        memset(p, 0x5a, n);
        total += n;
    }
    return 0;
}

static mk_ctx *new_of(mk_kind kind, unsigned flags)
{
    mk_ctx_opts o = {.flags = flags, .chunk_size = kind == MK_SLAB ? 256 : 0};
    return mk_ctx_new(NULL, "grown", kind, &o);
}

static void test_release_on_reset(void)
{
    for (int k = 0; k < 4; k++) {
        mk_kind kind = (mk_kind)k;
        printf("  kind %s\n", kind_names[k]);
        pu_snap base = trimmed();
        mk_ctx *ctx = new_of(kind, MK_CTX_RELEASE_ON_RESET);
        REQUIRE_NOT_NULL(ctx);
        REQUIRE(grow(ctx, kind) == 0);
        pu_snap peak = pu_now();
        CHECK_GE(peak.f.os_committed, base.f.os_committed + 30 * MiB);
        mk_ctx_reset(ctx);
        pu_snap after = pu_now(); /* at once: no sleep, no trim */
        pu_print("reset", &after);
        CHECK_LE(after.f.os_committed, base.f.os_committed + SLACK);
        if (PU_RSS)
            CHECK_LE(after.rss, base.rss + 2 * SLACK);
        mk_stats st;
        mk_ctx_stats(ctx, &st, 0);
        CHECK_EQ(st.blocks, (size_t)0); /* reset keeps none */
        CHECK_EQ(st.bytes_reserved, (size_t)0);
        /* still usable, and again after a second reset */
        for (int round = 0; round < 2; round++) {
            void *p[100];
            for (int i = 0; i < 100; i++) {
                p[i] = mk_alloc(ctx, 200);
                REQUIRE_NOT_NULL(p[i]);
                th_fill(p[i], 200, (uint64_t)i);
            }
            for (int i = 0; i < 100; i++)
                CHECK_PATTERN(p[i], 200, (uint64_t)i);
            mk_ctx_stats(ctx, &st, 0);
            CHECK_GE(st.blocks, (size_t)1);
            mk_ctx_reset(ctx);
        }
        mk_ctx_delete(ctx);
        after = pu_now();
        CHECK_LE(after.f.os_committed, base.f.os_committed + SLACK);

        /* the control: without the flag, reset keeps the memory */
        base = trimmed();
        ctx = new_of(kind, 0);
        REQUIRE_NOT_NULL(ctx);
        REQUIRE(grow(ctx, kind) == 0);
        mk_ctx_reset(ctx);
        after = pu_now();
        CHECK_GE(after.f.os_committed, base.f.os_committed + 24 * MiB);
        mk_ctx_delete(ctx);
    }
}

/* With the flag, a page that empties goes back at once, reset or not:
 * GENERAL's large chunks (512 KiB: below 1 MiB also with the checking
 * build's tail, which makes a 1 MiB request huge), GENERATION's blocks. */
static void test_release_on_free(void)
{
    pu_snap base = trimmed();
    mk_ctx *ctx = new_of(MK_GENERAL, MK_CTX_RELEASE_ON_RESET);
    mk_ctx *gen = new_of(MK_GENERATION, MK_CTX_RELEASE_ON_RESET);
    REQUIRE(ctx && gen);
    static void *p[64], *q[4096];
    for (int i = 0; i < 64; i++) {
        REQUIRE_NOT_NULL(p[i] = mk_alloc(ctx, 512 << 10));
        memset(p[i], 1, 512 << 10);
    }
    for (int i = 0; i < 4096; i++) {
        REQUIRE_NOT_NULL(q[i] = mk_alloc(gen, 4000));
        memset(q[i], 2, 4000);
    }
    pu_snap peak = pu_now();
    CHECK_GE(peak.f.os_committed, base.f.os_committed + 46 * MiB);
    for (int i = 0; i < 64; i++)
        mk_free(p[i]);
    pu_snap mid = pu_now();
    pu_print("large freed", &mid);
    CHECK_LE(mid.f.os_committed, peak.f.os_committed - 31 * MiB);
    for (int i = 0; i < 4096; i++)
        mk_free(q[i]);
    pu_snap after = pu_now();
    pu_print("gen freed", &after);
    CHECK_LE(after.f.os_committed, base.f.os_committed + SLACK);
    if (PU_RSS)
        CHECK_LE(after.rss, base.rss + 2 * SLACK);
    mk_ctx_delete(ctx);
    mk_ctx_delete(gen);
}

/* Huge chunks (> 1 MiB) of an MK_CTX_RELEASE_ON_RESET context go back
 * at once too, freed or reset.  (Found by this test: they went into the
 * cache of huge mappings, resident, like any other context's; fixed in
 * 2c3bbe3.) */
static void test_release_huge(void)
{
    for (int by_reset = 0; by_reset < 2; by_reset++) {
        pu_snap base = trimmed();
        mk_ctx *ctx = new_of(MK_GENERAL, MK_CTX_RELEASE_ON_RESET);
        REQUIRE_NOT_NULL(ctx);
        void *big[3];
        for (int i = 0; i < 3; i++) {
            REQUIRE_NOT_NULL(big[i] = mk_alloc(ctx, 8 * MiB));
            memset(big[i], 3, 8 * MiB);
        }
        pu_snap peak = pu_now();
        CHECK_GE(peak.f.os_committed, base.f.os_committed + 24 * MiB);
        if (by_reset)
            mk_ctx_reset(ctx);
        else
            for (int i = 0; i < 3; i++)
                mk_free(big[i]);
        pu_snap after = pu_now();
        pu_print(by_reset ? "reset" : "freed", &after);
        CHECK_LE(after.f.os_committed, base.f.os_committed + SLACK);
        if (PU_RSS)
            CHECK_LE(after.rss, base.rss + 2 * SLACK);
        mk_ctx_delete(ctx);
    }
}

int main(void)
{
    /* nothing goes back on its own: only the calls under test move it */
    if (mk_option_set("purge", 0) != 0)
        return 1;
    RUN(test_trim_everything);
    RUN(test_trim_orphaned_heap);
    RUN(test_ctx_trim);
    RUN(test_release_on_reset);
    RUN(test_release_on_free);
    RUN(test_release_huge);
    return th_done();
}
