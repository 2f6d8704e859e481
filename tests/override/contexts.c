/* SPDX-License-Identifier: MIT */
/*
 * override/contexts.c - malloc and memkit's contexts together (linked with
 * libmemkit-malloc): the drop-in allocates from the calling thread's
 * current context when it is GENERAL, so a program can point a leaky
 * library at a context and take everything back by deleting it.
 *
 * What it proves:
 *  - leak capture: a "library" that mallocs and leaks (strdup, asprintf, a
 *    linked list, a buffer grown by realloc into a huge chunk, calloc,
 *    posix_memalign) while the current context is a GENERAL context puts
 *    every chunk there (mk_ctx_of, mk_ctx_stats counts them all); after
 *    switching back malloc is on the thread heap again; mk_ctx_delete
 *    returns it all: memkit's committed bytes (after mk_trim) come back to
 *    within 256 KiB of where they were, and the heap never saw a chunk;
 *    the same through a child context deleted with its parent, and when
 *    the context deleted is still the current one (malloc then goes back
 *    to the heap);
 *  - a current context of another kind (BUMP, SLAB, GENERATION) leaves
 *    malloc, calloc, realloc and posix_memalign on the thread heap;
 *  - hand-over: a worker thread creates a GENERAL context, switches to it,
 *    mallocs and leaks, and exits without switching back; the main thread
 *    takes the context (mk_ctx_set_owner), finds the leaked data intact,
 *    allocates into it, deletes it, and the memory goes back;
 *  - realloc of a chunk owned by another, still running, thread's heap
 *    keeps the contents, small, large and huge: a resize that does not fit
 *    moves the chunk into the caller's heap; one that fits keeps it where
 *    it is; the other thread's heap ends with none of those chunks;
 *  - realloc of a BUMP chunk fails with ENOTSUP from its owner (the chunk
 *    untouched), and from another thread fails the same way or keeps the
 *    contents (known bug: it returns a new chunk with nothing copied).
 *
 * Fixed contents; under a second.
 */
#include "harness.h"

#include <malloc.h>
#include <memkit.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)

static mk_stats stats_of(mk_ctx *c)
{
    mk_stats st;
    memset(&st, 0, sizeof st);
    CHECK_EQ(mk_ctx_stats(c, &st, 0), 0);
    return st;
}

/* memkit's committed bytes once every empty page has gone back. */
static size_t committed_now(void)
{
    mk_trim();
    mk_process_figures f;
    mk_process_stats(&f);
    return f.os_committed;
}

/* ---- a library that leaks ----------------------------------------------- */

typedef struct node {
    struct node *next;
    int value;
    char name[44];
} node;

typedef struct leaks {
    node *list;
    char *strings[100];
    char *text;     /* asprintf */
    char *buffer;   /* grown by realloc to BUFFER bytes */
    char *zeroed;   /* calloc */
    void *aligned;  /* posix_memalign */
    size_t chunks;  /* how many chunks the library leaked */
    size_t bytes;   /* how many bytes it asked for */
    int foreign;    /* chunks found outside the expected context */
} leaks;

enum { NODES = 1000 };
#define BUFFER (2 * MiB + 12345)

/* Leak in whatever malloc uses; record where every chunk went. */
static void leaky_library(leaks *l, mk_ctx *expect)
{
    memset(l, 0, sizeof *l);
    for (int i = 0; i < NODES; i++) {
        node *n = malloc(sizeof *n);
        if (!n)
            return;
        n->next = l->list;
        n->value = i;
        snprintf(n->name, sizeof n->name, "node %d", i);
        l->list = n;
        l->foreign += mk_ctx_of(n) != expect;
        l->chunks++;
        l->bytes += sizeof *n;
    }
    for (int i = 0; i < 100; i++) {
        char tmp[32];
        snprintf(tmp, sizeof tmp, "string number %d", i);
        l->strings[i] = strdup(tmp); /* the C library's malloc call */
        l->foreign += !l->strings[i] || mk_ctx_of(l->strings[i]) != expect;
        l->chunks++;
        l->bytes += strlen(tmp) + 1;
    }
    if (asprintf(&l->text, "%s %d", "formatted by asprintf", 42) > 0) {
        l->foreign += mk_ctx_of(l->text) != expect;
        l->chunks++;
    }
    for (size_t n = 16; n < BUFFER; n = n * 3 / 2) { /* small -> huge */
        char *b = realloc(l->buffer, n);
        if (!b)
            return;
        b[n - 1] = 'z';
        l->buffer = b;
    }
    l->buffer = realloc(l->buffer, BUFFER);
    if (l->buffer) {
        memset(l->buffer, 'b', BUFFER);
        l->foreign += mk_ctx_of(l->buffer) != expect;
        l->chunks++;
        l->bytes += BUFFER;
    }
    l->zeroed = calloc(200, KiB);
    if (l->zeroed) {
        l->foreign += mk_ctx_of(l->zeroed) != expect;
        l->chunks++;
        l->bytes += 200 * KiB;
    }
    if (posix_memalign(&l->aligned, 4096, 10000) == 0) {
        l->foreign += mk_ctx_of(l->aligned) != expect;
        l->chunks++;
        l->bytes += 10000;
    }
}

/* The library's data is as it left it. */
static int leaks_intact(const leaks *l)
{
    int i = NODES - 1;
    for (const node *n = l->list; n; n = n->next, i--) {
        char want[44];
        snprintf(want, sizeof want, "node %d", i);
        if (n->value != i || strcmp(n->name, want) != 0)
            return 0;
    }
    if (i != -1 || strcmp(l->text, "formatted by asprintf 42") != 0)
        return 0;
    for (int s = 0; s < 100; s++) {
        char want[32];
        snprintf(want, sizeof want, "string number %d", s);
        if (strcmp(l->strings[s], want) != 0)
            return 0;
    }
    return l->buffer[0] == 'b' && l->buffer[BUFFER - 1] == 'b' &&
           th_all_zero(l->zeroed, 200 * KiB);
}

static leaks lib; /* big: not on the stack */

static void test_leak_capture(void)
{
    mk_ctx *heap = mk_ctx_current();
    REQUIRE_NOT_NULL(heap);
    size_t heap_chunks = stats_of(heap).chunks;
    size_t base = committed_now();

    mk_ctx *ctx = mk_ctx_new(NULL, "library", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(ctx);
    mk_ctx *prev = mk_ctx_switch(ctx);
    CHECK_PTR_EQ(prev, heap);
    CHECK_PTR_EQ(mk_ctx_current(), ctx);
    leaky_library(&lib, ctx);
    CHECK_PTR_EQ(mk_ctx_switch(prev), ctx);
    CHECK_PTR_EQ(mk_ctx_current(), heap);

    CHECK_EQ(lib.foreign, 0);
    CHECK_EQ(lib.chunks, NODES + 100 + 4u);
    CHECK(leaks_intact(&lib));
    mk_stats st = stats_of(ctx);
    CHECK_EQ(st.chunks, lib.chunks);
    CHECK_GE(st.bytes_used, lib.bytes);
    CHECK_EQ(stats_of(heap).chunks, heap_chunks); /* none on the heap */

    /* malloc is back on the heap */
    void *p = malloc(100);
    CHECK_PTR_EQ(mk_ctx_of(p), heap);
    free(p);

    size_t leaked = committed_now();
    CHECK_GT(leaked, base + 2 * MiB);
    mk_ctx_delete(ctx);
    size_t after = committed_now();
    printf("  committed: %zu KiB before, %zu with the leaks, %zu after "
           "delete\n", base / 1024, leaked / 1024, after / 1024);
    CHECK_LT(after, base + 256 * KiB);
    CHECK_EQ(stats_of(heap).chunks, heap_chunks);
}

/* A child context of the current one, deleted with its parent. */
static void test_child_context(void)
{
    size_t base = committed_now();
    mk_ctx *parent = mk_ctx_new(NULL, "parent", MK_GENERAL, NULL);
    mk_ctx *child = mk_ctx_new(parent, "child", MK_GENERAL, NULL);
    REQUIRE(parent && child);
    mk_ctx *prev = mk_ctx_switch(child);
    leaky_library(&lib, child);
    mk_ctx_switch(prev);
    CHECK_EQ(lib.foreign, 0);
    mk_stats st;
    CHECK_EQ(mk_ctx_stats(parent, &st, 1), 0);
    CHECK_EQ(st.chunks, lib.chunks);
    CHECK_EQ(st.contexts, 2u);
    mk_ctx_delete(parent);
    CHECK_LT(committed_now(), base + 256 * KiB);
}

/* Deleting the current context: malloc goes back to the heap. */
static void test_delete_current(void)
{
    mk_ctx *heap = mk_ctx_current();
    mk_ctx *ctx = mk_ctx_new(NULL, "current", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(ctx);
    mk_ctx_switch(ctx);
    void *a = malloc(64), *b = malloc(100 * KiB);
    CHECK_PTR_EQ(mk_ctx_of(a), ctx);
    CHECK_PTR_EQ(mk_ctx_of(b), ctx);
    mk_ctx_delete(ctx); /* takes a and b with it */
    CHECK_PTR_EQ(mk_ctx_current(), heap);
    void *c = malloc(64);
    REQUIRE_NOT_NULL(c);
    CHECK_PTR_EQ(mk_ctx_of(c), heap);
    free(c);
}

/* ---- a current context of another kind ---------------------------------- */

static void test_other_kinds_leave_malloc_on_heap(void)
{
    mk_ctx *heap = mk_ctx_current();
    mk_ctx_opts so = {.chunk_size = 64};
    mk_ctx *kinds[3] = {mk_ctx_new(NULL, "bump", MK_BUMP, NULL),
                        mk_ctx_new(NULL, "slab", MK_SLAB, &so),
                        mk_ctx_new(NULL, "generation", MK_GENERATION, NULL)};
    for (int k = 0; k < 3; k++) {
        REQUIRE_NOT_NULL(kinds[k]);
        CHECK_PTR_EQ(mk_ctx_switch(kinds[k]), heap);
        CHECK_PTR_EQ(mk_ctx_current(), kinds[k]);
        size_t before = stats_of(kinds[k]).chunks;
        void *m = malloc(32), *big = malloc(50 * KiB), *z = calloc(4, 8);
        void *a = NULL;
        CHECK_EQ(posix_memalign(&a, 64, 48), 0);
        char *r = realloc(NULL, 10);
        REQUIRE(m && big && z && a && r);
        CHECK_PTR_EQ(mk_ctx_of(m), heap);
        CHECK_PTR_EQ(mk_ctx_of(big), heap);
        CHECK_PTR_EQ(mk_ctx_of(z), heap);
        CHECK_PTR_EQ(mk_ctx_of(a), heap);
        CHECK_PTR_EQ(mk_ctx_of(r), heap);
        memcpy(r, "123456789", 10);
        r = realloc(r, 3000);
        CHECK_PTR_EQ(mk_ctx_of(r), heap);
        CHECK_STR_EQ(r, "123456789");
        /* mk_alloc still reaches the current context itself */
        void *own = mk_alloc(mk_ctx_current(), 64);
        CHECK_PTR_EQ(mk_ctx_of(own), kinds[k]);
        if (k != 0) /* BUMP does not count chunks */
            CHECK_EQ(stats_of(kinds[k]).chunks, before + 1);
        free(m);
        free(big);
        free(z);
        free(a);
        free(r);
        free(own);
        CHECK_PTR_EQ(mk_ctx_switch(NULL), kinds[k]); /* NULL: the heap */
        CHECK_PTR_EQ(mk_ctx_current(), heap);
        mk_ctx_delete(kinds[k]);
    }
}

/* ---- hand-over from a thread that exits --------------------------------- */

static leaks worker_lib;

static void *worker_leaks(void *arg)
{
    (void)arg;
    mk_ctx *ctx = mk_ctx_new(NULL, "worker library", MK_GENERAL, NULL);
    if (!ctx)
        return NULL;
    mk_ctx_switch(ctx);
    leaky_library(&worker_lib, ctx);
    return ctx; /* exits with ctx still current */
}

static void test_handover_from_exited_thread(void)
{
    size_t base = committed_now();
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, worker_leaks, NULL) == 0);
    void *ret = NULL;
    pthread_join(t, &ret);
    mk_ctx *ctx = ret;
    REQUIRE_NOT_NULL(ctx);
    CHECK_EQ(worker_lib.foreign, 0);
    CHECK_EQ(worker_lib.chunks, NODES + 100 + 4u);

    mk_ctx_set_owner(ctx);
    CHECK(leaks_intact(&worker_lib));
    mk_stats st = stats_of(ctx);
    CHECK_EQ(st.chunks, worker_lib.chunks);
    /* the main thread may use it now, malloc included */
    mk_ctx *prev = mk_ctx_switch(ctx);
    char *more = malloc(1000);
    CHECK_PTR_EQ(mk_ctx_of(more), ctx);
    free(worker_lib.strings[0]); /* and free into it */
    mk_ctx_switch(prev);
    CHECK_EQ(stats_of(ctx).chunks, worker_lib.chunks);
    CHECK_GT(committed_now(), base + 2 * MiB);
    mk_ctx_delete(ctx);
    CHECK_LT(committed_now(), base + 256 * KiB);
}

/* ---- realloc of another live thread's chunk ----------------------------- */

enum { NSIZES = 4 };
static const size_t other_sizes[NSIZES] = {100, 3000, 50 * KiB, 2 * MiB};
static void *other_chunks[2][NSIZES]; /* [0]: grown, [1]: shrunk */
static mk_ctx *other_heap;
static size_t other_left = (size_t)-1;
static int phase; /* 1: chunks ready; 2: main is done with them */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;

static void set_phase(int to)
{
    pthread_mutex_lock(&lock);
    phase = to;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
}

static void wait_phase(int to)
{
    pthread_mutex_lock(&lock);
    while (phase != to)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
}

static void *owner_thread(void *arg)
{
    (void)arg;
    other_heap = mk_ctx_current();
    size_t base = stats_of(other_heap).chunks;
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < NSIZES; i++) {
            other_chunks[k][i] = malloc(other_sizes[i]);
            if (other_chunks[k][i])
                th_fill(other_chunks[k][i], other_sizes[i],
                        300 + (uint64_t)(k * NSIZES + i));
        }
    set_phase(1);
    wait_phase(2); /* alive while the main thread reallocs its chunks */
    /* every chunk the main thread resized has left this heap */
    other_left = stats_of(other_heap).chunks - base;
    return NULL;
}

static void test_realloc_other_threads_chunk(void)
{
    mk_ctx *heap = mk_ctx_current();
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, owner_thread, NULL) == 0);
    wait_phase(1);
    for (int i = 0; i < NSIZES; i++) {
        size_t n = other_sizes[i];
        uint64_t id = 300 + (uint64_t)i;
        char *p = other_chunks[0][i];
        REQUIRE_NOT_NULL(p);
        CHECK_PTR_EQ(mk_ctx_of(p), other_heap);
        CHECK_PATTERN(p, n, id);
        /* a small shrink fits where it is: the chunk stays */
        char *q = realloc(p, n - n / 4);
        REQUIRE_NOT_NULL(q);
        CHECK_PTR_EQ(q, p);
        CHECK_PTR_EQ(mk_ctx_of(q), other_heap);
        CHECK_PATTERN(q, n - n / 4, id);
        /* growing moves it into this thread's heap, contents kept */
        char *g = realloc(q, 3 * n);
        REQUIRE_NOT_NULL(g);
        CHECK_PTR_EQ(mk_ctx_of(g), heap);
        CHECK_PATTERN(g, n - n / 4, id);
        free(g);

        /* a big shrink moves it too (it would waste the old chunk) */
        id += NSIZES;
        char *b = other_chunks[1][i];
        REQUIRE_NOT_NULL(b);
        char *small = realloc(b, n / 8);
        REQUIRE_NOT_NULL(small);
        CHECK_PTR_EQ(mk_ctx_of(small), heap);
        CHECK_PATTERN(small, n / 8, id);
        free(small);
    }
    set_phase(2);
    pthread_join(t, NULL);
    CHECK_EQ(other_left, 0u);
}

/* ---- realloc of a BUMP chunk, by its owner and by another thread ------ */

/*
 * A BUMP chunk cannot be resized (mk_realloc: NULL, errno ENOTSUP); realloc
 * from the owner thread says so and leaves the chunk alone.  From another
 * thread it must do the same, or at least keep the contents: a chunk whose
 * size memkit does not know (mk_usable_size 0) cannot be copied.
 */
static char *bump_chunk;
static char *bump_other_result;
static int bump_other_errno;

static void *realloc_bump_elsewhere(void *arg)
{
    (void)arg;
    errno = 0;
    bump_other_result = realloc(bump_chunk, 200);
    bump_other_errno = errno;
    return NULL;
}

static void test_realloc_bump_chunk_other_thread(void)
{
    mk_ctx *b = mk_ctx_new(NULL, "bump", MK_BUMP, NULL);
    REQUIRE_NOT_NULL(b);
    bump_chunk = mk_alloc(b, 100);
    REQUIRE_NOT_NULL(bump_chunk);
    th_fill(bump_chunk, 100, 77);
    errno = 0;
    CHECK_NULL(realloc(bump_chunk, 200)); /* the owner */
    CHECK_ERRNO(ENOTSUP);
    CHECK_PATTERN(bump_chunk, 100, 77);

    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, realloc_bump_elsewhere, NULL) == 0);
    pthread_join(t, NULL);
    CHECK_PATTERN(bump_chunk, 100, 77);
    if (bump_other_result) { /* moved: then with its contents */
        CHECK_PATTERN(bump_other_result, 100, 77);
        free(bump_other_result);
    } else {
        CHECK_EQ(bump_other_errno, ENOTSUP);
    }
    mk_ctx_delete(b);
}

int main(void)
{
    RUN(test_leak_capture);
    RUN(test_child_context);
    RUN(test_delete_current);
    RUN(test_other_kinds_leave_malloc_on_heap);
    RUN(test_handover_from_exited_thread);
    RUN(test_realloc_other_threads_chunk);
    RUN(test_realloc_bump_chunk_other_thread);
    return th_done();
}
