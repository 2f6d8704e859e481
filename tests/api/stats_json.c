/* SPDX-License-Identifier: MIT */
/*
 * api/stats_json.c - mk_ctx_stats_json: a context tree written as
 * one JSON object, read back with a strict parser (json.h) and compared,
 * context by context, with the API.
 *
 * The tree has every kind, names that need escaping (quotes, backslashes,
 * a tab and a newline, which must come out as escapes, not raw), a
 * non-ASCII name (passed through as UTF-8), a NULL name ("?"), a chain
 * three levels deep (the writer closes several arrays at once when it
 * climbs back), an empty leaf, and a context whose chunks another thread
 * freed just before (the writer must take those frees in first, so its
 * count is the live count, known independently).  What is proved:
 *  - the output is one line, one JSON object, schema
 *    "memkit-context-stats", version 1;
 *  - every context appears exactly once, under its parent, with its name
 *    and kind, and with the figures mk_ctx_stats gives it alone (and
 *    bytes_free = bytes_reserved - bytes_used); chunk counts match what
 *    the test knows is live;
 *  - "totals" are mk_ctx_stats of the root with recursion, contexts counts
 *    the tree;
 *  - a subtree and a leaf can be written on their own;
 *  - NULL arguments return -1 with EINVAL and write nothing; a write error
 *    (/dev/full, unbuffered) returns -1;
 *  - the parser itself refuses what a sloppy writer would produce (so the
 *    checks above can fail).
 * Also built against the checking library (api_stats_json_check), whose
 * figures count requested bytes: the comparison with mk_ctx_stats holds
 * there too.
 */
#include "harness.h"
#include "json.h"

#include <memkit.h>
#include <pthread.h>

#define NCTX 11

static mk_ctx *ctxs[NCTX];
static const char *const names[NCTX] = {
    "top \"quoted\" \\back\\slash\\", "slab\ttab\nnewline",
    "gen/\xc3\xa9t\xc3\xa9",
    "bump", NULL, "remote", "d1", "d2", "d3", "empty leaf", "pool-ish"};
static const int parents[NCTX] = {-1, 0, 0, 2, 2, 0, 0, 6, 7, 8, 0};
static const mk_kind kinds[NCTX] = {MK_GENERAL, MK_SLAB,    MK_GENERATION,
                                    MK_BUMP,    MK_GENERAL, MK_GENERAL,
                                    MK_GENERAL, MK_GENERATION, MK_BUMP,
                                    MK_SLAB,    MK_SLAB};
/* live chunks each context holds (-1: the kind does not count them) */
static long live[NCTX];

static const char *kind_word(mk_kind k)
{
    static const char *const w[] = {"general", "slab", "generation", "bump"};
    return w[k];
}

#define REMOTE_CHUNKS 200
#define REMOTE_FREED 80
static void *remote_chunks[REMOTE_CHUNKS];

static void *free_some(void *arg)
{
    (void)arg;
    for (int i = 0; i < REMOTE_FREED; i++)
        mk_free(remote_chunks[2 * i]);
    return NULL;
}

static int build_tree(void)
{
    for (int i = 0; i < NCTX; i++) {
        mk_ctx_opts o = {.chunk_size = 64};
        ctxs[i] = mk_ctx_new(parents[i] < 0 ? NULL : ctxs[parents[i]],
                             names[i], kinds[i],
                             kinds[i] == MK_SLAB ? &o : NULL);
        if (!ctxs[i])
            return -1;
    }
    static const int counts[NCTX] = {37, 100, 50, 70, 0, REMOTE_CHUNKS,
                                     1, 2, 3, 0, 5};
    for (int i = 0; i < NCTX; i++) {
        for (int k = 0; k < counts[i]; k++) {
            size_t n = kinds[i] == MK_SLAB ? 64 : (size_t)(16 + 40 * k);
            if (i == 0 && k % 10 == 9)
                n = 100000; /* a few large chunks in the root */
            void *p = mk_alloc(ctxs[i], n);
            if (!p)
                return -1;
            memset(p, 1, n);
            if (i == 5)
                remote_chunks[k] = p;
        }
        live[i] = kinds[i] == MK_BUMP ? -1 : counts[i];
    }
    /* another thread frees 80 of "remote"'s chunks: queued for the owner */
    pthread_t t;
    if (pthread_create(&t, NULL, free_some, NULL) != 0)
        return -1;
    pthread_join(t, NULL);
    live[5] -= REMOTE_FREED;
    return 0;
}

/* Write @ctx's JSON into a malloc'ed string. */
static char *json_of(const mk_ctx *ctx, int *rc)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    *rc = mk_ctx_stats_json(ctx, f);
    fclose(f);
    return buf;
}

static int index_of(const mk_ctx *c)
{
    for (int i = 0; i < NCTX; i++)
        if (ctxs[i] == c)
            return i;
    return -1;
}

static int seen[NCTX];

/* Check the JSON node @node for context @want (an index), then its
 * children; @depth guards against a runaway tree. */
static void check_node(const jn *node, int want, int depth)
{
    REQUIRE(depth < 16);
    REQUIRE(node && node->type == JN_OBJ);
    const mk_ctx *c = ctxs[want];
    const char *name = jn_str(node, "name");
    CHECK_STR_EQ(name, mk_ctx_name(c));
    CHECK_STR_EQ(jn_str(node, "kind"), kind_word(mk_ctx_kind(c)));
    seen[want]++;
    mk_stats st;
    REQUIRE(mk_ctx_stats(c, &st, 0) == 0);
    int ok = 1;
    CHECK_EQ(jn_int(node, "blocks", &ok), (long long)st.blocks);
    CHECK_EQ(jn_int(node, "bytes_reserved", &ok), (long long)st.bytes_reserved);
    CHECK_EQ(jn_int(node, "bytes_used", &ok), (long long)st.bytes_used);
    CHECK_EQ(jn_int(node, "bytes_free", &ok), (long long)st.bytes_free);
    CHECK_EQ(jn_int(node, "chunks", &ok), (long long)st.chunks);
    CHECK_EQ(jn_int(node, "bytes_resting", &ok), (long long)st.bytes_resting);
    CHECK_EQ(jn_int(node, "bytes_resident", &ok), (long long)st.bytes_resident);
    CHECK(ok);
    CHECK_EQ(st.bytes_free, st.bytes_reserved - st.bytes_used);
    if (live[want] >= 0)
        CHECK_EQ(jn_int(node, "chunks", &ok), (long long)live[want]);
    const jn *kids = jn_get(node, "children");
    REQUIRE(kids && kids->type == JN_ARR);
    size_t expect_kids = 0;
    for (int i = 0; i < NCTX; i++)
        expect_kids += parents[i] == want;
    CHECK_EQ(kids->n, expect_kids);
    for (size_t k = 0; k < kids->n; k++) {
        const char *kn = jn_str(kids->items[k], "name");
        int idx = -1;
        for (int i = 0; i < NCTX && kn; i++)
            if (parents[i] == want && strcmp(mk_ctx_name(ctxs[i]), kn) == 0)
                idx = i;
        CHECK(idx >= 0); /* a child of this context, by name */
        if (idx >= 0)
            check_node(kids->items[k], idx, depth + 1);
    }
}

/* Parse @text and check it as the tree rooted at ctxs[@root]. */
static void check_document(const char *text, int root, size_t ncontexts)
{
    REQUIRE_NOT_NULL(text);
    size_t len = strlen(text);
    CHECK(len > 0 && text[len - 1] == '\n');
    CHECK(strchr(text, '\n') == text + len - 1); /* one line */
    const char *err = NULL;
    jn *doc = jn_parse(text, &err);
    if (!doc)
        printf("  parse error: %s\n  text: %s", err, text);
    REQUIRE_NOT_NULL(doc);
    CHECK_STR_EQ(jn_str(doc, "schema"), "memkit-context-stats");
    int ok = 1;
    CHECK_EQ(jn_int(doc, "version", &ok), 1LL);
    memset(seen, 0, sizeof seen);
    check_node(jn_get(doc, "context"), root, 0);
    size_t n = 0;
    for (int i = 0; i < NCTX; i++) {
        CHECK_LE(seen[i], 1);
        n += (size_t)seen[i];
    }
    CHECK_EQ(n, ncontexts); /* each context of the subtree, once */

    const jn *tot = jn_get(doc, "totals");
    mk_stats st;
    REQUIRE(mk_ctx_stats(ctxs[root], &st, 1) == 0);
    CHECK_EQ(st.contexts, ncontexts);
    CHECK_EQ(jn_int(tot, "contexts", &ok), (long long)st.contexts);
    CHECK_EQ(jn_int(tot, "blocks", &ok), (long long)st.blocks);
    CHECK_EQ(jn_int(tot, "bytes_reserved", &ok), (long long)st.bytes_reserved);
    CHECK_EQ(jn_int(tot, "bytes_used", &ok), (long long)st.bytes_used);
    CHECK_EQ(jn_int(tot, "bytes_free", &ok), (long long)st.bytes_free);
    CHECK_EQ(jn_int(tot, "chunks", &ok), (long long)st.chunks);
    CHECK_EQ(jn_int(tot, "bytes_resting", &ok), (long long)st.bytes_resting);
    CHECK_EQ(jn_int(tot, "bytes_resident", &ok), (long long)st.bytes_resident);
    CHECK(ok);
    jn_free(doc);
}

static void test_tree(void)
{
    REQUIRE(build_tree() == 0);
    int rc = -1;
    char *text = json_of(ctxs[0], &rc);
    CHECK_EQ(rc, 0);
    printf("  %s", text ? text : "(nothing)\n");
    /* escapes, not raw characters */
    CHECK_STR_HAS(text, "\"top \\\"quoted\\\" \\\\back\\\\slash\\\\\"");
    CHECK_STR_HAS(text, "\"name\":\"?\"");
    CHECK(text && !strchr(text, '\t'));
    check_document(text, 0, NCTX);
    free(text);
}

static void test_subtree_and_leaf(void)
{
    int rc = -1;
    char *text = json_of(ctxs[2], &rc); /* gen: itself, bump, "?" */
    CHECK_EQ(rc, 0);
    check_document(text, 2, 3);
    free(text);
    text = json_of(ctxs[6], &rc); /* d1 > d2 > d3 > empty leaf */
    CHECK_EQ(rc, 0);
    CHECK_STR_HAS(text, "\"children\":[]}]}]}]}");
    check_document(text, 6, 4);
    free(text);
    text = json_of(ctxs[9], &rc);
    CHECK_EQ(rc, 0);
    check_document(text, 9, 1);
    free(text);
}

static void test_errors(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    REQUIRE_NOT_NULL(f);
    errno = 0;
    CHECK_EQ(mk_ctx_stats_json(NULL, f), -1);
    CHECK_ERRNO(EINVAL);
    fflush(f);
    CHECK_EQ(len, (size_t)0); /* nothing written */
    fclose(f);
    free(buf);
    errno = 0;
    CHECK_EQ(mk_ctx_stats_json(ctxs[0], NULL), -1);
    CHECK_ERRNO(EINVAL);
    FILE *full = fopen("/dev/full", "w");
    if (!full) {
        th_note("no /dev/full: write errors not checked");
        return;
    }
    setvbuf(full, NULL, _IONBF, 0);
    CHECK_EQ(mk_ctx_stats_json(ctxs[0], full), -1);
    fclose(full);
}

static void test_parser_refuses(void)
{
    static const char *const bad[] = {
        "", "{", "{\"a\":1,}", "[1,]", "{\"a\":1,\"a\":2}", "\"raw\ttab\"",
        "01", "1.5", "1e3", "[1] x", "{\"a\" 1}", "{a:1}", "\"\\x\"",
        "\"\\ud800\"", "\"\\u0000\"", "nul", "-"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *err = NULL;
        jn *v = jn_parse(bad[i], &err);
        if (v)
            printf("  accepted: %s\n", bad[i]);
        CHECK_NULL(v);
        CHECK_NOT_NULL(err);
        jn_free(v);
    }
    const char *err = NULL;
    jn *v = jn_parse(" {\"k\\n\":[\"\\u00e9\\\"\\\\\\/\\ud83d\\ude00\","
                     " -12, true, null, {}], \"z\": 0}\n", &err);
    REQUIRE_NOT_NULL(v);
    const jn *a = jn_get(v, "k\n");
    REQUIRE(a && a->type == JN_ARR && a->n == 5);
    CHECK_STR_EQ(a->items[0]->s, "\xc3\xa9\"\\/\xf0\x9f\x98\x80");
    CHECK_EQ(a->items[1]->i, -12LL);
    CHECK_EQ(a->items[2]->type, JN_BOOL);
    CHECK_EQ(a->items[3]->type, JN_NULL);
    CHECK_EQ(a->items[4]->type, JN_OBJ);
    int ok = 1;
    CHECK_EQ(jn_int(v, "z", &ok), 0LL);
    jn_free(v);
}

int main(void)
{
    RUN(test_parser_refuses);
    RUN(test_tree);
    RUN(test_subtree_and_leaf);
    RUN(test_errors);
    mk_ctx_delete(ctxs[0]);
    return th_done();
}
