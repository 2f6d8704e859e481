/* SPDX-License-Identifier: MIT */
/*
 * api/slab.c - the MK_SLAB kind: one chunk size fixed at creation.
 *   - opts are required: no opts, chunk_size 0, a chunk size above 1 MiB, a
 *     chunk_align that is not a power of two or above 64 KiB: NULL, EINVAL;
 *   - one size: a request above the chunk size fails (NULL, EINVAL), at or
 *     below it succeeds; realloc within the size keeps the chunk (release),
 *     beyond it fails with EINVAL and leaves the chunk intact;
 *   - alignment: the default follows mk_alloc's rule for the chunk size
 *     (8 up to 8 bytes and for 17..24, else 16), chunk_align gives any
 *     power of two up to 64 KiB; mk_alloc_aligned accepts what the slot
 *     gives and refuses more (EINVAL);
 *   - usable size: the slot (release) or the requested size (instrumented);
 *     mk_ctx_of finds the context; no header: chunks of a page lie exactly
 *     one slot (the size rounded to the alignment) apart (release);
 *   - 1,000,000 live 48-byte chunks cost <= 49 MB (OS committed bytes, and
 *     resident memory where it can be read); freeing them all leaves at most
 *     2 blocks and, after mk_trim, committed bytes back at the baseline;
 *     freeing 90% in allocation order gives those pages back at once;
 *   - free is O(1): the time per free with 1,000,000 live chunks is within
 *     a small factor of the time with 1,000 (release build only);
 *   - allocation prefers the fullest block: when no page is being filled,
 *     after a scattered pattern of frees, new chunks fill the fullest page
 *     first, then the next fullest.
 */
#include "harness.h"

#include <memkit.h>
#include <time.h>

#include "internal.h"

static int instrumented;
static int under_valgrind;
static int sanitized;

static mk_ctx *slab_new(const char *name, size_t size, size_t align)
{
    mk_ctx_opts o = {.chunk_size = size, .chunk_align = align};
    return mk_ctx_new(NULL, name, MK_SLAB, &o);
}

static void test_opts_required(void)
{
    errno = 0;
    CHECK_NULL(mk_ctx_new(NULL, "s", MK_SLAB, NULL));
    CHECK_ERRNO(EINVAL);
    const struct { size_t size, align; } bad[] = {
        {0, 0}, {0, 16}, {((size_t)1 << 20) + 1, 0}, {(size_t)1 << 40, 0},
        {48, 3}, {48, 48}, {48, 24}, {48, (size_t)128 << 10},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        mk_ctx *c = slab_new("bad", bad[i].size, bad[i].align);
        if (c) {
            th_fail(__FILE__, __LINE__, "slab size %zu align %zu accepted",
                    bad[i].size, bad[i].align);
            mk_ctx_delete(c);
            continue;
        }
        CHECK_ERRNO(EINVAL);
    }
    /* the limits themselves are fine */
    mk_ctx *c = slab_new("one", 1, 0);
    REQUIRE_NOT_NULL(c);
    void *p = mk_alloc(c, 1);
    CHECK_NOT_NULL(p);
    CHECK_EQ((uintptr_t)p % 8, 0u);
    mk_ctx_delete(c);
    c = slab_new("mib", (size_t)1 << 20, 0);
    REQUIRE_NOT_NULL(c);
    char *q = mk_alloc(c, (size_t)1 << 20);
    REQUIRE_NOT_NULL(q);
    memset(q, 7, (size_t)1 << 20);
    CHECK_PTR_EQ(mk_ctx_of(q), c);
    char *q2 = mk_alloc(c, 10);
    REQUIRE_NOT_NULL(q2);
    CHECK(q2 != q);
    mk_free(q);
    mk_free(q2);
    mk_ctx_delete(c);
    c = slab_new("a64k", 100, (size_t)64 << 10);
    REQUIRE_NOT_NULL(c);
    p = mk_alloc(c, 100);
    REQUIRE_NOT_NULL(p);
    CHECK_EQ((uintptr_t)p % ((size_t)64 << 10), 0u);
    mk_ctx_delete(c);
}

static void test_one_size(void)
{
    mk_ctx *c = slab_new("one-size", 48, 0);
    REQUIRE_NOT_NULL(c);
    const size_t too_big[] = {49, 57, 64, 100, 4096, (size_t)1 << 21};
    for (size_t i = 0; i < sizeof too_big / sizeof too_big[0]; i++) {
        errno = 0;
        CHECK_NULL(mk_alloc(c, too_big[i]));
        CHECK_ERRNO(EINVAL);
    }
    errno = 0;
    CHECK_NULL(mk_alloc(c, (size_t)-1));
    CHECK(errno == EINVAL || errno == ENOMEM);
    for (size_t n = 0; n <= 48; n++) {
        char *p = mk_alloc(c, n);
        REQUIRE_NOT_NULL(p);
        th_fill(p, n, n);
        CHECK_PATTERN(p, n, n);
        mk_free(p);
    }
    char *p = mk_alloc(c, 40);
    REQUIRE_NOT_NULL(p);
    th_fill(p, 40, 9);
    char *q = mk_realloc(p, 48);
    REQUIRE_NOT_NULL(q);
    if (!instrumented)
        CHECK_PTR_EQ(q, p); /* the slot already holds 48 bytes */
    CHECK_PATTERN(q, 40, 9);
    errno = 0;
    CHECK_NULL(mk_realloc(q, 49));
    CHECK_ERRNO(EINVAL);
    CHECK_PATTERN(q, 40, 9); /* untouched, still live */
    mk_stats st;
    mk_ctx_stats(c, &st, 0);
    CHECK_EQ(st.chunks, 1u);
    mk_free(q);
    mk_ctx_stats(c, &st, 0);
    CHECK_EQ(st.chunks, 0u);
    /* mk_alloc_zero and mk_alloc_array within the size */
    char *z = mk_alloc_zero(c, 48);
    REQUIRE_NOT_NULL(z);
    CHECK(th_all_zero(z, 48));
    char *a = mk_alloc_array(c, 6, 8);
    REQUIRE_NOT_NULL(a);
    CHECK(th_all_zero(a, 48));
    errno = 0;
    CHECK_NULL(mk_alloc_array(c, 7, 8));
    CHECK_ERRNO(EINVAL);
    mk_ctx_delete(c);
}

typedef struct align_case {
    size_t size, align, want;
} align_case;

static void check_alignment(const align_case *cases, size_t ncases)
{
    for (size_t i = 0; i < ncases; i++) {
        mk_ctx *c = slab_new("align", cases[i].size, cases[i].align);
        REQUIRE_NOT_NULL(c);
        for (int j = 0; j < 3000; j++) {
            char *p = mk_alloc(c, cases[i].size);
            REQUIRE_NOT_NULL(p);
            if ((uintptr_t)p % cases[i].want) {
                th_fail(__FILE__, __LINE__, "slab %zu/%zu: chunk %p not "
                        "%zu-aligned", cases[i].size, cases[i].align,
                        (void *)p, cases[i].want);
                break;
            }
            if (!instrumented) {
                size_t u = mk_usable_size(p);
                CHECK_GE(u, cases[i].size);
                CHECK_EQ(u % cases[i].want, 0u);
            }
        }
        th_checks++;
        /* mk_alloc_aligned: what the slot gives is fine, more is not */
        void *p = mk_alloc_aligned(c, cases[i].size, cases[i].want);
        CHECK_NOT_NULL(p);
        CHECK_EQ((uintptr_t)p % cases[i].want, 0u);
        errno = 0;
        CHECK_NULL(mk_alloc_aligned(c, cases[i].size, (size_t)1 << 17));
        CHECK_ERRNO(EINVAL);
        mk_ctx_delete(c);
    }
}

/* chunk_align, and the default where the slab's rule and mk_alloc's agree */
static void test_alignment(void)
{
    static const align_case cases[] = {
        {8, 0, 8},       {24, 0, 8},          {48, 0, 16},   {4000, 0, 16},
        {24, 16, 16},    {48, 64, 64},        {100, 128, 128},
        {1000, 4096, 4096}, {5, 8, 8},        {72, 32, 32},  {40, 16, 16},
        {3, 0, 8},       {20, 0, 8},          {32, 0, 16},
    };
    check_alignment(cases, sizeof cases / sizeof cases[0]);
}

/*
 * The default alignment (chunk_align 0) is mk_alloc's (memkit.h: "a chunk
 * is aligned to 16 bytes, except that a request of 8 bytes or less is
 * aligned to 8 and a request of 17..24 bytes is aligned to 8"; and
 * mk_pool_new: "0: as mk_alloc would align @size"), also for sizes that
 * are not a multiple of 16.
 */
static void test_default_alignment_like_mk_alloc(void)
{
    static const align_case cases[] = {
        {40, 0, 16}, {72, 0, 16}, {100, 0, 16}, {25, 0, 16}, {1000, 0, 16},
    };
    check_alignment(cases, sizeof cases / sizeof cases[0]);
}

/*
 * A slab's alignment is its chunk alignment,
 * whatever the request.  mk_alloc_aligned(s, n, A) succeeds for every power
 * of two A up to that alignment (and the chunk is A-aligned) and fails with
 * EINVAL above it, up to 4 MiB, for small slots, slots of 128 KiB and 1 MiB
 * (pages above 64 KiB were only 64 KiB-aligned, and 128 KiB / 1 MiB
 * alignments were granted with 64 KiB-aligned chunks), and in every build.
 * mk_alloc(s, n) gives the slab's alignment for any n: a 24-byte slab's
 * chunks are 8-aligned also for a 16-byte request.
 */
static void test_alignment_is_the_slab_s(void)
{
    static const struct {
        size_t size, align, expect;
    } cases[] = {
        {24, 0, 8},           {48, 0, 16},        {4000, 0, 16},
        {131063, 0, 16},      {1048567, 0, 16},   {131063, 65536, 65536},
        {1048567, 65536, 65536}, {24, 16, 16},    {8, 4096, 4096},
        {100, 128, 128},      {200000, 32, 32},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mk_ctx *s = slab_new("rule", cases[i].size, cases[i].align);
        REQUIRE_NOT_NULL(s);
        size_t want = cases[i].expect;
        for (size_t a = 1; a <= ((size_t)4 << 20); a <<= 1) {
            errno = 0;
            void *p = mk_alloc_aligned(s, 100 < cases[i].size ? 100 : 1, a);
            th_checks++;
            if (a <= want) {
                if (!p || (uintptr_t)p % a)
                    th_fail(__FILE__, __LINE__, "slab %zu/%zu: align %zu "
                            "gave %p (errno %d)", cases[i].size,
                            cases[i].align, a, p, errno);
                mk_free(p);
            } else if (p || errno != EINVAL) {
                th_fail(__FILE__, __LINE__, "slab %zu/%zu: align %zu above "
                        "the slab's %zu gave %p, errno %d (want NULL, "
                        "EINVAL)", cases[i].size, cases[i].align, a, want, p,
                        errno);
                mk_free(p);
            }
        }
        /* plain allocations of any size: the slab's alignment */
        void *held[4];
        for (int k = 0; k < 4; k++) {
            size_t n = k == 0 ? 1 : k == 1 ? 16 : cases[i].size;
            held[k] = mk_alloc(s, n < cases[i].size ? n : cases[i].size);
            REQUIRE_NOT_NULL(held[k]);
            CHECK_EQ((uintptr_t)held[k] % want, 0u);
        }
        for (int k = 0; k < 4; k++)
            mk_free(held[k]);
        mk_ctx_delete(s);
    }
}

static void test_usable_and_owner(void)
{
    mk_ctx *c = slab_new("usable", 44, 0);
    REQUIRE_NOT_NULL(c);
    mk_ctx *other = slab_new("other", 44, 0);
    REQUIRE_NOT_NULL(other);
    for (size_t n = 0; n <= 44; n += 4) {
        char *p = mk_alloc(c, n), *q = mk_alloc(other, n);
        REQUIRE(p && q);
        CHECK_PTR_EQ(mk_ctx_of(p), c);
        CHECK_PTR_EQ(mk_ctx_of(q), other);
        /* release: the slot (44 rounded to 16); instrumented: the request */
        CHECK_EQ(mk_usable_size(p), instrumented ? n : 48u);
        th_fill(p, mk_usable_size(p), n);
        CHECK_PATTERN(p, mk_usable_size(p), n);
    }
    mk_ctx_delete(other);
    mk_ctx_delete(c);
}

/* No per-chunk header: the chunks of one page lie one chunk size apart. */
static void test_no_header(void)
{
    if (instrumented) {
        th_note("skipped in this build: instrumented chunks carry a tail");
        return;
    }
    const size_t sizes[] = {8, 24, 48, 96, 1000};
    for (size_t i = 0; i < 5; i++) {
        mk_ctx *c = slab_new("dense", sizes[i], 0);
        REQUIRE_NOT_NULL(c);
        char *prev = mk_alloc(c, sizes[i]);
        REQUIRE_NOT_NULL(prev);
        int adjacent = 0;
        for (int j = 0; j < 60; j++) {
            char *p = mk_alloc(c, sizes[i]);
            REQUIRE_NOT_NULL(p);
            /* the slot: the size rounded up to the alignment, no more */
            size_t slot = mk_usable_size(p);
            CHECK_GE(slot, sizes[i]);
            CHECK_LT(slot, sizes[i] + 16);
            if (((uintptr_t)p >> 16) == ((uintptr_t)prev >> 16)) {
                CHECK_EQ((size_t)(p > prev ? p - prev : prev - p), slot);
                adjacent++;
            }
            prev = p;
        }
        CHECK_GE(adjacent, 50);
        mk_stats st;
        mk_ctx_stats(c, &st, 0);
        CHECK_EQ(st.bytes_used, 61 * mk_usable_size(prev));
        mk_ctx_delete(c);
    }
}

/* ---- a million chunks ------------------------------------------------------ */

/* Transparent huge pages on for every mapping make resident memory jump
 * by 2 MiB at a time: the resident-size check is then meaningless. */
static int thp_always(void)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f)
        return 0;
    char buf[128] = "";
    if (!fgets(buf, sizeof buf, f))
        buf[0] = '\0';
    fclose(f);
    return strstr(buf, "[always]") != NULL;
}

static void **ptrs;
static long million = 1000000;

static void test_million(void)
{
    long n = million;
    ptrs = malloc((size_t)n * sizeof *ptrs);
    REQUIRE_NOT_NULL(ptrs);
    /* resident before we measure (not 0: malloc + memset 0 may become
     * calloc, which leaves fresh pages untouched) */
    memset(ptrs, 0xff, (size_t)n * sizeof *ptrs);
    mk_trim();
    size_t base = mki_os_committed(), meta0 = mki_meta_bytes();
    size_t rss0 = th_rss_bytes();
    mk_ctx *c = slab_new("million", 48, 0);
    REQUIRE_NOT_NULL(c);
    for (long i = 0; i < n; i++) {
        char *p = mk_alloc(c, 48);
        if (!p) {
            th_fail(__FILE__, __LINE__, "chunk %ld failed", i);
            return;
        }
        memset(p, (int)(i & 0x7f), 48);
        ptrs[i] = p;
    }
    size_t committed = mki_os_committed() - base;
    size_t rss = th_rss_bytes() - rss0;
    mk_stats st;
    mk_ctx_stats(c, &st, 0);
    printf("  %ld chunks: %zu blocks, %zu bytes reserved, committed +%zu, "
           "rss +%zu\n", n, st.blocks, st.bytes_reserved, committed, rss);
    CHECK_EQ(st.chunks, (size_t)n);
    CHECK_EQ(st.bytes_used, (size_t)n * 48);
    if (!instrumented && n == 1000000) {
        CHECK_LE(st.bytes_reserved, (size_t)49000000);
        CHECK_LE(committed, (size_t)49000000);
        /* a small first page of 21 (8 chunks, rounded up to a unit),
         * then 1365 per 64 KiB */
        CHECK_EQ(st.blocks, 1 + (size_t)(n - 21 + 1364) / 1365);
        if (!sanitized && !under_valgrind && rss0 && !thp_always())
            CHECK_LE(rss, (size_t)49000000);
    }
    /* spot-check contents */
    for (long i = 0; i < n; i += 997)
        if (((unsigned char *)ptrs[i])[47] != (i & 0x7f))
            th_fail(__FILE__, __LINE__, "chunk %ld corrupted", i);
    th_checks++;

    /* free 90% in allocation order: those pages go back at once */
    long cut = n / 10 * 9;
    for (long i = 0; i < cut; i++)
        mk_free(ptrs[i]);
    mk_stats st2;
    mk_ctx_stats(c, &st2, 0);
    printf("  after freeing 90%%: %zu blocks, %zu chunks\n", st2.blocks,
           st2.chunks);
    CHECK_EQ(st2.chunks, (size_t)(n - cut));
    CHECK_LE(st2.blocks, st.blocks / 10 + 3);
    /* the rest in a scattered order */
    th_rng r = {77};
    for (long i = n - 1; i > cut; i--) {
        long j = cut + (long)th_below(&r, (uint64_t)(i - cut + 1));
        void *t = ptrs[i];
        ptrs[i] = ptrs[j];
        ptrs[j] = t;
    }
    for (long i = cut; i < n; i++)
        mk_free(ptrs[i]);
    mk_ctx_stats(c, &st2, 0);
    printf("  all freed: %zu blocks, %zu bytes reserved\n", st2.blocks,
           st2.bytes_reserved);
    CHECK_EQ(st2.chunks, 0u);
    CHECK_EQ(st2.bytes_used, 0u);
    CHECK_LE(st2.blocks, 2u);
    mk_trim();
    /* the blocks still held, the headers of the segments they sit in, and
     * any growth of memkit's bookkeeping may stay committed */
    size_t now = mki_os_committed(), meta1 = mki_meta_bytes();
    size_t headers = mki_segment_count() * MKI_SEG_HEADER_UNITS * MKI_UNIT;
    printf("  trimmed: committed %zu, baseline %zu (+%zu held, %zu segment "
           "headers, meta +%zu)\n", now, base, st2.bytes_reserved, headers,
           meta1 - meta0);
    CHECK_LE(mki_segment_count(), 2u);
    CHECK_LE(now, base + st2.bytes_reserved + headers + (meta1 - meta0));
    mk_ctx_delete(c);
    mk_trim();
    CHECK_LE(mki_os_committed(), base + (mki_meta_bytes() - meta0));
    free(ptrs);
}

/* ---- the fullest block first ------------------------------------------------ */

enum { MAXP = 40000 };
static char *chunk_at[MAXP];

static uintptr_t page_of(const void *p) { return (uintptr_t)p >> 16; }

static void test_prefers_fullest(void)
{
    mk_ctx *c = slab_new("fullest", 48, 0);
    REQUIRE_NOT_NULL(c);
    /* the slab's small first page is filled and stays full: the pages
     * below are its 64 KiB ones */
    static char *first[64];
    int nf = 0;
    do {
        REQUIRE(nf < 64);
        first[nf] = mk_alloc(c, 48);
        REQUIRE_NOT_NULL(first[nf]);
        nf++;
    } while (nf < 2 || page_of(first[nf - 1]) == page_of(first[nf - 2]));
    chunk_at[0] = first[--nf]; /* the first chunk of the first big page */
    /* fill exactly six pages: the first page change tells the capacity;
     * the last chunk fills the sixth page, so no page is current with room
     * left when the frees below happen */
    int n = 1, cap = 0;
    while (!cap || n < 6 * cap) {
        REQUIRE(n < MAXP);
        chunk_at[n] = mk_alloc(c, 48);
        REQUIRE_NOT_NULL(chunk_at[n]);
        n++;
        if (!cap && n > 1 &&
            page_of(chunk_at[n - 1]) != page_of(chunk_at[n - 2]))
            cap = n - 1;
    }
    int npages = n / cap;
    printf("  %d chunks per page, %d full pages\n", cap, npages);
    REQUIRE(cap > 100);
    /* chunks of page k are chunk_at[k*cap .. (k+1)*cap) */
    for (int i = 0; i < n; i++)
        if (page_of(chunk_at[i]) != page_of(chunk_at[i / cap * cap]))
            th_fail(__FILE__, __LINE__, "chunk %d not on page %d", i, i / cap);
    th_checks++;
    mk_stats st;
    mk_ctx_stats(c, &st, 0);
    CHECK_EQ(st.chunks, (size_t)(n + nf)); /* and the first page's */
    uintptr_t pg_id[16];
    REQUIRE(npages <= 16);
    for (int k = 0; k < npages; k++)
        pg_id[k] = page_of(chunk_at[k * cap]);

    /* scattered frees: page 1 loses a quarter, page 3 half, page 0 three
     * quarters, page 4 all (it goes back or becomes the spare).  The slab
     * ranks pages by steps of free chunks (a few hundred here), so the
     * three differ by whole steps */
    const int lose[4] = {cap / 4, cap / 2, cap * 3 / 4, cap};
    const int page[4] = {1, 3, 0, 4};
    for (int k = 0; k < 4; k++) {
        int stride = cap / lose[k];
        int freed = 0;
        for (int i = 0; i < cap && freed < lose[k]; i += stride, freed++) {
            mk_free(chunk_at[page[k] * cap + i]);
            chunk_at[page[k] * cap + i] = NULL;
        }
        CHECK_EQ(freed, lose[k]);
    }
    mk_ctx_stats(c, &st, 0);
    CHECK_EQ(st.chunks,
             (size_t)(nf + n - cap / 4 - cap / 2 - cap * 3 / 4 - cap));
    CHECK_LE(st.blocks, (size_t)npages + 1);

    /* new chunks: page 1 first, then page 3, then page 0 */
    for (int k = 0; k < 3; k++) {
        uintptr_t want = pg_id[page[k]];
        int wrong = 0;
        for (int i = 0; i < lose[k]; i++) {
            char *p = mk_alloc(c, 48);
            REQUIRE_NOT_NULL(p);
            if (page_of(p) != want && wrong++ < 3)
                th_fail(__FILE__, __LINE__, "allocation %d after the frees "
                        "came from another page than page %d (%d free "
                        "chunks there)", i, page[k], lose[k] - i);
        }
        th_checks++;
    }
    /* every old page is full again: the next chunk is on a page that was
     * empty (page 4 as the spare, or a new one) */
    char *p = mk_alloc(c, 48);
    REQUIRE_NOT_NULL(p);
    for (int k = 0; k < npages; k++)
        if (k != 4 && page_of(p) == pg_id[k])
            th_fail(__FILE__, __LINE__, "a full page %d gave a chunk", k);
    th_checks++;
    mk_ctx_delete(c);
}

int main(int argc, char **argv)
{
    instrumented = mki_instrument_active();
    under_valgrind = mki_valgrind_on;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    sanitized = 1;
#endif
    million = th_arg_long(argc, argv, 1, "MEMKIT_TEST_CHUNKS",
                          under_valgrind ? 100000 : 1000000);
    printf("instrumented %d, valgrind %d, sanitizer %d, %ld chunks\n",
           instrumented, under_valgrind, sanitized, million);
    RUN(test_opts_required);
    RUN(test_one_size);
    RUN(test_alignment);
    RUN(test_default_alignment_like_mk_alloc);
    RUN(test_alignment_is_the_slab_s);
    RUN(test_usable_and_owner);
    RUN(test_no_header);
    RUN(test_million);
    RUN(test_prefers_fullest);
    return th_done();
}
