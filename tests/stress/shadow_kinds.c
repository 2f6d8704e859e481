/* SPDX-License-Identifier: MIT */
/*
 * stress/shadow_kinds.c - the randomized shadow-model test for one context
 * kind: argv[1] names it (general, slab, generation, bump), argv[2] or
 * MEMKIT_TEST_OPS gives the number of operations (300,000 by default),
 * argv[3] or MEMKIT_TEST_SEED the seed.
 *
 * Two contexts of the kind, a root and its child (a SLAB of 96-byte chunks
 * aligned to 32).  Operations, by kind:
 *   general     alloc, alloc_zero, alloc_aligned (16 .. 2 MiB), alloc_array,
 *               free, realloc (grow and shrink); sizes mostly small, some
 *               large, a few huge;
 *   slab        alloc (0..96 bytes), alloc_zero, alloc_aligned (<= 32), free,
 *               realloc within the chunk size;
 *   generation  as general (aligned to 16 .. 4096), frees mostly of the oldest
 *               chunks (the pattern the kind is made for), some at random;
 *   bump        alloc, alloc_zero, alloc_aligned (16 .. 64 KiB); no frees:
 *               a chunk replaced in the shadow stays in its context, and
 *               resets are frequent.
 * Now and then the child is reset, the root is reset (which deletes the
 * child; it is made again) or the child is deleted and made again.
 *
 * The shadow holds every chunk's pointer, size, id and context.  Each chunk
 * is filled with a pattern derived from its id and verified before every
 * free, realloc, reset and delete that takes it, and at the end.  Every new
 * chunk is checked for mk_ctx_of, mk_usable_size (>= size; 0 for BUMP in
 * the release build), alignment and zeroing.  Every 20,000 operations each
 * context's mk_ctx_stats is compared with the shadow (chunks and bytes; for
 * BUMP in the release build, which keeps no sizes, bytes used >= the bytes
 * live).  At the end everything is freed (or reset), the contexts deleted,
 * and after mk_trim the OS layer's committed bytes are back to the
 * baseline.
 */
#include "harness.h"

#include <memkit.h>
#include <time.h>

#include "internal.h"

enum { SLOTS = 4096, NCTX = 2, SLAB_SIZE = 96, SLAB_ALIGN = 32 };

typedef struct slot {
    char *p;
    size_t size;
    uint64_t id;
    uint64_t born; /* operation number (FIFO frees for GENERATION) */
    int ctx;       /* 0 root, 1 child */
} slot;

static slot slots[SLOTS];
static mk_ctx *ctxs[NCTX];
static const char *names[NCTX] = {"root", "child"};
static mk_kind kind;
static mk_ctx_opts opts;
static uint64_t next_id = 1, opno;
static th_rng rng;
static long live_count[NCTX];
static long errors;
static int instrumented;

#define FAIL(...)                                                           \
    do {                                                                    \
        if (errors++ < 20)                                                  \
            th_fail(__FILE__, __LINE__, __VA_ARGS__);                       \
        else                                                                \
            th_failures++, th_test_failed++;                                \
    } while (0)

static size_t random_size(void)
{
    if (kind == MK_SLAB)
        return (size_t)th_below(&rng, SLAB_SIZE + 1);
    uint64_t r = th_below(&rng, 10000);
    if (r < 7000)
        return (size_t)th_below(&rng, 129);
    if (r < 9300)
        return 129 + (size_t)th_below(&rng, 3968);
    if (r < 9900)
        return 4097 + (size_t)th_below(&rng, 28672);
    if (r < 9990)
        return 32769 + (size_t)th_below(&rng, (1 << 20) - 32768);
    return ((size_t)1 << 20) + 1 + (size_t)th_below(&rng, (size_t)3 << 20);
}

static void verify(const slot *s, const char *when)
{
    size_t bad = th_verify(s->p, s->size, s->id);
    th_checks++;
    if (bad != (size_t)-1)
        FAIL("%s: chunk id %llu (%zu bytes at %p, context %s) corrupted at "
             "offset %zu", when, (unsigned long long)s->id, s->size,
             (void *)s->p, names[s->ctx], bad);
}

/* The alignment every chunk of @size must have. */
static size_t rule_align(size_t size)
{
    switch (kind) {
    case MK_SLAB:
        return SLAB_ALIGN;
    case MK_BUMP:
        return 16;
    default:
        return (size <= 8 || (size >= 17 && size <= 24)) ? 8 : 16;
    }
}

static void check_new(const slot *s, size_t align, int zeroed)
{
    th_checks++;
    size_t u = mk_usable_size(s->p);
    if (kind == MK_BUMP && !instrumented) {
        if (u != 0)
            FAIL("BUMP: usable size %zu, expected 0", u);
    } else if (u < s->size) {
        FAIL("usable size %zu < %zu", u, s->size);
    }
    if (mk_ctx_of(s->p) != ctxs[s->ctx])
        FAIL("mk_ctx_of(%p) = %p, expected %s", (void *)s->p,
             (void *)mk_ctx_of(s->p), names[s->ctx]);
    size_t want = rule_align(s->size);
    if (align > want)
        want = align;
    if ((uintptr_t)s->p % want)
        FAIL("chunk of %zu bytes at %p not %zu-aligned", s->size,
             (void *)s->p, want);
    if (zeroed && !th_all_zero(s->p, s->size))
        FAIL("zeroed chunk of %zu bytes is not zero", s->size);
}

static void do_alloc(slot *s)
{
    s->ctx = (int)th_below(&rng, NCTX);
    s->size = random_size();
    s->id = next_id++;
    s->born = opno;
    size_t align = 0;
    int zeroed = 0;
    uint64_t how = th_below(&rng, 20);
    mk_ctx *c = ctxs[s->ctx];
    if (how < 14) {
        s->p = mk_alloc(c, s->size);
    } else if (how < 16) {
        s->p = mk_alloc_zero(c, s->size);
        zeroed = 1;
    } else if (how < 18 || kind == MK_SLAB || kind == MK_BUMP) {
        switch (kind) {
        case MK_SLAB:
            align = (size_t)1 << (3 + th_below(&rng, 3)); /* 8 .. 32 */
            break;
        case MK_BUMP:
            align = (size_t)1 << (4 + th_below(&rng, 13)); /* 16 .. 64 KiB */
            if (s->size > ((size_t)900 << 10))
                s->size = (size_t)900 << 10;
            break;
        case MK_GENERATION:
            align = (size_t)1 << (4 + th_below(&rng, 9)); /* 16 .. 4096 */
            break;
        default:
            align = (size_t)1 << (4 + th_below(&rng, 9)); /* 16 .. 4096 */
            if (th_below(&rng, 50) == 0)
                align = (size_t)1 << (13 + th_below(&rng, 9)); /* .. 2 MiB */
        }
        s->p = mk_alloc_aligned(c, s->size, align);
    } else {
        size_t elem = 1 + (size_t)th_below(&rng, 16);
        size_t n = s->size / elem;
        s->size = n * elem;
        s->p = mk_alloc_array(c, n, elem);
        zeroed = 1;
    }
    if (!s->p) {
        FAIL("allocation of %zu bytes (align %zu) failed (errno %d)", s->size,
             align, errno);
        return;
    }
    check_new(s, align, zeroed);
    th_fill(s->p, s->size, s->id);
    live_count[s->ctx]++;
}

/* Take @s out of the shadow: free it (BUMP: leave it to the context). */
static void do_free(slot *s)
{
    verify(s, "before free");
    if (kind != MK_BUMP)
        mk_free(s->p);
    s->p = NULL;
    live_count[s->ctx]--;
}

static void do_realloc(slot *s)
{
    verify(s, "before realloc");
    size_t old = s->size, n;
    uint64_t how = th_below(&rng, 4);
    if (how == 0)
        n = old / 2;
    else if (how == 1)
        n = old + (size_t)th_below(&rng, 64);
    else
        n = random_size();
    if (kind == MK_SLAB && n > SLAB_SIZE)
        n = SLAB_SIZE;
    char *q = mk_realloc(s->p, n);
    if (!q) {
        FAIL("mk_realloc(%zu -> %zu) failed (errno %d)", old, n, errno);
        return;
    }
    s->p = q;
    s->size = old < n ? old : n;
    verify(s, "after realloc"); /* the kept prefix */
    s->size = n;
    check_new(s, 0, 0);
    s->id = next_id++;
    th_fill(s->p, n, s->id);
}

/* Forget the shadow of every chunk of contexts >= @from, verifying each. */
static void drop_from(int from, const char *when)
{
    for (int i = 0; i < SLOTS; i++)
        if (slots[i].p && slots[i].ctx >= from) {
            verify(&slots[i], when);
            live_count[slots[i].ctx]--;
            slots[i].p = NULL;
        }
}

static mk_ctx *make(mk_ctx *parent, int i)
{
    mk_ctx *c = mk_ctx_new(parent, names[i], kind, &opts);
    if (!c)
        FAIL("mk_ctx_new(%s) failed", names[i]);
    return c;
}

static void do_reset(void)
{
    uint64_t how = th_below(&rng, 4);
    if (how == 0) {
        drop_from(1, "before delete");
        mk_ctx_delete(ctxs[1]);
        ctxs[1] = make(ctxs[0], 1);
    } else if (how == 1) {
        drop_from(0, "before reset of the root");
        mk_ctx_reset(ctxs[0]); /* deletes the child */
        ctxs[1] = make(ctxs[0], 1);
    } else {
        drop_from(1, "before reset");
        mk_ctx_reset(ctxs[1]);
    }
}

static void check_stats(void)
{
    size_t total_chunks = 0;
    for (int c = 0; c < NCTX; c++) {
        size_t usable = 0, bytes = 0;
        for (int i = 0; i < SLOTS; i++)
            if (slots[i].p && slots[i].ctx == c) {
                usable += mk_usable_size(slots[i].p);
                bytes += slots[i].size;
            }
        mk_stats st;
        mk_ctx_stats(ctxs[c], &st, 0);
        th_checks++;
        if (kind == MK_BUMP && !instrumented) {
            /* no sizes kept: every chunk ever bumped since the last reset
             * counts, the forgotten ones too */
            if (st.chunks != 0 || st.bytes_used < bytes)
                FAIL("context %s: stats say %zu chunks / %zu bytes used, the "
                     "shadow 0 / >= %zu", names[c], st.chunks, st.bytes_used,
                     bytes);
        } else if (kind == MK_BUMP) {
            if (st.chunks < (size_t)live_count[c] || st.bytes_used < bytes)
                FAIL("context %s: stats say %zu chunks / %zu bytes used, the "
                     "shadow >= %ld / >= %zu", names[c], st.chunks,
                     st.bytes_used, live_count[c], bytes);
        } else if (kind == MK_GENERATION && !instrumented) {
            /* a block's bytes count up to its fill point until it goes
             * back: exact chunks, bytes at least the live ones */
            if (st.chunks != (size_t)live_count[c] || st.bytes_used < usable)
                FAIL("context %s: stats say %zu chunks / %zu bytes used, the "
                     "shadow %ld / <= %zu", names[c], st.chunks, st.bytes_used,
                     live_count[c], usable);
        } else if (st.chunks != (size_t)live_count[c] ||
                   st.bytes_used != usable) {
            FAIL("context %s: stats say %zu chunks / %zu bytes used, the "
                 "shadow %ld / %zu", names[c], st.chunks, st.bytes_used,
                 live_count[c], usable);
        }
        if (st.bytes_free != st.bytes_reserved - st.bytes_used)
            FAIL("context %s: bytes_free %zu", names[c], st.bytes_free);
        total_chunks += st.chunks;
    }
    mk_stats all;
    mk_ctx_stats(ctxs[0], &all, 1);
    th_checks++;
    if (all.contexts != NCTX || all.chunks != total_chunks)
        FAIL("recursive stats: %zu contexts, %zu chunks", all.contexts,
             all.chunks);
}

/* GENERATION: free the oldest chunk of a random context, mostly. */
static slot *oldest(void)
{
    slot *best = NULL;
    for (int tries = 0; tries < 64; tries++) {
        slot *s = &slots[th_below(&rng, SLOTS)];
        if (s->p && (!best || s->born < best->born))
            best = s;
    }
    return best;
}

static long ops = 300000;
static uint64_t seed = 0x5eedc0ffeeull;

static void test_shadow(void)
{
    mk_trim();
    size_t base = mki_os_committed(), meta0 = mki_meta_bytes();
    rng.s = seed;
    ctxs[0] = make(NULL, 0);
    REQUIRE_NOT_NULL(ctxs[0]);
    ctxs[1] = make(ctxs[0], 1);
    REQUIRE_NOT_NULL(ctxs[1]);
    long counts[4] = {0, 0, 0, 0};
    /* resets: about 30 per million ops; BUMP, which never frees, 1 in 2000 */
    uint64_t reset_per_100k = kind == MK_BUMP ? 50 : 3;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (opno = 0; opno < (uint64_t)ops; opno++) {
        slot *s = &slots[th_below(&rng, SLOTS)];
        uint64_t r = th_below(&rng, 100000);
        if (r < reset_per_100k) {
            do_reset();
            counts[3]++;
        } else if (!s->p) {
            do_alloc(s);
            counts[0]++;
        } else if (r < 60000 || kind == MK_BUMP) {
            if (kind == MK_GENERATION && r < 50000) {
                slot *o = oldest();
                if (o)
                    s = o;
            }
            do_free(s);
            counts[1]++;
        } else {
            do_realloc(s);
            counts[2]++;
        }
        if (opno % 20000 == 19999)
            check_stats();
        if (errors > 1000)
            break;
    }
    check_stats();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("  %ld ops: %ld allocs, %ld frees, %ld reallocs, %ld resets; "
           "%.2f s\n", ops, counts[0], counts[1], counts[2], counts[3],
           (double)(t1.tv_sec - t0.tv_sec) +
               (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    CHECK_GT(counts[3], 0L);

    /* the end: verify and free everything (BUMP: verify, then reset) */
    for (int i = 0; i < SLOTS; i++)
        if (slots[i].p)
            do_free(&slots[i]);
    if (kind == MK_BUMP)
        mk_ctx_reset(ctxs[0]);
    mk_stats st;
    mk_ctx_stats(ctxs[0], &st, 1);
    CHECK_EQ(st.chunks, 0u);
    CHECK_EQ(st.bytes_used, 0u);
    mk_ctx_delete(ctxs[0]);
    mk_trim();
    size_t now = mki_os_committed(), meta1 = mki_meta_bytes();
    CHECK_LE(now, base + (meta1 - meta0));
}

int main(int argc, char **argv)
{
    const char *k = argc > 1 ? argv[1] : "general";
    if (strcmp(k, "general") == 0) {
        kind = MK_GENERAL;
    } else if (strcmp(k, "slab") == 0) {
        kind = MK_SLAB;
        opts.chunk_size = SLAB_SIZE;
        opts.chunk_align = SLAB_ALIGN;
    } else if (strcmp(k, "generation") == 0) {
        kind = MK_GENERATION;
    } else if (strcmp(k, "bump") == 0) {
        kind = MK_BUMP;
    } else {
        fprintf(stderr, "usage: %s general|slab|generation|bump [ops] "
                "[seed]\n", argv[0]);
        return 2;
    }
    ops = th_arg_long(argc, argv, 2, "MEMKIT_TEST_OPS", ops);
    seed = (uint64_t)th_arg_long(argc, argv, 3, "MEMKIT_TEST_SEED",
                                 (long)seed);
    instrumented = mki_instrument_active();
    printf("kind %s, seed 0x%llx, %ld operations, instrumented %d\n", k,
           (unsigned long long)seed, ops, instrumented);
    RUN(test_shadow);
    return th_done();
}
