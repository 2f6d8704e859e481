/* SPDX-License-Identifier: MIT */
/*
 * api/stats.c - seeing memory: mk_ctx_stats figures right after known
 * allocations (alone and recursive; NULL arguments), mk_ctx_stats_print
 * (one indented line per context, then a totals line, figures matching
 * mk_ctx_stats), mk_process_stats (OS figures follow a huge chunk), and
 * mk_trim (gives back what deleted contexts left empty), and the resident
 * figure: one 4000-byte chunk in a new page is 4096 bytes resident of a
 * larger reservation, and the printed line calls free only what is
 * resident and unused ("4096 resident, 4096 used, 0 free"), for every
 * kind, large and huge chunks included.
 */
#include "harness.h"
#include "option.h"

#include <memkit.h>

static mk_stats get(const mk_ctx *c, int recurse)
{
    mk_stats st;
    memset(&st, 0xee, sizeof st);
    CHECK_EQ(mk_ctx_stats(c, &st, recurse), 0);
    return st;
}

static void check_consistent(const mk_stats *st, int line)
{
    th_checks++;
    if (st->bytes_free != st->bytes_reserved - st->bytes_used ||
        st->bytes_used > st->bytes_reserved ||
        st->bytes_resident > st->bytes_reserved ||
        st->bytes_resident < st->bytes_used)
        th_fail(__FILE__, line, "inconsistent: reserved %zu resident %zu used "
                "%zu free %zu", st->bytes_reserved, st->bytes_resident,
                st->bytes_used, st->bytes_free);
}

static void test_empty(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "empty", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    mk_stats st = get(c, 0);
    CHECK_EQ(st.contexts, 1u);
    CHECK_EQ(st.blocks, 0u);
    CHECK_EQ(st.bytes_reserved, 0u);
    CHECK_EQ(st.bytes_used, 0u);
    CHECK_EQ(st.bytes_free, 0u);
    CHECK_EQ(st.chunks, 0u);
    st = get(c, 1);
    CHECK_EQ(st.contexts, 1u);
    CHECK_EQ(st.chunks, 0u);

    errno = 0;
    CHECK_EQ(mk_ctx_stats(NULL, &st, 0), -1);
    CHECK_ERRNO(EINVAL);
    errno = 0;
    CHECK_EQ(mk_ctx_stats(c, NULL, 1), -1);
    CHECK_ERRNO(EINVAL);
    mk_ctx_delete(c);
}

static void test_known_allocations(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "known", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    void *small[10], *large, *huge;
    size_t used = 0;
    for (int i = 0; i < 10; i++) {
        small[i] = mk_alloc(c, 100);
        REQUIRE_NOT_NULL(small[i]);
        used += mk_usable_size(small[i]);
    }
    mk_stats st = get(c, 0);
    CHECK_EQ(st.chunks, 10u);
    CHECK_EQ(st.bytes_used, used);
    CHECK_GE(st.blocks, 1u);
    CHECK_GE(st.bytes_reserved, used);
    check_consistent(&st, __LINE__);

    large = mk_alloc(c, 100000);
    REQUIRE_NOT_NULL(large);
    used += mk_usable_size(large);
    st = get(c, 0);
    CHECK_EQ(st.chunks, 11u);
    CHECK_EQ(st.bytes_used, used);
    CHECK_GE(st.blocks, 2u);
    check_consistent(&st, __LINE__);

    size_t before_reserved = st.bytes_reserved;
    huge = mk_alloc(c, (size_t)5 << 20);
    REQUIRE_NOT_NULL(huge);
    used += mk_usable_size(huge);
    st = get(c, 0);
    CHECK_EQ(st.chunks, 12u);
    CHECK_EQ(st.bytes_used, used);
    CHECK_GE(st.blocks, 3u);
    CHECK_GE(st.bytes_reserved, before_reserved + ((size_t)5 << 20));
    check_consistent(&st, __LINE__);

    /* free them again, in a mixed order */
    mk_free(huge);
    used -= (size_t)5 << 20;
    for (int i = 0; i < 10; i += 2)
        mk_free(small[i]);
    st = get(c, 0);
    CHECK_EQ(st.chunks, 6u);
    check_consistent(&st, __LINE__);
    mk_free(large);
    for (int i = 1; i < 10; i += 2)
        mk_free(small[i]);
    st = get(c, 0);
    CHECK_EQ(st.chunks, 0u);
    CHECK_EQ(st.bytes_used, 0u);
    check_consistent(&st, __LINE__);
    mk_ctx_delete(c);
}

static void test_recurse(void)
{
    mk_ctx *root = mk_ctx_new(NULL, "root", MK_GENERAL, NULL);
    mk_ctx *a = mk_ctx_new(root, "a", MK_GENERAL, NULL);
    mk_ctx *a1 = mk_ctx_new(a, "a1", MK_GENERAL, NULL);
    mk_ctx *b = mk_ctx_new(root, "b", MK_GENERAL, NULL);
    REQUIRE(root && a && a1 && b);
    mk_ctx *all[] = {root, a, a1, b};
    size_t want_used = 0;
    for (int i = 0; i < 4; i++)
        for (int k = 0; k <= i; k++) { /* root 1, a 2, a1 3, b 4 chunks */
            void *p = mk_alloc(all[i], 200 + 1000 * (size_t)k);
            REQUIRE_NOT_NULL(p);
            want_used += mk_usable_size(p);
        }
    mk_stats st = get(root, 0);
    CHECK_EQ(st.contexts, 1u);
    CHECK_EQ(st.chunks, 1u);
    st = get(root, 1);
    CHECK_EQ(st.contexts, 4u);
    CHECK_EQ(st.chunks, 10u);
    CHECK_EQ(st.bytes_used, want_used);
    check_consistent(&st, __LINE__);
    st = get(a, 1);
    CHECK_EQ(st.contexts, 2u);
    CHECK_EQ(st.chunks, 5u);
    st = get(a1, 1);
    CHECK_EQ(st.contexts, 1u);
    CHECK_EQ(st.chunks, 3u);
    st = get(b, 1);
    CHECK_EQ(st.contexts, 1u);
    CHECK_EQ(st.chunks, 4u);
    /* the sum of the parts is the whole */
    mk_stats sr = get(root, 0), sa = get(a, 1), sb = get(b, 1),
             whole = get(root, 1);
    CHECK_EQ(sr.bytes_reserved + sa.bytes_reserved + sb.bytes_reserved,
             whole.bytes_reserved);
    CHECK_EQ(sr.blocks + sa.blocks + sb.blocks, whole.blocks);
    mk_ctx_delete(root);
}

/* ---- mk_ctx_stats_print ----------------------------------------------------- */

/* Split @text into lines (in place); returns how many. */
static int split_lines(char *text, char **lines, int max)
{
    int n = 0;
    for (char *s = text; *s && n < max;) {
        lines[n++] = s;
        char *e = strchr(s, '\n');
        if (!e)
            break;
        *e = '\0';
        s = e + 1;
    }
    return n;
}

static size_t indent_of(const char *line)
{
    size_t n = 0;
    while (line[n] == ' ')
        n++;
    return n;
}

static void test_print(void)
{
    mk_ctx *root = mk_ctx_new(NULL, "printroot", MK_GENERAL, NULL);
    mk_ctx *a = mk_ctx_new(root, "alpha", MK_GENERAL, NULL);
    mk_ctx *a1 = mk_ctx_new(a, "alpha1", MK_GENERAL, NULL);
    mk_ctx *b = mk_ctx_new(root, "beta", MK_GENERAL, NULL);
    REQUIRE(root && a && a1 && b);
    mk_ctx *b1 = mk_ctx_new(b, "beta1", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(b1);
    CHECK_NOT_NULL(mk_alloc(b1, 1));
    CHECK_NOT_NULL(mk_alloc(b1, 2));
    for (int i = 0; i < 7; i++)
        CHECK_NOT_NULL(mk_alloc(a1, 64));
    CHECK_NOT_NULL(mk_alloc(b, 100000));
    CHECK_NOT_NULL(mk_alloc(root, 10));

    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    REQUIRE_NOT_NULL(f);
    mk_ctx_stats_print(root, f);
    fclose(f);
    REQUIRE_NOT_NULL(buf);
    printf("%s", buf);

    char *lines[32];
    int n = split_lines(buf, lines, 32);
    CHECK_EQ(n, 6); /* 5 contexts + totals */
    if (n == 6) {
        /* the root first, not indented */
        CHECK_EQ(strncmp(lines[0], "printroot", 9), 0);
        CHECK_EQ(indent_of(lines[0]), 0u);
        /* each line is indented by depth; find every context's line */
        int seen[4] = {0, 0, 0, 0};
        for (int i = 1; i < 5; i++) {
            const char *name = lines[i] + indent_of(lines[i]);
            if (strncmp(name, "beta1", 5) == 0) {
                seen[3]++;
                CHECK_GT(indent_of(lines[i]), indent_of(lines[i - 1]));
                CHECK_STR_HAS(lines[i], "2 chunks");
            } else if (strncmp(name, "alpha1", 6) == 0) {
                seen[1]++;
                CHECK_GT(indent_of(lines[i]), indent_of(lines[i - 1]));
                CHECK_STR_HAS(lines[i], "7 chunks");
                CHECK(strncmp(lines[i - 1] + indent_of(lines[i - 1]),
                              "alpha", 5) == 0);
            } else if (strncmp(name, "alpha", 5) == 0) {
                seen[0]++;
                CHECK_GT(indent_of(lines[i]), 0u);
                CHECK_STR_HAS(lines[i], "0 chunks");
            } else if (strncmp(name, "beta", 4) == 0) {
                seen[2]++;
                CHECK_GT(indent_of(lines[i]), 0u);
                CHECK_STR_HAS(lines[i], "1 chunks");
            }
        }
        CHECK_EQ(seen[0], 1);
        CHECK_EQ(seen[1], 1);
        CHECK_EQ(seen[2], 1);
        CHECK_EQ(seen[3], 1);
        /* siblings alpha and beta are at the same depth */
        size_t ia = 0, ib = 0, ia1 = 0, ib1 = 0;
        for (int i = 1; i < 5; i++) {
            const char *name = lines[i] + indent_of(lines[i]);
            if (strncmp(name, "beta1", 5) == 0)
                ib1 = indent_of(lines[i]);
            else if (strncmp(name, "alpha1", 6) == 0)
                ia1 = indent_of(lines[i]);
            else if (strncmp(name, "alpha", 5) == 0)
                ia = indent_of(lines[i]);
            else if (strncmp(name, "beta", 4) == 0)
                ib = indent_of(lines[i]);
        }
        CHECK_EQ(ia, ib);
        CHECK_GT(ia1, ia);
        CHECK_EQ(ia1, ib1);
        /* the kind is shown */
        CHECK_STR_HAS(lines[0], "general");
        /* totals: the figures of mk_ctx_stats(root, recurse) */
        mk_stats st = get(root, 1);
        char want[256];
        snprintf(want, sizeof want, "%zu contexts", st.contexts);
        CHECK_STR_HAS(lines[5], want);
        snprintf(want, sizeof want, "%zu chunks", st.chunks);
        CHECK_STR_HAS(lines[5], want);
        snprintf(want, sizeof want, "%zu bytes reserved", st.bytes_reserved);
        CHECK_STR_HAS(lines[5], want);
        snprintf(want, sizeof want, "%zu used", st.bytes_used);
        CHECK_STR_HAS(lines[5], want);
        CHECK_EQ(st.contexts, 5u);
        CHECK_EQ(st.chunks, 11u);
        CHECK_EQ(indent_of(lines[5]), 0u);
    }
    free(buf);

    /* a subtree prints only itself, from depth 0 */
    buf = NULL;
    f = open_memstream(&buf, &len);
    REQUIRE_NOT_NULL(f);
    mk_ctx_stats_print(a, f);
    fclose(f);
    n = split_lines(buf, lines, 32);
    CHECK_EQ(n, 3);
    if (n == 3) {
        CHECK_EQ(strncmp(lines[0], "alpha", 5), 0);
        CHECK_EQ(indent_of(lines[1]), 2u);
        CHECK_STR_HAS(lines[1], "alpha1");
        CHECK_STR_HAS(lines[2], "2 contexts");
        CHECK_STR_HAS(lines[2], "7 chunks");
    }
    free(buf);

    /* a subtree whose root has a sibling, to a tmpfile: beta, beta1, total
     * (and nothing of alpha's) */
    f = tmpfile();
    REQUIRE_NOT_NULL(f);
    mk_ctx_stats_print(b, f);
    CHECK_GT(ftell(f), 0L);
    rewind(f);
    char line[512];
    int nl = 0;
    while (fgets(line, sizeof line, f)) {
        nl++;
        if (nl == 1)
            CHECK_EQ(strncmp(line, "beta ", 5), 0);
        if (nl == 2)
            CHECK_EQ(strncmp(line, "  beta1", 7), 0);
        if (nl == 3) {
            CHECK_STR_HAS(line, "2 contexts");
            CHECK_STR_HAS(line, "3 chunks");
        }
        CHECK(strstr(line, "alpha") == NULL);
    }
    CHECK_EQ(nl, 3);
    fclose(f);
    mk_ctx_delete(root);
}

/* ---- process figures and trim ------------------------------------------- */

/* Reserved address space is not resident memory: a chunk reaches the
 * OS pages it covers, and the printed "free" is the resident memory no
 * chunk uses. */
static void test_resident(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "one", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    CHECK_NOT_NULL(mk_alloc(c, 4000));
    mk_stats st = get(c, 0);
    check_consistent(&st, __LINE__);
    CHECK_GT(st.bytes_reserved, 4096u);
    CHECK_EQ(st.bytes_resident, 4096u);
    char buf[1024];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    REQUIRE_NOT_NULL(f);
    mk_ctx_stats_print(c, f);
    fclose(f);
    char want[256];
    /* (4096 used: the chunk's class; 4000 where contexts are instrumented,
     * under a sanitizer or Valgrind, which count the bytes asked for) */
    snprintf(want, sizeof want, "one (general): 1 blocks, %zu bytes reserved, "
             "4096 resident, %zu used, %zu free, 1 chunks\n",
             st.bytes_reserved, st.bytes_used, 4096 - st.bytes_used);
    CHECK_STR_HAS(buf, want);
    /* more chunks reach more pages */
    for (int i = 0; i < 3; i++)
        CHECK_NOT_NULL(mk_alloc(c, 4000));
    st = get(c, 0);
    check_consistent(&st, __LINE__);
    CHECK_EQ(st.bytes_resident, 4u * 4096);
    /* a large and a huge chunk: their size, in whole pages */
    mk_ctx *l = mk_ctx_new(c, "large", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(l);
    CHECK_NOT_NULL(mk_alloc(l, 100000));
    st = get(l, 0);
    check_consistent(&st, __LINE__);
    CHECK_EQ(st.bytes_resident, (size_t)102400);
    mk_ctx *h = mk_ctx_new(c, "huge", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(h);
    CHECK_NOT_NULL(mk_alloc(h, (size_t)3 << 20));
    st = get(h, 0);
    check_consistent(&st, __LINE__);
    CHECK_GE(st.bytes_resident, (size_t)3 << 20); /* (instrumented: and */
    CHECK_LE(st.bytes_resident, ((size_t)3 << 20) + 4096); /* its tail) */
    size_t huge = st.bytes_resident;
    size_t sum = 4u * 4096 + 102400 + huge;
    /* the other kinds: up to their fill point, in whole OS pages, within
     * their block (a first block may be smaller than an OS page) */
    mk_ctx_opts so = {.chunk_size = 64, .block_size = 0};
    mk_ctx_opts big = {.block_size = 65536};
    const struct { mk_kind kind; const mk_ctx_opts *opts; } kinds[] = {
        {MK_SLAB, &so}, {MK_GENERATION, NULL}, {MK_BUMP, NULL},
        {MK_GENERATION, &big}, {MK_BUMP, &big}};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        mk_ctx *o = mk_ctx_new(c, "other", kinds[k].kind, kinds[k].opts);
        REQUIRE_NOT_NULL(o);
        CHECK_NOT_NULL(mk_alloc(o, 64));
        st = get(o, 0);
        check_consistent(&st, __LINE__);
        size_t page = st.bytes_reserved < 4096 ? st.bytes_reserved : 4096;
        CHECK_EQ(st.bytes_resident, page);
        if (kinds[k].opts == &big)
            CHECK_EQ(st.bytes_reserved, (size_t)65536);
        sum += st.bytes_resident;
    }
    /* the tree's totals add up */
    st = get(c, 1);
    check_consistent(&st, __LINE__);
    CHECK_EQ(st.bytes_resident, sum);
    mk_ctx_delete(c);
}

static void test_process_stats(void)
{
    mk_process_figures a, b, c;
    mk_trim(); /* no cached huge mapping to reuse */
    mk_process_stats(&a);
    mk_ctx *ctx = mk_ctx_new(NULL, "proc", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(ctx);
    void *p = mk_alloc(ctx, (size_t)8 << 20);
    REQUIRE_NOT_NULL(p);
    mk_process_stats(&b);
    CHECK_GE(b.os_reserved, a.os_reserved + ((size_t)8 << 20));
    CHECK_GE(b.os_committed, a.os_committed + ((size_t)8 << 20));
    CHECK_GT(b.os_calls, a.os_calls);
    CHECK_EQ(b.segments, a.segments + 1);
    CHECK_GT(b.meta_bytes, 0u);
    CHECK_GE(b.os_reserved, b.os_committed);
    mk_free(p); /* a huge mapping is cached for reuse ... */
    mk_trim();  /* ... until the purge delay, or mk_trim */
    mk_process_stats(&c);
    CHECK_EQ(c.os_reserved, a.os_reserved);
    CHECK_EQ(c.os_committed, a.os_committed);
    CHECK_EQ(c.segments, a.segments);
    CHECK_GE(c.os_calls, b.os_calls);
    mk_ctx_delete(ctx);
}

static void test_trim(void)
{
    long old = th_option("purge_delay_ms");
    CHECK_EQ(mk_option_set("purge_delay_ms", -1), 0); /* keep empty ones */
    mk_process_figures a, b, c;
    mk_trim();
    mk_process_stats(&a);
    mk_ctx *ctx = mk_ctx_new(NULL, "trim", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(ctx);
    for (int i = 0; i < 2000; i++)
        CHECK_NOT_NULL(mk_alloc(ctx, 1 + (size_t)(i * 131) % 20000));
    mk_ctx_delete(ctx);
    mk_process_stats(&b);
    CHECK_GT(b.os_committed, a.os_committed); /* kept: delay -1 */
    size_t given = mk_trim();
    mk_process_stats(&c);
    CHECK_GT(given, 0u);
    CHECK_EQ(c.os_committed + given, b.os_committed);
    /* every byte of pages goes back; bookkeeping stays (page/meta.c: it is
     * never given back), and 2,000 chunks over the 64 size classes may
     * take another 64 KiB of it for their page descriptors */
    printf("  committed %zu -> %zu -> %zu bytes, of them bookkeeping %zu -> %zu\n",
           a.os_committed, b.os_committed, c.os_committed, a.meta_bytes, c.meta_bytes);
    CHECK_LE(c.os_committed - c.meta_bytes, a.os_committed - a.meta_bytes);
    CHECK_LE(c.meta_bytes, a.meta_bytes + ((size_t)64 << 10));
    CHECK_LE(c.segments, a.segments);
    CHECK_EQ(mk_trim(), 0u); /* nothing left to give */
    CHECK_EQ(mk_option_set("purge_delay_ms", old), 0);
}

int main(void)
{
    RUN(test_empty);
    RUN(test_known_allocations);
    RUN(test_recurse);
    RUN(test_print);
    RUN(test_resident);
    RUN(test_process_stats);
    RUN(test_trim);
    return th_done();
}
