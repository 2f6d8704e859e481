/* SPDX-License-Identifier: MIT */
/*
 * wrong/checks.c - every check of the checking build (libmemkit-check), for
 * every kind where it applies.  Death tests: the parent makes the contexts,
 * pools and chunks; a forked child commits the error; the child must die
 * of SIGABRT after writing exactly one line to stderr, naming the pointer
 * and the context (or the pools):
 *   - double free: GENERAL small, SLAB, GENERATION, pool, thread-safe pool
 *     ("memkit: mk_free(): double free of P (context "NAME")"); GENERAL and
 *     GENERATION large chunks, and GENERAL huge ones, whose memory has gone
 *     back, are reported without a context (see the comments there);
 *   - a pointer memkit never returned, handed to a pool, and an interior
 *     pointer of a SLAB chunk, of a pool object and of a GENERATION chunk;
 *   - a write past the requested size, found at free, at realloc (GENERAL,
 *     SLAB, GENERATION, pools) and at reset and at delete (all four kinds,
 *     "... found at reset or delete ...");
 *   - a write to freed memory, found when the chunk is handed out again
 *     (GENERAL, SLAB, pool);
 *   - an object freed into the wrong pool ("memkit: mk_pool_free(): object P of
 *     pool A, freed into pool B"; and a context's chunk freed into a pool);
 *   - mk_free and mk_realloc of a BUMP chunk;
 *   - chunks still live when a MK_CTX_REPORT_LEAKS context (GENERAL, SLAB,
 *     GENERATION; also deleted as a child) or a pool is deleted
 *     ("memkit: mk_ctx_delete(): context "NAME": N chunks (B bytes)
 *     leaked", "memkit: mk_pool_delete(): pool "NAME": N objects (B bytes)
 *     leaked"); no report without the flag, and
 *     none at reset.
 * Then: with mk_set_error_handler the same errors do not abort, the handler
 * gets each line (no newline) and the faulty operation is abandoned; with
 * mk_silence_errors(1) nothing is printed and nothing aborts; correct use
 * of every kind and of pools reports nothing.
 *
 * Bad writes go through a function pointer held in a volatile variable:
 * mk_alloc is declared `malloc`, so the compiler could otherwise drop a
 * store past the end of a chunk or into a freed one as dead.  In the ASan
 * build they also escape AddressSanitizer, so that these tests see memkit's
 * checks (the ASan build runs them too).
 */
#include "harness.h"

#include <memkit.h>

/* Not instrumented by AddressSanitizer: in the ASan build memkit's chunks
 * are poisoned too, and ASan would stop the bad write before memkit's own
 * check could see it (tools/asan_uaf.c is where ASan's verdict counts). */
#if defined(__SANITIZE_ADDRESS__)
__attribute__((no_sanitize_address))
#endif
static void poke_impl(char *p, size_t off, int v)
{
    ((volatile char *)p)[off] = (char)v;
}
static void (*volatile poke)(char *p, size_t off, int v) = poke_impl;

static mk_ctx *general, *slab, *generation, *bumpc;
static mk_pool *pool_a, *pool_b, *pool_ts;

/* ---- the death test with an exact line ---------------------------------- */

static void dies_with(const char *file, int line, const char *what,
                      void (*fn)(void *), void *arg, const char *want)
{
    char out[4096];
    th_checks++;
    int st = th_run_child(fn, arg, out, sizeof out);
    if (st == -1) {
        th_fail(file, line, "%s: could not fork", what);
        return;
    }
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGABRT) {
        th_fail(file, line, "%s: child %s %d, expected SIGABRT; stderr \"%s\"",
                what, WIFSIGNALED(st) ? "died of signal" : "exited with",
                WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), out);
        return;
    }
    char line_want[600];
    snprintf(line_want, sizeof line_want, "%s\n", want);
    if (strcmp(out, line_want) != 0)
        th_fail(file, line, "%s: stderr is \"%s\", expected the one line \"%s\"", what, out, want);
}

#define DIES_WITH(fn, arg, want) \
    dies_with(__FILE__, __LINE__, #fn, fn, arg, want)

/* Format the expected line for pointer @p. */
static const char *msg(const char *fmt, const void *p)
{
    static char buf[600];
    snprintf(buf, sizeof buf, fmt, p);
    return buf;
}

/* The same, for a line "FN() ... P ... NAME". */
static const char *msg3(const char *fmt, const char *fn, const void *p,
                        const char *name)
{
    static char buf[600];
    snprintf(buf, sizeof buf, fmt, fn, p, name);
    return buf;
}

static void lives_quietly(const char *file, int line, const char *what,
                          void (*fn)(void *), void *arg)
{
    char out[4096];
    th_checks++;
    int st = th_run_child(fn, arg, out, sizeof out);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || out[0])
        th_fail(file, line, "%s: child status 0x%x (%s %d), stderr \"%s\"; expected exit 0 and nothing printed", what, st,
                WIFSIGNALED(st) ? "signal" : "exit",
                WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), out);
}

#define LIVES_QUIETLY(fn, arg) lives_quietly(__FILE__, __LINE__, #fn, fn, arg)

/* ---- the errors, each run in a child ------------------------------------ */

static void free_twice(void *p)
{
    mk_free(p);
    mk_free(p);
}

/* The second free after memkit gave the memory back to the OS. */
static void free_trim_free(void *p)
{
    mk_free(p);
    mk_trim();
    mk_free(p);
}

static void pool_a_free_twice(void *p)
{
    mk_pool_free(pool_a, p);
    mk_pool_free(pool_a, p);
}

static void pool_ts_free_twice(void *p)
{
    mk_pool_free(pool_ts, p);
    mk_pool_free(pool_ts, p);
}

static void test_double_free(void)
{
    char *keep = mk_alloc(general, 100);
    char *p = mk_alloc(general, 100);
    REQUIRE(keep && p);
    DIES_WITH(free_twice, p, msg("memkit: mk_free(): double free of %p (context \"general-ctx\")", p));
    p = mk_alloc(general, 8);
    DIES_WITH(free_twice, p, msg("memkit: mk_free(): double free of %p (context \"general-ctx\")", p));
    p = mk_alloc(general, 20000);
    DIES_WITH(free_twice, p, msg("memkit: mk_free(): double free of %p (context \"general-ctx\")", p));
    p = mk_alloc(slab, 48);
    REQUIRE_NOT_NULL(mk_alloc(slab, 48));
    DIES_WITH(free_twice, p, msg("memkit: mk_free(): double free of %p (context \"slab-ctx\")", p));
    REQUIRE_NOT_NULL(mk_alloc(generation, 100));
    p = mk_alloc(generation, 100);
    REQUIRE_NOT_NULL(mk_alloc(generation, 100));
    DIES_WITH(free_twice, p, msg("memkit: mk_free(): double free of %p (context \"generation-ctx\")", p));
    p = mk_pool_alloc(pool_a);
    REQUIRE_NOT_NULL(mk_pool_alloc(pool_a));
    DIES_WITH(pool_a_free_twice, p, msg("memkit: mk_pool_free(): double free of %p (context \"pool-a\")", p));
    DIES_WITH(free_twice, p, msg("memkit: mk_free(): double free of %p (context \"pool-a\")", p));
    p = mk_pool_alloc(pool_ts);
    REQUIRE_NOT_NULL(mk_pool_alloc(pool_ts));
    DIES_WITH(pool_ts_free_twice, p, msg("memkit: mk_pool_free(): double free of %p (context \"pool-ts\")", p));
}

/* A large chunk has a page of its own, which goes back at the first free:
 * the second free finds memory memkit holds free and cannot name the
 * context any more.  A huge chunk's mapping is kept for reuse: the same;
 * once mk_trim gave it back to the OS, the second free sees a pointer
 * memkit does not hold at all. */
static void test_double_free_large(void)
{
    char *p = mk_alloc(general, 100000);
    REQUIRE_NOT_NULL(p);
    DIES_WITH(free_twice, p, msg("memkit: mk_free(): double free of %p (memory memkit holds free)", p));
    p = mk_alloc(generation, 200000);
    REQUIRE_NOT_NULL(p);
    DIES_WITH(free_twice, p, msg("memkit: mk_free(): double free of %p (memory memkit holds free)", p));
    p = mk_alloc(general, (size_t)3 << 20);
    REQUIRE_NOT_NULL(p);
    DIES_WITH(free_twice, p, msg("memkit: mk_free(): double free of %p (memory memkit holds free)", p));
    DIES_WITH(free_trim_free, p, msg("memkit: mk_free(): invalid pointer %p (memkit never returned it)", p));
}

static char stack_like[64];

static void pool_a_free(void *p) { mk_pool_free(pool_a, p); }
static void pool_ts_free(void *p) { mk_pool_free(pool_ts, p); }
static void pool_b_free(void *p) { mk_pool_free(pool_b, p); }
static void free_one(void *p) { mk_free(p); }

static void test_never_returned(void)
{
    DIES_WITH(pool_a_free, stack_like + 8,
              msg("memkit: mk_pool_free(): invalid pointer %p (memkit never returned it)",
                  stack_like + 8));
    char *m = malloc(40);
    REQUIRE_NOT_NULL(m);
    DIES_WITH(pool_ts_free, m,
              msg("memkit: mk_pool_free(): invalid pointer %p (memkit never returned it)", m));
    free(m);
    char *p = mk_alloc(slab, 48);
    REQUIRE_NOT_NULL(p);
    DIES_WITH(free_one, p + 8, msg("memkit: mk_free(): invalid pointer %p (not the start of a chunk, context \"slab-ctx\")",
                                   p + 8));
    p = mk_pool_alloc(pool_a);
    REQUIRE_NOT_NULL(p);
    DIES_WITH(pool_a_free, p + 16, msg("memkit: mk_pool_free(): invalid pointer %p (not the start of a chunk, context \"pool-a\")", p + 16));
}

/* An interior pointer of a GENERATION chunk: the chunk's own data must not
 * be taken for a header (which would read as "double free"). */
static void test_never_returned_generation(void)
{
    REQUIRE_NOT_NULL(mk_alloc(generation, 100));
    char *p = mk_alloc(generation, 100);
    REQUIRE_NOT_NULL(p);
    memset(p, 0, 100);
    DIES_WITH(free_one, p + 16, msg("memkit: mk_free(): invalid pointer %p (not the start of a chunk, context \"generation-ctx\")", p + 16));
}

/* ---- writes past the requested size ------------------------------------- */

typedef struct bad_write {
    char *p;
    size_t off;
    mk_ctx *ctx;
    mk_pool *pool;
} bad_write;

static void past_then_free(void *arg)
{
    bad_write *b = arg;
    poke(b->p, b->off, 'x');
    if (b->pool)
        mk_pool_free(b->pool, b->p);
    else
        mk_free(b->p);
}

static void past_then_realloc(void *arg)
{
    bad_write *b = arg;
    poke(b->p, b->off, 'x');
    void *q = mk_realloc(b->p, 40);
    (void)q;
}

static void past_then_reset(void *arg)
{
    bad_write *b = arg;
    poke(b->p, b->off, 'x');
    mk_ctx_reset(b->ctx);
}

static void past_then_delete(void *arg)
{
    bad_write *b = arg;
    poke(b->p, b->off, 'x');
    mk_ctx_delete(b->ctx);
}

static void test_write_past_at_free(void)
{
    const char *fmt = "memkit: %s(): write past the end of chunk %p (past the "
                      "requested size, context \"%s\")";
    struct { mk_ctx *ctx; size_t n; const char *name; } cases[] = {
        {general, 100, "general-ctx"},  {general, 13, "general-ctx"},
        {general, 0, "general-ctx"},    {general, 24, "general-ctx"},
        {general, 5000, "general-ctx"}, {general, 100000, "general-ctx"},
        {general, (size_t)2 << 20, "general-ctx"},
        {slab, 48, "slab-ctx"},         {slab, 20, "slab-ctx"},
        {generation, 100, "generation-ctx"}, {generation, 7, "generation-ctx"},
        {generation, 300000, "generation-ctx"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bad_write b = {mk_alloc(cases[i].ctx, cases[i].n), cases[i].n, NULL,
                       NULL};
        REQUIRE_NOT_NULL(b.p);
        char want[300];
        snprintf(want, sizeof want, fmt, "mk_free", (void *)b.p, cases[i].name);
        DIES_WITH(past_then_free, &b, want);
        snprintf(want, sizeof want, fmt, "mk_realloc", (void *)b.p,
                 cases[i].name);
        DIES_WITH(past_then_realloc, &b, want);
    }
    /* pools: mk_pool_free and mk_free */
    bad_write b = {mk_pool_alloc(pool_a), 40, NULL, pool_a};
    REQUIRE_NOT_NULL(b.p);
    DIES_WITH(past_then_free, &b, msg3(fmt, "mk_pool_free", b.p, "pool-a"));
    b.pool = NULL;
    DIES_WITH(past_then_free, &b, msg3(fmt, "mk_free", b.p, "pool-a"));
    b = (bad_write){mk_pool_alloc(pool_ts), 40, NULL, pool_ts};
    REQUIRE_NOT_NULL(b.p);
    DIES_WITH(past_then_free, &b, msg3(fmt, "mk_pool_free", b.p, "pool-ts"));
}

static void test_write_past_at_reset_and_delete(void)
{
    const char *fmt = "memkit: write past the end of chunk %p (past the "
                      "requested size, found at reset or delete, context "
                      "\"%s\")";
    mk_ctx_opts so = {.chunk_size = 48};
    const struct { mk_kind kind; const mk_ctx_opts *opts; size_t n; }
        cases[] = {
            {MK_GENERAL, NULL, 100},    {MK_GENERAL, NULL, 1},
            {MK_GENERAL, NULL, 70000},  {MK_GENERAL, NULL, (size_t)2 << 20},
            {MK_SLAB, &so, 48},         {MK_SLAB, &so, 30},
            {MK_GENERATION, NULL, 100}, {MK_GENERATION, NULL, 100000},
            {MK_BUMP, NULL, 100},       {MK_BUMP, NULL, 3},
            {MK_BUMP, NULL, 500000},
        };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mk_ctx *c = mk_ctx_new(NULL, "doomed", cases[i].kind, cases[i].opts);
        REQUIRE_NOT_NULL(c);
        /* a few good chunks around the bad one */
        for (int j = 0; j < 5; j++)
            REQUIRE_NOT_NULL(mk_alloc(c, cases[i].n));
        bad_write b = {mk_alloc(c, cases[i].n), cases[i].n, c, NULL};
        REQUIRE_NOT_NULL(b.p);
        for (int j = 0; j < 5; j++)
            REQUIRE_NOT_NULL(mk_alloc(c, cases[i].n));
        char want[300];
        snprintf(want, sizeof want, fmt, (void *)b.p, "doomed");
        DIES_WITH(past_then_reset, &b, want);
        DIES_WITH(past_then_delete, &b, want);
        /* as a child: deleted with its parent */
        mk_ctx *parent = mk_ctx_new(NULL, "parent", MK_GENERAL, NULL);
        mk_ctx *kid = mk_ctx_new(parent, "doomed-kid", cases[i].kind,
                                 cases[i].opts);
        REQUIRE(parent && kid);
        bad_write k = {mk_alloc(kid, cases[i].n), cases[i].n, parent, NULL};
        REQUIRE_NOT_NULL(k.p);
        snprintf(want, sizeof want, fmt, (void *)k.p, "doomed-kid");
        DIES_WITH(past_then_reset, &k, want);
        DIES_WITH(past_then_delete, &k, want);
        mk_ctx_delete(parent);
        mk_ctx_delete(c);
    }
}

/* ---- writes to freed memory ---------------------------------------------- */

typedef struct uaf {
    char *p;
    size_t n;
    mk_ctx *ctx;
    mk_pool *pool;
} uaf;

static void write_after_free(void *arg)
{
    uaf *u = arg;
    if (u->pool)
        mk_pool_free(u->pool, u->p);
    else
        mk_free(u->p);
    poke(u->p, u->n > 16 ? 16 : u->n - 1, 'y');
    /* allocate until the chunk comes back (it is checked then) */
    size_t rounds = ((size_t)64 << 20) / (u->n + 16);
    for (size_t i = 0; i < rounds; i++) {
        void *q = u->pool ? mk_pool_alloc(u->pool) : mk_alloc(u->ctx, u->n);
        if (!q)
            _exit(5);
    }
    _exit(0); /* never reused: the test fails (exit, not abort) */
}

static void test_write_to_freed(void)
{
    const char *fmt = "memkit: write to freed memory at %p (found as it was "
                      "handed out again, context \"%s\")";
    const struct { mk_ctx *ctx; size_t n; const char *name; } cases[] = {
        {general, 64, "general-ctx"},  {general, 24, "general-ctx"},
        {general, 1000, "general-ctx"}, {general, 30000, "general-ctx"},
        {slab, 48, "slab-ctx"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uaf u = {mk_alloc(cases[i].ctx, cases[i].n), cases[i].n, cases[i].ctx,
                 NULL};
        REQUIRE_NOT_NULL(u.p);
        char want[300];
        snprintf(want, sizeof want, fmt, (void *)u.p, cases[i].name);
        DIES_WITH(write_after_free, &u, want);
    }
    uaf u = {mk_pool_alloc(pool_a), 40, NULL, pool_a};
    REQUIRE_NOT_NULL(u.p);
    char want[300];
    snprintf(want, sizeof want, fmt, (void *)u.p, "pool-a");
    DIES_WITH(write_after_free, &u, want);
    u = (uaf){mk_pool_alloc(pool_ts), 40, NULL, pool_ts};
    REQUIRE_NOT_NULL(u.p);
    snprintf(want, sizeof want, fmt, (void *)u.p, "pool-ts");
    DIES_WITH(write_after_free, &u, want);
}

/* ---- the wrong pool ----------------------------------------------------------- */

static void test_wrong_pool(void)
{
    char *a = mk_pool_alloc(pool_a);
    REQUIRE_NOT_NULL(a);
    DIES_WITH(pool_b_free, a, msg("memkit: mk_pool_free(): object %p of pool \"pool-a\" freed into pool \"pool-b\"", a));
    DIES_WITH(pool_ts_free, a, msg("memkit: mk_pool_free(): object %p of pool \"pool-a\" freed into pool \"pool-ts\"", a));
    char *t = mk_pool_alloc(pool_ts);
    REQUIRE_NOT_NULL(t);
    DIES_WITH(pool_a_free, t, msg("memkit: mk_pool_free(): object %p of pool \"pool-ts\" freed into pool \"pool-a\"", t));
    char *g = mk_alloc(general, 40);
    REQUIRE_NOT_NULL(g);
    DIES_WITH(pool_b_free, g, msg("memkit: mk_pool_free(): object %p of context \"general-ctx\" freed into pool \"pool-b\"", g));
    char *s = mk_alloc(slab, 40);
    REQUIRE_NOT_NULL(s);
    DIES_WITH(pool_a_free, s, msg("memkit: mk_pool_free(): object %p of context \"slab-ctx\" freed into pool \"pool-a\"", s));
}

/* ---- BUMP chunks -------------------------------------------------------------- */

static void realloc_one(void *p)
{
    void *q = mk_realloc(p, 200);
    (void)q;
}

static void test_bump_free_realloc(void)
{
    char *p = mk_alloc(bumpc, 100);
    REQUIRE_NOT_NULL(p);
    DIES_WITH(free_one, p, msg("memkit: mk_free(): free of BUMP chunk %p (its memory returns on reset or delete, context \"bump-ctx\")", p));
    DIES_WITH(realloc_one, p, msg("memkit: mk_realloc(): resize of BUMP chunk %p (context \"bump-ctx\")",
                                  p));
    char *big = mk_alloc(bumpc, 400000);
    REQUIRE_NOT_NULL(big);
    DIES_WITH(free_one, big, msg("memkit: mk_free(): free of BUMP chunk %p (its memory returns on reset or delete, context \"bump-ctx\")", big));
}

/* ---- leaks ---------------------------------------------------------------------- */

static mk_kind leak_kind;

static mk_ctx *leaky(mk_ctx *parent, const char *name, unsigned flags)
{
    mk_ctx_opts o = {.flags = flags};
    if (leak_kind == MK_SLAB)
        o.chunk_size = 64;
    mk_ctx *c = mk_ctx_new(parent, name, leak_kind, &o);
    if (!c)
        _exit(3);
    void *p[3];
    for (int i = 0; i < 3; i++)
        if (!(p[i] = mk_alloc(c, 64)))
            _exit(4);
    mk_free(p[1]); /* two live: 2 chunks, 128 bytes */
    return c;
}

static void leak_delete(void *arg)
{
    (void)arg;
    mk_ctx_delete(leaky(NULL, "leak-ctx", MK_CTX_REPORT_LEAKS));
}

static void leak_delete_child(void *arg)
{
    (void)arg;
    mk_ctx *parent = mk_ctx_new(NULL, "parent", MK_GENERAL, NULL);
    leaky(parent, "leak-kid", MK_CTX_REPORT_LEAKS);
    mk_ctx_delete(parent);
}

static void leak_unflagged(void *arg)
{
    (void)arg;
    mk_ctx_delete(leaky(NULL, "quiet", 0));
}

static void leak_reset_only(void *arg)
{
    (void)arg;
    mk_ctx *c = leaky(NULL, "reset-ctx", MK_CTX_REPORT_LEAKS);
    mk_ctx_reset(c); /* reset frees: nothing is leaked */
    mk_ctx_delete(c);
}

static void leak_pool(void *arg)
{
    (void)arg;
    mk_pool *p = mk_pool_new((const char *)arg, 40, 0,
                             strcmp(arg, "leak-pool-ts") ? 0
                                                         : MK_POOL_THREADSAFE);
    void *o[5];
    for (int i = 0; i < 5; i++)
        o[i] = mk_pool_alloc(p);
    mk_pool_free(p, o[0]);
    mk_pool_free(p, o[4]);
    mk_pool_delete(p); /* 3 objects, 120 bytes */
}

static void test_leaks(void)
{
    const mk_kind kinds[] = {MK_GENERAL, MK_SLAB, MK_GENERATION};
    for (int i = 0; i < 3; i++) {
        leak_kind = kinds[i];
        DIES_WITH(leak_delete, NULL,
                  "memkit: mk_ctx_delete(): context \"leak-ctx\": 2 chunks (128 bytes) leaked");
        DIES_WITH(leak_delete_child, NULL,
                  "memkit: mk_ctx_delete(): context \"leak-kid\": 2 chunks (128 bytes) leaked");
        LIVES_QUIETLY(leak_unflagged, NULL);
        LIVES_QUIETLY(leak_reset_only, NULL);
    }
    DIES_WITH(leak_pool, (void *)"leak-pool",
              "memkit: mk_pool_delete(): pool \"leak-pool\": 3 objects (120 bytes) leaked");
    DIES_WITH(leak_pool, (void *)"leak-pool-ts",
              "memkit: mk_pool_delete(): pool \"leak-pool-ts\": 3 objects (120 bytes) leaked");
}

/* ---- a handler instead of the abort --------------------------------------------- */

static char lines[16][300];
static int nlines;

static void handler(const char *m, void *arg)
{
    (void)arg;
    if (nlines < 16)
        snprintf(lines[nlines], sizeof lines[0], "%s", m);
    nlines++;
}

#define EXPECT_LINE(want)                                                   \
    do {                                                                    \
        th_checks++;                                                        \
        if (nlines != 1)                                                    \
            th_fail(__FILE__, __LINE__, "%d handler calls, expected 1 "     \
                    "(first: \"%s\")", nlines, nlines ? lines[0] : "");     \
        else if (strcmp(lines[0], (want)) != 0)                             \
            th_fail(__FILE__, __LINE__, "handler got \"%s\", expected "     \
                    "\"%s\"", lines[0], (want));                            \
        nlines = 0;                                                         \
    } while (0)

static size_t live_chunks(const mk_ctx *c)
{
    mk_stats st;
    mk_ctx_stats(c, &st, 0);
    return st.chunks;
}

static void test_handler(void)
{
    mk_set_error_handler(handler, NULL);
    nlines = 0;
    mk_ctx *c = mk_ctx_new(NULL, "handled", MK_GENERAL, NULL);
    mk_ctx *b = mk_ctx_new(NULL, "handled-bump", MK_BUMP, NULL);
    mk_pool *pa = mk_pool_new("ha", 40, 0, 0), *pb = mk_pool_new("hb", 40, 0, 0);
    REQUIRE(c && b && pa && pb);

    /* double free: the second free is refused */
    char *p = mk_alloc(c, 100), *q = mk_alloc(c, 100);
    REQUIRE(p && q);
    mk_free(p);
    mk_free(p);
    EXPECT_LINE(msg("memkit: mk_free(): double free of %p (context \"handled\")", p));
    CHECK_EQ(live_chunks(c), 1u);

    /* write past the end: the free is abandoned, the chunk stays live */
    poke(q, 100, 'z');
    mk_free(q);
    EXPECT_LINE(msg("memkit: mk_free(): write past the end of chunk %p (past "
                    "the requested size, context \"handled\")", q));
    CHECK_EQ(live_chunks(c), 1u);
    CHECK_NULL(mk_realloc(q, 500));
    EXPECT_LINE(msg("memkit: mk_realloc(): write past the end of chunk %p "
                    "(past the requested size, context \"handled\")", q));
    CHECK_EQ(live_chunks(c), 1u);
    mk_ctx_reset(c); /* found again at reset, and the reset goes on */
    EXPECT_LINE(msg("memkit: write past the end of chunk %p (past the requested "
                    "size, found at reset or delete, context \"handled\")", q));
    CHECK_EQ(live_chunks(c), 0u);

    /* write to freed memory: reported when handed out again */
    char *r = mk_alloc(c, 64);
    REQUIRE_NOT_NULL(r);
    mk_free(r);
    poke(r, 20, 1);
    char *r2 = NULL;
    for (int i = 0; i < 1000 && nlines == 0; i++)
        r2 = mk_alloc(c, 64);
    CHECK_PTR_EQ(r2, r);
    EXPECT_LINE(msg("memkit: write to freed memory at %p (found as it was "
                    "handed out again, context \"handled\")", r));

    /* wrong pool: refused, the object stays in its pool */
    char *o = mk_pool_alloc(pa);
    REQUIRE_NOT_NULL(o);
    mk_pool_free(pb, o);
    EXPECT_LINE(msg("memkit: mk_pool_free(): object %p of pool \"ha\" freed into pool \"hb\"",
                    o));
    mk_stats st;
    mk_pool_stats(pa, &st);
    CHECK_EQ(st.chunks, 1u);
    mk_pool_free(pa, o);
    CHECK_EQ(nlines, 0);

    /* BUMP */
    char *bp = mk_alloc(b, 10);
    REQUIRE_NOT_NULL(bp);
    mk_free(bp);
    EXPECT_LINE(msg("memkit: mk_free(): free of BUMP chunk %p (its memory returns on reset or delete, context \"handled-bump\")", bp));
    errno = 0;
    CHECK_NULL(mk_realloc(bp, 20));
    CHECK_ERRNO(ENOTSUP);
    EXPECT_LINE(msg("memkit: mk_realloc(): resize of BUMP chunk %p (context \"handled-bump\")", bp));

    /* a pointer memkit never returned */
    char local[8];
    mk_free(local);
    EXPECT_LINE(msg("memkit: mk_free(): invalid pointer %p (memkit never "
                    "returned it)", local));

    /* leaks: reported, the delete goes on */
    mk_ctx_opts lo = {.flags = MK_CTX_REPORT_LEAKS};
    mk_ctx *l = mk_ctx_new(NULL, "handled-leak", MK_GENERATION, &lo);
    REQUIRE_NOT_NULL(l);
    REQUIRE_NOT_NULL(mk_alloc(l, 16));
    mk_ctx_delete(l);
    EXPECT_LINE("memkit: mk_ctx_delete(): context \"handled-leak\": 1 chunk (16 bytes) leaked");
    REQUIRE_NOT_NULL(mk_pool_alloc(pb));
    mk_pool_delete(pb);
    EXPECT_LINE("memkit: mk_pool_delete(): pool \"hb\": 1 object (40 bytes) leaked");

    mk_pool_delete(pa);
    mk_ctx_delete(b);
    mk_ctx_delete(c);
    CHECK_EQ(nlines, 0);
    mk_set_error_handler(NULL, NULL);
}

/* ---- silence ---------------------------------------------------------------------- */

static void everything_silenced(void *arg)
{
    (void)arg;
    if (mk_silence_errors(1) != 0)
        _exit(6);
    mk_ctx *c = mk_ctx_new(NULL, "silent", MK_GENERAL, NULL);
    mk_ctx_opts so = {.chunk_size = 48, .flags = MK_CTX_REPORT_LEAKS};
    mk_ctx *s = mk_ctx_new(NULL, "silent-slab", MK_SLAB, &so);
    mk_ctx *b = mk_ctx_new(NULL, "silent-bump", MK_BUMP, NULL);
    mk_pool *pa = mk_pool_new("sa", 40, 0, 0), *pb = mk_pool_new("sb", 40, 0, 0);
    char *p = mk_alloc(c, 100);
    mk_free(p);
    mk_free(p);                      /* double free */
    char *q = mk_alloc(c, 100);
    poke(q, 100, 1);
    mk_free(q);                      /* write past, at free */
    if (mk_realloc(q, 300))          /* ... at realloc */
        _exit(7);
    char *r = mk_alloc(s, 48);
    mk_free(r);
    poke(r, 20, 1);
    for (int i = 0; i < 100; i++)    /* write to freed memory */
        if (!mk_alloc(s, 48))
            _exit(8);
    char *o = mk_pool_alloc(pa);
    mk_pool_free(pb, o);             /* wrong pool */
    char *x = mk_alloc(b, 10);
    mk_free(x);                      /* bump free */
    if (mk_realloc(x, 20))           /* bump realloc */
        _exit(9);
    char local[8];
    mk_free(local);                  /* never returned */
    mk_ctx_reset(c);                 /* write past, found at reset */
    mk_pool_delete(pa);              /* pool leak */
    mk_ctx_delete(s);                /* context leak */
    mk_ctx_delete(b);
    mk_ctx_delete(c);
    mk_pool_delete(pb);
}

static void test_silence(void)
{
    LIVES_QUIETLY(everything_silenced, NULL);
}

/* ---- correct use reports nothing ---------------------------------------------------- */

static void correct_use(void *arg)
{
    (void)arg;
    mk_ctx_opts so = {.chunk_size = 100, .flags = MK_CTX_REPORT_LEAKS};
    mk_ctx_opts lo = {.flags = MK_CTX_REPORT_LEAKS};
    mk_ctx *root = mk_ctx_new(NULL, "root", MK_GENERAL, &lo);
    mk_ctx *s = mk_ctx_new(root, "s", MK_SLAB, &so);
    mk_ctx *g = mk_ctx_new(root, "g", MK_GENERATION, &lo);
    mk_ctx *b = mk_ctx_new(root, "b", MK_BUMP, NULL);
    mk_pool *pool = mk_pool_new("p", 24, 0, 0);
    mk_pool *tsp = mk_pool_new("t", 56, 64, MK_POOL_THREADSAFE);
    if (!root || !s || !g || !b || !pool || !tsp)
        _exit(3);
    th_rng rng = {9};
    static char *live[4][256];
    for (int it = 0; it < 20000; it++) {
        int k = (int)th_below(&rng, 4), i = (int)th_below(&rng, 256);
        size_t n = (size_t)th_below(&rng, k == 1 ? 101 : 3000);
        if (th_below(&rng, 200) == 0)
            n = 100000 + (size_t)th_below(&rng, (size_t)3 << 20);
        if (k == 1 && n > 100)
            n = 100;
        mk_ctx *c = k == 0 ? root : k == 1 ? s : k == 2 ? g : b;
        if (live[k][i] && k != 3) {
            if (th_below(&rng, 3) == 0) {
                char *q = mk_realloc(live[k][i], n);
                if (!q)
                    _exit(4);
                memset(q, 1, n);
                live[k][i] = q;
                continue;
            }
            mk_free(live[k][i]);
        }
        char *p = th_below(&rng, 5) || k == 1
                      ? mk_alloc(c, n)
                      : mk_alloc_aligned(c, n, (size_t)64);
        if (!p)
            _exit(5);
        memset(p, 2, n);
        live[k][i] = p;
        if (it % 5000 == 4999) {
            mk_ctx_reset(b);
            memset(live[3], 0, sizeof live[3]);
        }
    }
    for (int i = 0; i < 20000; i++) {
        void *x = mk_pool_alloc(pool), *y = mk_pool_alloc(tsp);
        if (!x || !y)
            _exit(6);
        memset(x, 3, 24);
        memset(y, 4, 56);
        mk_pool_free(pool, x);
        mk_free(y);
    }
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 256; i++)
            mk_free(live[k][i]);
    mk_pool_delete(pool);
    mk_pool_delete(tsp);
    mk_ctx_delete(root);
}

static void test_correct_use_silent(void)
{
    LIVES_QUIETLY(correct_use, NULL);
}

int main(void)
{
    mk_ctx_opts so = {.chunk_size = 48};
    general = mk_ctx_new(NULL, "general-ctx", MK_GENERAL, NULL);
    slab = mk_ctx_new(NULL, "slab-ctx", MK_SLAB, &so);
    generation = mk_ctx_new(NULL, "generation-ctx", MK_GENERATION, NULL);
    bumpc = mk_ctx_new(NULL, "bump-ctx", MK_BUMP, NULL);
    pool_a = mk_pool_new("pool-a", 40, 0, 0);
    pool_b = mk_pool_new("pool-b", 40, 0, 0);
    pool_ts = mk_pool_new("pool-ts", 40, 0, MK_POOL_THREADSAFE);
    if (!general || !slab || !generation || !bumpc || !pool_a || !pool_b ||
        !pool_ts)
        return 1;
    th_checks++;
    if (!mk_checking())
        th_fail(__FILE__, __LINE__, "not linked with libmemkit-check");
    RUN(test_double_free);
    RUN(test_double_free_large);
    RUN(test_never_returned);
    RUN(test_never_returned_generation);
    RUN(test_write_past_at_free);
    RUN(test_write_past_at_reset_and_delete);
    RUN(test_write_to_freed);
    RUN(test_wrong_pool);
    RUN(test_bump_free_realloc);
    RUN(test_leaks);
    RUN(test_handler);
    RUN(test_silence);
    RUN(test_correct_use_silent);
    /* the parent's pools still hold objects: left to the process exit (a
     * delete would report them) */
    return th_done();
}
