/* SPDX-License-Identifier: MIT */
/*
 * override/family.c - the malloc family, linked with libmemkit-malloc (the
 * shared library, or the static one for override_family_static), so that
 * memkit's own API can look at what malloc hands out.
 *
 * It runs every check of family.h (the family's contract through the C
 * library's names), then what only a program that sees memkit can prove:
 *  - every entry point's chunk belongs to the calling thread's current
 *    context (mk_ctx_of(malloc(n)) == mk_ctx_current()), for small, large,
 *    huge and aligned chunks, calloc, realloc, valloc and pvalloc;
 *  - free(), free_sized() and realloc() accept chunks that mk_alloc gave
 *    from any kind of context: GENERAL, SLAB and GENERATION chunks are
 *    freed (the context's chunk count drops to 0), a typed pool's object
 *    too, a BUMP chunk's free is a no-op (the chunk stays intact until
 *    the context goes); realloc keeps a chunk in its own context;
 *  - realloc(p, 0) and free() really free: the heap's chunk count returns
 *    to where it was;
 *  - malloc_trim(0) gives back what free() left committed (returns 1, then
 *    0 once nothing is left), with the purge delay set to "never" so that
 *    only the trim can do it.
 *
 * Fixed seeds; a few seconds at most.
 */
#include "family.h"

#include <memkit.h>
#include "option.h"

static size_t heap_chunks(void)
{
    mk_stats st;
    CHECK_EQ(mk_ctx_stats(mk_ctx_current(), &st, 0), 0);
    return st.chunks;
}

static size_t chunks_of(mk_ctx *c)
{
    mk_stats st;
    CHECK_EQ(mk_ctx_stats(c, &st, 0), 0);
    return st.chunks;
}

/* ---- malloc's chunks belong to the current context ---------------------- */

static void check_mine(void *p, const char *what, size_t n)
{
    th_checks++;
    if (!p) {
        th_fail(__FILE__, __LINE__, "%s(%zu) failed", what, n);
        return;
    }
    if (mk_ctx_of(p) != mk_ctx_current())
        th_fail(__FILE__, __LINE__, "%s(%zu) = %p: owned by %p (\"%s\"), "
                "not the current context %p", what, n, p, (void *)mk_ctx_of(p),
                mk_ctx_of(p) ? mk_ctx_name(mk_ctx_of(p)) : "-",
                (void *)mk_ctx_current());
}

static void test_owner_is_current(void)
{
    mk_ctx *cur = mk_ctx_current();
    REQUIRE_NOT_NULL(cur);
    CHECK_EQ(mk_ctx_kind(cur), MK_GENERAL);
    CHECK_STR_EQ(mk_ctx_name(cur), "thread");
    static const size_t sizes[] = {0, 1, 8, 24, 100, 1024, 5000, 32768,
                                   40000, 1048576, 2 * 1048576 + 1};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        void *p = malloc(n);
        check_mine(p, "malloc", n);
        void *c = calloc(1, n);
        check_mine(c, "calloc", n);
        void *a = aligned_alloc(256, n);
        check_mine(a, "aligned_alloc", n);
        void *m = memalign(128 * 1024, n);
        check_mine(m, "memalign", n);
        void *v = valloc(n);
        check_mine(v, "valloc", n);
        void *pv = pvalloc(n);
        check_mine(pv, "pvalloc", n);
        void *r = NULL;
        CHECK_EQ(posix_memalign(&r, 64, n), 0);
        check_mine(r, "posix_memalign", n);
        p = realloc(p, n * 2 + 1);
        check_mine(p, "realloc", n * 2 + 1);
        free(p);
        free(c);
        free(a);
        free(m);
        free(v);
        free(pv);
        free(r);
    }
}

/* free() and realloc(p, 0) free: the heap's chunk count comes back. */
static void test_free_counts(void)
{
    size_t base = heap_chunks();
    enum { N = 500 };
    static void *ps[N];
    th_rng rng = {0x5eed0002};
    for (int i = 0; i < N; i++) {
        ps[i] = malloc((size_t)th_below(&rng, 70000));
        REQUIRE_NOT_NULL(ps[i]);
    }
    CHECK_EQ(heap_chunks(), base + N);
    for (int i = 0; i < N; i++) {
        if (i % 3 == 0)
            free(ps[i]);
        else if (i % 3 == 1)
            CHECK_NULL(realloc(ps[i], 0));
        else
            free_sized(ps[i], 0);
    }
    CHECK_EQ(heap_chunks(), base);
}

/* ---- chunks of every kind of context go through free() and realloc() ---- */

static void test_free_context_chunks(void)
{
    mk_ctx *g = mk_ctx_new(NULL, "general", MK_GENERAL, NULL);
    mk_ctx_opts so = {.chunk_size = 48};
    mk_ctx *s = mk_ctx_new(NULL, "slab", MK_SLAB, &so);
    mk_ctx *gen = mk_ctx_new(NULL, "generation", MK_GENERATION, NULL);
    mk_ctx *b = mk_ctx_new(NULL, "bump", MK_BUMP, NULL);
    REQUIRE(g && s && gen && b);

    void *gp[4] = {mk_alloc(g, 100), mk_alloc(g, 100000),
                   mk_alloc(g, 2 * FAM_MiB), mk_alloc_aligned(g, 10, 4096)};
    void *sp[3] = {mk_alloc(s, 48), mk_alloc(s, 10), mk_alloc_zero(s, 48)};
    void *np[3] = {mk_alloc(gen, 10), mk_alloc(gen, 5000),
                   mk_alloc(gen, 300000)};
    for (int i = 0; i < 4; i++)
        REQUIRE_NOT_NULL(gp[i]);
    for (int i = 0; i < 3; i++)
        REQUIRE(sp[i] && np[i]);
    CHECK_EQ(chunks_of(g), 4u);
    CHECK_EQ(chunks_of(s), 3u);
    CHECK_EQ(chunks_of(gen), 3u);

    /* realloc keeps a GENERAL chunk in its context, contents and all */
    th_fill(gp[0], 100, 61);
    void *grown = realloc(gp[0], 50000);
    REQUIRE_NOT_NULL(grown);
    CHECK_PTR_EQ(mk_ctx_of(grown), g);
    CHECK_PATTERN(grown, 100, 61);
    gp[0] = grown;
    /* a SLAB chunk resizes within its chunk size only */
    th_fill(sp[0], 48, 62);
    void *same = realloc(sp[0], 40);
    CHECK_PTR_EQ(mk_ctx_of(same), s);
    CHECK_PATTERN(same, 40, 62);
    sp[0] = same;
    CHECK_NULL(realloc(sp[0], 49));
    CHECK_PATTERN(sp[0], 40, 62);

    free(gp[0]);
    free_sized(gp[1], 100000);
    free(gp[2]);
    free_aligned_sized(gp[3], 4096, 10);
    for (int i = 0; i < 3; i++) {
        free(sp[i]);
        free(np[i]);
    }
    CHECK_EQ(chunks_of(g), 0u);
    CHECK_EQ(chunks_of(s), 0u);
    CHECK_EQ(chunks_of(gen), 0u);

    /* BUMP: free() is a no-op, the chunk stays as it was */
    char *bp = mk_alloc(b, 200);
    REQUIRE_NOT_NULL(bp);
    th_fill(bp, 200, 63);
    free(bp);
    CHECK_PTR_EQ(mk_ctx_of(bp), b);
    CHECK_PATTERN(bp, 200, 63);
    char *bq = mk_alloc(b, 200); /* not handed out again */
    REQUIRE_NOT_NULL(bq);
    CHECK(bq + 200 <= bp || bp + 200 <= bq);
    CHECK_PATTERN(bp, 200, 63);

    /* a typed pool's object, freed with free() */
    mk_pool *pool = mk_pool_new("pool", 32, 0, 0);
    REQUIRE_NOT_NULL(pool);
    void *obj = mk_pool_alloc(pool);
    REQUIRE_NOT_NULL(obj);
    free(obj);
    mk_stats ps;
    CHECK_EQ(mk_pool_stats(pool, &ps), 0);
    CHECK_EQ(ps.chunks, 0u);
    mk_pool_delete(pool);

    mk_ctx_delete(g);
    mk_ctx_delete(s);
    mk_ctx_delete(gen);
    mk_ctx_delete(b);
}

/* ---- malloc_trim -------------------------------------------------------- */

static void test_trim_gives_back(void)
{
    long old = th_option("purge_delay_ms");
    CHECK_EQ(mk_option_set("purge_delay_ms", -1), 0); /* only a trim purges */
    enum { N = 48 };
    void *ps[N];
    for (int i = 0; i < N; i++) {
        ps[i] = malloc(fam_opaque(512 * FAM_KiB)); /* large: in segments */
        REQUIRE_NOT_NULL(ps[i]);
        memset(ps[i], 7, 512 * FAM_KiB);
    }
    for (int i = 0; i < N; i++)
        free(ps[i]);
    mk_process_figures before, after;
    mk_process_stats(&before);
    CHECK_EQ(malloc_trim(0), 1);
    mk_process_stats(&after);
    /* most of the 24 MiB freed went back */
    CHECK_LT(after.os_committed + 16 * FAM_MiB, before.os_committed);
    CHECK_EQ(malloc_trim(0), 0);
    CHECK_EQ(mk_option_set("purge_delay_ms", old), 0);
}

int main(void)
{
    family_run_all();
    RUN(test_owner_is_current);
    RUN(test_free_counts);
    RUN(test_free_context_chunks);
    RUN(test_trim_gives_back);
    return th_done();
}
