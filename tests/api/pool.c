/* SPDX-License-Identifier: MIT */
/*
 * api/pool.c - typed pools (mk_pool_*, MK_POOL_DECLARE).
 *   - mk_pool_new refuses a zero size and an alignment that is not a power
 *     of two (NULL, EINVAL);
 *   - alloc gives distinct objects that hold their contents, aligned as
 *     asked (8 .. 4096; 0: as mk_alloc would align the size, checked for
 *     sizes where the rules agree); mk_pool_free and mk_free both return
 *     them; NULL is ignored; mk_ctx_of finds the pool's context;
 *   - MK_POOL_DECLARE for two types: typed alloc/free, objects aligned to
 *     the type's _Alignof (one over-aligned type);
 *   - mk_pool_stats: live objects, blocks, bytes; all freed: 0 objects;
 *     NULL: -1, EINVAL; a thread-safe pool used by one thread behaves the
 *     same;
 *   - after a peak of 200,000 objects freed in a scattered order, at most 2
 *     blocks stay and mk_trim gives the rest back;
 *   - the leak report in the release build (in a child process, stderr
 *     captured): exactly "memkit: pool NAME: N objects (B bytes) leaked"
 *     with B = N * size, and no abort; a pool deleted empty prints
 *     nothing; mk_silence_errors(1) prints nothing; with an error handler
 *     the handler gets the line (no newline) and nothing is printed.
 */
#include "harness.h"

#include <memkit.h>

#include "internal.h"

typedef struct variant24 {
    long type;
    long a, b;
} variant24;

typedef struct vec4 {
    _Alignas(32) double v[4];
    int tag;
} vec4;

MK_POOL_DECLARE(variant24, variant)
MK_POOL_DECLARE(vec4, vec4)

static int instrumented;

static void test_new_bad(void)
{
    errno = 0;
    CHECK_NULL(mk_pool_new("zero", 0, 0, 0));
    CHECK_ERRNO(EINVAL);
    const size_t bad_align[] = {3, 24, 48, 100, (size_t)1 << 20};
    for (int i = 0; i < 5; i++) {
        errno = 0;
        CHECK_NULL(mk_pool_new("bad", 32, bad_align[i], 0));
        CHECK_ERRNO(EINVAL);
    }
    mk_pool_delete(NULL); /* ignored */
    errno = 0;
    mk_stats st;
    CHECK_EQ(mk_pool_stats(NULL, &st), -1);
    CHECK_ERRNO(EINVAL);
}

static void test_alloc_free(void)
{
    mk_pool *p = mk_pool_new("objects", 40, 0, 0);
    REQUIRE_NOT_NULL(p);
    enum { N = 20000 };
    static char *obj[N];
    for (int i = 0; i < N; i++) {
        obj[i] = mk_pool_alloc(p);
        REQUIRE_NOT_NULL(obj[i]);
        CHECK_EQ((uintptr_t)obj[i] % 8, 0u);
        th_fill(obj[i], 40, (uint64_t)i);
    }
    mk_ctx *owner = mk_ctx_of(obj[0]);
    CHECK_NOT_NULL(owner);
    CHECK_EQ(mk_ctx_kind(owner), MK_SLAB);
    CHECK_STR_EQ(mk_ctx_name(owner), "objects");
    mk_stats st;
    CHECK_EQ(mk_pool_stats(p, &st), 0);
    CHECK_EQ(st.chunks, (size_t)N);
    CHECK_GE(st.blocks, 1u);
    CHECK_GE(st.bytes_used, (size_t)N * 40);
    for (int i = 0; i < N; i += 7)
        CHECK_PATTERN(obj[i], 40, (uint64_t)i);
    /* every other one back: half through mk_pool_free, half mk_free */
    for (int i = 0; i < N; i += 2) {
        if (i % 4)
            mk_pool_free(p, obj[i]);
        else
            mk_free(obj[i]);
        obj[i] = NULL;
    }
    mk_pool_free(p, NULL);
    CHECK_EQ(mk_pool_stats(p, &st), 0);
    CHECK_EQ(st.chunks, (size_t)N / 2);
    for (int i = 1; i < N; i += 2)
        CHECK_PATTERN(obj[i], 40, (uint64_t)i);
    /* reuse: new objects are distinct from the live ones */
    for (int i = 0; i < N; i += 2) {
        obj[i] = mk_pool_alloc(p);
        REQUIRE_NOT_NULL(obj[i]);
        th_fill(obj[i], 40, (uint64_t)i + N);
    }
    for (int i = 0; i < N; i++)
        CHECK_PATTERN(obj[i], 40, (uint64_t)i + (i % 2 ? 0 : N));
    for (int i = 0; i < N; i++)
        mk_pool_free(p, obj[i]);
    CHECK_EQ(mk_pool_stats(p, &st), 0);
    CHECK_EQ(st.chunks, 0u);
    CHECK_EQ(st.bytes_used, 0u);
    mk_pool_delete(p);
}

/*
 * After a peak, memory goes back: 200,000 objects freed in a scattered
 * order leave at most 2 blocks (the current page and one spare, as for a
 * SLAB context: api/slab.c), and after mk_trim the OS layer's committed
 * bytes are back near the baseline.  (The pool's front holds objects of
 * the slab's current page only, so it pins no other page.)
 */
static void test_pages_back_after_peak(void)
{
    enum { N = 200000 };
    static void *o[N];
    mk_trim();
    size_t base = mki_os_committed(), meta0 = mki_meta_bytes();
    mk_pool *p = mk_pool_new("peak", 48, 0, 0);
    REQUIRE_NOT_NULL(p);
    for (int i = 0; i < N; i++) {
        o[i] = mk_pool_alloc(p);
        REQUIRE_NOT_NULL(o[i]);
    }
    th_rng r = {11};
    for (int i = N - 1; i > 0; i--) {
        int j = (int)th_below(&r, (uint64_t)i + 1);
        void *t = o[i];
        o[i] = o[j];
        o[j] = t;
    }
    for (int i = 0; i < N; i++)
        mk_pool_free(p, o[i]);
    mk_stats st;
    CHECK_EQ(mk_pool_stats(p, &st), 0);
    printf("  after the peak: %zu objects, %zu blocks, %zu bytes reserved\n",
           st.chunks, st.blocks, st.bytes_reserved);
    CHECK_EQ(st.chunks, 0u);
    CHECK_LE(st.blocks, 2u);
    mk_trim();
    size_t headers = mki_segment_count() * MKI_SEG_HEADER_UNITS * MKI_UNIT;
    CHECK_LE(mki_os_committed(), base + st.bytes_reserved + headers +
                                     (mki_meta_bytes() - meta0));
    mk_pool_delete(p);
}

static void test_alignment(void)
{
    const struct { size_t size, align, want; } cases[] = {
        {8, 0, 8},    {24, 0, 8},   {48, 0, 16},    {64, 0, 16},
        {24, 8, 8},   {24, 16, 16}, {40, 64, 64},   {100, 128, 128},
        {200, 4096, 4096}, {1, 0, 8}, {16, 32, 32},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mk_pool *p = mk_pool_new("align", cases[i].size, cases[i].align, 0);
        REQUIRE_NOT_NULL(p);
        int bad = 0;
        static char *objs[2000];
        for (int j = 0; j < 2000; j++) {
            char *o = objs[j] = mk_pool_alloc(p);
            REQUIRE_NOT_NULL(o);
            if ((uintptr_t)o % cases[i].want && bad++ < 3)
                th_fail(__FILE__, __LINE__, "pool %zu/%zu: %p not %zu-aligned",
                        cases[i].size, cases[i].align, (void *)o,
                        cases[i].want);
            memset(o, 0x3c, cases[i].size);
        }
        th_checks++;
        for (int j = 0; j < 2000; j++)
            mk_pool_free(p, objs[j]);
        mk_pool_delete(p);
    }
}

static void test_typed(void)
{
    variant_pool *vp = variant_pool_new("variant24", 0);
    vec4_pool *v4 = vec4_pool_new("vec4", 0);
    REQUIRE(vp && v4);
    enum { N = 5000 };
    static variant24 *v[N];
    static vec4 *w[N];
    for (int i = 0; i < N; i++) {
        v[i] = variant_alloc(vp);
        w[i] = vec4_alloc(v4);
        REQUIRE(v[i] && w[i]);
        CHECK_EQ((uintptr_t)v[i] % _Alignof(variant24), 0u);
        CHECK_EQ((uintptr_t)w[i] % 32, 0u);
        v[i]->type = 1, v[i]->a = i, v[i]->b = -i;
        w[i]->v[0] = i, w[i]->v[3] = -i, w[i]->tag = i;
    }
    for (int i = 0; i < N; i++) {
        if (v[i]->a != i || v[i]->b != -i || w[i]->v[3] != -i ||
            w[i]->tag != i) {
            th_fail(__FILE__, __LINE__, "object %d corrupted", i);
            break;
        }
    }
    th_checks++;
    mk_stats st;
    CHECK_EQ(mk_pool_stats((mk_pool *)vp, &st), 0);
    CHECK_EQ(st.chunks, (size_t)N);
    if (!instrumented)
        CHECK_EQ(st.bytes_used, (size_t)N * sizeof(variant24));
    CHECK_EQ(mk_pool_stats((mk_pool *)v4, &st), 0);
    CHECK_EQ(st.chunks, (size_t)N);
    if (!instrumented)
        CHECK_EQ(st.bytes_used, (size_t)N * sizeof(vec4));
    for (int i = 0; i < N; i++) {
        variant_free(vp, v[i]);
        vec4_free(v4, w[i]);
    }
    CHECK_EQ(mk_pool_stats((mk_pool *)vp, &st), 0);
    CHECK_EQ(st.chunks, 0u);
    variant_pool_delete(vp);
    vec4_pool_delete(v4);
}

static void test_threadsafe_single_thread(void)
{
    mk_pool *p = mk_pool_new("ts", 48, 0, MK_POOL_THREADSAFE);
    REQUIRE_NOT_NULL(p);
    enum { N = 10000 };
    static char *o[N];
    for (int r = 0; r < 3; r++) {
        for (int i = 0; i < N; i++) {
            o[i] = mk_pool_alloc(p);
            REQUIRE_NOT_NULL(o[i]);
            CHECK_EQ((uintptr_t)o[i] % 16, 0u);
            th_fill(o[i], 48, (uint64_t)i * 3 + (uint64_t)r);
        }
        mk_stats st;
        CHECK_EQ(mk_pool_stats(p, &st), 0);
        CHECK_EQ(st.chunks, (size_t)N);
        for (int i = 0; i < N; i++) {
            CHECK_PATTERN(o[i], 48, (uint64_t)i * 3 + (uint64_t)r);
            mk_pool_free(p, o[i]);
        }
        CHECK_EQ(mk_pool_stats(p, &st), 0);
        CHECK_EQ(st.chunks, 0u);
    }
    mk_pool_delete(p);
}

/* ---- the leak report (release build: a line, no abort) ------------------- */

static void leak_some(const char *name, size_t size, int n, int freed)
{
    mk_pool *p = mk_pool_new(name, size, 0, 0);
    if (!p)
        _exit(3);
    void *o[64];
    for (int i = 0; i < n; i++)
        if (!(o[i] = mk_pool_alloc(p)))
            _exit(4);
    for (int i = 0; i < freed; i++)
        mk_pool_free(p, o[i]);
    mk_pool_delete(p);
}

static void child_leak(void *arg)
{
    (void)arg;
    leak_some("clean", 40, 10, 10); /* nothing */
    leak_some("leaky", 40, 10, 7);  /* 3 objects, 120 bytes */
    leak_some("big", 1000, 50, 0);  /* 50 objects, 50000 bytes */
    fprintf(stderr, "still here\n");
}

static void child_leak_threadsafe(void *arg)
{
    (void)arg;
    mk_pool *p = mk_pool_new("shared", 24, 0, MK_POOL_THREADSAFE);
    for (int i = 0; i < 4; i++)
        if (!mk_pool_alloc(p))
            _exit(4);
    mk_pool_delete(p);
}

static void child_leak_silenced(void *arg)
{
    (void)arg;
    if (mk_silence_errors(1) != 0)
        _exit(6);
    leak_some("quiet", 40, 10, 0);
    fprintf(stderr, "done");
}

static void test_leak_report(void)
{
    if (mk_checking()) {
        th_note("skipped in this build: the checking build aborts: wrong/checks.c");
        return;
    }
    char out[2048];
    int st = th_run_child(child_leak, NULL, out, sizeof out);
    th_checks++;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        th_fail(__FILE__, __LINE__, "child status 0x%x: the release build "
                "must not abort on a leak; stderr \"%s\"", st, out);
    CHECK_STR_EQ(out, "memkit: mk_pool_delete(): pool \"leaky\": 3 objects (120 bytes) leaked\n"
                      "memkit: mk_pool_delete(): pool \"big\": 50 objects (50000 bytes) leaked\n"
                      "still here\n");

    st = th_run_child(child_leak_threadsafe, NULL, out, sizeof out);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK_STR_EQ(out, "memkit: mk_pool_delete(): pool \"shared\": 4 objects (96 bytes) leaked\n");

    st = th_run_child(child_leak_silenced, NULL, out, sizeof out);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK_STR_EQ(out, "done");
}

static char got[512];
static int calls;
static void *got_arg;

static void handler(const char *msg, void *arg)
{
    calls++;
    got_arg = arg;
    snprintf(got, sizeof got, "%s", msg);
}

static void child_leak_handler(void *arg)
{
    (void)arg;
    int token;
    mk_set_error_handler(handler, &token);
    leak_some("handled", 64, 5, 1);
    if (calls != 1 || got_arg != &token)
        _exit(5);
    /* hand the handler's line to the parent through stderr (memkit
     * itself printed nothing) */
    fprintf(stderr, "[%s]", got);
    mk_set_error_handler(NULL, NULL);
}

static void test_leak_report_handler(void)
{
    char out[1024];
    int st = th_run_child(child_leak_handler, NULL, out, sizeof out);
    th_checks++;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        th_fail(__FILE__, __LINE__, "child status 0x%x, stderr \"%s\"", st,
                out);
    /* exactly one line, without its newline, and nothing else printed */
    CHECK_STR_EQ(out, "[memkit: mk_pool_delete(): pool \"handled\": 4 objects (256 bytes) leaked]");
}

/* A pool made in a context's tree: its memory is in the context's figures
 * and reports (kind "pool"), objects in its front count as free, a typed
 * pool has NAME_stats, and a reset or delete of the parent takes the pool
 * with it, quietly. */
typedef struct { long a, b, c; } trio;
MK_POOL_DECLARE(trio, trio)

static int tree_reports;
static void count_report(const char *line, void *arg)
{
    (void)arg;
    printf("  report: %s\n", line);
    tree_reports++;
}

static void test_pool_in_tree(void)
{
    mk_ctx *req = mk_ctx_new(NULL, "request", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(req);
    mk_pool *p = mk_pool_new_in(req, "objs", 40, 0, 0);
    REQUIRE_NOT_NULL(p);
    void *o[10];
    for (int i = 0; i < 10; i++)
        REQUIRE_NOT_NULL(o[i] = mk_pool_get(p));
    for (int i = 0; i < 4; i++)
        mk_pool_put(p, o[i]); /* into the front, where it has one */
    mk_stats mine, all, pst;
    CHECK_EQ(mk_ctx_stats(req, &mine, 0), 0);
    CHECK_EQ(mk_ctx_stats(req, &all, 1), 0);
    CHECK_EQ(mk_pool_stats(p, &pst), 0);
    CHECK_EQ(mine.chunks, 0u);
    CHECK_EQ(pst.chunks, 6u);
    CHECK_EQ(all.chunks, 6u);
    CHECK_EQ(all.contexts, 2u);
    CHECK_GE(all.bytes_used, 6u * 40);
    CHECK_GE(all.bytes_reserved, pst.bytes_reserved);

    char buf[4096] = "";
    FILE *f = fmemopen(buf, sizeof buf, "w");
    REQUIRE_NOT_NULL(f);
    mk_ctx_stats_print(req, f);
    fclose(f);
    CHECK_STR_HAS(buf, "request (general)");
    CHECK_STR_HAS(buf, "  objs (pool)");
    CHECK_STR_HAS(buf, " 6 chunks\n");
    char json[4096] = "";
    f = fmemopen(json, sizeof json, "w");
    REQUIRE_NOT_NULL(f);
    CHECK_EQ(mk_ctx_stats_json(req, f), 0);
    fclose(f);
    CHECK_STR_HAS(json, "\"name\":\"objs\",\"kind\":\"pool\"");

    trio_pool *tp = trio_pool_new_in(req, "trios", 0);
    REQUIRE_NOT_NULL(tp);
    trio *t = trio_alloc(tp);
    REQUIRE_NOT_NULL(t);
    CHECK_EQ(trio_stats(tp, &pst), 0);
    CHECK_EQ(pst.chunks, 1u);
    CHECK_EQ(mk_ctx_stats(req, &all, 1), 0);
    CHECK_EQ(all.chunks, 7u);

    /* a reset of the parent deletes both pools (no report: their objects
     * go with the request), and the request goes on */
    tree_reports = 0;
    mk_set_error_handler(count_report, NULL);
    mk_ctx_reset(req);
    mk_set_error_handler(NULL, NULL);
    CHECK_EQ(tree_reports, 0);
    CHECK_EQ(mk_ctx_stats(req, &all, 1), 0);
    CHECK_EQ(all.contexts, 1u);
    CHECK_EQ(all.chunks, 0u);
    p = mk_pool_new_in(req, "again", 24, 0, MK_POOL_THREADSAFE);
    REQUIRE_NOT_NULL(p);
    REQUIRE_NOT_NULL(mk_pool_alloc(p));
    mk_ctx_delete(req); /* and a delete */
}

/* Pools made and deleted by the thousand, alone and in a context's tree,
 * leave memkit's bookkeeping where it was: each delete gives back exactly
 * what the pool held (a write into a freed pool's struct would cut the
 * bookkeeping's free list and make it grow). */
static void test_pools_churn_bookkeeping(void)
{
    mk_ctx *parent = mk_ctx_new(NULL, "churn", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(parent);
    for (int warm = 0; warm < 2; warm++) {
        size_t before = mki_meta_bytes();
        for (int i = 0; i < 3000; i++) {
            mk_pool *a = mk_pool_new("a", 32, 0, 0);
            mk_pool *b = mk_pool_new_in(parent, "b", 48, 0, 0);
            REQUIRE(a && b);
            void *x = mk_pool_get(a), *y = mk_pool_get(b);
            REQUIRE(x && y);
            mk_pool_put(a, x); /* into the fronts */
            mk_pool_put(b, y);
            mk_pool_delete(a);
            mk_ctx_reset(parent); /* b goes with the parent's reset */
        }
        if (warm)
            CHECK_LE(mki_meta_bytes(), before + ((size_t)64 << 10));
    }
    mk_ctx_delete(parent);
}

int main(void)
{
    instrumented = mki_instrument_active();
    printf("instrumented contexts: %s, checking build: %d\n",
           instrumented ? "yes" : "no", mk_checking());
    RUN(test_new_bad);
    RUN(test_alloc_free);
    RUN(test_pages_back_after_peak);
    RUN(test_alignment);
    RUN(test_typed);
    RUN(test_threadsafe_single_thread);
    RUN(test_leak_report);
    RUN(test_leak_report_handler);
    RUN(test_pool_in_tree);
    RUN(test_pools_churn_bookkeeping);
    return th_done();
}
