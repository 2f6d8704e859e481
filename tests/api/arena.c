/* SPDX-License-Identifier: MIT */
/*
 * api/arena.c - the arena of normal segments (os.h, segment.c; option
 * arena_mb): whatever its size, every chunk behaves the same.
 *
 * Run with MEMKIT_ARENA_MB=0 (no arena: every segment a mapping of its
 * own, every free on the slow path) and =256 (the smallest arena: 64
 * segments; 300 MiB of chunks outgrow it): chunks of every size class,
 * large and huge, allocated past the arena's end, written, checked,
 * reallocated and freed from the owner and from another thread; a double
 * free and an interior free of a chunk outside the arena are reported;
 * segments given back and taken again (mk_trim between two rounds).
 * Without the variable, the default arena: the same checks.
 */
#include "harness.h"
#include "option.h"

#include <memkit.h>
#include <pthread.h>

#define MiB ((size_t)1 << 20)

enum { N = 4800 };
static char *chunks[N];
static size_t sizes[N];

static void *free_half(void *arg)
{
    (void)arg;
    for (int i = 1; i < N; i += 2) {
        mk_free(chunks[i]);
        chunks[i] = NULL;
    }
    return NULL;
}

static void round_trip(mk_ctx *c, uint64_t seed)
{
    th_rng r = {seed};
    size_t total = 0;
    for (int i = 0; i < N; i++) {
        size_t n = i % 400 == 0 ? (size_t)(2 + th_below(&r, 3)) * MiB
                   : i % 20 == 0 ? 40000 + (size_t)th_below(&r, 200000)
                                 : 16 + (size_t)th_below(&r, 120000);
        chunks[i] = mk_alloc(c, n);
        REQUIRE_NOT_NULL(chunks[i]);
        sizes[i] = n;
        th_fill(chunks[i], n < 4096 ? n : 4096, seed + (uint64_t)i);
        total += n;
    }
    printf("  %.0f MiB in %d chunks\n", (double)total / MiB, N);
    for (int i = 0; i < N; i++)
        CHECK_PATTERN(chunks[i], sizes[i] < 4096 ? sizes[i] : 4096, seed + (uint64_t)i);
    for (int i = 0; i < N; i += 4) { /* realloc a quarter */
        char *q = mk_realloc(chunks[i], sizes[i] + 1000);
        REQUIRE_NOT_NULL(q);
        CHECK_PATTERN(q, sizes[i] < 4096 ? sizes[i] : 4096, seed + (uint64_t)i);
        chunks[i] = q;
    }
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, free_half, NULL) == 0);
    pthread_join(t, NULL);
    for (int i = 0; i < N; i += 2)
        mk_free(chunks[i]);
}

static int reports;
static void handler(const char *m, void *arg)
{
    (void)arg, (void)m;
    reports++;
}

static void test_every_size_past_the_arena(void)
{
    printf("  arena_mb %ld\n", th_option("arena_mb"));
    mk_ctx *c = mk_ctx_new(NULL, "arena", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    round_trip(c, 1);
    mk_trim(); /* segments go back ... */
    round_trip(c, 2); /* ... and are taken again */
    /* misuse on the chunks allocated last (outside a small arena) */
    char *p = mk_alloc(c, 48), *q = mk_alloc(c, 48);
    REQUIRE(p && q);
    mk_set_error_handler(handler, NULL);
    mk_free(p);
    mk_free(p);
    CHECK_EQ(reports, 1);
    mk_free(q + 16);
    CHECK_EQ(reports, 2);
    mk_set_error_handler(NULL, NULL);
    mk_free(q);
    mk_ctx_delete(c);
    CHECK_EQ(mk_option_set("arena_mb", 1024), -1); /* fixed at start */
}

int main(void)
{
    RUN(test_every_size_past_the_arena);
    return th_done();
}
