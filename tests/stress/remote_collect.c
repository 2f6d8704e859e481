/* SPDX-License-Identifier: MIT */
/*
 * remote_collect.c - chunks freed by another thread come back to their
 * owner, for every kind and for large chunks: an owner that keeps
 * allocating while a second thread frees everything it allocated must not
 * grow.  Linked against both builds; in the checking build a reset after
 * such frees must not report the freed chunks.
 */
#include "harness.h"

#include <memkit.h>
#include <pthread.h>

enum { BATCH = 4000, ROUNDS = 30 };
static void *batch[BATCH];

static void *free_all(void *arg)
{
    (void)arg;
    for (int i = 0; i < BATCH; i++)
        mk_free(batch[i]);
    return NULL;
}

/* Rounds of: the owner allocates BATCH chunks of @size, another thread
 * frees them.  Returns the largest reserved figure seen after round 5. */
static size_t rounds(mk_ctx *c, size_t size, int *bad)
{
    size_t most = 0, after5 = 0;
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < BATCH; i++) {
            batch[i] = mk_alloc(c, size);
            if (!batch[i]) {
                (*bad)++;
                return 0;
            }
            ((char *)batch[i])[0] = (char)r;
        }
        pthread_t t;
        if (pthread_create(&t, NULL, free_all, NULL) != 0) {
            (*bad)++;
            return 0;
        }
        pthread_join(t, NULL);
        mk_stats st;
        mk_ctx_stats(c, &st, 0);
        if (r == 5)
            after5 = st.bytes_reserved;
        if (r > 5 && st.bytes_reserved > most)
            most = st.bytes_reserved;
    }
    /* steady state: what round 5 held, give or take a block or two */
    return most > after5 ? most - after5 : 0;
}

static void run_kind(mk_kind kind, size_t size, const char *what)
{
    mk_ctx_opts o = {.chunk_size = size};
    mk_ctx *c = mk_ctx_new(NULL, what, kind, kind == MK_SLAB ? &o : NULL);
    REQUIRE_NOT_NULL(c);
    int bad = 0;
    size_t growth = rounds(c, size, &bad);
    CHECK_EQ(bad, 0);
    printf("  %s, %zu-byte chunks: reserved grew %zu bytes after round 5\n",
           what, size, growth);
    /* one more block's worth is tolerated; unbounded growth is ROUNDS x
     * BATCH x size */
    CHECK_LE(growth, (size_t)BATCH * size / 2 + (1u << 20));
    /* the last batch was freed by the other thread: a reset (which in the
     * checking build walks the live chunks) must find none of them */
    mk_ctx_reset(c);
    mk_stats st;
    mk_ctx_stats(c, &st, 0);
    CHECK_EQ(st.chunks, 0u);
    mk_ctx_delete(c);
}

static void test_general_small(void) { run_kind(MK_GENERAL, 100, "general"); }
static void test_general_large(void)
{
    run_kind(MK_GENERAL, 40000, "general-large");
}
static void test_slab(void) { run_kind(MK_SLAB, 100, "slab"); }
static void test_generation(void) { run_kind(MK_GENERATION, 100, "generation"); }
static void test_generation_large(void)
{
    run_kind(MK_GENERATION, 100000, "generation-large");
}

int main(void)
{
    RUN(test_general_small);
    RUN(test_general_large);
    RUN(test_slab);
    RUN(test_generation);
    RUN(test_generation_large);
    return th_done();
}
