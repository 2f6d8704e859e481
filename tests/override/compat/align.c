/* SPDX-License-Identifier: MIT */
/*
 * compat/align.c - every result of the malloc family for more than 8 bytes
 * is 16-aligned, as on glibc (C23 7.24.3 asks for the alignment
 * of any object that fits the request).
 *
 *  - malloc, calloc, realloc (growing and shrinking), memalign and
 *    posix_memalign with small alignments, aligned_alloc(16), strdup and
 *    the C library's own callers, for every size up to 4 KiB and a spread
 *    of larger ones, in the main thread and another;
 *  - a struct of an __m128 and a flexible array member, allocated with
 *    malloc(sizeof(S) + 8) and stored with movaps: it crashed on memkit
 *    when malloc(24) was 8-aligned half the time;
 *  - linked with the drop-in: malloc inside a GENERAL context made current
 *    with mk_ctx_switch, and realloc of a chunk of mk_alloc's 24-byte class
 *    (8-aligned by design, memkit.h) into a malloc size.
 */
#include "compat.h"

#include <malloc.h>
#include <pthread.h>
#include <xmmintrin.h>
#ifdef OVR_LINKED
#include <memkit.h>
#endif

static void check_aligned(const void *p, size_t n, const char *what, int line)
{
    th_checks++;
    if (!p)
        th_fail(__FILE__, line, "%s(%zu) failed", what, n);
    else if (n > 8 && (uintptr_t)p % 16)
        th_fail(__FILE__, line, "%s(%zu) = %p: not 16-aligned", what, n, p);
}
#define ALIGNED(p, n, what) check_aligned(p, n, what, __LINE__)

static size_t big_sizes[] = {4097, 5000, 8200, 20000, 32768, 32769, 65536,
                             100000, 1u << 20, (1u << 20) + 1, 3u << 20,
                             (5u << 20) + 17};

/* Every allocation function, every size up to 4 KiB and the big ones; the
 * chunks stay live until the end, so that no size reuses another's. */
static void *every_function(void *arg)
{
    (void)arg;
    enum { N = 4097 + sizeof big_sizes / sizeof big_sizes[0] };
    static void *keep[N * 7]; /* (the two calls run one after the other) */
    size_t k = 0;
    for (size_t i = 0; i < N; i++) {
        size_t n = i < 4097 ? i : big_sizes[i - 4097];
        void *p = malloc(compat_opaque(n));
        ALIGNED(p, n, "malloc");
        keep[k++] = p;
        p = calloc(1, compat_opaque(n));
        ALIGNED(p, n, "calloc");
        keep[k++] = p;
        p = memalign(8, compat_opaque(n));
        ALIGNED(p, n, "memalign(8)");
        keep[k++] = p;
        p = NULL;
        if (posix_memalign(&p, 8, compat_opaque(n)) != 0)
            p = NULL;
        ALIGNED(p, n, "posix_memalign(8)");
        keep[k++] = p;
        p = aligned_alloc(16, compat_opaque(n ? (n + 15) & ~(size_t)15 : 16));
        ALIGNED(p, n ? n : 16, "aligned_alloc(16)");
        keep[k++] = p;
        /* realloc up from 1 byte, and down from 4 KiB */
        p = realloc(malloc(1), compat_opaque(n ? n : 1)); /* (0 frees) */
        ALIGNED(p, n, "realloc up");
        keep[k++] = p;
        p = realloc(malloc(4096), compat_opaque(n ? n : 1));
        ALIGNED(p, n, "realloc down");
        keep[k++] = p;
    }
    for (size_t i = 0; i < k; i++)
        free(keep[i]);
    /* the C library's own calls */
    char text[300];
    memset(text, 'x', sizeof text);
    for (size_t n = 9; n < sizeof text; n++) {
        text[n] = '\0';
        char *s = strdup(text);
        ALIGNED(s, n + 1, "strdup");
        free(s);
        text[n] = 'x';
    }
    return NULL;
}

static void test_every_function(void)
{
    every_function(NULL);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, every_function, NULL) == 0);
    pthread_join(t, NULL);
}

/* An object C says fits the request: 16 bytes of vector, then a tail. */
typedef struct {
    __m128 v;
    char tail[];
} vec_tail;

static void test_movaps(void)
{
    enum { N = 256 };
    vec_tail *keep[N];
    __m128 x = _mm_set1_ps(1.5f);
    for (int i = 0; i < N; i++) {
        keep[i] = malloc(compat_opaque(sizeof(vec_tail) + 8));
        REQUIRE_NOT_NULL(keep[i]);
        ALIGNED(keep[i], sizeof(vec_tail) + 8, "malloc");
        if ((uintptr_t)keep[i] % 16)
            return; /* the store below would kill the test */
        _mm_store_ps((float *)&keep[i]->v, x); /* movaps: faults if not 16-aligned */
        memset(keep[i]->tail, i, 8);
    }
    float out[4];
    for (int i = 0; i < N; i++) {
        _mm_storeu_ps(out, _mm_load_ps((float *)&keep[i]->v));
        CHECK(out[0] == 1.5f && out[3] == 1.5f);
        free(keep[i]);
    }
}

#ifdef OVR_LINKED
/* malloc in a GENERAL context made current: the same rule. */
static void test_switched_context(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "switched", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    mk_ctx *prev = mk_ctx_switch(c);
    void *keep[64 * 3];
    size_t k = 0;
    for (size_t n = 9; n <= 72; n++) {
        keep[k] = malloc(compat_opaque(n));
        ALIGNED(keep[k], n, "malloc in a switched context");
        CHECK(keep[k] && mk_ctx_of(keep[k]) == c);
        k++;
        keep[k] = calloc(1, compat_opaque(n));
        ALIGNED(keep[k], n, "calloc in a switched context");
        k++;
        keep[k] = realloc(NULL, compat_opaque(n));
        ALIGNED(keep[k], n, "realloc(NULL) in a switched context");
        k++;
    }
    for (size_t i = 0; i < k; i++)
        free(keep[i]);
    mk_ctx_switch(prev);
    mk_ctx_delete(c);
}

/* mk_alloc keeps its 24-byte class, 8-aligned; realloc to a malloc size
 * gives malloc's alignment. */
static void test_mk_alloc_then_realloc(void)
{
    enum { N = 64 };
    void *p[N];
    int misaligned = 0;
    for (int i = 0; i < N; i++) {
        p[i] = mk_alloc(mk_ctx_current(), 24);
        REQUIRE_NOT_NULL(p[i]);
        misaligned += (uintptr_t)p[i] % 16 != 0;
    }
    CHECK_GT(misaligned, 0); /* the 24-byte class is still 8-aligned */
    for (int i = 0; i < N; i++) {
        void *q = realloc(p[i], compat_opaque(17 + (size_t)i % 8));
        ALIGNED(q, 17 + (size_t)i % 8, "realloc of a 24-byte mk_alloc chunk");
        free(q);
    }
}
#endif

int main(void)
{
    compat_start();
    RUN(test_every_function);
    RUN(test_movaps);
#ifdef OVR_LINKED
    RUN(test_switched_context);
    RUN(test_mk_alloc_then_realloc);
#endif
    return th_done();
}
