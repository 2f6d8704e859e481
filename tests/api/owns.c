/*
 * api/owns.c - mk_owns, the question that never aborts: 1 for the start of
 * a live chunk memkit handed out, 0 for anything else, whatever it is
 * (built against the release library, api_owns, and the checking library,
 * api_owns_check, whose small pages answer from their live bits):
 *  - every kind's live chunks, small, large and huge, and a pool's
 *    objects: 1; NULL: 0;
 *  - freed chunks (by the owner, by another thread before the owner took
 *    them in, a pool object waiting in the pool's front): 0;
 *  - interior pointers (one byte in, past a huge chunk's first 4 MiB): 0;
 *  - addresses memkit never returned (the stack, a global, glibc's
 *    malloc, a string literal, a page of our own mmap): 0, and the
 *    program goes on: nothing printed, nothing aborted;
 *  - a deleted context's chunks: 0;
 *  - a bump block: any address inside it 1 (no chunk boundaries), as
 *    documented.
 * Each check that could abort runs in a child (th_run_child) that must
 * exit 0 with nothing on stderr.
 */
#include "harness.h"

#include <memkit.h>
#include <pthread.h>
#include <sys/mman.h>

static int global_word;

typedef struct owns_case {
    const void *p;
    int want;
} owns_case;

/* In a child: mk_owns(p) must answer @want and print nothing; a wrong
 * answer exits 3, an abort dies of SIGABRT. */
static void ask(void *arg)
{
    const owns_case *c = arg;
    _exit(mk_owns(c->p) == c->want ? 0 : 3);
}

static void owns_is(const char *file, int line, const void *p, int want)
{
    owns_case c = {p, want};
    char out[1024];
    th_checks++;
    int st = th_run_child(ask, &c, out, sizeof out);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || out[0])
        th_fail(file, line, "mk_owns(%p): expected %d quietly; child status "
                "0x%x, stderr \"%s\"", p, want, st, out);
}
#define OWNS_IS(p, want) owns_is(__FILE__, __LINE__, p, want)

static void test_live_chunks(void)
{
    CHECK_EQ(mk_owns(NULL), 0);
    mk_ctx_opts so = {.chunk_size = 48};
    const struct { mk_kind kind; const mk_ctx_opts *opts; } kinds[] = {
        {MK_GENERAL, NULL}, {MK_SLAB, &so}, {MK_GENERATION, NULL}};
    const size_t sizes[] = {0, 8, 24, 48, 1000, 20000, 100000, (size_t)3 << 20};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        mk_ctx *c = mk_ctx_new(NULL, "owns", kinds[k].kind, kinds[k].opts);
        REQUIRE_NOT_NULL(c);
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
            if (kinds[k].kind == MK_SLAB && sizes[i] > 48)
                continue;
            char *p = mk_alloc(c, sizes[i]);
            REQUIRE_NOT_NULL(p);
            CHECK_EQ(mk_owns(p), 1);
            if (sizes[i] >= 16)
                OWNS_IS(p + 1, 0); /* inside the chunk */
            if (sizes[i] > ((size_t)4 << 20) + 4096)
                OWNS_IS(p + ((size_t)4 << 20) + 64, 0);
            mk_free(p);
            OWNS_IS(p, 0); /* freed (or its memory gone back) */
        }
        mk_ctx_delete(c);
    }
    /* a huge chunk's data past its first 4 MiB is no chunk's start */
    mk_ctx *c = mk_ctx_new(NULL, "huge", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    char *h = mk_alloc(c, (size_t)9 << 20);
    REQUIRE_NOT_NULL(h);
    CHECK_EQ(mk_owns(h), 1);
    OWNS_IS(h + ((size_t)5 << 20), 0);
    mk_ctx_delete(c);
    OWNS_IS(h, 0); /* its context is gone */
}

static void test_pools(void)
{
    mk_pool *pool = mk_pool_new("owns-pool", 40, 0, 0);
    REQUIRE_NOT_NULL(pool);
    void *a = mk_pool_get(pool), *b = mk_pool_get(pool);
    REQUIRE(a && b);
    CHECK_EQ(mk_owns(a), 1);
    CHECK_EQ(mk_owns(b), 1);
    mk_pool_put(pool, a); /* in the pool's front: free for the program */
    CHECK_EQ(mk_owns(a), 0);
    CHECK_EQ(mk_owns(b), 1);
    mk_pool_put(pool, b);
    mk_pool_delete(pool);
}

static void *free_it(void *p)
{
    mk_free(p);
    return NULL;
}

/* A chunk freed by another thread waits on a list for its owner: it is
 * already no live chunk. */
static void test_remote_free(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "remote", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    void *keep = mk_alloc(c, 64), *p = mk_alloc(c, 64);
    REQUIRE(keep && p);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, free_it, p) == 0);
    pthread_join(t, NULL);
    CHECK_EQ(mk_owns(p), 0);
    CHECK_EQ(mk_owns(keep), 1);
    mk_ctx_delete(c);
}

/* Addresses memkit never returned: 0, quietly (mk_ctx_of and
 * mk_usable_size would report them and abort). */
static void test_foreign(void)
{
    int local = 0;
    OWNS_IS(&local, 0);
    OWNS_IS(&global_word, 0);
    OWNS_IS("a literal", 0);
    OWNS_IS((void *)test_foreign, 0);
    char *m = malloc(64); /* glibc's: this test does not use the drop-in */
    REQUIRE_NOT_NULL(m);
    OWNS_IS(m, 0);
    free(m);
    void *map = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(map != MAP_FAILED);
    OWNS_IS(map, 0);
    OWNS_IS((char *)map + 4096, 0);
    munmap(map, 1 << 16);
    OWNS_IS((void *)(uintptr_t)16, 0);
    OWNS_IS((void *)(uintptr_t)-4096, 0);
}

/* BUMP keeps no boundaries: any address of a block is accepted, as
 * mk_ctx_of accepts it; outside it, 0. */
static void test_bump(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "bump", MK_BUMP, NULL);
    REQUIRE_NOT_NULL(c);
    char *p = mk_alloc(c, 100);
    REQUIRE_NOT_NULL(p);
    CHECK_EQ(mk_owns(p), 1);
    CHECK_EQ(mk_owns(p + 50), 1);
    mk_ctx_delete(c);
    OWNS_IS(p, 0);
}

int main(void)
{
    RUN(test_live_chunks);
    RUN(test_pools);
    RUN(test_remote_free);
    RUN(test_foreign);
    RUN(test_bump);
    return th_done();
}
