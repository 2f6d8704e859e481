/* SPDX-License-Identifier: MIT */
/*
 * stress/shadow.c - a randomized run of mixed operations (1,000,000 by
 * default; argv[1] or MEMKIT_TEST_OPS for another count, argv[2] or
 * MEMKIT_TEST_SEED for another seed) against a shadow model.
 *
 * Operations: allocate (mk_alloc, mk_alloc_zero, mk_alloc_aligned,
 * mk_alloc_array; sizes mostly small, some large, a few huge), free,
 * realloc (grow and shrink), and now and then reset a child context (which
 * deletes its own child) or delete and recreate it.  Three contexts: a
 * root, its child, the child's child.  The shadow holds every live chunk's
 * pointer, size, id and context; every chunk is filled with a pattern
 * derived from its id and verified before it is freed, resized or reset
 * away, and at the end.  On every allocation the shadow also checks
 * mk_usable_size >= size, mk_ctx_of, alignment and zeroing; every 50,000
 * operations it checks each context's chunk count and bytes in use against
 * mk_ctx_stats.  At the end: everything freed, the contexts deleted, and
 * after mk_trim the OS layer's committed bytes are back to the baseline.
 */
#include "harness.h"

#include <memkit.h>
#include <time.h>

#include "internal.h"

enum { SLOTS = 8192, NCTX = 3 };

typedef struct slot {
    char *p;
    size_t size;
    uint64_t id;
    int ctx; /* 0 root, 1 child, 2 grandchild */
} slot;

static slot slots[SLOTS];
static mk_ctx *ctxs[NCTX];
static const char *names[NCTX] = {"root", "child", "grandchild"};
static uint64_t next_id = 1;
static th_rng rng;
static long live_count[NCTX];
static long errors;

/* Stop flooding the output after a few failures. */
#define FAIL(...)                                                           \
    do {                                                                    \
        if (errors++ < 20)                                                  \
            th_fail(__FILE__, __LINE__, __VA_ARGS__);                       \
        else                                                                \
            th_failures++, th_test_failed++;                                \
    } while (0)

static size_t random_size(void)
{
    uint64_t r = th_below(&rng, 10000);
    if (r < 7000)
        return (size_t)th_below(&rng, 129);          /* 0..128 */
    if (r < 9300)
        return 129 + (size_t)th_below(&rng, 3968);   /* ..4 KiB */
    if (r < 9900)
        return 4097 + (size_t)th_below(&rng, 28672); /* ..32 KiB */
    if (r < 9990)
        return 32769 + (size_t)th_below(&rng, (1 << 20) - 32768); /* large */
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

/* Checks made on every new chunk (before it is filled).  @align: the
 * alignment asked for; 0 the size rule (which resized chunks obey too). */
static void check_new(const slot *s, size_t align, int zeroed)
{
    th_checks++;
    if (mk_usable_size(s->p) < s->size)
        FAIL("usable size %zu < %zu", mk_usable_size(s->p), s->size);
    if (mk_ctx_of(s->p) != ctxs[s->ctx])
        FAIL("mk_ctx_of(%p) = %p, expected %s", (void *)s->p,
             (void *)mk_ctx_of(s->p), names[s->ctx]);
    size_t want = (s->size <= 8 || (s->size >= 17 && s->size <= 24)) ? 8 : 16;
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
    size_t align = 0;
    int zeroed = 0;
    uint64_t how = th_below(&rng, 20);
    mk_ctx *c = ctxs[s->ctx];
    if (how < 14) {
        s->p = mk_alloc(c, s->size);
    } else if (how < 16) {
        s->p = mk_alloc_zero(c, s->size);
        zeroed = 1;
    } else if (how < 18) {
        align = (size_t)1 << (4 + th_below(&rng, 9)); /* 16 .. 4096 */
        if (th_below(&rng, 50) == 0)
            align = (size_t)1 << (13 + th_below(&rng, 9)); /* .. 2 MiB */
        s->p = mk_alloc_aligned(c, s->size, align);
    } else {
        size_t elem = 1 + (size_t)th_below(&rng, 16);
        size_t n = s->size / elem;
        s->size = n * elem;
        s->p = mk_alloc_array(c, n, elem);
        zeroed = 1;
    }
    if (!s->p) {
        FAIL("allocation of %zu bytes failed (errno %d)", s->size, errno);
        return;
    }
    check_new(s, align, zeroed);
    th_fill(s->p, s->size, s->id);
    live_count[s->ctx]++;
}

static void do_free(slot *s)
{
    verify(s, "before free");
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
        n = old / 2;                                  /* shrink */
    else if (how == 1)
        n = old + (size_t)th_below(&rng, 64);         /* grow a bit */
    else
        n = random_size();                            /* anything */
    char *q = mk_realloc(s->p, n);
    if (!q) {
        FAIL("mk_realloc(%zu -> %zu) failed", old, n);
        return;
    }
    s->p = q;
    size_t keep = old < n ? old : n;
    s->size = keep;
    verify(s, "after realloc"); /* the kept prefix */
    s->size = n;
    check_new(s, 0, 0);
    s->id = next_id++;
    th_fill(s->p, n, s->id);
}

/* Forget the shadow of every chunk of contexts >= @from (verifying each). */
static void drop_from(int from, const char *when)
{
    for (int i = 0; i < SLOTS; i++)
        if (slots[i].p && slots[i].ctx >= from) {
            verify(&slots[i], when);
            live_count[slots[i].ctx]--;
            slots[i].p = NULL;
        }
}

static void do_reset(void)
{
    uint64_t how = th_below(&rng, 4);
    if (how == 0) {
        /* delete the child (and so the grandchild), then recreate both */
        drop_from(1, "before delete");
        mk_ctx_delete(ctxs[1]);
        ctxs[1] = mk_ctx_new(ctxs[0], names[1], MK_GENERAL, NULL);
    } else if (how == 1) {
        /* reset the grandchild only */
        drop_from(2, "before reset");
        mk_ctx_reset(ctxs[2]);
        return;
    } else {
        /* reset the child: the grandchild is deleted */
        drop_from(1, "before reset");
        mk_ctx_reset(ctxs[1]);
    }
    ctxs[2] = mk_ctx_new(ctxs[1], names[2], MK_GENERAL, NULL);
    if (!ctxs[1] || !ctxs[2])
        FAIL("mk_ctx_new failed");
}

/* The shadow's counts against mk_ctx_stats. */
static void check_stats(void)
{
    for (int c = 0; c < NCTX; c++) {
        size_t used = 0;
        for (int i = 0; i < SLOTS; i++)
            if (slots[i].p && slots[i].ctx == c)
                used += mk_usable_size(slots[i].p);
        mk_stats st;
        mk_ctx_stats(ctxs[c], &st, 0);
        th_checks++;
        if (st.chunks != (size_t)live_count[c] || st.bytes_used != used)
            FAIL("context %s: stats say %zu chunks / %zu bytes used, the "
                 "shadow %ld / %zu", names[c], st.chunks, st.bytes_used,
                 live_count[c], used);
    }
    mk_stats all;
    mk_ctx_stats(ctxs[0], &all, 1);
    th_checks++;
    if (all.contexts != NCTX ||
        all.chunks != (size_t)(live_count[0] + live_count[1] + live_count[2]))
        FAIL("recursive stats: %zu contexts, %zu chunks", all.contexts,
             all.chunks);
}

static long ops = 1000000;
static uint64_t seed = 0x5eed1234abcdull;

static void test_shadow(void)
{
    size_t base = mki_os_committed(), meta0 = mki_meta_bytes();
    rng.s = seed;
    ctxs[0] = mk_ctx_new(NULL, names[0], MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(ctxs[0]);
    ctxs[1] = mk_ctx_new(ctxs[0], names[1], MK_GENERAL, NULL);
    ctxs[2] = mk_ctx_new(ctxs[1], names[2], MK_GENERAL, NULL);
    REQUIRE(ctxs[1] && ctxs[2]);
    long counts[4] = {0, 0, 0, 0};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);

    for (long op = 0; op < ops; op++) {
        slot *s = &slots[th_below(&rng, SLOTS)];
        uint64_t r = th_below(&rng, 100000);
        if (r < 3) { /* 0.003%: about 30 resets per million */
            do_reset();
            counts[3]++;
        } else if (!s->p) {
            do_alloc(s);
            counts[0]++;
        } else if (r < 60000) {
            do_free(s);
            counts[1]++;
        } else {
            do_realloc(s);
            counts[2]++;
        }
        if (op % 50000 == 49999)
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

    /* the end: verify and free everything, in slot order */
    for (int i = 0; i < SLOTS; i++)
        if (slots[i].p)
            do_free(&slots[i]);
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
    ops = th_arg_long(argc, argv, 1, "MEMKIT_TEST_OPS", ops);
    seed = (uint64_t)th_arg_long(argc, argv, 2, "MEMKIT_TEST_SEED",
                                 (long)seed);
    printf("seed 0x%llx, %ld operations\n", (unsigned long long)seed, ops);
    RUN(test_shadow);
    return th_done();
}
