/* SPDX-License-Identifier: MIT */
/*
 * wrong/release.c - misuse that the release library (libmemkit, not the
 * checking build) reports, in its default mode and in secure mode
 * (MEMKIT_SECURE=1), each report checked to the exact line:
 *
 *   every build   a double free of a small chunk at the head of its page's
 *                 free list: "memkit: mk_free(): double free of P
 *                 (context "NAME")", for
 *                 GENERAL classes from 8 bytes to 32 KiB (also when the page
 *                 was full at the first free), the thread's heap, SLAB
 *                 chunks, and pool objects (plain and thread-safe, through
 *                 mk_free, mk_pool_free and the inline mk_pool_put); of a
 *                 large (64 KiB) and a huge (3 MiB) chunk, whose memory
 *                 memkit holds free after the first free: "memkit:
 *                 mk_free(): double free of P (memory memkit holds free)"; mk_realloc of a
 *                 pointer outside memkit's segments: "memkit: mk_realloc():
 *                 invalid pointer P"; mk_free of a stack pointer, a static
 *                 array, glibc's malloc (outside the span of address space
 *                 memkit's segments cover): "memkit: mk_free(): invalid
 *                 pointer P";
 *   secure mode   the same; mk_free of a stack pointer, of a static
 *                 array, of glibc's malloc (this program is linked with
 *                 libmemkit only, so malloc is glibc's), of a huge chunk
 *                 after mk_trim unmapped it: "memkit: mk_free(): invalid
 *                 pointer P"; mk_pool_free of a foreign pointer: "memkit:
 *                 mk_pool_free(): invalid pointer P"; a free-list link
 *                 overwritten with 8 bytes (an address an attacker would
 *                 choose, or zero), in the chunk at the head of the list and
 *                 in one further down, for GENERAL classes, SLAB contexts and
 *                 pools (thread-safe too; secure mode gives pools no inline
 *                 front): "memkit: write to freed memory at P (its
 *                 free-list link was overwritten, context "NAME")", before the
 *                 forged address could be handed out.
 * Every build: a double free anywhere in a free list (free(a),
 * free(b), free(a) in one page) and one whose first free another thread
 * made (the chunk waits on a remote list), for GENERAL classes, the large
 * and huge chunks, SLAB chunks, pool objects (mk_free, mk_pool_free,
 * mk_pool_put; plain and thread-safe) and GENERATION chunks; the free or
 * realloc of an address that is not the start of a live chunk (an interior
 * pointer of a small, large or huge chunk, a SLAB chunk, a pool object, a
 * GENERATION chunk; a chunk from before a reset; a freed chunk handed to
 * realloc): "memkit: FN(): invalid pointer P (not the start of a chunk,
 * context "NAME")" ("(a freed chunk, context "NAME")"), or, past a huge
 * chunk's first 4 MiB, "memkit: mk_free(): invalid pointer P".  With a
 * handler, nothing is handed out twice.  Secure mode: a write past the
 * end of a chunk into its neighbour, reported when either is freed:
 * "memkit: FN(): write past the end of chunk P (into its neighbour,
 * context "NAME")" (GENERAL small and large chunks, SLAB, pools,
 * GENERATION).
 * With mk_set_error_handler the same errors reach the handler, one line
 * each, and the program goes on: the second free is abandoned (the chunk is
 * handed out once, not twice), realloc returns NULL, a bad link drops the
 * rest of its list and never hands out the forged address.
 *
 * Each case runs in a fresh process (wrong/reexec.h: secure mode is read
 * at load); the child announces the line it expects, commits the error,
 * and must die of SIGABRT with exactly that line on stderr (SLAB and pool
 * double frees were known bugs this file found, fixed in 3967406).
 * tests/override/hardening.c runs the same errors through the drop-in.
 */
#include "harness.h"
#include "option.h"
#include "wrong/reexec.h"

#include <memkit.h>
#include <pthread.h>

/* Stores into freed memory through a function pointer the compiler cannot
 * see through: mk_alloc is declared `malloc`, so a plain store into a chunk
 * the program freed could be dropped as dead. */
static void poke8_impl(void *p, uint64_t v) { memcpy(p, &v, 8); }
static void (*volatile poke8)(void *p, uint64_t v) = poke8_impl;
static void *launder_impl(void *p) { return p; }
static void *(*volatile launder)(void *) = launder_impl;

static const char *const SECURE[] = {"MEMKIT_SECURE=1", NULL};
static const char *const SECURE2[] = {"MEMKIT_SECURE=2", NULL};
static const char *const DEFAULT[] = {NULL};
/* the three modes every double-free and interior-pointer case runs in */
static const char *const *const MODES[] = {DEFAULT, SECURE, SECURE2};
#define NMODES (sizeof MODES / sizeof MODES[0])

static const char DOUBLE_FREE[] = "memkit: mk_free(): double free of %p "
                                  "(context \"%s\")";
static const char DOUBLE_FREE_POOL[] = "memkit: mk_pool_free(): double free "
                                       "of %p (context \"%s\")";
static const char HELD_FREE[] = "memkit: mk_free(): double free of %p "
                                "(memory memkit holds free)";
static const char BAD_LINK[] = "memkit: write to freed memory at %p (its "
                               "free-list link was overwritten, context "
                               "\"%s\")";

static void expect2(const char *fmt, const void *p, const char *name)
{
    char buf[512];
    snprintf(buf, sizeof buf, fmt, p, name);
    rx_expect(buf);
}

static mk_ctx *new_general(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "rel-general", MK_GENERAL, NULL);
    if (!c)
        _exit(3);
    return c;
}

static mk_ctx *new_slab(size_t size)
{
    mk_ctx_opts o = {.chunk_size = size};
    mk_ctx *c = mk_ctx_new(NULL, "rel-slab", MK_SLAB, &o);
    if (!c)
        _exit(3);
    return c;
}

static mk_pool *new_pool(int threadsafe)
{
    mk_pool *p = mk_pool_new(threadsafe ? "rel-pool-ts" : "rel-pool", 40, 0,
                             threadsafe ? MK_POOL_THREADSAFE : 0);
    if (!p)
        _exit(3);
    return p;
}

static void *must(void *p)
{
    if (!p)
        _exit(4);
    return p;
}

/* ---- the cases (in the child) -------------------------------------------- */

/* A GENERAL chunk of @arg bytes freed twice, a neighbour keeping its page
 * in use. */
static void case_double_free(const char *arg)
{
    size_t n = strtoul(arg, NULL, 0);
    mk_ctx *c = new_general();
    char *keep = must(mk_alloc(c, n));
    char *p = must(mk_alloc(c, n));
    (void)keep;
    expect2(DOUBLE_FREE, p, "rel-general");
    mk_free(p);
    mk_free(p);
}

/* The first free finds the page full (off the class lists, freed through
 * the slow path), the second finds the chunk at the head of its list. */
static void case_double_free_full(const char *arg)
{
    size_t n = strtoul(arg, NULL, 0);
    mk_ctx *c = new_general();
    char *p = must(mk_alloc(c, n));
    mk_stats st;
    size_t blocks;
    mk_ctx_stats(c, &st, 0);
    blocks = st.blocks;
    for (;;) { /* until a second page is needed: the first is full */
        must(mk_alloc(c, n));
        mk_ctx_stats(c, &st, 0);
        if (st.blocks > blocks)
            break;
    }
    expect2(DOUBLE_FREE, p, "rel-general");
    mk_free(p);
    mk_free(p);
}

/* The thread's heap (the context malloc uses in the drop-in). */
static void case_double_free_heap(const char *arg)
{
    size_t n = strtoul(arg, NULL, 0);
    mk_ctx *h = must(mk_ctx_current());
    char *keep = must(mk_alloc(h, n));
    char *p = must(mk_alloc(h, n));
    (void)keep;
    expect2(DOUBLE_FREE, p, mk_ctx_name(h));
    mk_free(p);
    mk_free(p);
}

/* Large and huge chunks: their memory is free at the first free. */
static void case_double_free_big(const char *arg)
{
    size_t n = strtoul(arg, NULL, 0);
    mk_ctx *c = new_general();
    char *p = must(mk_alloc(c, n));
    memset(p, 1, n);
    rx_expect_ptr(HELD_FREE, p);
    mk_free(p);
    mk_free(p);
}

static void case_double_free_slab(const char *arg)
{
    size_t n = strtoul(arg, NULL, 0);
    mk_ctx *s = new_slab(n);
    char *keep = must(mk_alloc(s, n));
    char *p = must(mk_alloc(s, n));
    (void)keep;
    expect2(DOUBLE_FREE, p, "rel-slab");
    mk_free(p);
    mk_free(p);
}

/* A pool object freed twice: arg "free" through mk_free, "pool" through
 * mk_pool_free, "put" through the inline mk_pool_put; "-ts" for a
 * thread-safe pool. */
static void case_double_free_pool(const char *arg)
{
    int ts = strstr(arg, "-ts") != NULL;
    mk_pool *pool = new_pool(ts);
    char *keep = must(mk_pool_alloc(pool));
    char *p = must(mk_pool_alloc(pool));
    (void)keep;
    expect2(strncmp(arg, "free", 4) == 0 ? DOUBLE_FREE : DOUBLE_FREE_POOL, p,
            ts ? "rel-pool-ts" : "rel-pool");
    for (int i = 0; i < 2; i++) {
        if (strncmp(arg, "pool", 4) == 0)
            mk_pool_free(pool, p);
        else if (strncmp(arg, "put", 3) == 0)
            mk_pool_put(pool, p);
        else
            mk_free(p);
    }
}

static char static_array[256];

/* mk_free / mk_realloc / mk_pool_free of a pointer memkit does not hold:
 * arg "stack", "static", "glibc" (malloc is glibc's here), "trimmed" (a
 * huge chunk whose mapping mk_trim gave back). */
static void *foreign(const char *arg, char *stack)
{
    if (strcmp(arg, "stack") == 0)
        return stack;
    if (strcmp(arg, "static") == 0)
        return static_array + 16;
    if (strcmp(arg, "glibc") == 0)
        return must(malloc(40));
    if (strcmp(arg, "trimmed") == 0) {
        char *p = must(mk_alloc(new_general(), (size_t)3 << 20));
        mk_free(p);
        mk_trim();
        return p;
    }
    _exit(5);
}

static void case_free_foreign(const char *arg)
{
    char stack[64];
    void *p = launder(foreign(arg, stack));
    rx_expect_ptr("memkit: mk_free(): invalid pointer %p (memkit never returned it)", p);
    mk_free(p);
}

static void case_realloc_foreign(const char *arg)
{
    char stack[64];
    void *p = launder(foreign(arg, stack));
    rx_expect_ptr("memkit: mk_realloc(): invalid pointer %p (memkit never returned it)", p);
    void *q = mk_realloc(p, 100);
    printf("realloc returned %p\n", q);
}

static void case_pool_free_foreign(const char *arg)
{
    char stack[64];
    mk_pool *pool = new_pool(0);
    must(mk_pool_alloc(pool)); /* the pool has a page */
    void *p = launder(foreign(arg, stack));
    rx_expect_ptr("memkit: mk_pool_free(): invalid pointer %p (memkit never returned it)", p);
    mk_pool_free(pool, p);
}

/*
 * An overwritten link.  arg "KIND:SIZE:VALUE:WHERE": KIND general, slab,
 * pool, pool-ts; VALUE "forge" (the address of a static array, what an
 * attacker would plant) or "zero"; WHERE "head" (the last chunk freed) or
 * "deep" (the chunk freed before it, second on the list).  Then allocate
 * until the link is followed: the report must come before the forged
 * address is handed out.
 */
static char forged_target[4096] __attribute__((aligned(64)));

static void case_link(const char *arg)
{
    char kind[16] = "", value[16] = "", where[16] = "";
    size_t n = 0;
    if (sscanf(arg, "%15[^:]:%zu:%15[^:]:%15s", kind, &n, value, where) != 4)
        _exit(5);
    mk_ctx *c = NULL;
    mk_pool *pool = NULL;
    const char *name;
    if (strcmp(kind, "general") == 0) {
        c = new_general();
        name = "rel-general";
    } else if (strcmp(kind, "slab") == 0) {
        c = new_slab(n);
        name = "rel-slab";
    } else {
        pool = new_pool(strcmp(kind, "pool-ts") == 0);
        name = strcmp(kind, "pool-ts") == 0 ? "rel-pool-ts" : "rel-pool";
        n = 40;
    }
#define ALLOC() (pool ? mk_pool_alloc(pool) : mk_alloc(c, n))
#define FREE(x) (pool ? mk_pool_free(pool, (x)) : mk_free(x))
    char *keep = must(ALLOC());
    char *a = must(ALLOC());
    char *b = must(ALLOC());
    char *keep2 = must(ALLOC());
    (void)keep, (void)keep2;
    int deep = strcmp(where, "deep") == 0;
    char *victim = deep ? a : b;
    expect2(BAD_LINK, victim, name);
    FREE(a);
    FREE(b); /* the list: b, a, ... */
    uint64_t v = strcmp(value, "zero") == 0 ? 0 : (uint64_t)(uintptr_t)forged_target;
    poke8(victim, v);
    for (int i = 0; i < 100000; i++) {
        char *q = ALLOC();
        if (!q)
            _exit(6);
        if (q == forged_target) {
            printf("the forged address was handed out\n");
            _exit(7);
        }
    }
#undef ALLOC
#undef FREE
}

/* ---- double frees anywhere, interior pointers ------------------------------ */

static const char INTERIOR[] = "memkit: %s(): invalid pointer %p (not the "
                               "start of a chunk, context \"%s\")";
static const char FREED_CHUNK[] = "memkit: %s(): invalid pointer %p (a freed "
                                  "chunk, context \"%s\")";

static void expect3(const char *fmt, const char *fn, const void *p,
                    const char *name)
{
    char buf[512];
    snprintf(buf, sizeof buf, fmt, fn, p, name);
    rx_expect(buf);
}

/* A context of kind @kind ("general", "slab", "generation") for chunks
 * of @n bytes, with a name the expected lines use. */
static mk_ctx *new_kind(const char *kind, size_t n)
{
    if (strcmp(kind, "slab") == 0)
        return new_slab(n);
    if (strcmp(kind, "generation") == 0) {
        mk_ctx *c = mk_ctx_new(NULL, "rel-gen", MK_GENERATION, NULL);
        if (!c)
            _exit(3);
        return c;
    }
    return new_general();
}

static const char *kind_name(const char *kind)
{
    return strcmp(kind, "slab") == 0         ? "rel-slab"
           : strcmp(kind, "generation") == 0 ? "rel-gen"
                                             : "rel-general";
}

/* free(a); free(b); free(a) with a and b in one page: arg "KIND:SIZE",
 * KIND general, slab, generation; or "pool:WAY[-ts]" (WAY free, pool,
 * put).  The chunk is second on its list at the second free. */
static void case_abab(const char *arg)
{
    char kind[16] = "";
    size_t n = 0;
    if (strncmp(arg, "pool:", 5) == 0) {
        const char *way = arg + 5;
        int ts = strstr(way, "-ts") != NULL;
        mk_pool *pool = new_pool(ts);
        char *keep = must(mk_pool_alloc(pool));
        char *a = must(mk_pool_alloc(pool)), *b = must(mk_pool_alloc(pool));
        (void)keep;
        expect2(strncmp(way, "free", 4) == 0 ? DOUBLE_FREE : DOUBLE_FREE_POOL,
                a, ts ? "rel-pool-ts" : "rel-pool");
        char *seq[3] = {a, b, a};
        for (int i = 0; i < 3; i++) {
            if (strncmp(way, "pool", 4) == 0)
                mk_pool_free(pool, seq[i]);
            else if (strncmp(way, "put", 3) == 0)
                mk_pool_put(pool, seq[i]);
            else
                mk_free(seq[i]);
        }
        return;
    }
    if (sscanf(arg, "%15[^:]:%zu", kind, &n) != 2)
        _exit(5);
    mk_ctx *c = new_kind(kind, n);
    char *a = must(mk_alloc(c, n)), *b = must(mk_alloc(c, n));
    char *keep = must(mk_alloc(c, n)); /* (after them: a GENERATION block
                                          with a live chunk is not rewound) */
    (void)keep;
    expect2(DOUBLE_FREE, a, kind_name(kind));
    mk_free(a);
    mk_free(b);
    mk_free(a);
}

/* The first free is another thread's: the chunk waits on a remote list
 * (its page's, or its context's: a full page, SLAB, GENERATION, large);
 * the second free is the owner's (arg "KIND:SIZE:owner") or a third
 * thread's ("KIND:SIZE:other").  "pool-ts:40:..." for a thread-safe pool
 * (mk_pool_free). */
static void *remote_ptr;
static mk_pool *remote_pool;

static void *free_there(void *arg)
{
    (void)arg;
    if (remote_pool)
        mk_pool_free(remote_pool, remote_ptr);
    else
        mk_free(remote_ptr);
    return NULL;
}

static void free_in_thread(void *p)
{
    remote_ptr = p;
    pthread_t t;
    if (pthread_create(&t, NULL, free_there, NULL) != 0)
        _exit(6);
    pthread_join(t, NULL);
}

static void case_remote(const char *arg)
{
    char kind[16] = "", who[16] = "";
    size_t n = 0;
    if (sscanf(arg, "%15[^:]:%zu:%15s", kind, &n, who) != 3)
        _exit(5);
    const char *name;
    char *p;
    if (strcmp(kind, "pool-ts") == 0) {
        remote_pool = new_pool(1);
        must(mk_pool_alloc(remote_pool));
        p = must(mk_pool_alloc(remote_pool));
        name = "rel-pool-ts";
    } else {
        mk_ctx *c = new_kind(kind, n);
        must(mk_alloc(c, n));
        p = must(mk_alloc(c, n));
        name = kind_name(kind);
    }
    /* (a large or huge chunk is marked while it waits: chunk.c) */
    expect2(remote_pool ? DOUBLE_FREE_POOL : DOUBLE_FREE, p, name);
    free_in_thread(p);
    if (strcmp(who, "owner") == 0) {
        if (remote_pool)
            mk_pool_free(remote_pool, p);
        else
            mk_free(p);
    } else {
        free_in_thread(p);
    }
}

/* free of an interior pointer: arg "KIND:SIZE:OFFSET" (KIND general,
 * slab, generation, pool, pool-put; malloc is not memkit's here). */
static void case_interior(const char *arg)
{
    char kind[16] = "";
    size_t n = 0, off = 0;
    if (sscanf(arg, "%15[^:]:%zu:%zu", kind, &n, &off) != 3)
        _exit(5);
    if (strncmp(kind, "pool", 4) == 0) {
        mk_pool *pool = new_pool(0);
        char *p = must(mk_pool_alloc(pool));
        must(mk_pool_alloc(pool));
        expect3(INTERIOR, "mk_pool_free", p + off, "rel-pool");
        if (strcmp(kind, "pool-put") == 0)
            mk_pool_put(pool, p + off);
        else
            mk_pool_free(pool, p + off);
        return;
    }
    mk_ctx *c = new_kind(kind, n);
    char *p = must(mk_alloc(c, n));
    must(mk_alloc(c, n));
    if (n > ((size_t)4 << 20) && off >= ((size_t)4 << 20)) /* past 4 MiB */
        rx_expect_ptr("memkit: mk_free(): invalid pointer %p (memkit never returned it)", p + off);
    else
        expect3(INTERIOR, "mk_free", p + off, kind_name(kind));
    mk_free(launder(p + off));
}

/* realloc of an interior pointer ("interior:SIZE") or of a freed chunk
 * ("freed:SIZE"), GENERAL. */
/* The bad-pointer cases' chunk: arg "WHAT:SIZE" gives @what and *@n; a
 * chunk of SIZE bytes of a new GENERAL context, and a neighbour that keeps
 * its page when it is freed. */
static char *bad_case_chunk(const char *arg, char what[16], size_t *n)
{
    if (sscanf(arg, "%15[^:]:%zu", what, n) != 2)
        _exit(5);
    mk_ctx *c = new_general();
    char *p = must(mk_alloc(c, *n));
    must(mk_alloc(c, *n));
    return p;
}

static void case_realloc_bad(const char *arg)
{
    char what[16] = "";
    size_t n = 0;
    char *p = bad_case_chunk(arg, what, &n);
    if (strcmp(what, "freed") == 0) {
        mk_free(p);
        if (n > 32768) /* a large chunk's page went back with it */
            rx_expect_ptr("memkit: mk_realloc(): invalid pointer %p (memkit never returned it)", p);
        else
            expect3(FREED_CHUNK, "mk_realloc", p, "rel-general");
        void *volatile moved = mk_realloc(p, n * 2); /* (it aborts) */
        (void)moved;
    } else {
        expect3(INTERIOR, "mk_realloc", p + 16, "rel-general");
        void *volatile moved = mk_realloc(launder(p + 16), n * 2);
        (void)moved;
    }
}

/* mk_usable_size of a freed chunk or of an interior pointer (its inline
 * path, general.h, must leave both to the reporting one): arg
 * "freed:SIZE" or "interior:SIZE". */
static void case_usable_bad(const char *arg)
{
    char what[16] = "";
    size_t n = 0;
    char *p = bad_case_chunk(arg, what, &n);
    if (mk_usable_size(p) < n)
        _exit(6);
    if (strcmp(what, "freed") == 0) {
        mk_free(p);
        expect3(FREED_CHUNK, "mk_usable_size", p, "rel-general");
        (void)mk_usable_size(launder(p));
    } else {
        expect3(INTERIOR, "mk_usable_size", p + 16, "rel-general");
        (void)mk_usable_size(launder(p + 16));
    }
    _exit(7); /* (it aborts) */
}

/* A chunk freed after its context was reset (its page is the one the
 * reset kept, rewound): arg "KIND:SIZE". */
static void case_after_reset(const char *arg)
{
    char kind[16] = "";
    size_t n = 0;
    if (sscanf(arg, "%15[^:]:%zu", kind, &n) != 2)
        _exit(5);
    mk_ctx *c = new_kind(kind, n);
    must(mk_alloc(c, n));
    char *p = must(mk_alloc(c, n));
    mk_ctx_reset(c);
    expect3(INTERIOR, "mk_free", p, kind_name(kind));
    mk_free(launder(p));
}

/* Secure mode: a write past the end of a chunk into its neighbour (its
 * usable size + 8 + 4 bytes), reported when the chunk itself is freed
 * ("self") or its neighbour is ("next"): arg "KIND:SIZE:WHICH", KIND
 * general, slab, pool, generation. */
static const char OVERFLOW[] = "memkit: %s(): write past the end of chunk %p "
                               "(into its neighbour, context \"%s\")";

static void case_overflow(const char *arg)
{
    char kind[16] = "", which[16] = "";
    size_t n = 0;
    if (sscanf(arg, "%15[^:]:%zu:%15s", kind, &n, which) != 3)
        _exit(5);
    mk_pool *pool = NULL;
    mk_ctx *c = NULL;
    const char *name;
    if (strcmp(kind, "pool") == 0) {
        pool = new_pool(0);
        name = "rel-pool";
    } else {
        c = new_kind(kind, n);
        name = kind_name(kind);
    }
    char *a = must(pool ? mk_pool_alloc(pool) : mk_alloc(c, n));
    char *b = must(pool ? mk_pool_alloc(pool) : mk_alloc(c, n));
    int large = n > 32760;
    /* (MEMKIT_SECURE=2 cuts a page in a random order: "self" only) */
    if (strcmp(which, "next") == 0 && b != a + mk_usable_size(a) + 8 && !large) {
        printf("%p and %p are not neighbours\n", (void *)a, (void *)b);
        _exit(8);
    }
    /* past the guard (GENERATION: the next header) into the neighbour;
     * a large chunk's neighbour is another page: into its guard only */
    size_t over = mk_usable_size(a) + (large ? 4 : 8 + 4);
    memset(launder(a), 'x', over);
    void *victim = strcmp(which, "self") == 0 ? a : b;
    if (victim == b && strcmp(kind, "generation") == 0) /* b's header went:
                                                           b is no chunk */
        expect3(INTERIOR, pool ? "mk_pool_free" : "mk_free", b, name);
    else
        expect3(OVERFLOW, pool ? "mk_pool_free" : "mk_free", a, name);
    if (pool)
        mk_pool_free(pool, victim);
    else
        mk_free(victim);
}

/* A correct program (test_correct_program_quiet): nothing may be reported.
 * Scattered frees: every third chunk first, then the rest, some of them
 * by another thread; then the survivors realloc'ed and freed. */
static void *clean_ptrs[300];
static size_t clean_n;
static mk_pool *clean_pool;

static void *clean_free_thirds(void *arg)
{
    size_t phase = (size_t)(uintptr_t)arg;
    for (size_t i = phase; i < clean_n; i += 3) {
        if (clean_pool)
            mk_pool_free(clean_pool, clean_ptrs[i]);
        else
            mk_free(clean_ptrs[i]);
        clean_ptrs[i] = NULL;
    }
    return NULL;
}

static void clean_round(mk_ctx *c, mk_pool *pool, size_t size)
{
    clean_n = size > 100000 ? 20 : sizeof clean_ptrs / sizeof clean_ptrs[0];
    clean_pool = pool;
    for (size_t i = 0; i < clean_n; i++) {
        clean_ptrs[i] = must(pool ? mk_pool_alloc(pool) : mk_alloc(c, size));
        memset(clean_ptrs[i], (int)i, pool ? 40 : size); /* every byte asked for */
    }
    clean_free_thirds((void *)(uintptr_t)1); /* the owner, 1 in 3 */
    pthread_t t; /* another thread, the next third */
    if (pthread_create(&t, NULL, clean_free_thirds, (void *)(uintptr_t)2) != 0)
        _exit(6);
    pthread_join(t, NULL);
    for (size_t i = 0; i < clean_n; i++) { /* the rest: survivors moved */
        if (!clean_ptrs[i])
            continue;
        if (!pool && mk_ctx_kind(c) != MK_SLAB) {
            clean_ptrs[i] = must(mk_realloc(clean_ptrs[i], size + 24));
            memset(clean_ptrs[i], 7, size + 24);
        }
    }
    for (size_t i = 0; i < clean_n; i += 2) /* half again, the owner */
        if (clean_ptrs[i]) {
            pool ? mk_pool_free(pool, clean_ptrs[i]) : mk_free(clean_ptrs[i]);
            clean_ptrs[i] = NULL;
        }
    for (size_t i = 0; i < clean_n; i++) /* allocated again between */
        if (!clean_ptrs[i] && i % 5 == 0)
            clean_ptrs[i] = must(pool ? mk_pool_alloc(pool) : mk_alloc(c, size));
    for (size_t i = 0; i < clean_n; i++)
        if (clean_ptrs[i])
            pool ? mk_pool_free(pool, clean_ptrs[i]) : mk_free(clean_ptrs[i]);
}

static void case_clean(const char *arg)
{
    (void)arg;
    static const size_t sizes[] = {1,   8,    9,    16,    24,    40,     48,
                                   100, 1000, 1016, 4096, 32760, 100000, 3145728};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        mk_ctx *g = new_general();
        clean_round(g, NULL, sizes[i]);
        mk_ctx_delete(g);
        if (sizes[i] <= 1000) {
            mk_ctx *s = new_slab(sizes[i]);
            clean_round(s, NULL, sizes[i]);
            mk_ctx_delete(s);
        }
        mk_ctx *gen = new_kind("generation", sizes[i]);
        clean_round(gen, NULL, sizes[i]);
        mk_ctx_delete(gen);
    }
    mk_pool *pool = new_pool(0);
    clean_round(NULL, pool, 40);
    clean_round(NULL, pool, 40);
    mk_pool_delete(pool);
    mk_pool *ts = new_pool(1);
    clean_round(NULL, ts, 40);
    mk_pool_delete(ts);
    printf("clean: nothing reported\n");
}

/* ---- with an error handler the process goes on ------------------------------ */

static char lines[16][400];
static int nlines;

static void handler(const char *m, void *arg)
{
    (void)arg;
    if (nlines < 16)
        snprintf(lines[nlines], sizeof lines[0], "%s", m);
    nlines++;
}

static void expect_line(int line, const char *fmt, const void *p,
                        const char *name)
{
    char want[512];
    snprintf(want, sizeof want, fmt, p, name);
    th_checks++;
    if (nlines != 1)
        th_fail(__FILE__, line, "%d handler calls, expected 1 (\"%s\"); "
                "first \"%s\"", nlines, want, nlines ? lines[0] : "");
    else if (strcmp(lines[0], want) != 0)
        th_fail(__FILE__, line, "handler got \"%s\", expected \"%s\"",
                lines[0], want);
    nlines = 0;
}

#define EXPECT_LINE(fmt, p, name) expect_line(__LINE__, fmt, p, name)

static size_t chunks_of(const mk_ctx *c)
{
    mk_stats st;
    mk_ctx_stats(c, &st, 0);
    return st.chunks;
}

/* After a refused second free the chunk is on its free list once: of the
 * next allocations of its size, exactly one is @p, and none repeats. */
static void check_handed_out_once(mk_ctx *c, mk_pool *pool, size_t n,
                                  const char *p)
{
    char *got[64];
    int seen = 0;
    for (int i = 0; i < 64; i++) {
        got[i] = pool ? mk_pool_alloc(pool) : mk_alloc(c, n);
        REQUIRE_NOT_NULL(got[i]);
        seen += got[i] == p;
        for (int j = 0; j < i; j++)
            CHECK(got[j] != got[i]);
    }
    CHECK_EQ(seen, 1);
}

static void handler_double_free(mk_ctx *c, mk_pool *pool, size_t n,
                                const char *name)
{
    char *keep = pool ? mk_pool_alloc(pool) : mk_alloc(c, n);
    char *p = pool ? mk_pool_alloc(pool) : mk_alloc(c, n);
    REQUIRE(keep && p);
    mk_free(p);
    size_t live = c ? chunks_of(c) : 0;
    mk_free(p);
    EXPECT_LINE(DOUBLE_FREE, p, name);
    if (c)
        CHECK_EQ(chunks_of(c), live);
    check_handed_out_once(c, pool, n, p);
}

static void case_handler(const char *arg)
{
    int secure = strcmp(arg, "secure") == 0;
    mk_set_error_handler(handler, NULL);
    mk_ctx *c = new_general();
    mk_ctx *s = new_slab(48);
    mk_pool *pool = new_pool(0);

    /* double frees at the head of a list */
    static const size_t sizes[] = {8, 24, 100, 1000, 32760};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        handler_double_free(c, NULL, sizes[i], "rel-general");

    /* free(a), free(b), free(a): refused, a and b handed out once each */
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char *a = mk_alloc(c, sizes[i]), *b = mk_alloc(c, sizes[i]);
        REQUIRE(a && b);
        mk_free(a);
        mk_free(b);
        mk_free(a);
        EXPECT_LINE(DOUBLE_FREE, a, "rel-general");
        check_handed_out_once(c, NULL, sizes[i], a);
    }
    /* an interior pointer: refused, the chunk stays live */
    char *whole = mk_alloc(c, 48);
    REQUIRE_NOT_NULL(whole);
    memset(whole, 5, 48);
    mk_free(whole + 16);
    {
        char want[512];
        snprintf(want, sizeof want, INTERIOR, "mk_free", whole + 16, "rel-general");
        th_checks++;
        if (nlines != 1 || strcmp(lines[0], want) != 0)
            th_fail(__FILE__, __LINE__, "handler got \"%s\", expected \"%s\"",
                    nlines ? lines[0] : "", want);
        nlines = 0;
    }
    for (int i = 0; i < 48; i++)
        CHECK_EQ(whole[i], 5);
    mk_free(whole);
    handler_double_free(s, NULL, 48, "rel-slab");
    handler_double_free(NULL, pool, 40, "rel-pool");

    /* large and huge: the second free is refused, memory stays as it was */
    static const size_t big[] = {(size_t)64 << 10, (size_t)3 << 20};
    for (int i = 0; i < 2; i++) {
        size_t before = chunks_of(c);
        char *p = mk_alloc(c, big[i]);
        REQUIRE_NOT_NULL(p);
        mk_free(p);
        mk_free(p);
        EXPECT_LINE(HELD_FREE, p, NULL);
        CHECK_EQ(chunks_of(c), before);
        char *q = mk_alloc(c, big[i]);
        REQUIRE_NOT_NULL(q);
        memset(q, 7, big[i]);
        mk_free(q);
    }

    /* realloc of a stack pointer: NULL, reported, in every release build */
    char stack[64];
    char *sp = launder(stack);
    CHECK_NULL(mk_realloc(sp, 100));
    EXPECT_LINE("memkit: mk_realloc(): invalid pointer %p (memkit never returned it)", sp, NULL);

    if (secure) {
        char *m = malloc(40);
        REQUIRE_NOT_NULL(m);
        void *foreign_ptrs[] = {sp, static_array + 16, m};
        for (int i = 0; i < 3; i++) {
            mk_free(foreign_ptrs[i]);
            EXPECT_LINE("memkit: mk_free(): invalid pointer %p (memkit never "
                        "returned it)", foreign_ptrs[i], NULL);
            mk_pool_free(pool, foreign_ptrs[i]);
            EXPECT_LINE("memkit: mk_pool_free(): invalid pointer %p (memkit "
                        "never returned it)", foreign_ptrs[i], NULL);
        }
        free(m); /* glibc's, untouched */

        /* an overwritten link: reported once, the chunk itself is handed
         * out, the rest of that list is dropped, never the forged address;
         * the context goes on working */
        mk_ctx *l = new_general();
        char *keep = mk_alloc(l, 64), *a = mk_alloc(l, 64), *b = mk_alloc(l, 64);
        REQUIRE(keep && a && b);
        mk_free(a);
        mk_free(b);
        poke8(b, (uint64_t)(uintptr_t)forged_target);
        char *q = mk_alloc(l, 64);
        EXPECT_LINE(BAD_LINK, b, "rel-general");
        CHECK_PTR_EQ(q, b);
        for (int i = 0; i < 2000; i++) {
            char *r = mk_alloc(l, 64);
            REQUIRE_NOT_NULL(r);
            CHECK(r != forged_target);
            memset(r, 1, 64);
        }
        CHECK_EQ(nlines, 0);
        mk_ctx_delete(l);
    }
    CHECK_EQ(nlines, 0);
    mk_ctx_reset(c);
    mk_ctx_delete(c);
    mk_ctx_delete(s);
    mk_set_error_handler(NULL, NULL);
    exit(th_done());
}

/* ---- dispatch ------------------------------------------------------------------ */

static const struct {
    const char *name;
    void (*fn)(const char *arg);
} cases[] = {
    {"double-free", case_double_free},
    {"double-free-full", case_double_free_full},
    {"double-free-heap", case_double_free_heap},
    {"double-free-big", case_double_free_big},
    {"double-free-slab", case_double_free_slab},
    {"double-free-pool", case_double_free_pool},
    {"free-foreign", case_free_foreign},
    {"realloc-foreign", case_realloc_foreign},
    {"pool-free-foreign", case_pool_free_foreign},
    {"link", case_link},
    {"handler", case_handler},
    {"abab", case_abab},
    {"remote", case_remote},
    {"interior", case_interior},
    {"realloc-bad", case_realloc_bad},
    {"usable-bad", case_usable_bad},
    {"after-reset", case_after_reset},
    {"overflow", case_overflow},
    {"clean", case_clean},
};

static int rx_child(const char *name, const char *arg)
{
    rx_begin(name);
    /* the mode the parent asked for must be the mode in force */
    long want = getenv("MEMKIT_SECURE") ? atol(getenv("MEMKIT_SECURE")) : 0;
    if (th_option("secure") != want) {
        rx_expect("secure mode is not what the test asked for");
        return 3;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (strcmp(cases[i].name, name) == 0) {
            cases[i].fn(arg);
            return 0; /* survived: the parent reports it */
        }
    rx_expect("no such case");
    return 2;
}

/* ---- the tests (in the parent) -------------------------------------------------- */
/* (32760 bytes: the largest class's size in both modes; secure mode's
 * guard word makes 32768 bytes a large chunk, page.h) */

static const char *const small_sizes[] = {"8",   "16",   "24",   "48",  "100",
                                          "256", "1000", "4096", "20000",
                                          "32760"};
#define NSMALL (sizeof small_sizes / sizeof small_sizes[0])

static void test_double_free_small(void)
{
    for (size_t i = 0; i < NSMALL; i++) {
        RX_DIES("double-free", small_sizes[i], DEFAULT);
        RX_DIES("double-free", small_sizes[i], SECURE);
    }
    RX_DIES("double-free-full", "100", DEFAULT);
    RX_DIES("double-free-full", "32760", DEFAULT);
    RX_DIES("double-free-full", "100", SECURE);
    RX_DIES("double-free-heap", "24", DEFAULT);
    RX_DIES("double-free-heap", "24", SECURE);
    RX_DIES("double-free-heap", "2000", SECURE);
}

static void test_double_free_big(void)
{
    RX_DIES("double-free-big", "65536", DEFAULT);
    RX_DIES("double-free-big", "3145728", DEFAULT);
    RX_DIES("double-free-big", "65536", SECURE);
    RX_DIES("double-free-big", "3145728", SECURE);
}

/* SLAB chunks and pool objects: every way to free them, in both modes
 * (secure mode gives pools no inline front). */
static void test_double_free_slab_pool(void)
{
    static const char *const slab_sizes[] = {"48", "8", "1000"};
    static const char *const pool_ways[] = {"free", "free-ts", "pool",
                                            "pool-ts", "put", "put-ts"};
    for (int m = 0; m < 2; m++) {
        const char *const *env = m ? SECURE : DEFAULT;
        for (int i = 0; i < 3; i++)
            RX_DIES("double-free-slab", slab_sizes[i], env);
        for (int i = 0; i < 6; i++)
            RX_DIES("double-free-pool", pool_ways[i], env);
    }
}

static void test_foreign_secure(void)
{
    static const char *const what[] = {"stack", "static", "glibc", "trimmed"};
    for (int i = 0; i < 4; i++) {
        RX_DIES("free-foreign", what[i], SECURE);
        RX_DIES("realloc-foreign", what[i], SECURE);
    }
    RX_DIES("pool-free-foreign", "stack", SECURE);
    RX_DIES("pool-free-foreign", "static", SECURE);
    RX_DIES("pool-free-foreign", "glibc", SECURE);
}

/* The default mode's free reports a pointer outside the span of memkit's
 * segments (the stack, above every mapping; a static array and glibc's
 * brk heap, below them); one inside the span is secure mode's business. */
static void test_foreign_default(void)
{
    static const char *const what[] = {"stack", "static", "glibc"};
    for (int i = 0; i < 3; i++)
        RX_DIES("free-foreign", what[i], DEFAULT);
}

/* realloc checks the pointer in every release build (its cost is paid
 * once per realloc, not per free). */
static void test_realloc_foreign_default(void)
{
    RX_DIES("realloc-foreign", "stack", DEFAULT);
    RX_DIES("realloc-foreign", "static", DEFAULT);
    RX_DIES("realloc-foreign", "glibc", DEFAULT);
}

static void test_overwritten_link_secure(void)
{
    static const char *const args[] = {
        "general:8:forge:head",    "general:24:forge:head",
        "general:100:forge:head",  "general:1000:forge:head",
        "general:8192:forge:head", "general:32760:forge:head",
        "general:100:zero:head",   "general:100:forge:deep",
        "general:24:zero:deep",    "slab:48:forge:head",
        "slab:8:forge:head",       "slab:200:zero:head",
        "slab:48:forge:deep",      "pool:40:forge:head",
        "pool:40:zero:deep",       "pool-ts:40:forge:head",
        "pool-ts:40:forge:deep",
    };
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++)
        RX_DIES("link", args[i], SECURE);
}

/* A chunk freed twice wherever it is in its free list, for
 * every small class and kind, in both modes. */
static void test_double_free_anywhere(void)
{
    static const char *const args[] = {
        "general:8",     "general:16",    "general:24",    "general:48",
        "general:100",   "general:1000",  "general:4096",  "general:20000",
        "general:32760", "slab:16",       "slab:48",       "slab:1000",
        "generation:24", "generation:200", "pool:free",    "pool:pool",
        "pool:put",      "pool:free-ts",  "pool:pool-ts",
    };
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++)
        for (size_t m = 0; m < NMODES; m++)
            RX_DIES("abab", args[i], MODES[m]);
}

/* The first free was another thread's. */
static void test_double_free_remote(void)
{
    static const char *const args[] = {
        "general:24:owner",    "general:24:other",   "general:1000:owner",
        "general:32760:owner", "general:100000:owner", "general:3145728:other",
        "slab:48:owner",       "slab:48:other",      "generation:64:owner",
        "generation:64:other", "pool-ts:40:owner",   "pool-ts:40:other",
    };
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++)
        for (size_t m = 0; m < NMODES; m++)
            RX_DIES("remote", args[i], MODES[m]);
}

/* Addresses that are not the start of a live chunk. */
static void test_not_a_chunk(void)
{
    static const char *const interior[] = {
        "general:48:16",       "general:24:8",        "general:1000:512",
        "general:32760:16",    "general:100000:4096", "general:100000:1",
        "general:3145728:4096", "general:9437184:5242880", "slab:48:16",
        "slab:100:8",          "generation:64:16",    "generation:64:1",
        "pool:40:16",          "pool-put:40:8",
    };
    for (size_t i = 0; i < sizeof interior / sizeof interior[0]; i++)
        for (size_t m = 0; m < NMODES; m++)
            RX_DIES("interior", interior[i], MODES[m]);
    static const char *const realloc_bad[] = {"interior:48", "freed:48",
                                              "freed:100000"};
    for (size_t i = 0; i < 3; i++)
        for (size_t m = 0; m < NMODES; m++)
            RX_DIES("realloc-bad", realloc_bad[i], MODES[m]);
    static const char *const usable_bad[] = {"interior:48", "freed:48",
                                             "freed:1000", "interior:5000"};
    for (size_t i = 0; i < 4; i++)
        for (size_t m = 0; m < NMODES; m++)
            RX_DIES("usable-bad", usable_bad[i], MODES[m]);
    static const char *const reset[] = {"general:48", "slab:48",
                                        "generation:64"};
    for (size_t i = 0; i < 3; i++)
        for (size_t m = 0; m < NMODES; m++)
            RX_DIES("after-reset", reset[i], MODES[m]);
}

/* Secure mode: a write past the end of a chunk into its neighbour is
 * reported when either is freed. */
static void test_overflow_secure(void)
{
    static const char *const args[] = {
        "general:8:self",     "general:8:next",     "general:16:self",
        "general:24:next",    "general:48:self",    "general:100:next",
        "general:1000:self",  "general:4096:next",  "general:32760:self",
        "general:32760:next", "general:100000:self", "slab:40:self",
        "slab:40:next",       "slab:8:next",        "pool:40:self",
        "pool:40:next",       "generation:40:self", "generation:200:self",
        "generation:40:next",
    };
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) {
        RX_DIES("overflow", args[i], SECURE);
        if (strstr(args[i], ":self")) /* (neighbours: not with SECURE=2) */
            RX_DIES("overflow", args[i], SECURE2);
    }
}

/* A correct program reports nothing, in every mode: chunks of every kind
 * and many sizes allocated, freed in a scattered order (so that a free's
 * neighbours are in every state: live, freed, never handed out, and with
 * MEMKIT_SECURE=2 pages cut in a random order), some by another thread,
 * allocated again, realloc'ed, freed. */
static void test_correct_program_quiet(void)
{
    for (size_t m = 0; m < NMODES; m++)
        RX_LIVES("clean", "", MODES[m]);
}

static void test_handler(void)
{
    RX_LIVES("handler", "default", DEFAULT);
    RX_LIVES("handler", "secure", SECURE);
}

/* The release build's first report is followed by one line on what the
 * checking build finds; a handler gets the report alone. */
static void double_free_child(void *arg)
{
    (void)arg;
    mk_ctx *c = new_general();
    char *p = must(mk_alloc(c, 40));
    mk_free(p);
    mk_free(p);
}

static char handled[512];
static void keep_line(const char *line, void *arg)
{
    (void)arg;
    snprintf(handled, sizeof handled, "%s", line);
}

static void test_hint(void)
{
    char err[2048];
    int st = th_run_child(double_free_child, NULL, err, sizeof err);
    CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    const char *nl = strchr(err, '\n');
    REQUIRE_NOT_NULL(nl);
    CHECK(strncmp(err, "memkit: mk_free(): double free of ", 34) == 0);
    CHECK_STR_EQ(nl + 1, RX_HINT); /* right after the report, once */
    mk_set_error_handler(keep_line, NULL);
    mk_ctx *c = new_general();
    char *p = mk_alloc(c, 40);
    REQUIRE_NOT_NULL(p);
    mk_free(p);
    mk_free(p);
    mk_set_error_handler(NULL, NULL);
    CHECK(strncmp(handled, "memkit: mk_free(): double free of ", 34) == 0);
    CHECK(strstr(handled, "release build") == NULL);
    mk_ctx_delete(c);
}

int main(int argc, char **argv)
{
    if (argc > 2)
        return rx_child(argv[1], argv[2]);
    th_checks++;
    if (mk_checking())
        th_fail(__FILE__, __LINE__, "linked with the checking build");
    RUN(test_double_free_small);
    RUN(test_double_free_big);
    RUN(test_double_free_slab_pool);
    RUN(test_foreign_secure);
    RUN(test_foreign_default);
    RUN(test_realloc_foreign_default);
    RUN(test_overwritten_link_secure);
    RUN(test_double_free_anywhere);
    RUN(test_double_free_remote);
    RUN(test_not_a_chunk);
    RUN(test_overflow_secure);
    RUN(test_correct_program_quiet);
    RUN(test_handler);
    RUN(test_hint);
    return th_done();
}
