/* SPDX-License-Identifier: MIT */
/*
 * override/realloc_align.c - realloc keeps malloc's alignment rule (every
 * result of more than 8 bytes is 16-aligned, as on glibc) when it is given
 * a chunk that is not 16-aligned: one of mk_alloc's 24-byte class (8-aligned,
 * memkit.h), which a program may hand to realloc.
 *
 * The drop-in's realloc keeps a chunk where it is if the new size fits
 * (n <= usable and n >= usable / 2, src/override/malloc.c); a 24-byte-class
 * chunk kept for 9..32 bytes would break the rule: it must move, whether
 * its owner reallocates it or another thread does (that case was a library
 * bug found by fuzz/malloc_fuzz, fixed in 2656fea).
 */
#include "harness.h"

#include <memkit.h>
#include <pthread.h>
#include <string.h>

static void *chunk, *result;
static size_t new_size;

static void *realloc_there(void *arg)
{
    (void)arg;
    result = realloc(chunk, new_size);
    return NULL;
}

/* A chunk of @n (17..24) bytes of mk_alloc's 24-byte class at an address
 * that is not 16-aligned (the class holds both kinds; take the first
 * 8-aligned one, keeping the 16-aligned ones met before it in `spares`,
 * NULL after the last, for free_spares).  How many come first is the free
 * list's business: the 8-aligned chunks that realloc moves away from
 * another thread come back to the list only when it runs dry, and the
 * 16-aligned ones freed here go on top of it. */
#define SPARES 4096
static void *spares[SPARES];

static void *misaligned(size_t n)
{
    memset(spares, 0, sizeof spares);
    for (int k = 0; k < SPARES; k++) {
        void *p = mk_alloc(mk_ctx_current(), n);
        if (!p || (uintptr_t)p % 16 != 0)
            return p;
        spares[k] = p;
    }
    return NULL;
}

static void free_spares(void)
{
    for (int k = 0; k < SPARES; k++)
        free(spares[k]);
}

static void test_owner_realloc(void)
{
    for (size_t n1 = 17; n1 <= 24; n1++)
        for (size_t n2 = 9; n2 <= 32; n2++) {
            void *p = misaligned(n1);
            REQUIRE(p && (uintptr_t)p % 16 != 0);
            void *q = realloc(p, n2);
            REQUIRE_NOT_NULL(q);
            th_checks++;
            if ((uintptr_t)q % 16)
                th_fail(__FILE__, __LINE__, "realloc(%zu-byte chunk, %zu): "
                        "%p, not 16-aligned", n1, n2, q);
            free(q);
            free_spares();
        }
}

static void test_other_thread_realloc(void)
{
    for (size_t n1 = 17; n1 <= 24; n1++)
        for (size_t n2 = 9; n2 <= 32; n2++) {
            chunk = misaligned(n1);
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
            free_spares();
        }
}

int main(void)
{
    RUN(test_owner_realloc);
    RUN(test_other_thread_realloc);
    return th_done();
}
