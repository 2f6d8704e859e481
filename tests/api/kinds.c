/* SPDX-License-Identifier: MIT */
/*
 * api/kinds.c - what every context kind shares, run over GENERAL, SLAB (two
 * chunk sizes), GENERATION and BUMP alike:
 *   - a context reports its kind, name and parent; mk_ctx_of finds it from
 *     any of its chunks; size 0 gives unique pointers;
 *   - mk_ctx_stats figures right after known allocations (alone and
 *     recursive), in the release build and in instrumented builds (ASan,
 *     Valgrind), where chunks count their requested bytes;
 *   - reset keeps at most one block (GENERAL: 1 MiB of pages) and frees every chunk; after mk_trim the
 *     OS layer's committed bytes are back to the baseline (plus what the
 *     kept block holds); delete returns every block: committed bytes back
 *     to the baseline exactly on the second round (the first may grow
 *     memkit's bookkeeping, which is kept for reuse by design);
 *   - hierarchy across kinds: a child of any kind under a parent of any
 *     other kind is deleted (callbacks run) when its parent is reset or
 *     deleted, and its blocks go back;
 *   - mk_ctx_stats_print names each kind;
 *   - MK_CTX_REPORT_LEAKS in the release build: the one line
 *     "memkit: context NAME: N chunks (B bytes) leaked" at delete, and no
 *     abort (in a child process).
 */
#include "harness.h"

#include <memkit.h>
#include <stdio.h>

#include "internal.h"

typedef struct kcase {
    const char *name;
    mk_kind kind;
    mk_ctx_opts opts;
} kcase;

static const kcase cases[] = {
    {"general", MK_GENERAL, {0}},
    {"slab48", MK_SLAB, {.chunk_size = 48}},
    {"slab1000", MK_SLAB, {.chunk_size = 1000, .chunk_align = 64}},
    {"generation", MK_GENERATION, {0}},
    {"bump", MK_BUMP, {0}},
};
enum { NCASES = sizeof cases / sizeof cases[0] };

static int instrumented;

static mk_ctx *new_ctx(const kcase *k, mk_ctx *parent, const char *name)
{
    return mk_ctx_new(parent, name, k->kind, &k->opts);
}

/* A size for kind case @k: its chunk size for a slab, else a mix. */
static size_t pick_size(const kcase *k, th_rng *r)
{
    if (k->kind == MK_SLAB)
        return k->opts.chunk_size - (size_t)th_below(r, 8);
    uint64_t x = th_below(r, 1000);
    if (x < 700)
        return (size_t)th_below(r, 256);
    if (x < 950)
        return 256 + (size_t)th_below(r, 32768);
    if (x < 995)
        return 32769 + (size_t)th_below(r, (1 << 20) - 32768);
    return ((size_t)1 << 20) + (size_t)th_below(r, (size_t)3 << 20);
}

static mk_stats get(const mk_ctx *c, int recurse)
{
    mk_stats st;
    memset(&st, 0xee, sizeof st);
    CHECK_EQ(mk_ctx_stats(c, &st, recurse), 0);
    CHECK_EQ(st.bytes_free, st.bytes_reserved - st.bytes_used);
    CHECK_LE(st.bytes_used, st.bytes_reserved);
    return st;
}

/* ---- identity ------------------------------------------------------------- */

static void test_identity(void)
{
    for (int i = 0; i < NCASES; i++) {
        const kcase *k = &cases[i];
        mk_ctx *c = new_ctx(k, NULL, k->name);
        REQUIRE_NOT_NULL(c);
        CHECK_EQ(mk_ctx_kind(c), k->kind);
        CHECK_STR_EQ(mk_ctx_name(c), k->name);
        CHECK_NULL(mk_ctx_parent(c));
        mk_ctx *kid = new_ctx(k, c, "kid");
        REQUIRE_NOT_NULL(kid);
        CHECK_PTR_EQ(mk_ctx_parent(kid), c);
        mk_ctx *anon = new_ctx(k, c, NULL);
        REQUIRE_NOT_NULL(anon);
        CHECK_STR_EQ(mk_ctx_name(anon), "?");

        th_rng r = {100 + (uint64_t)i};
        for (int n = 0; n < 300; n++) {
            size_t sz = pick_size(k, &r);
            mk_ctx *where = n % 2 ? kid : c;
            char *p = mk_alloc(where, sz);
            REQUIRE_NOT_NULL(p);
            CHECK_PTR_EQ(mk_ctx_of(p), where);
            if (sz) {
                p[0] = 1;
                p[sz - 1] = 2;
            }
        }
        CHECK_NULL(mk_ctx_of(NULL));
        mk_ctx_delete(c);
    }
}

static void test_size_zero_unique(void)
{
    for (int i = 0; i < NCASES; i++) {
        mk_ctx *c = new_ctx(&cases[i], NULL, cases[i].name);
        REQUIRE_NOT_NULL(c);
        enum { N = 64 };
        char *p[N];
        for (int j = 0; j < N; j++) {
            p[j] = mk_alloc(c, 0);
            REQUIRE_NOT_NULL(p[j]);
            CHECK_PTR_EQ(mk_ctx_of(p[j]), c);
            for (int k = 0; k < j; k++)
                if (p[k] == p[j])
                    th_fail(__FILE__, __LINE__, "%s: size 0 twice %p",
                            cases[i].name, (void *)p[j]);
        }
        /* freeable (a no-op for BUMP, which a checking build reports) */
        for (int j = 0; j < N; j += 2)
            if (cases[i].kind != MK_BUMP || !mk_checking())
                mk_free(p[j]);
        mk_ctx_delete(c);
    }
}

/* ---- statistics ------------------------------------------------------------ */

/* Bytes mk_ctx_stats counts as used for one chunk of 100 bytes at @p. */
static size_t used_for_100(const kcase *k, const void *p)
{
    if (instrumented)
        return 100;
    switch (k->kind) {
    case MK_GENERAL: return 112;                   /* the 112-byte class */
    case MK_SLAB: return k->opts.chunk_size == 1000 ? 1024 : 0; /* its slot */
    case MK_GENERATION:                            /* its usable size */
        CHECK_GE(mk_usable_size(p), 100u);
        CHECK_LT(mk_usable_size(p), 100u + 16);
        return mk_usable_size(p);
    case MK_BUMP: return 112;                      /* bytes bumped */
    }
    return 0;
}

static void test_stats_known(void)
{
    for (int i = 0; i < NCASES; i++) {
        const kcase *k = &cases[i];
        if (k->kind == MK_SLAB && k->opts.chunk_size < 100)
            continue;
        mk_ctx *c = new_ctx(k, NULL, k->name);
        REQUIRE_NOT_NULL(c);
        mk_stats st = get(c, 0);
        CHECK_EQ(st.contexts, 1u);
        CHECK_EQ(st.blocks, 0u);
        CHECK_EQ(st.chunks, 0u);
        CHECK_EQ(st.bytes_used, 0u);
        CHECK_EQ(st.bytes_reserved, 0u);

        enum { N = 40 };
        void *p[N];
        for (int j = 0; j < N; j++) {
            p[j] = mk_alloc(c, 100);
            REQUIRE_NOT_NULL(p[j]);
            memset(p[j], j, 100);
        }
        st = get(c, 0);
        printf("  %s: %zu blocks, %zu reserved, %zu used, %zu chunks\n",
               k->name, st.blocks, st.bytes_reserved, st.bytes_used,
               st.chunks);
        CHECK_EQ(st.contexts, 1u);
        CHECK_GE(st.blocks, 1u);
        /* GENERATION in the release build counts a block's bytes up to its
         * fill point (its frees do not touch chunks): headers and the
         * 16-byte rounding on top of the usable sizes */
        int fill_point = k->kind == MK_GENERATION && !instrumented;
        if (fill_point) {
            CHECK_GE(st.bytes_used, N * used_for_100(k, p[0]));
            CHECK_LE(st.bytes_used,
                     N * (used_for_100(k, p[0]) + 8) + st.blocks * 16);
        } else {
            CHECK_EQ(st.bytes_used, N * used_for_100(k, p[0]));
        }
        /* BUMP keeps no sizes: it counts chunks only when instrumented */
        if (k->kind == MK_BUMP && !instrumented)
            CHECK_EQ(st.chunks, 0u);
        else
            CHECK_EQ(st.chunks, (size_t)N);
        if (k->kind != MK_BUMP) {
            size_t usable = 0;
            for (int j = 0; j < N; j++)
                usable += mk_usable_size(p[j]);
            if (!fill_point)
                CHECK_EQ(st.bytes_used, usable);
            size_t before = st.bytes_used;
            for (int j = 0; j < N; j += 2)
                mk_free(p[j]);
            st = get(c, 0);
            CHECK_EQ(st.chunks, (size_t)N / 2);
            if (fill_point) /* no block emptied: nothing went back */
                CHECK_EQ(st.bytes_used, before);
            else
                CHECK_EQ(st.bytes_used, N / 2 * used_for_100(k, p[0]));
        }

        /* recursive: a child of every kind adds its figures */
        mk_stats alone = get(c, 0);
        size_t kid_chunks = 0;
        for (int j = 0; j < NCASES; j++) {
            mk_ctx *kid = new_ctx(&cases[j], c, cases[j].name);
            REQUIRE_NOT_NULL(kid);
            CHECK_NOT_NULL(mk_alloc(kid, 40));
            CHECK_NOT_NULL(mk_alloc(kid, 40));
            if (cases[j].kind != MK_BUMP || instrumented)
                kid_chunks += 2;
        }
        mk_stats all = get(c, 1);
        CHECK_EQ(all.contexts, 1u + NCASES);
        CHECK_EQ(all.chunks, alone.chunks + kid_chunks);
        CHECK_GE(all.blocks, alone.blocks + NCASES);
        CHECK_GT(all.bytes_used, alone.bytes_used);
        st = get(c, 0);
        CHECK_EQ(st.chunks, alone.chunks);
        mk_ctx_delete(c);
    }
}

static void test_stats_print_names_kinds(void)
{
    mk_ctx *root = mk_ctx_new(NULL, "root", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(root);
    for (int j = 0; j < NCASES; j++)
        REQUIRE_NOT_NULL(new_ctx(&cases[j], root, cases[j].name));
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    REQUIRE_NOT_NULL(f);
    mk_ctx_stats_print(root, f);
    fclose(f);
    CHECK_STR_HAS(buf, "slab48 (slab)");
    CHECK_STR_HAS(buf, "generation (generation)");
    CHECK_STR_HAS(buf, "bump (bump)");
    CHECK_STR_HAS(buf, "root (general)");
    CHECK_STR_HAS(buf, "Grand total: 6 contexts");
    free(buf);
    mk_ctx_delete(root);
}

/* ---- memory goes back ------------------------------------------------------- */

enum { MAXCH = 40000 };
static void *held[MAXCH];

/* Fill @c and its child with about @total bytes (at most MAXCH chunks) for
 * case @k, free a third (kinds that free); returns the bytes allocated. */
static size_t fill(const kcase *k, mk_ctx *c, mk_ctx *kid, size_t total,
                   uint64_t seed)
{
    th_rng r = {seed};
    size_t sum = 0;
    int n = 0;
    while (sum < total && n < MAXCH) {
        size_t sz = pick_size(k, &r);
        char *p = mk_alloc(n % 3 ? c : kid, sz);
        if (!p) {
            th_fail(__FILE__, __LINE__, "%s: mk_alloc(%zu) failed", k->name,
                    sz);
            break;
        }
        memset(p, 0x5a, sz);
        held[n++] = p;
        sum += sz;
    }
    if (k->kind != MK_BUMP)
        for (int j = 0; j < n; j += 3)
            mk_free(held[j]);
    return sum;
}

static void test_reset_returns_blocks(void)
{
    for (int i = 0; i < NCASES; i++) {
        const kcase *k = &cases[i];
        mk_ctx *c = new_ctx(k, NULL, k->name);
        REQUIRE_NOT_NULL(c);
        mk_ctx *kid = new_ctx(k, c, "kid");
        REQUIRE_NOT_NULL(kid);
        fill(k, c, kid, (size_t)8 << 20, 1); /* warm the bookkeeping */
        mk_ctx_reset(c);
        mk_trim();
        size_t base = mki_os_committed();
        size_t meta0 = mki_meta_bytes();
        for (int round = 0; round < 2; round++) {
            kid = new_ctx(k, c, "kid");
            REQUIRE_NOT_NULL(kid);
            size_t sum = fill(k, c, kid, (size_t)24 << 20, 2 + (uint64_t)round);
            CHECK_GE(mki_os_committed(), base + sum / 2);
            mk_ctx_reset(c);
            mk_stats st = get(c, 1);
            CHECK_EQ(st.contexts, 1u); /* the child went */
            CHECK_EQ(st.chunks, 0u);
            CHECK_EQ(st.bytes_used, 0u);
            /* kept: GENERAL pages up to 1 MiB (the others that served
             * the round rest, and the purge takes their memory), one
             * block of the other kinds */
            size_t kept = st.bytes_reserved - st.bytes_resting;
            if (k->kind == MK_GENERAL)
                CHECK_LE(kept, (size_t)1 << 20);
            else
                CHECK_LE(st.blocks, 1u);
            mk_trim();
            size_t now = mki_os_committed();
            printf("  %s reset %d: committed %zu, baseline %zu, kept %zu, "
                   "resting %zu\n", k->name, round, now, base, kept,
                   st.bytes_resting);
            CHECK_LE(now, base + kept + (mki_meta_bytes() - meta0));
            /* and the context is usable */
            char *p = mk_alloc(c, k->kind == MK_SLAB ? 8 : 1000);
            CHECK_NOT_NULL(p);
            CHECK_PTR_EQ(mk_ctx_of(p), c);
        }
        mk_ctx_delete(c);
    }
}

static void test_delete_returns_blocks(void)
{
    for (int i = 0; i < NCASES; i++) {
        const kcase *k = &cases[i];
        size_t segs = mki_segment_count();
        for (int round = 0; round < 2; round++) {
            size_t base = mki_os_committed(), meta0 = mki_meta_bytes();
            mk_ctx *c = new_ctx(k, NULL, k->name);
            REQUIRE_NOT_NULL(c);
            mk_ctx *kid = new_ctx(k, c, "kid");
            REQUIRE_NOT_NULL(kid);
            size_t sum = fill(k, c, kid, (size_t)24 << 20, 10 + (uint64_t)round);
            CHECK_GE(sum, (size_t)1 << 20);
            CHECK_GE(mki_os_committed(), base + sum / 2);
            mk_ctx_delete(c);
            mk_trim();
            size_t now = mki_os_committed(), meta1 = mki_meta_bytes();
            printf("  %s delete %d: committed %zu, baseline %zu, meta +%zu\n",
                   k->name, round, now, base, meta1 - meta0);
            CHECK_LE(now, base + (meta1 - meta0));
            if (round > 0)
                CHECK_LE(now, base);
            CHECK_LE(mki_segment_count(), segs);
        }
    }
}

/* ---- hierarchy across kinds -------------------------------------------------- */

static int cb_runs[NCASES][NCASES];

static void cb(void *arg)
{
    (*(int *)arg)++;
}

static void test_hierarchy_mixed(void)
{
    memset(cb_runs, 0, sizeof cb_runs);
    for (int reset = 0; reset < 2; reset++) {
        for (int i = 0; i < NCASES; i++) {
            size_t base = mki_os_committed(), meta0 = mki_meta_bytes();
            mk_ctx *parent = new_ctx(&cases[i], NULL, "parent");
            REQUIRE_NOT_NULL(parent);
            CHECK_NOT_NULL(mk_alloc(parent, 16));
            for (int j = 0; j < NCASES; j++) {
                if (j == i)
                    continue;
                mk_ctx *kid = new_ctx(&cases[j], parent, cases[j].name);
                REQUIRE_NOT_NULL(kid);
                /* and a grandchild of the parent's kind */
                mk_ctx *gk = new_ctx(&cases[i], kid, "grandchild");
                REQUIRE_NOT_NULL(gk);
                cb_runs[i][j] = 0;
                CHECK_EQ(mk_ctx_on_reset(kid, cb, &cb_runs[i][j]), 0);
                CHECK_EQ(mk_ctx_on_reset(gk, cb, &cb_runs[i][j]), 0);
                for (int n = 0; n < 50; n++) {
                    size_t sz = cases[j].kind == MK_SLAB ? 40 : 3000;
                    char *p = mk_alloc(kid, sz);
                    REQUIRE_NOT_NULL(p);
                    memset(p, 1, sz);
                    CHECK_NOT_NULL(mk_alloc(gk, 16));
                }
                /* one big chunk in every child */
                if (cases[j].kind != MK_SLAB)
                    CHECK_NOT_NULL(mk_alloc(kid, (size_t)2 << 20));
            }
            mk_stats st = get(parent, 1);
            CHECK_EQ(st.contexts, 1u + 2u * (NCASES - 1));
            if (reset) {
                mk_ctx_reset(parent);
                st = get(parent, 1);
                CHECK_EQ(st.contexts, 1u);
                CHECK_EQ(st.chunks, 0u);
                CHECK_LE(st.blocks, 1u);
            }
            mk_ctx_delete(parent);
            for (int j = 0; j < NCASES; j++)
                if (j != i && cb_runs[i][j] != 2)
                    th_fail(__FILE__, __LINE__, "%s %s parent: callbacks of "
                            "its %s child ran %d times, expected 2",
                            reset ? "reset" : "deleted", cases[i].name,
                            cases[j].name, cb_runs[i][j]);
            th_checks++;
            mk_trim();
            CHECK_LE(mki_os_committed(), base + (mki_meta_bytes() - meta0));
        }
    }
}

/* ---- leak report in the release build ------------------------------------ */

static const kcase *leak_case;

static void leak_child(void *arg)
{
    (void)arg;
    mk_ctx_opts o = leak_case->opts;
    o.flags |= MK_CTX_REPORT_LEAKS;
    mk_ctx *c = mk_ctx_new(NULL, "leaky", leak_case->kind, &o);
    if (!c)
        _exit(3);
    void *p[5];
    for (int i = 0; i < 5; i++)
        if (!(p[i] = mk_alloc(c, 48)))
            _exit(4);
    mk_free(p[1]);
    mk_free(p[3]);
    mk_ctx_delete(c); /* 3 chunks leaked: reported, no abort */
    /* a clean context reports nothing */
    c = mk_ctx_new(NULL, "clean", leak_case->kind, &o);
    void *q = mk_alloc(c, 48);
    mk_free(q);
    mk_ctx_delete(c);
    _exit(0);
}

static void test_leak_report_release(void)
{
    if (mk_checking()) {
        th_note("skipped in this build: the checking build aborts: wrong/checks.c");
        return;
    }
    for (int i = 0; i < NCASES; i++) {
        /* BUMP keeps no chunk count in the release build: no report */
        if (cases[i].kind == MK_BUMP || cases[i].opts.chunk_size == 1000)
            continue;
        leak_case = &cases[i];
        /* bytes: what mk_ctx_stats counts as used (the usable size in the
         * release build, the request when instrumented) */
        mk_ctx *probe = new_ctx(&cases[i], NULL, "probe");
        REQUIRE_NOT_NULL(probe);
        void *q = mk_alloc(probe, 48);
        REQUIRE_NOT_NULL(q);
        size_t each = instrumented ? 48 : mk_usable_size(q);
        mk_ctx_delete(probe);
        char want[128];
        snprintf(want, sizeof want, "memkit: mk_ctx_delete(): context \"leaky\": 3 chunks (%zu "
                 "bytes) leaked\n", 3 * each);
        char out[1024];
        int st = th_run_child(leak_child, NULL, out, sizeof out);
        th_checks++;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            th_fail(__FILE__, __LINE__, "%s: leak report child status 0x%x "
                    "(must not abort in the release build), stderr \"%s\"",
                    cases[i].name, st, out);
        if (cases[i].kind == MK_GENERATION && !instrumented) {
            /* the bytes are the block's fill point: at least the chunks */
            size_t bytes = 0;
            CHECK_EQ(sscanf(out, "memkit: mk_ctx_delete(): context \"leaky\": 3 chunks (%zu bytes) "
                            "leaked", &bytes), 1);
            CHECK_GE(bytes, 3 * each);
        } else {
            CHECK_STR_EQ(out, want);
        }
    }
}

int main(void)
{
    instrumented = mki_instrument_active();
    printf("instrumented contexts: %s\n", instrumented ? "yes" : "no");
    RUN(test_identity);
    RUN(test_size_zero_unique);
    RUN(test_stats_known);
    RUN(test_stats_print_names_kinds);
    RUN(test_reset_returns_blocks);
    RUN(test_delete_returns_blocks);
    RUN(test_hierarchy_mixed);
    RUN(test_leak_report_release);
    return th_done();
}
