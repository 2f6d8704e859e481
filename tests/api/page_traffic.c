/*
 * api/page_traffic.c - how often a GENERAL context cuts a page from the
 * shared pool (mki_segment_cuts), where it need not:
 *   - a class whose use swings past its current page and back, in a loop
 *     (a producer fills, a consumer frees in order), keeps the larger of
 *     its two pages once both are empty, so that the swings stop cutting
 *     pages (they cut one a swing when the small page came back current);
 *   - a context refilled after its reset with what it held before (under
 *     1 MiB) is served by the pages the reset kept: no page is cut.
 */
#include "harness.h"

#include <memkit.h>

#include "internal.h"

static void test_swing_keeps_larger_page(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "swing", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    /* four classes, each swinging between a few chunks and 48 of them;
     * they share the context's one spare page, and 48 fit one page of each */
    static const size_t sizes[] = {100, 200, 500, 1000};
    enum { MAXN = 4 * 48 };
    void *ps[MAXN];
    size_t sz[MAXN];
    th_rng r = {7};
    size_t cuts0 = 0;
    for (int round = 0; round < 400; round++) {
        if (round == 100) /* the pages have grown to what the swings need */
            cuts0 = mki_segment_cuts();
        int n = 0;
        for (int k = 0; k < 4; k++) {
            int m = th_below(&r, 2) ? 48 : 4 + (int)th_below(&r, 8);
            for (int i = 0; i < m; i++, n++) {
                sz[n] = sizes[k];
                ps[n] = mk_alloc(c, sz[n]);
                REQUIRE_NOT_NULL(ps[n]);
                th_fill(ps[n], sz[n], (uint64_t)(round * MAXN + n));
            }
        }
        for (int i = 0; i < n; i++) { /* oldest first */
            CHECK_PATTERN(ps[i], sz[i], (uint64_t)(round * MAXN + i));
            mk_free(ps[i]);
        }
    }
    size_t cuts = mki_segment_cuts() - cuts0;
    printf("  pages cut in 300 rounds: %zu\n", cuts);
    CHECK_LE(cuts, 4u);
    mk_ctx_delete(c);
}

static void test_reset_refill_cuts_nothing(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "refill", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    static const size_t sizes[] = {16, 48, 200, 1000, 2500, 9000};
    for (int round = 0; round < 5; round++) {
        size_t cuts0 = mki_segment_cuts();
        for (int i = 0; i < 300; i++) /* some 640 KiB in six classes */
            REQUIRE_NOT_NULL(mk_alloc(c, sizes[i % 6]));
        size_t cuts = mki_segment_cuts() - cuts0;
        printf("  round %d: pages cut %zu\n", round, cuts);
        if (round > 0)
            CHECK_EQ(cuts, 0u);
        else
            CHECK_GT(cuts, 6u);
        mk_ctx_reset(c);
    }
    mk_ctx_delete(c);
}

int main(void)
{
    RUN(test_swing_keeps_larger_page);
    RUN(test_reset_refill_cuts_nothing);
    return th_done();
}
