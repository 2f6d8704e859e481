/* SPDX-License-Identifier: MIT */
/*
 * api/ctx.c - the context tree: mk_ctx_new (kinds, names, parents),
 * mk_ctx_name/parent/kind, mk_ctx_set_parent (the subtree moves, cycles
 * refused), mk_ctx_reset (chunks freed, descendants deleted,
 * context usable after), mk_ctx_delete (descendants first, NULL ignored),
 * mk_ctx_on_reset (newest first, once, on reset and delete; descendants'
 * callbacks before their parent's), mk_ctx_set_owner (same thread, and a
 * hand-over to another thread, which then allocates, frees, and collects
 * the old owner's frees).
 */
#include "harness.h"

#include <errno.h>
#include <memkit.h>
#include <pthread.h>

/* ---- a log of callback runs ---------------------------------------------- */

static const char *cb_log[64];
static int cb_n;

static void log_cb(void *arg)
{
    if (cb_n < 64)
        cb_log[cb_n] = arg;
    cb_n++;
}

static void log_clear(void) { cb_n = 0; }

/* "a,b,c" of the callbacks run so far */
static const char *log_str(void)
{
    static char buf[512];
    buf[0] = '\0';
    for (int i = 0; i < cb_n && i < 64; i++) {
        if (i)
            strcat(buf, ",");
        strcat(buf, cb_log[i]);
    }
    return buf;
}

/* ---- creation ------------------------------------------------------------- */

static void test_new_general(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "top", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    CHECK_STR_EQ(mk_ctx_name(c), "top");
    CHECK_NULL(mk_ctx_parent(c));
    CHECK_EQ(mk_ctx_kind(c), MK_GENERAL);

    mk_ctx_opts opts = {0};
    mk_ctx *k = mk_ctx_new(c, "kid", MK_GENERAL, &opts);
    REQUIRE_NOT_NULL(k);
    CHECK_PTR_EQ(mk_ctx_parent(k), c);
    CHECK_STR_EQ(mk_ctx_name(k), "kid");

    mk_ctx *anon = mk_ctx_new(NULL, NULL, MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(anon);
    CHECK_STR_EQ(mk_ctx_name(anon), "?");
    CHECK(anon != c && anon != k);
    mk_ctx_delete(anon);
    mk_ctx_delete(c);
}

static void test_new_bad_kind(void)
{
    const int bad[] = {4, 5, 100, -1, 0x7fffffff};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        CHECK_NULL(mk_ctx_new(NULL, "bad", (mk_kind)bad[i], NULL));
        CHECK_ERRNO(EINVAL);
    }
}

/* The other kinds with NULL opts: GENERATION and BUMP take their
 * defaults; MK_SLAB has no chunk size then, so it fails with EINVAL. */
static void test_new_other_kinds(void)
{
    const mk_kind kinds[] = {MK_SLAB, MK_GENERATION, MK_BUMP};
    for (size_t i = 0; i < 3; i++) {
        errno = 0;
        mk_ctx *c = mk_ctx_new(NULL, "other", kinds[i], NULL);
        if (c) {
            CHECK(kinds[i] != MK_SLAB);
            CHECK_EQ(mk_ctx_kind(c), kinds[i]);
            mk_ctx_delete(c);
        } else {
            CHECK_EQ(kinds[i], MK_SLAB);
            CHECK_ERRNO(EINVAL);
        }
    }
}

/* A child that makes a slab without its chunk size, with MEMKIT_VERBOSE
 * set (at run time) when @arg is not NULL. */
static void slab_without_size(void *arg)
{
    if (arg && mk_option_set("verbose", 1) != 0)
        _exit(7);
    errno = 0;
    if (mk_ctx_new(NULL, "cells", MK_SLAB, NULL) || errno != EINVAL)
        _exit(3);
    mk_ctx_opts zero = {.chunk_size = 0};
    if (mk_ctx_new(NULL, "cells", MK_SLAB, &zero) || errno != EINVAL)
        _exit(4);
    mk_ctx_opts align = {.chunk_size = 24, .chunk_align = 24};
    if (mk_ctx_new(NULL, "cells", MK_SLAB, &align) || errno != EINVAL)
        _exit(5);
    _exit(0);
}

/* EINVAL alone does not say that MK_SLAB needs a chunk size: with
 * MEMKIT_VERBOSE=1 memkit says it, one line per failure; without, the
 * failure is the program's to report and memkit prints nothing. */
static void test_slab_einval_says_why(void)
{
    char out[2048];
    int st = th_run_child(slab_without_size, NULL, out, sizeof out);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK_STR_EQ(out, "");
    st = th_run_child(slab_without_size, "verbose", out, sizeof out);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    const char *need = "memkit: mk_ctx_new(): fails with EINVAL: MK_SLAB needs "
                       "mk_ctx_opts.chunk_size, its one chunk size (1 byte to "
                       "1 MiB) (context \"cells\")\n";
    char want[1024];
    snprintf(want, sizeof want, "%s%s%s", need, need,
             "memkit: mk_ctx_new(): fails with EINVAL: MK_SLAB's chunk_align "
             "is not a power of two up to 64 KiB (context \"cells\")\n");
    CHECK_STR_EQ(out, want);
}

/* ---- reset ---------------------------------------------------------------- */

static void test_reset_frees_and_deletes(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "r", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    mk_ctx *k1 = mk_ctx_new(c, "k1", MK_GENERAL, NULL);
    mk_ctx *k2 = mk_ctx_new(k1, "k2", MK_GENERAL, NULL);
    REQUIRE(k1 && k2);
    const size_t sizes[] = {0, 8, 24, 100, 1000, 5000, 40000, 300000,
                            2u << 20};
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            CHECK_NOT_NULL(mk_alloc(c, sizes[i]));
            CHECK_NOT_NULL(mk_alloc(k1, sizes[i]));
            CHECK_NOT_NULL(mk_alloc(k2, sizes[i]));
        }
    }
    mk_ctx_on_reset(k1, log_cb, "k1");
    mk_ctx_on_reset(k2, log_cb, "k2");
    mk_stats st;
    CHECK_EQ(mk_ctx_stats(c, &st, 1), 0);
    CHECK_EQ(st.contexts, 3u);
    CHECK_EQ(st.chunks, 81u);

    log_clear();
    mk_ctx_reset(c);
    CHECK_STR_EQ(log_str(), "k2,k1"); /* the descendants are gone */
    CHECK_EQ(mk_ctx_stats(c, &st, 1), 0);
    CHECK_EQ(st.contexts, 1u);
    CHECK_EQ(st.chunks, 0u);
    CHECK_EQ(st.bytes_used, 0u);
    /* a GENERAL context keeps up to 1 MiB of its pages for reuse */
    CHECK_LE(st.bytes_reserved, (size_t)1 << 20);

    /* usable after: allocate, write, free, and reset again */
    for (int round = 0; round < 3; round++) {
        void *ps[9];
        for (size_t i = 0; i < 9; i++) {
            ps[i] = mk_alloc(c, sizes[i]);
            REQUIRE_NOT_NULL(ps[i]);
            th_fill(ps[i], sizes[i], i);
            CHECK_PTR_EQ(mk_ctx_of(ps[i]), c);
        }
        for (size_t i = 0; i < 9; i++) {
            CHECK_PATTERN(ps[i], sizes[i], i);
            if (i & 1)
                mk_free(ps[i]);
        }
        mk_ctx *k = mk_ctx_new(c, "again", MK_GENERAL, NULL);
        CHECK_NOT_NULL(mk_alloc(k, 64));
        mk_ctx_reset(c);
        CHECK_EQ(mk_ctx_stats(c, &st, 1), 0);
        CHECK_EQ(st.contexts, 1u);
        CHECK_EQ(st.chunks, 0u);
    }
    mk_ctx_delete(c);
}

/* A reset page is reused from its start: chunks allocated after a reset
 * come from the kept page and do not overlap each other. */
static void test_reset_reuse_distinct(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "reuse", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    enum { N = 2000 };
    static void *ps[N];
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < N; i++) {
            ps[i] = mk_alloc(c, 48);
            REQUIRE_NOT_NULL(ps[i]);
            th_fill(ps[i], 48, (uint64_t)i);
        }
        for (int i = 0; i < N; i++)
            CHECK_PATTERN(ps[i], 48, (uint64_t)i);
        mk_ctx_reset(c);
    }
    mk_ctx_delete(c);
}

/* A GENERAL context's reset keeps up to 1 MiB of its pages, rewound in
 * their classes: the same fill again takes no new page; chunks handed out
 * from kept pages are distinct, usable and freed one by one; a fill above
 * the bound keeps at most the bound; mk_ctx_trim gives the kept pages back,
 * and MK_CTX_RELEASE_ON_RESET keeps none. */
static size_t reserved(mk_ctx *c)
{
    mk_stats st;
    CHECK_EQ(mk_ctx_stats(c, &st, 0), 0);
    return st.bytes_reserved;
}

static size_t resting(mk_ctx *c)
{
    mk_stats st;
    CHECK_EQ(mk_ctx_stats(c, &st, 0), 0);
    return st.bytes_resting;
}

static void fill_mix(mk_ctx *c, void **ps, int n, uint64_t seed)
{
    static const size_t sizes[] = {24, 100, 1000, 3000};
    for (int i = 0; i < n; i++) {
        size_t sz = sizes[i % 4];
        ps[i] = mk_alloc(c, sz);
        REQUIRE_NOT_NULL(ps[i]);
        th_fill(ps[i], sz, seed + (uint64_t)i);
    }
}

static void test_reset_keeps_pages(void)
{
    enum { N = 500 }; /* some 550 KiB in four classes */
    static void *ps[N];
    static const size_t sizes[] = {24, 100, 1000, 3000};
    mk_ctx *c = mk_ctx_new(NULL, "keep", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    fill_mix(c, ps, N, 1);
    size_t full = reserved(c);
    mk_ctx_reset(c);
    size_t kept = reserved(c);
    CHECK_GT(kept, (size_t)64 << 10); /* more than one page */
    CHECK_LE(kept, (size_t)1 << 20);
    CHECK_LE(kept, full);
    /* refills of the same mix: a class whose first round took several
     * pages below 64 KiB keeps its largest, and the first refill cuts it
     * a page twice that size, at most one a class; from the second refill
     * on, the kept pages serve every round: nothing is added, and the
     * rounds hold the same */
    size_t settled = 0;
    for (int round = 0; round < 4; round++) {
        size_t before = reserved(c);
        fill_mix(c, ps, N, 100 * (uint64_t)round);
        if (round == 0)
            CHECK_LE(reserved(c), before + 4 * ((size_t)64 << 10));
        else
            CHECK_EQ(reserved(c), before);
        for (int i = 0; i < N; i++)
            CHECK_PATTERN(ps[i], sizes[i % 4], 100 * (uint64_t)round + (uint64_t)i);
        for (int i = 0; i < N; i += 3) /* a third, one by one (no page empties) */
            mk_free(ps[i]);
        mk_ctx_reset(c);
        CHECK_LE(reserved(c), (size_t)1 << 20);
        if (round == 0)
            settled = reserved(c);
        else
            CHECK_EQ(reserved(c), settled);
    }
    CHECK_EQ(resting(c), 0u); /* (all within the bound) */
    /* a fill past the bound keeps at most the bound; the pages past it
     * rest, except in an instrumented context (ASan, Valgrind), which
     * rests none (tests/api/rest.c knows which it is) */
    for (int i = 0; i < 8000; i++)
        REQUIRE_NOT_NULL(mk_alloc(c, 1000));
    mk_ctx_reset(c);
    CHECK_LE(reserved(c) - resting(c), (size_t)1 << 20);
    if (resting(c) != 0)
        CHECK_GT(resting(c), (size_t)6 << 20);
    mk_ctx_trim(c);
    CHECK_EQ(reserved(c), 0u);
    CHECK_EQ(resting(c), 0u);
    CHECK_NOT_NULL(mk_alloc(c, 1000)); /* usable after */
    mk_ctx_delete(c);

    mk_ctx_opts o = {.flags = MK_CTX_RELEASE_ON_RESET};
    c = mk_ctx_new(NULL, "release", MK_GENERAL, &o);
    REQUIRE_NOT_NULL(c);
    fill_mix(c, ps, N, 7);
    mk_ctx_reset(c);
    CHECK_EQ(reserved(c), 0u);
    fill_mix(c, ps, N, 8);
    for (int i = 0; i < N; i++)
        CHECK_PATTERN(ps[i], sizes[i % 4], 8 + (uint64_t)i);
    mk_ctx_delete(c);
}

/* ---- delete --------------------------------------------------------------- */

static void test_delete_descendants_first(void)
{
    /* root -> a -> a1 -> a11
     *      -> b
     * Every context logs its name; a descendant must log before each of
     * its ancestors. */
    mk_ctx *root = mk_ctx_new(NULL, "root", MK_GENERAL, NULL);
    mk_ctx *a = mk_ctx_new(root, "a", MK_GENERAL, NULL);
    mk_ctx *a1 = mk_ctx_new(a, "a1", MK_GENERAL, NULL);
    mk_ctx *a11 = mk_ctx_new(a1, "a11", MK_GENERAL, NULL);
    mk_ctx *b = mk_ctx_new(root, "b", MK_GENERAL, NULL);
    REQUIRE(root && a && a1 && a11 && b);
    mk_ctx *all[] = {root, a, a1, a11, b};
    const char *names[] = {"root", "a", "a1", "a11", "b"};
    for (int i = 0; i < 5; i++) {
        CHECK_NOT_NULL(mk_alloc(all[i], 100));
        CHECK_NOT_NULL(mk_alloc(all[i], 2u << 20));
        CHECK_EQ(mk_ctx_on_reset(all[i], log_cb, (void *)names[i]), 0);
    }
    log_clear();
    mk_ctx_delete(root);
    CHECK_EQ(cb_n, 5);
    int pos[5] = {-1, -1, -1, -1, -1};
    for (int i = 0; i < cb_n && i < 64; i++)
        for (int j = 0; j < 5; j++)
            if (strcmp(cb_log[i], names[j]) == 0)
                pos[j] = i;
    for (int j = 0; j < 5; j++)
        CHECK_GE(pos[j], 0);
    CHECK_LT(pos[3], pos[2]); /* a11 before a1 */
    CHECK_LT(pos[2], pos[1]); /* a1 before a */
    CHECK_LT(pos[1], pos[0]); /* a before root */
    CHECK_LT(pos[4], pos[0]); /* b before root */
    CHECK_EQ(pos[0], 4);      /* root last */

    mk_ctx_delete(NULL); /* ignored */
    CHECK_EQ(cb_n, 5);
}

/* Deleting a child alone leaves the parent and siblings intact. */
static void test_delete_child_only(void)
{
    mk_ctx *p = mk_ctx_new(NULL, "p", MK_GENERAL, NULL);
    mk_ctx *x = mk_ctx_new(p, "x", MK_GENERAL, NULL);
    mk_ctx *y = mk_ctx_new(p, "y", MK_GENERAL, NULL);
    mk_ctx *z = mk_ctx_new(p, "z", MK_GENERAL, NULL);
    REQUIRE(p && x && y && z);
    char *sp = mk_strdup(p, "parent"), *sx = mk_strdup(x, "x"),
         *sz = mk_strdup(z, "z");
    REQUIRE(sp && sx && sz);
    mk_ctx_delete(y); /* the middle sibling */
    mk_stats st;
    mk_ctx_stats(p, &st, 1);
    CHECK_EQ(st.contexts, 3u);
    CHECK_EQ(st.chunks, 3u);
    CHECK_STR_EQ(sp, "parent");
    CHECK_STR_EQ(sx, "x");
    CHECK_STR_EQ(sz, "z");
    mk_ctx_delete(z); /* the newest */
    mk_ctx_delete(x); /* the last */
    mk_ctx_stats(p, &st, 1);
    CHECK_EQ(st.contexts, 1u);
    CHECK_EQ(st.chunks, 1u);
    mk_ctx *w = mk_ctx_new(p, "w", MK_GENERAL, NULL);
    CHECK_NOT_NULL(w);
    mk_ctx_stats(p, &st, 1);
    CHECK_EQ(st.contexts, 2u);
    mk_ctx_delete(p);
}

/* A deep chain is deleted without recursion trouble. */
static void test_delete_deep(void)
{
    mk_ctx *root = mk_ctx_new(NULL, "deep", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(root);
    mk_ctx *c = root;
    for (int i = 0; i < 10000; i++) {
        c = mk_ctx_new(c, "d", MK_GENERAL, NULL);
        REQUIRE_NOT_NULL(c);
        if (i % 1000 == 0)
            CHECK_NOT_NULL(mk_alloc(c, 32));
    }
    mk_stats st;
    mk_ctx_stats(root, &st, 1);
    CHECK_EQ(st.contexts, 10001u);
    CHECK_EQ(st.chunks, 10u);
    mk_ctx_reset(root);
    mk_ctx_stats(root, &st, 1);
    CHECK_EQ(st.contexts, 1u);
    mk_ctx_delete(root);
}

/* ---- callbacks ------------------------------------------------------------ */

static void test_callbacks_order_and_once(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "cb", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    CHECK_EQ(mk_ctx_on_reset(c, log_cb, "1"), 0);
    CHECK_EQ(mk_ctx_on_reset(c, log_cb, "2"), 0);
    CHECK_EQ(mk_ctx_on_reset(c, log_cb, "3"), 0);
    log_clear();
    mk_ctx_reset(c);
    CHECK_STR_EQ(log_str(), "3,2,1"); /* newest first */
    log_clear();
    mk_ctx_reset(c);
    CHECK_EQ(cb_n, 0); /* once */

    CHECK_EQ(mk_ctx_on_reset(c, log_cb, "4"), 0);
    CHECK_EQ(mk_ctx_on_reset(c, log_cb, "5"), 0);
    log_clear();
    mk_ctx_delete(c);
    CHECK_STR_EQ(log_str(), "5,4"); /* on delete too, only the new ones */
}

static void test_callbacks_tree_order(void)
{
    /* parent P with callbacks p1,p2; child C with c1,c2; grandchild G with
     * g1.  Reset of P: G's, then C's, then P's, each newest first. */
    mk_ctx *p = mk_ctx_new(NULL, "P", MK_GENERAL, NULL);
    mk_ctx *c = mk_ctx_new(p, "C", MK_GENERAL, NULL);
    mk_ctx *g = mk_ctx_new(c, "G", MK_GENERAL, NULL);
    REQUIRE(p && c && g);
    mk_ctx_on_reset(p, log_cb, "p1");
    mk_ctx_on_reset(c, log_cb, "c1");
    mk_ctx_on_reset(g, log_cb, "g1");
    mk_ctx_on_reset(p, log_cb, "p2");
    mk_ctx_on_reset(c, log_cb, "c2");
    log_clear();
    mk_ctx_reset(p);
    CHECK_STR_EQ(log_str(), "g1,c2,c1,p2,p1");

    /* the same through delete, and resetting a middle context */
    c = mk_ctx_new(p, "C", MK_GENERAL, NULL);
    g = mk_ctx_new(c, "G", MK_GENERAL, NULL);
    REQUIRE(c && g);
    mk_ctx_on_reset(p, log_cb, "p3");
    mk_ctx_on_reset(c, log_cb, "c3");
    mk_ctx_on_reset(g, log_cb, "g2");
    log_clear();
    mk_ctx_reset(c);
    CHECK_STR_EQ(log_str(), "g2,c3");
    mk_ctx_on_reset(c, log_cb, "c4");
    log_clear();
    mk_ctx_delete(p);
    CHECK_STR_EQ(log_str(), "c4,p3");
}

/* A callback may allocate from (and free into) the context being reset. */
static mk_ctx *cb_ctx;
static int cb_alloc_ok;
static void alloc_cb(void *arg)
{
    (void)arg;
    char *s = mk_strdup(cb_ctx, "inside a callback");
    cb_alloc_ok = s && strcmp(s, "inside a callback") == 0 &&
                  mk_ctx_of(s) == cb_ctx;
    mk_free(s);
}

static void test_callback_uses_context(void)
{
    cb_ctx = mk_ctx_new(NULL, "cbuse", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(cb_ctx);
    CHECK_EQ(mk_ctx_on_reset(cb_ctx, alloc_cb, NULL), 0);
    cb_alloc_ok = 0;
    mk_ctx_reset(cb_ctx);
    CHECK(cb_alloc_ok);
    mk_stats st;
    mk_ctx_stats(cb_ctx, &st, 0);
    CHECK_EQ(st.chunks, 0u);
    mk_ctx_delete(cb_ctx);
}

static void test_callbacks_bad_args(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "bad", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    errno = 0;
    CHECK_EQ(mk_ctx_on_reset(NULL, log_cb, NULL), -1);
    CHECK_ERRNO(EINVAL);
    errno = 0;
    CHECK_EQ(mk_ctx_on_reset(c, NULL, NULL), -1);
    CHECK_ERRNO(EINVAL);
    log_clear();
    mk_ctx_delete(c);
    CHECK_EQ(cb_n, 0);
}

/* Many callbacks, all run once, newest first. */
static int seq_next, seq_ok;
static void seq_cb(void *arg)
{
    int want = (int)(intptr_t)arg;
    if (want != seq_next)
        seq_ok = 0;
    seq_next--;
}

static void test_many_callbacks(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "many", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    for (int i = 0; i < 5000; i++)
        REQUIRE(mk_ctx_on_reset(c, seq_cb, (void *)(intptr_t)i) == 0);
    seq_next = 4999;
    seq_ok = 1;
    mk_ctx_delete(c);
    CHECK(seq_ok);
    CHECK_EQ(seq_next, -1);
}

/* ---- owner ----------------------------------------------------------------- */

/* mk_ctx_set_parent: the subtree moves with its chunks, callbacks and
 * figures; the old parent's delete leaves it, the new one's takes it;
 * cycles are refused and change nothing; NULL makes it top-level. */
static void test_set_parent(void)
{
    mk_ctx *query = mk_ctx_new(NULL, "query", MK_GENERAL, NULL);
    mk_ctx *session = mk_ctx_new(NULL, "session", MK_GENERAL, NULL);
    mk_ctx *plan = mk_ctx_new(query, "plan", MK_GENERAL, NULL);
    mk_ctx *node = mk_ctx_new(plan, "node", MK_SLAB,
                              &(mk_ctx_opts){.chunk_size = 32});
    REQUIRE(query && session && plan && node);
    char *a = mk_alloc(plan, 100), *b = mk_alloc(node, 32);
    REQUIRE(a && b);
    th_fill(a, 100, 1);
    th_fill(b, 32, 2);
    log_clear();
    CHECK_EQ(mk_ctx_on_reset(plan, log_cb, "plan"), 0);
    CHECK_EQ(mk_ctx_on_reset(node, log_cb, "node"), 0);

    /* cycles: under itself, its child, its grandchild */
    errno = 0;
    CHECK_EQ(mk_ctx_set_parent(plan, plan), -1);
    CHECK_ERRNO(EINVAL);
    CHECK_EQ(mk_ctx_set_parent(plan, node), -1);
    CHECK_EQ(mk_ctx_set_parent(query, node), -1);
    CHECK_PTR_EQ(mk_ctx_parent(plan), query);
    CHECK_PTR_EQ(mk_ctx_parent(node), plan);

    mk_stats st;
    CHECK_EQ(mk_ctx_set_parent(plan, session), 0);
    CHECK_PTR_EQ(mk_ctx_parent(plan), session);
    CHECK_PTR_EQ(mk_ctx_parent(node), plan);
    CHECK_EQ(mk_ctx_stats(session, &st, 1), 0);
    CHECK_EQ(st.contexts, 3u);
    CHECK_EQ(st.chunks, 2u);
    CHECK_EQ(mk_ctx_stats(query, &st, 1), 0);
    CHECK_EQ(st.contexts, 1u);
    CHECK_EQ(mk_ctx_set_parent(plan, session), 0); /* already there */

    mk_ctx_delete(query); /* the old parent: plan and node stay */
    CHECK_EQ(cb_n, 0);
    CHECK_PATTERN(a, 100, 1);
    CHECK_PATTERN(b, 32, 2);
    CHECK_PTR_EQ(mk_ctx_of(b), node);

    /* top-level, then back under session, then deleted with it */
    CHECK_EQ(mk_ctx_set_parent(plan, NULL), 0);
    CHECK_NULL(mk_ctx_parent(plan));
    CHECK_EQ(mk_ctx_stats(session, &st, 1), 0);
    CHECK_EQ(st.contexts, 1u);
    CHECK_EQ(mk_ctx_set_parent(plan, session), 0);
    mk_ctx_delete(session);
    CHECK_STR_EQ(log_str(), "node,plan"); /* the moved callbacks ran */
}

static void test_set_owner_same_thread(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "own", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    void *p = mk_alloc(c, 64);
    REQUIRE_NOT_NULL(p);
    mk_ctx_set_owner(c); /* already ours: nothing changes */
    mk_free(p);
    mk_stats st;
    mk_ctx_stats(c, &st, 0);
    CHECK_EQ(st.chunks, 0u);
    p = mk_alloc(c, 64);
    CHECK_NOT_NULL(p);
    CHECK_PTR_EQ(mk_ctx_of(p), c);
    mk_ctx_delete(c);
}

/* Hand a context over to another thread.  The new owner frees some of the
 * old owner's chunks and allocates; afterwards the old owner's frees of the
 * rest are remote frees the new owner collects. */
typedef struct handover {
    mk_ctx *ctx;
    char *chunks[300];
    int phase1_ok, phase2_ok;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int step;
} handover;

static void wait_step(handover *h, int step)
{
    pthread_mutex_lock(&h->lock);
    while (h->step < step)
        pthread_cond_wait(&h->cond, &h->lock);
    pthread_mutex_unlock(&h->lock);
}

static void set_step(handover *h, int step)
{
    pthread_mutex_lock(&h->lock);
    h->step = step;
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->lock);
}

static void *new_owner(void *arg)
{
    handover *h = arg;
    wait_step(h, 1);
    mk_ctx_set_owner(h->ctx);
    int ok = 1;
    /* free the first half (now local frees), allocate more */
    for (int i = 0; i < 150; i++) {
        ok &= th_verify(h->chunks[i], 100, (uint64_t)i) == (size_t)-1;
        mk_free(h->chunks[i]);
    }
    for (int i = 0; i < 150; i++) {
        h->chunks[i] = mk_alloc(h->ctx, 100);
        ok &= h->chunks[i] != NULL && mk_ctx_of(h->chunks[i]) == h->ctx;
        if (h->chunks[i])
            th_fill(h->chunks[i], 100, 1000 + (uint64_t)i);
    }
    h->phase1_ok = ok;
    set_step(h, 2);
    wait_step(h, 3); /* the old owner freed the second half */
    ok = 1;
    /* the old owner's frees are remote: mk_ctx_stats takes them in first,
     * so they count as freed in every build (150 live, not 300) */
    mk_stats st;
    mk_ctx_stats(h->ctx, &st, 0);
    ok &= st.chunks == 150u;
    /* and their memory is the new owner's to use again */
    void *probe[150];
    for (int i = 0; i < 150; i++) {
        probe[i] = mk_alloc(h->ctx, 100);
        ok &= probe[i] != NULL;
    }
    mk_ctx_stats(h->ctx, &st, 0);
    ok &= st.chunks == 300u;
    for (int i = 0; i < 150; i++)
        mk_free(probe[i]);
    for (int i = 0; i < 150; i++) {
        ok &= th_verify(h->chunks[i], 100, 1000 + (uint64_t)i) == (size_t)-1;
        mk_free(h->chunks[i]);
    }
    mk_ctx_stats(h->ctx, &st, 0);
    ok &= st.chunks == 0 && st.bytes_used == 0;
    h->phase2_ok = ok;
    return NULL;
}

static void test_set_owner_handover(void)
{
    static handover h;
    memset(&h, 0, sizeof h);
    pthread_mutex_init(&h.lock, NULL);
    pthread_cond_init(&h.cond, NULL);
    h.ctx = mk_ctx_new(NULL, "handed", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(h.ctx);
    for (int i = 0; i < 300; i++) {
        h.chunks[i] = mk_alloc(h.ctx, 100);
        REQUIRE_NOT_NULL(h.chunks[i]);
        th_fill(h.chunks[i], 100, (uint64_t)i);
    }
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, new_owner, &h) == 0);
    set_step(&h, 1);
    wait_step(&h, 2);
    /* no longer the owner: these are remote frees */
    for (int i = 150; i < 300; i++) {
        CHECK_PATTERN(h.chunks[i], 100, (uint64_t)i);
        mk_free(h.chunks[i]);
    }
    set_step(&h, 3);
    pthread_join(t, NULL);
    CHECK(h.phase1_ok);
    CHECK(h.phase2_ok);
    /* take it back and delete it */
    mk_ctx_set_owner(h.ctx);
    void *p = mk_alloc(h.ctx, 64);
    CHECK_NOT_NULL(p);
    mk_free(p);
    mk_ctx_delete(h.ctx);
    pthread_mutex_destroy(&h.lock);
    pthread_cond_destroy(&h.cond);
}

/* A callback that registers itself again during a reset runs at the next
 * reset, not again in the same one; during a delete it runs before the
 * context goes. */
static mk_ctx *rereg_ctx;
static int rereg_runs;
static void rereg(void *arg)
{
    (void)arg;
    rereg_runs++;
    if (rereg_runs < 10)
        mk_ctx_on_reset(rereg_ctx, rereg, NULL);
}

static void test_callback_registers_again(void)
{
    rereg_ctx = mk_ctx_new(NULL, "rereg", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(rereg_ctx);
    rereg_runs = 0;
    CHECK_EQ(mk_ctx_on_reset(rereg_ctx, rereg, NULL), 0);
    mk_ctx_reset(rereg_ctx);
    CHECK_EQ(rereg_runs, 1);
    mk_ctx_reset(rereg_ctx);
    CHECK_EQ(rereg_runs, 2);
    mk_ctx_delete(rereg_ctx); /* runs until none is left */
    CHECK_EQ(rereg_runs, 10);
}

int main(void)
{
    RUN(test_new_general);
    RUN(test_reset_keeps_pages);
    RUN(test_new_bad_kind);
    RUN(test_new_other_kinds);
    RUN(test_slab_einval_says_why);
    RUN(test_reset_frees_and_deletes);
    RUN(test_reset_reuse_distinct);
    RUN(test_delete_descendants_first);
    RUN(test_delete_child_only);
    RUN(test_delete_deep);
    RUN(test_callbacks_order_and_once);
    RUN(test_callbacks_tree_order);
    RUN(test_callback_uses_context);
    RUN(test_callbacks_bad_args);
    RUN(test_many_callbacks);
    RUN(test_set_parent);
    RUN(test_set_owner_same_thread);
    RUN(test_set_owner_handover);
    RUN(test_callback_registers_again);
    return th_done();
}
