/* SPDX-License-Identifier: MIT */
/*
 * api/tiny_aligned.c - zero and tiny sizes at every alignment (the case it
 * guards: mk_alloc_aligned(ctx, 0, 128 KiB) must give a chunk with memory
 * behind it, since a free from another thread writes a link word into the
 * chunk).
 *
 * For every kind that allocates aligned chunks (GENERAL, GENERATION, BUMP,
 * and SLAB up to its own alignment), sizes 0, 1, 7 and 8, and every power of
 * two from 1 byte to 4 MiB:
 *   - the chunk is not NULL, aligned, unique, and has room for its size;
 *   - its usable size follows one rule for size 0: at least 8 bytes in the
 *     release build (as mk_alloc(ctx, 0) gives), exactly the requested
 *     size when contexts are instrumented (MK_BUMP: 0 in the release build);
 *   - it can be freed by its owner, and by another thread; after the other
 *     thread's frees the context reports no live chunk (the frees were
 *     taken in, nothing was lost) and stays usable (BUMP chunks are not
 *     freed one by one: they go with the context).
 * Linked against both builds (api_tiny_aligned, api_tiny_aligned_check).
 */
#include "harness.h"

#include <memkit.h>
#include <pthread.h>

#include "internal.h"

enum { NALIGN = 23 }; /* 1 B .. 4 MiB */
static const size_t sizes[] = {0, 1, 7, 8};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static int instrumented;

typedef struct batch {
    void *p[NSIZES * NALIGN];
    size_t n;
} batch;

static void *free_batch(void *arg)
{
    batch *b = arg;
    for (size_t i = 0; i < b->n; i++)
        mk_free(b->p[i]);
    return NULL;
}

/* The usable size the rule promises for a chunk of @size in @kind. */
static void check_usable(mk_kind kind, size_t size, size_t align,
                         const void *p)
{
    size_t u = mk_usable_size(p);
    th_checks++;
    if (instrumented) {
        if (u != size)
            th_fail(__FILE__, __LINE__, "kind %d size %zu align %zu: usable "
                    "%zu, instrumented builds give the requested size",
                    (int)kind, size, align, u);
    } else if (kind == MK_BUMP) {
        if (u != 0)
            th_fail(__FILE__, __LINE__, "bump size %zu align %zu: usable %zu",
                    size, align, u);
    } else if (u < 8 || u < size) {
        th_fail(__FILE__, __LINE__, "kind %d size %zu align %zu: usable %zu "
                "(at least 8 and the size)", (int)kind, size, align, u);
    }
}

/* Allocate every (size, alignment) pair up to @max_align in @c; write the
 * bytes the chunk is said to have; free half by the owner, half by another
 * thread.  */
static void run(mk_ctx *c, mk_kind kind, size_t max_align)
{
    batch own = {.n = 0}, other = {.n = 0};
    for (size_t s = 0; s < NSIZES; s++)
        for (size_t a = 1; a <= max_align && a <= ((size_t)4 << 20); a <<= 1) {
            size_t size = sizes[s];
            void *p = mk_alloc_aligned(c, size, a);
            th_checks++;
            if (!p) {
                th_fail(__FILE__, __LINE__, "kind %d: mk_alloc_aligned(%zu, "
                        "%zu) = NULL (errno %d)", (int)kind, size, a, errno);
                continue;
            }
            CHECK_EQ((uintptr_t)p % a, 0u);
            CHECK_PTR_EQ(mk_ctx_of(p), c);
            check_usable(kind, size, a, p);
            size_t u = mk_usable_size(p);
            memset(p, 0x5a, u > size ? u : size);
            batch *b = (own.n + other.n) % 2 ? &other : &own;
            b->p[b->n++] = p;
        }
    /* unique: no two chunks alike */
    for (size_t i = 0; i < own.n; i++)
        for (size_t j = 0; j < other.n; j++)
            CHECK(own.p[i] != other.p[j]);
    /* bump chunks are not freed one by one (the checking build reports
     * an mk_free of one): they go with the context */
    if (kind != MK_BUMP) {
        pthread_t t;
        REQUIRE(pthread_create(&t, NULL, free_batch, &other) == 0);
        pthread_join(t, NULL);
        free_batch(&own);
        mk_stats st;
        CHECK_EQ(mk_ctx_stats(c, &st, 0), 0);
        CHECK_EQ(st.chunks, 0u);
        CHECK_EQ(st.bytes_used, 0u);
    }
    /* still usable */
    size_t a = max_align < ((size_t)1 << 17) ? max_align : (size_t)1 << 17;
    void *q = mk_alloc_aligned(c, 0, a);
    CHECK_NOT_NULL(q);
    CHECK_EQ((uintptr_t)q % a, 0u);
    if (kind != MK_BUMP)
        mk_free(q);
}

static void test_general(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "general", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    run(c, MK_GENERAL, (size_t)4 << 20);
    mk_ctx_delete(c);
}

static void test_generation(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "generation", MK_GENERATION, NULL);
    REQUIRE_NOT_NULL(c);
    run(c, MK_GENERATION, (size_t)4 << 20);
    mk_ctx_delete(c);
}

static void test_bump(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "bump", MK_BUMP, NULL);
    REQUIRE_NOT_NULL(c);
    run(c, MK_BUMP, (size_t)4 << 20);
    mk_ctx_delete(c);
}

/* A slab gives its own alignment and less: run every alignment up to it,
 * for a small and a large chunk alignment. */
static void test_slab(void)
{
    static const size_t aligns[] = {8, 64, 4096, 65536};
    for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
        mk_ctx_opts o = {.chunk_size = 8, .chunk_align = aligns[i]};
        mk_ctx *c = mk_ctx_new(NULL, "slab", MK_SLAB, &o);
        REQUIRE_NOT_NULL(c);
        run(c, MK_SLAB, aligns[i]);
        mk_ctx_delete(c);
    }
}

/* mk_alloc(ctx, 0) and mk_alloc_aligned(ctx, 0, A) agree: a freeable chunk
 * with at least 16 usable bytes (release: the smallest class), 0
 * (instrumented). */
static void test_zero_consistent(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "zero", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    void *plain = mk_alloc(c, 0);
    REQUIRE_NOT_NULL(plain);
    size_t base = mk_usable_size(plain);
    CHECK_EQ(base, instrumented ? 0u : 16u);
    for (size_t a = 1; a <= ((size_t)4 << 20); a <<= 1) {
        void *p = mk_alloc_aligned(c, 0, a);
        REQUIRE_NOT_NULL(p);
        if (instrumented)
            CHECK_EQ(mk_usable_size(p), 0u);
        else
            CHECK_GE(mk_usable_size(p), base);
        mk_free(p);
    }
    mk_free(plain);
    mk_ctx_delete(c);
}

int main(void)
{
    instrumented = mki_instrument_active();
    printf("instrumented contexts: %s\n", instrumented ? "yes" : "no");
    RUN(test_general);
    RUN(test_generation);
    RUN(test_bump);
    RUN(test_slab);
    RUN(test_zero_consistent);
    return th_done();
}
