/* SPDX-License-Identifier: MIT */
/*
 * wrong/freed_writes.c - the checking build (libmemkit-check) reports a
 * write to every byte of a freed chunk as a write to freed memory, for
 * each kind that keeps free lists: GENERAL (classes of 8, 24, 48,
 * 100, 256 and 1000 bytes), SLAB (48 bytes, and 96 aligned to 32) and
 * pools (plain and thread-safe).
 *
 * For every offset 0 .. size-1 of one freed chunk a forked child writes
 * one byte there, then allocates from the chunk's context until the chunk
 * would be handed out again, and must die of SIGABRT with exactly one line:
 *   offsets 0..7, the free-list link the chunk now holds:
 *     "memkit: write to freed memory at P (its free-list link was
 *     overwritten, context "NAME")"
 *   offsets 8 and up, the 0xDF fill of a freed chunk:
 *     "memkit: write to freed memory at P (found as it was handed out
 *     again, context "NAME")"
 * The chunk is the first one freed in its page, so its link is the end of
 * the list (NULL) and any byte written into it makes an address outside
 * the page: the report is certain, not a matter of luck.  A second series
 * frees the chunk after a neighbour (its link then leads to that chunk)
 * and writes the lowest byte (which makes the link unaligned) and the two
 * highest (which leave the address space): reported too.  Before all of
 * that, the control: a child that frees and allocates the same way without
 * the write must exit quietly.
 * Last, eight zero bytes over a link that led to another free chunk
 * (`obj->next = NULL` after free, the commonest use-after-free store) are
 * reported too: they would read as the end of the list, which a plain
 * link could not tell from a real end (found here as a known library bug;
 * fixed in 3967406 by encoding the checking build's links).
 *
 * The bad write goes through a function pointer held in a volatile (the
 * compiler cannot drop it as a store to dead memory) and escapes
 * AddressSanitizer in the ASan build, so that memkit's own check is judged.
 */
#include "harness.h"

#include <memkit.h>

#if defined(__SANITIZE_ADDRESS__)
__attribute__((no_sanitize_address))
#endif
static void poke_impl(char *p, size_t off, int v)
{
    volatile char *q = p;
    /* v < 0: one byte that differs from the byte there (the checking
     * build's links are encoded with a per-process key, so any fixed value
     * matches the byte already there once in 256 runs) */
    q[off] = v < 0 ? (char)(q[off] ^ 0x5A) : (char)v;
}
static void (*volatile poke)(char *p, size_t off, int v) = poke_impl;

typedef struct victim {
    const char *name; /* the context's name, as reported */
    mk_ctx *ctx;      /* or */
    mk_pool *pool;
    size_t n;         /* the requested size */
    char *p;          /* the chunk the child frees and writes into */
    char *before;     /* freed first, when the link must lead somewhere */
    size_t off;       /* where the child writes; (size_t)-1: nowhere */
    int zero8;        /* write 8 zero bytes at off instead of one byte */
} victim;

static void *alloc_in(const victim *v)
{
    return v->pool ? mk_pool_alloc(v->pool) : mk_alloc(v->ctx, v->n);
}

static void free_in(const victim *v, void *p)
{
    if (v->pool)
        mk_pool_free(v->pool, p);
    else
        mk_free(p);
}

/* The child: free, write, allocate until the chunk is handed out again. */
static void free_write_alloc(void *arg)
{
    victim *v = arg;
    if (v->before)
        free_in(v, v->before);
    free_in(v, v->p);
    if (v->off != (size_t)-1)
        for (int i = 0; i < (v->zero8 ? 8 : 1); i++)
            poke(v->p, v->off + (size_t)i, v->zero8 ? 0 : -1);
    for (int i = 0; i < 4096; i++) {
        void *q = alloc_in(v);
        if (!q)
            _exit(5);
        if (q == v->p)
            _exit(0); /* handed out (the parent wanted a report, or not) */
    }
    _exit(6); /* never came back: the test cannot judge */
}

static int one_offset(const victim *v, int line)
{
    char out[4096], want[400];
    if (v->off < 8)
        snprintf(want, sizeof want, "memkit: write to freed memory at %p (its "
                 "free-list link was overwritten, context \"%s\")\n",
                 (void *)v->p, v->name);
    else
        snprintf(want, sizeof want, "memkit: write to freed memory at %p "
                 "(found as it was handed out again, context \"%s\")\n",
                 (void *)v->p, v->name);
    th_checks++;
    int st = th_run_child(free_write_alloc, (void *)v, out, sizeof out);
    /* a release build's first report is followed by its hint line */
    char *hint = strstr(out, "\nmemkit: (the release build");
    if (hint)
        hint[1] = '\0';
    if (st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT &&
        strcmp(out, want) == 0)
        return 0;
    th_fail(__FILE__, line, "%s, %zu bytes, write at offset %zu: child %s %d, "
            "stderr \"%s\"; expected SIGABRT and \"%.*s\"", v->name, v->n,
            v->off, st != -1 && WIFSIGNALED(st) ? "signal" : "exit",
            st == -1 ? -1 : WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st),
            out, (int)strlen(want) - 1, want);
    return 1;
}

/* The control, then every offset of one chunk; the first few failures of
 * a series are printed, then the series stops. */
static void every_offset(victim v, int line)
{
    char out[4096];
    v.off = (size_t)-1;
    th_checks++;
    int st = th_run_child(free_write_alloc, &v, out, sizeof out);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || out[0]) {
        th_fail(__FILE__, line, "%s, %zu bytes: the control (no write) ended "
                "with status 0x%x, stderr \"%s\"", v.name, v.n, st, out);
        return;
    }
    int failed = 0;
    for (v.off = 0; v.off < v.n && failed < 3; v.off++)
        failed += one_offset(&v, line);
}

/* A fresh context (or pool) in which @p is the first chunk ever freed in
 * its page: chunks before and after it stay live. */
static victim make(mk_kind kind, const char *name, size_t n, size_t align,
                   int pool_flags)
{
    victim v = {.name = name, .n = n};
    if (pool_flags >= 0) {
        v.pool = mk_pool_new(name, n, align, (unsigned)pool_flags);
    } else {
        mk_ctx_opts o = {.chunk_size = n, .chunk_align = align};
        v.ctx = mk_ctx_new(NULL, name, kind, kind == MK_SLAB ? &o : NULL);
    }
    if (!v.pool && !v.ctx)
        return v;
    void *keep = alloc_in(&v);
    v.p = alloc_in(&v);
    void *keep2 = alloc_in(&v);
    if (!keep || !keep2)
        v.p = NULL;
    return v;
}

static void test_general_every_offset(void)
{
    static const size_t sizes[] = {8, 24, 48, 100, 256, 1000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        victim v = make(MK_GENERAL, "fw-general", sizes[i], 0, -1);
        REQUIRE_NOT_NULL(v.p);
        every_offset(v, __LINE__);
    }
}

static void test_slab_every_offset(void)
{
    victim v = make(MK_SLAB, "fw-slab", 48, 0, -1);
    REQUIRE_NOT_NULL(v.p);
    every_offset(v, __LINE__);
    v = make(MK_SLAB, "fw-slab-96", 96, 32, -1);
    REQUIRE_NOT_NULL(v.p);
    every_offset(v, __LINE__);
}

static void test_pool_every_offset(void)
{
    victim v = make(MK_SLAB, "fw-pool", 40, 0, 0);
    REQUIRE_NOT_NULL(v.p);
    every_offset(v, __LINE__);
    v = make(MK_SLAB, "fw-pool-ts", 40, 0, MK_POOL_THREADSAFE);
    REQUIRE_NOT_NULL(v.p);
    every_offset(v, __LINE__);
}

/* The link leads to a neighbour: a write to its lowest byte makes it
 * unaligned, to its highest bytes an address outside the address space. */
static void test_link_to_a_neighbour(void)
{
    struct { mk_kind kind; const char *name; size_t n; int pool; } cases[] = {
        {MK_GENERAL, "fw-general", 100, -1},
        {MK_SLAB, "fw-slab", 48, -1},
        {MK_SLAB, "fw-pool", 40, 0},
    };
    for (int i = 0; i < 3; i++) {
        victim v = make(cases[i].kind, cases[i].name, cases[i].n, 0,
                        cases[i].pool);
        REQUIRE_NOT_NULL(v.p);
        v.before = alloc_in(&v);
        REQUIRE_NOT_NULL(v.before);
        REQUIRE_NOT_NULL(alloc_in(&v));
        static const size_t offs[] = {0, 6, 7};
        for (int k = 0; k < 3; k++) {
            v.off = offs[k];
            one_offset(&v, __LINE__);
        }
    }
}

/* Eight zero bytes over a link that led to another free chunk. */
static void test_zero_link(void)
{
    const struct { mk_kind kind; const char *name; size_t n; int pool; }
        cases[] = {{MK_GENERAL, "fw-general", 100, -1},
                   {MK_SLAB, "fw-slab", 48, -1},
                   {MK_SLAB, "fw-pool", 40, 0}};
    for (int i = 0; i < 3; i++) {
        victim v = make(cases[i].kind, cases[i].name, cases[i].n, 0,
                        cases[i].pool);
        REQUIRE_NOT_NULL(v.p);
        v.before = alloc_in(&v);
        REQUIRE_NOT_NULL(v.before);
        REQUIRE_NOT_NULL(alloc_in(&v));
        v.off = 0;
        v.zero8 = 1;
        one_offset(&v, __LINE__);
    }
}

int main(void)
{
    th_checks++;
    if (!mk_checking())
        th_fail(__FILE__, __LINE__, "not linked with libmemkit-check");
    RUN(test_general_every_offset);
    RUN(test_slab_every_offset);
    RUN(test_pool_every_offset);
    RUN(test_link_to_a_neighbour);
    RUN(test_zero_link);
    return th_done();
}
