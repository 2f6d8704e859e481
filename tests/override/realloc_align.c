/*
 * override/realloc_align.c - realloc keeps memkit.h's alignment rule (a
 * chunk is 16-aligned unless its size is 8 or less or 17..24) when
 * another thread reallocates a chunk (a library bug found by
 * fuzz/malloc_fuzz, fixed in 2656fea).
 *
 * The drop-in's realloc of a chunk that another thread's context owns
 * keeps the chunk where it is if the new size fits (n <= usable and
 * n >= usable / 2, src/override/malloc.c).  A chunk of 17..24 bytes lives
 * in the 24-byte class, 8-aligned; kept for 12..16 bytes, it would break
 * the rule those sizes have (16): such a chunk must move.  The owner's
 * realloc (the same thread) moves it to the 16-byte class: checked here
 * too, as the control.
 */
#include "harness.h"

#include <pthread.h>

static void *chunk, *result;
static size_t new_size;

static void *realloc_there(void *arg)
{
    (void)arg;
    result = realloc(chunk, new_size);
    return NULL;
}

/* A chunk of @n bytes at an address that is not 16-aligned (the 24-byte
 * class holds both kinds; take the first 8-aligned one). */
static void *misaligned(size_t n, void **spare)
{
    void *p = malloc(n);
    if (p && (uintptr_t)p % 16 == 0) {
        *spare = p;
        p = malloc(n);
    }
    return p;
}

static void test_owner_realloc(void)
{
    for (size_t n1 = 17; n1 <= 24; n1++)
        for (size_t n2 = 9; n2 <= 16; n2++) {
            void *spare = NULL, *p = misaligned(n1, &spare);
            REQUIRE(p && (uintptr_t)p % 16 != 0);
            void *q = realloc(p, n2);
            REQUIRE_NOT_NULL(q);
            CHECK_EQ((uintptr_t)q % 16, 0u);
            free(q);
            free(spare);
        }
}

static void test_other_thread_realloc(void)
{
    for (size_t n1 = 17; n1 <= 24; n1++)
        for (size_t n2 = 9; n2 <= 16; n2++) {
            void *spare = NULL;
            chunk = misaligned(n1, &spare);
            REQUIRE(chunk && (uintptr_t)chunk % 16 != 0);
            new_size = n2;
            pthread_t t;
            REQUIRE(pthread_create(&t, NULL, realloc_there, NULL) == 0);
            pthread_join(t, NULL);
            REQUIRE_NOT_NULL(result);
            th_checks++;
            if ((uintptr_t)result % 16)
                th_fail(__FILE__, __LINE__, "realloc(%zu-byte chunk, %zu) "
                        "from another thread: %p, not 16-aligned", n1, n2,
                        result);
            free(result);
            free(spare);
        }
}

int main(void)
{
    RUN(test_owner_realloc);
    RUN(test_other_thread_realloc);
    return th_done();
}
