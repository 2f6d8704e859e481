/* SPDX-License-Identifier: MIT */
/*
 * override/family.h - the malloc family's contract, checked through the C
 * library's names only (no memkit header), so that the same checks run in
 * a program linked with libmemkit-malloc (family.c) and in a plain program
 * that gets memkit through LD_PRELOAD (preload.c).
 *
 * What it proves, for malloc, calloc, realloc, reallocarray, free,
 * posix_memalign, aligned_alloc, memalign, valloc, pvalloc,
 * malloc_usable_size, free_sized, free_aligned_sized and the glibc extras:
 *  - every alignment from 1 byte to 64 KiB (and 1 and 16 MiB) is honoured
 *    by each aligned entry point, for sizes from 0 to huge; valloc and
 *    pvalloc give pages (pvalloc a whole number of them);
 *  - sizes 0 .. 64 MiB, four per power of two, give chunks with at least
 *    the requested bytes, memkit's documented alignment, and every usable
 *    byte writable without touching a neighbour;
 *  - realloc keeps the contents across size classes and into and out of
 *    large (> 32 KiB) and huge (> 1 MiB) chunks, both ways, step by step
 *    and in single jumps, aligned chunks included; realloc(p, 0) frees
 *    and returns NULL;
 *  - calloc zeroes, also memory that was just filled and freed, small,
 *    large and huge (a huge mapping served again at another size);
 *  - overflow and impossible requests fail with glibc's errno (ENOMEM, or
 *    EINVAL for a bad alignment) and leave the old chunk intact;
 *  - malloc_trim, mallopt, mallinfo, mallinfo2, malloc_stats, malloc_info
 *    answer as memkit documents (src/override/malloc.c).
 * Where memkit differs from glibc on purpose (usable size of a 1-byte
 * chunk, aligned_alloc refusing a non-power-of-two alignment as C17 and
 * glibc 2.38 do), the check follows memkit's documentation and says so;
 * mallopt and malloc_info answer as glibc does (tests/override/compat/
 * checks them against glibc itself).
 *
 * The includer defines nothing; it calls family_run_all() from main().
 * Fixed seeds; every check can fail.
 */
#ifndef OVR_FAMILY_H
#define OVR_FAMILY_H

#include "harness.h"

#include <gnu/libc-version.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* C23 names that glibc 2.36 neither declares nor defines: weak, so that a
 * plain program links, and finds memkit's through the preload (checked in
 * test_free_sized). */
void free_sized(void *p, size_t size) __attribute__((weak));
void free_aligned_sized(void *p, size_t align, size_t size)
    __attribute__((weak));

#define FAM_KiB ((size_t)1024)
#define FAM_MiB ((size_t)1024 * 1024)

/* Keep the compiler from reasoning about the value of a size. */
static size_t fam_opaque(size_t n)
{
    volatile size_t v = n;
    return v;
}

static void *fam_opaque_ptr(void *p)
{
    void *volatile v = p;
    return v;
}

static int fam_aligned(const void *p, size_t align)
{
    return ((uintptr_t)p & (align - 1)) == 0;
}

/* Is the running C library glibc @major.@minor or later? */
static int fam_glibc_at_least(unsigned major, unsigned minor)
{
    unsigned a = 0, b = 0;
    if (sscanf(gnu_get_libc_version(), "%u.%u", &a, &b) < 1)
        return 0;
    return a > major || (a == major && b >= minor);
}

/* memkit's alignment of malloc(n) (memkit.h): 8 for n <= 8 and for
 * 17..24, else 16. */
static size_t fam_malloc_align(size_t n)
{
    return (n <= 8 || (n > 16 && n <= 24)) ? 8 : 16;
}

/* Check that @p has at least @n usable bytes, and fill all of them with
 * @id's pattern. */
static void fam_fill_usable(void *p, size_t n, uint64_t id)
{
    size_t u = malloc_usable_size(p);
    CHECK_GE(u, n);
    th_fill(p, u, id);
}

/* ---- alignment ---------------------------------------------------------- */

/* One aligned chunk from entry point @how (0 posix_memalign, 1 aligned_alloc,
 * 2 memalign). */
static void *fam_aligned_alloc(int how, size_t align, size_t n)
{
    void *p = NULL;
    switch (how) {
    case 0:
        if (posix_memalign(&p, align, n) != 0)
            p = NULL;
        break;
    case 1:
        p = aligned_alloc(align, n);
        break;
    default:
        p = memalign(align, n);
        break;
    }
    return p;
}

static void test_alignments(void)
{
    static const char *names[3] = {"posix_memalign", "aligned_alloc",
                                   "memalign"};
    enum { NSIZE = 11 };
    uint64_t id = 1000;
    for (size_t align = 1; align <= 16 * FAM_MiB; align *= 2) {
        /* above 64 KiB two steps: 1 MiB (a huge chunk aligned inside its
         * mapping) and 16 MiB (more than a 4 MiB segment) */
        if (align > 64 * FAM_KiB && align != FAM_MiB && align != 16 * FAM_MiB)
            continue;
        size_t sizes[NSIZE] = {0, 1, 8, 24, 100, align - 1 ? align - 1 : 1,
                               align, align + 1, 3 * align + 5,
                               40 * FAM_KiB, 1536 * FAM_KiB};
        void *live[3][NSIZE];
        for (int how = 0; how < 3; how++) {
            for (int i = 0; i < NSIZE; i++) {
                live[how][i] = NULL;
                size_t n = sizes[i];
                if (how == 0 && align < sizeof(void *))
                    continue; /* refused: test_bad_alignment */
                if (align >= FAM_MiB && n > 4096 && i != NSIZE - 1)
                    continue; /* keep the big alignments quick */
                void *p = fam_aligned_alloc(how, align, n);
                if (!p) {
                    th_fail(__FILE__, __LINE__, "%s(%zu, %zu) failed",
                            names[how], align, n);
                    continue;
                }
                th_checks++;
                if (!fam_aligned(p, align))
                    th_fail(__FILE__, __LINE__, "%s(%zu, %zu) = %p: misaligned",
                            names[how], align, n, p);
                fam_fill_usable(p, n, id + (uint64_t)(how * NSIZE + i));
                live[how][i] = p;
            }
        }
        /* all of one alignment live at once: none overwrote another */
        for (int how = 0; how < 3; how++)
            for (int i = 0; i < NSIZE; i++)
                if (live[how][i]) {
                    CHECK_PATTERN(live[how][i],
                                  malloc_usable_size(live[how][i]),
                                  id + (uint64_t)(how * NSIZE + i));
                    free(live[how][i]);
                }
        id += 3 * NSIZE;
    }

    /* memalign rounds a non-power-of-two alignment up, as glibc does */
    static const size_t odd[] = {3, 24, 48, 100, 3000, 40000};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        size_t want = 1;
        while (want < odd[i])
            want <<= 1;
        void *p = memalign(odd[i], 10);
        REQUIRE_NOT_NULL(p);
        CHECK(fam_aligned(p, want));
        free(p);
    }
}

static void test_page_alignment(void)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    static const size_t sizes[] = {0, 1, 100, 4095, 4096, 4097, 40000,
                                   2 * 1024 * 1024 + 3};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        void *v = valloc(n);
        REQUIRE_NOT_NULL(v);
        CHECK(fam_aligned(v, page));
        fam_fill_usable(v, n, 50 + i);
        void *pv = pvalloc(n);
        REQUIRE_NOT_NULL(pv);
        CHECK(fam_aligned(pv, page));
        /* pvalloc rounds the size up to whole pages (at least one) */
        size_t rounded = n ? (n + page - 1) / page * page : page;
        fam_fill_usable(pv, rounded, 70 + i);
        CHECK_PATTERN(v, malloc_usable_size(v), 50 + i);
        CHECK_PATTERN(pv, malloc_usable_size(pv), 70 + i);
        free(v);
        free(pv);
    }
}

static void test_bad_alignment(void)
{
    void *p = (void *)&p; /* must stay untouched on failure */
    static const size_t bad[] = {0, 1, 2, 4, 3, 12, 24, 48, 4097};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        CHECK_EQ(posix_memalign(&p, bad[i], 16), EINVAL);
        CHECK_PTR_EQ(p, (void *)&p);
    }
    /* posix_memalign reports through its return value: errno untouched */
    errno = 1234;
    CHECK_EQ(posix_memalign(&p, 64, 100), 0);
    CHECK_EQ(errno, 1234);
    CHECK(fam_aligned(p, 64));
    free(p);

    /* an alignment that is not a power of two: aligned_alloc answers as
     * the running glibc does: EINVAL from 2.38 on (as C17 allows), the
     * alignment rounded up before (2.36's aligned_alloc is memalign) */
    static const size_t odd[] = {3, 0, 48, 24};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        errno = 0;
        void *q = aligned_alloc(odd[i], 96);
        if (fam_glibc_at_least(2, 38)) {
            CHECK_NULL(q);
            CHECK_ERRNO(EINVAL);
            continue;
        }
        REQUIRE_NOT_NULL(q);
        size_t want = 16;
        while (want < odd[i])
            want <<= 1;
        CHECK(fam_aligned(q, want));
        CHECK_GE(malloc_usable_size(q), 96u);
        free(q);
    }
}

/* ---- sizes -------------------------------------------------------------- */

/* Above 1 MiB a chunk is written sparsely: its first and last 64 KiB and
 * one word in every OS page in between (every page is touched, and the
 * test stays quick at 64 MiB). */
enum { FAM_DENSE = 1 << 20, FAM_EDGE = 64 << 10 };

static void fam_fill_sparse(unsigned char *p, size_t u, uint64_t id)
{
    if (u <= FAM_DENSE) {
        th_fill(p, u, id);
        return;
    }
    th_fill(p, FAM_EDGE, id);
    th_fill(p + u - FAM_EDGE, FAM_EDGE, ~id);
    for (size_t off = FAM_EDGE; off + 8 <= u - FAM_EDGE; off += 4096)
        th_fill(p + off, 8, id + off);
}

static int fam_check_sparse(const unsigned char *p, size_t u, uint64_t id)
{
    if (u <= FAM_DENSE)
        return th_verify(p, u, id) == (size_t)-1;
    if (th_verify(p, FAM_EDGE, id) != (size_t)-1 ||
        th_verify(p + u - FAM_EDGE, FAM_EDGE, ~id) != (size_t)-1)
        return 0;
    for (size_t off = FAM_EDGE; off + 8 <= u - FAM_EDGE; off += 4096)
        if (th_verify(p + off, 8, id + off) != (size_t)-1)
            return 0;
    return 1;
}

static void test_sizes(void)
{
    /* four sizes per power of two, 0 .. 64 MiB; each chunk stays live
     * while the next is allocated and written, then is checked */
    uint64_t id = 5000;
    unsigned char *prev = NULL;
    size_t prev_u = 0;
    uint64_t prev_id = 0;
    for (unsigned k = 0; k <= 26; k++) {
        size_t p2 = (size_t)1 << k;
        size_t sizes[4] = {p2 - 1, p2, p2 + p2 / 4 + 1, p2 + p2 / 2 + 3};
        for (int j = 0; j < 4; j++) {
            size_t n = fam_opaque(sizes[j]);
            if (n > 64 * FAM_MiB)
                continue;
            unsigned char *p = malloc(n);
            if (!p) {
                th_fail(__FILE__, __LINE__, "malloc(%zu) failed", n);
                continue;
            }
            th_checks++;
            if (!fam_aligned(p, fam_malloc_align(n)))
                th_fail(__FILE__, __LINE__, "malloc(%zu) = %p: not aligned "
                        "to %zu", n, (void *)p, fam_malloc_align(n));
            size_t u = malloc_usable_size(p);
            CHECK_GE(u, n);
            fam_fill_sparse(p, u, id);
            if (prev) {
                th_checks++;
                if (!fam_check_sparse(prev, prev_u, prev_id))
                    th_fail(__FILE__, __LINE__, "chunk of %zu usable bytes "
                            "changed while the next was written", prev_u);
                free(prev);
            }
            prev = p;
            prev_u = u;
            prev_id = id++;
        }
    }
    CHECK(fam_check_sparse(prev, prev_u, prev_id));
    free(prev);
}

/* malloc(0) and calloc(0, x) give unique, freeable pointers. */
static void test_zero_size(void)
{
    enum { N = 64 };
    void *ps[N];
    for (int i = 0; i < N; i++) {
        ps[i] = (i & 1) ? calloc(0, 8) : malloc(fam_opaque(0));
        REQUIRE_NOT_NULL(ps[i]);
        for (int j = 0; j < i; j++)
            CHECK(ps[j] != ps[i]);
    }
    for (int i = 0; i < N; i++)
        free(ps[i]);
    free(NULL); /* ignored */
    REQUIRE(free_sized && free_aligned_sized);
    free_sized(NULL, 0);
    free_aligned_sized(NULL, 64, 0);
    CHECK_EQ(malloc_usable_size(NULL), 0u);
}

/* Writing every usable byte of a chunk leaves its neighbours alone; the
 * usable size does not change while the chunk lives. */
static void test_usable_size(void)
{
    th_rng rng = {0x5eed0001};
    enum { N = 300 };
    static void *ps[N];
    static size_t us[N];
    for (int i = 0; i < N; i++) {
        size_t n = (size_t)th_below(&rng, 1u << (1 + th_below(&rng, 18)));
        ps[i] = malloc(n);
        REQUIRE_NOT_NULL(ps[i]);
        us[i] = malloc_usable_size(ps[i]);
        CHECK_GE(us[i], n);
        th_fill(ps[i], us[i], 20000 + (uint64_t)i);
    }
    for (int i = 0; i < N; i++) {
        CHECK_EQ(malloc_usable_size(ps[i]), us[i]);
        CHECK_PATTERN(ps[i], us[i], 20000 + (uint64_t)i);
        free(ps[i]);
    }
    /* memkit's telltale: a 1-byte chunk has 16 usable bytes (glibc: 24) */
    void *one = malloc(fam_opaque(1));
    CHECK_EQ(malloc_usable_size(one), 16u);
    free(one);
}

/* ---- realloc ------------------------------------------------------------ */

/* Resize @p from @old to @n bytes: the first min(old, n) bytes keep @id's
 * pattern; then the whole new size gets it.  Returns the new pointer. */
static void *fam_resize(void *p, size_t old, size_t n, uint64_t id, int line)
{
    void *q = realloc(p, n);
    th_checks++;
    if (!q) {
        th_fail(__FILE__, line, "realloc(%zu -> %zu) failed", old, n);
        return p;
    }
    size_t keep = old < n ? old : n;
    size_t bad = th_verify(q, keep, id);
    if (bad != (size_t)-1)
        th_fail(__FILE__, line, "realloc %zu -> %zu lost byte %zu", old, n,
                bad);
    CHECK_GE(malloc_usable_size(q), n);
    th_fill(q, n, id);
    return q;
}

static void test_realloc_steps(void)
{
    /* up through every regime and back down, with a blocker allocated
     * after each step so that growing in place is not always possible */
    static const size_t steps[] = {
        1, 8, 9, 24, 100, 1000, 4000, 16000, 32768, 32769, 60000,
        300000, 1048576, 1048577, 3145728, 9437184, 3145728, 1572864,
        1048576, 700000, 40000, 32768, 20000, 500, 16, 1};
    enum { NSTEP = sizeof steps / sizeof steps[0] };
    void *blockers[NSTEP];
    size_t old = steps[0];
    void *p = malloc(old);
    REQUIRE_NOT_NULL(p);
    th_fill(p, old, 777);
    for (int i = 1; i < NSTEP; i++) {
        p = fam_resize(p, old, steps[i], 777, __LINE__);
        old = steps[i];
        blockers[i] = malloc(steps[i] < 4096 ? steps[i] : 4096);
    }
    free(p);
    for (int i = 1; i < NSTEP; i++)
        free(blockers[i]);
}

static void test_realloc_jumps(void)
{
    /* single jumps between regimes: small, large, huge, both ways */
    static const size_t from_to[][2] = {
        {10, 5 * 1024 * 1024}, {5 * 1024 * 1024, 10},
        {10, 40000}, {40000, 10},
        {40000, 2 * 1024 * 1024}, {2 * 1024 * 1024, 40000},
        {100, 1048577}, {2 * 1024 * 1024, 3 * 1024 * 1024},
        {3 * 1024 * 1024, 1048577}, {33000, 1000000}, {1000000, 33000},
    };
    for (size_t i = 0; i < sizeof from_to / sizeof from_to[0]; i++) {
        size_t a = from_to[i][0], b = from_to[i][1];
        void *p = malloc(a);
        REQUIRE_NOT_NULL(p);
        th_fill(p, a, 900 + i);
        void *blocker = malloc(64);
        p = fam_resize(p, a, b, 900 + i, __LINE__);
        p = fam_resize(p, b, a, 900 + i, __LINE__);
        free(blocker);
        free(p);
    }

    /* aligned chunks resize like any other (the contents move with them) */
    static const size_t aligns[] = {64, 4096, 65536, 1048576};
    static const size_t ns[] = {10, 5000, 100000, 1500000};
    for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++)
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
            size_t n = ns[i];
            uint64_t id = 950 + a * 10 + i;
            void *p = aligned_alloc(aligns[a], n);
            REQUIRE_NOT_NULL(p);
            th_fill(p, n, id);
            p = fam_resize(p, n, 3 * n, id, __LINE__);
            p = fam_resize(p, 3 * n, n / 2, id, __LINE__);
            free(p);
        }

    /* realloc(NULL, n) is malloc(n); reallocarray resizes too */
    char *q = realloc(NULL, 50);
    REQUIRE_NOT_NULL(q);
    th_fill(q, 50, 42);
    q = reallocarray(q, 100, 10);
    REQUIRE_NOT_NULL(q);
    CHECK_PATTERN(q, 50, 42);
    free(q);
}

/* realloc(p, 0) frees p and returns NULL, without setting errno. */
static void test_realloc_zero(void)
{
    struct mallinfo2 before = mallinfo2();
    for (int i = 0; i < 50; i++) {
        void *p = malloc(fam_opaque(3 * FAM_MiB)); /* huge: counted */
        REQUIRE_NOT_NULL(p);
        errno = 0;
        CHECK_NULL(realloc(p, fam_opaque(0)));
        CHECK_ERRNO(0);
    }
    /* every one went back (a huge chunk is counted until freed) */
    struct mallinfo2 after = mallinfo2();
    CHECK_EQ(after.hblks, before.hblks);
    CHECK_EQ(after.hblkhd, before.hblkhd);
}

/* ---- calloc ------------------------------------------------------------- */

static void test_calloc_zeroes(void)
{
    static const size_t sizes[] = {1, 8, 16, 24, 40, 100, 256, 1000, 4096,
                                   10000, 32768, 40000, 200000, 1048576,
                                   1048577, 3 * 1024 * 1024};
    enum { PER = 16 };
    int reused = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        int per = n > 100000 ? 2 : PER;
        void *dirty[PER];
        for (int i = 0; i < per; i++) {
            dirty[i] = malloc(n);
            REQUIRE_NOT_NULL(dirty[i]);
            memset(dirty[i], 0xA5, malloc_usable_size(dirty[i]));
        }
        for (int i = 0; i < per; i++)
            free(dirty[i]);
        /* calloc right after: the freed memory is the first served */
        for (int i = 0; i < per; i++) {
            unsigned char *z = calloc(1, n);
            REQUIRE_NOT_NULL(z);
            th_checks++;
            if (!th_all_zero(z, n))
                th_fail(__FILE__, __LINE__, "calloc(1, %zu) after free: "
                        "not zero", n);
            for (int j = 0; j < per; j++)
                reused += (void *)z == dirty[j];
            dirty[i] = z;
        }
        for (int i = 0; i < per; i++)
            free(dirty[i]);
    }
    /* the test did exercise reuse of dirty memory */
    CHECK_GT(reused, 0);

    /* huge chunks: freed mappings may be kept and served again, the same
     * size, cut down, or grown (memkit's huge cache): every way, calloc
     * must clear what the last user wrote */
    static const size_t pairs[][2] = {
        {2 * FAM_MiB, 2 * FAM_MiB}, {6 * FAM_MiB, 2 * FAM_MiB + 1},
        {2 * FAM_MiB, 6 * FAM_MiB}, {8 * FAM_MiB, FAM_MiB + 1},
        {3 * FAM_MiB, 3 * FAM_MiB + 4096}, {FAM_MiB + 1, 5 * FAM_MiB},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        size_t a = pairs[i][0], b = pairs[i][1];
        unsigned char *d = malloc(fam_opaque(a));
        REQUIRE_NOT_NULL(d);
        memset(d, 0xA5, malloc_usable_size(d));
        /* and grown by realloc before it goes back */
        d = realloc(d, a + a / 2);
        REQUIRE_NOT_NULL(d);
        memset(d, 0x5A, malloc_usable_size(d));
        free(d);
        unsigned char *z = calloc(b, 1);
        REQUIRE_NOT_NULL(z);
        th_checks++;
        if (!th_all_zero(z, b))
            th_fail(__FILE__, __LINE__, "calloc(%zu) after a freed dirty "
                    "chunk of %zu: not zero", b, a + a / 2);
        free(z);
    }

    /* calloc(n, size) with the product in range */
    unsigned *a = calloc(1000, sizeof *a);
    REQUIRE_NOT_NULL(a);
    CHECK(th_all_zero(a, 1000 * sizeof *a));
    free(a);
}

/* ---- overflow and impossible requests ----------------------------------- */

static void test_overflow(void)
{
    size_t max = fam_opaque(SIZE_MAX);
    errno = 0;
    CHECK_NULL(calloc(max / 2, 3));
    CHECK_ERRNO(ENOMEM);
    errno = 0;
    CHECK_NULL(calloc(max, max));
    CHECK_ERRNO(ENOMEM);
    errno = 0;
    CHECK_NULL(calloc(fam_opaque((size_t)1 << 33), (size_t)1 << 31));
    CHECK_ERRNO(ENOMEM);
    errno = 0;
    CHECK_NULL(malloc(max));
    CHECK_ERRNO(ENOMEM);
    errno = 0;
    CHECK_NULL(malloc(max / 2));
    CHECK_ERRNO(ENOMEM);
    errno = 0;
    CHECK_NULL(malloc(max - 4095));
    CHECK_ERRNO(ENOMEM);
    errno = 0;
    CHECK_NULL(malloc((size_t)1 << 50));
    CHECK_ERRNO(ENOMEM);
    errno = 0;
    CHECK_NULL(reallocarray(NULL, max / 2, 3));
    CHECK_ERRNO(ENOMEM);
    errno = 0;
    CHECK_NULL(valloc(max));
    CHECK_ERRNO(ENOMEM);
    errno = 0;
    CHECK_NULL(pvalloc(max));
    CHECK_ERRNO(ENOMEM);
    errno = 0;
    CHECK_NULL(pvalloc(max - 4096));
    CHECK_ERRNO(ENOMEM);
    errno = 0;
    CHECK_NULL(aligned_alloc(64, max - 10));
    CHECK_ERRNO(ENOMEM);
    errno = 0;
    CHECK_NULL(memalign(FAM_MiB, max - 100));
    CHECK_ERRNO(ENOMEM);
    void *r = NULL;
    CHECK_EQ(posix_memalign(&r, 64, max), ENOMEM);
    CHECK_NULL(r);

    /* a failed resize leaves the chunk as it was (the calls get p through
     * fam_opaque_ptr: gcc cannot know that p survives a failed realloc and
     * would warn of a use after free) */
    char *p = malloc(100);
    REQUIRE_NOT_NULL(p);
    th_fill(p, 100, 31);
    errno = 0;
    CHECK_NULL(realloc(fam_opaque_ptr(p), max));
    CHECK_ERRNO(ENOMEM);
    errno = 0;
    CHECK_NULL(realloc(fam_opaque_ptr(p), (size_t)1 << 50));
    CHECK_ERRNO(ENOMEM);
    errno = 0;
    CHECK_NULL(reallocarray(fam_opaque_ptr(p), max / 2, 3));
    CHECK_ERRNO(ENOMEM);
    errno = 0;
    CHECK_NULL(reallocarray(fam_opaque_ptr(p), (size_t)1 << 40,
                            (size_t)1 << 10));
    CHECK_ERRNO(ENOMEM);
    CHECK_PATTERN(p, 100, 31);
    free(p);

    /* and the heap is still usable */
    p = malloc(1000);
    CHECK_NOT_NULL(p);
    free(p);
}

/* Alignments too large to satisfy: ENOMEM for a power of two, EINVAL for
 * what cannot be rounded to one (glibc's answers). */
static void test_huge_alignment(void)
{
    void *r = (void *)&r;
    CHECK_EQ(posix_memalign(&r, (size_t)1 << 62, 8), ENOMEM);
    CHECK_EQ(posix_memalign(&r, (size_t)1 << 63, 8), ENOMEM);
    CHECK_PTR_EQ(r, (void *)&r);
    errno = 0;
    CHECK_NULL(aligned_alloc((size_t)1 << 63, 1));
    CHECK_ERRNO(ENOMEM);
    errno = 0;
    CHECK_NULL(aligned_alloc((size_t)1 << 50, 1));
    CHECK_ERRNO(ENOMEM);
    errno = 0;
    CHECK_NULL(memalign((size_t)1 << 62, 1));
    CHECK_ERRNO(ENOMEM);
    errno = 0;
    CHECK_NULL(memalign(fam_opaque(SIZE_MAX), 1));
    CHECK_ERRNO(EINVAL);
    errno = 0;
    CHECK_NULL(memalign(((size_t)1 << 63) + 1, 1));
    CHECK_ERRNO(EINVAL);
    void *p = malloc(10);
    CHECK_NOT_NULL(p);
    free(p);
}

/* glibc rounds any alignment up to 2^63 (SIZE_MAX / 2 + 1) to a power of
 * two and then fails with ENOMEM; only larger ones are EINVAL.  (memkit
 * answered EINVAL from 2^62 + 1 on before bbf8468.) */
static void test_memalign_round_to_2_63(void)
{
    errno = 0;
    CHECK_NULL(memalign(((size_t)1 << 62) + 1, 1));
    CHECK_ERRNO(ENOMEM);
    errno = 0;
    CHECK_NULL(memalign(((size_t)3 << 61), 1));
    CHECK_ERRNO(ENOMEM);
}

/* ---- free_sized, free_aligned_sized ------------------------------------- */

static void test_free_sized(void)
{
    /* memkit defines both (glibc 2.36 has neither) */
    REQUIRE(free_sized && free_aligned_sized);
    /* counted through mallinfo2's huge figures: each free must return */
    struct mallinfo2 m0 = mallinfo2();
    void *a = malloc(fam_opaque(2 * FAM_MiB));
    void *b = aligned_alloc(4096, fam_opaque(2 * FAM_MiB));
    REQUIRE(a && b);
    struct mallinfo2 m1 = mallinfo2();
    CHECK_EQ(m1.hblks, m0.hblks + 2);
    free_sized(a, 2 * FAM_MiB);
    free_aligned_sized(b, 4096, 2 * FAM_MiB);
    struct mallinfo2 m2 = mallinfo2();
    CHECK_EQ(m2.hblks, m0.hblks);
    CHECK_EQ(m2.hblkhd, m0.hblkhd);

    /* and small ones, many times over (a chunk not freed would make the
     * loop grow the heap by 128 MiB) */
    size_t before = m2.uordblks;
    for (int i = 0; i < 4096; i++) {
        void *s = malloc(fam_opaque(16 * FAM_KiB));
        void *t = aligned_alloc(256, fam_opaque(16 * FAM_KiB));
        REQUIRE(s && t);
        free_sized(s, 16 * FAM_KiB);
        free_aligned_sized(t, 256, 16 * FAM_KiB);
    }
    CHECK_LT(mallinfo2().uordblks, before + 4 * FAM_MiB);
}

/* ---- glibc's extras ----------------------------------------------------- */

static void test_mallinfo(void)
{
    struct mallinfo2 m0 = mallinfo2();
    char *big = malloc(fam_opaque(8 * FAM_MiB));
    REQUIRE_NOT_NULL(big);
    memset(big, 1, 8 * FAM_MiB);
    struct mallinfo2 m1 = mallinfo2();
    CHECK_EQ(m1.hblks, m0.hblks + 1);
    CHECK_GE(m1.hblkhd, m0.hblkhd + 8 * FAM_MiB);
    /* glibc's meanings: a block with a mapping of its own is in hblkhd
     * only, not in uordblks (uordblks + hblkhd counts it once) */
    CHECK_LT(m1.uordblks, m0.uordblks + FAM_MiB);
    /* mallinfo (ints) tells the same while the figures fit */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    struct mallinfo old = mallinfo();
#pragma GCC diagnostic pop
    CHECK_EQ((size_t)old.hblks, m1.hblks);
    CHECK_EQ((size_t)old.hblkhd, m1.hblkhd);
    free(big);
    struct mallinfo2 m2 = mallinfo2();
    CHECK_EQ(m2.hblks, m0.hblks);
    CHECK_EQ(m2.hblkhd, m0.hblkhd);

    /* a large chunk (in a segment) shows in uordblks and in the arena */
    char *large = malloc(fam_opaque(512 * FAM_KiB));
    REQUIRE_NOT_NULL(large);
    struct mallinfo2 m3 = mallinfo2();
    CHECK_GE(m3.uordblks, m2.uordblks + 512 * FAM_KiB);
    CHECK_GE(m3.arena, 512 * FAM_KiB);
    CHECK_GE(m3.arena, m3.uordblks);
    free(large);

    /* a large chunk whose page commits only part of its range (70000
     * bytes: found by review, fordblks wrapped below zero): the figures
     * stay consistent, used + free = arena */
    char *part = malloc(fam_opaque(70000));
    REQUIRE_NOT_NULL(part);
    struct mallinfo2 m4 = mallinfo2();
    CHECK_LE(m4.fordblks, m4.arena);
    CHECK_LE(m4.uordblks, m4.arena);
    CHECK_EQ(m4.uordblks + m4.fordblks, m4.arena);
    free(part);
}

static void test_trim_opt(void)
{
    int r = malloc_trim(0);
    CHECK(r == 0 || r == 1);
    /* nothing freed since: nothing to give back */
    CHECK_EQ(malloc_trim(0), 0);
    /* mallopt tunes glibc's arenas: memkit accepts and ignores every
     * parameter with glibc's answer (1; 0 for M_MXFAST above 160) */
    CHECK_EQ(mallopt(M_MMAP_THRESHOLD, 1 << 20), 1);
    CHECK_EQ(mallopt(M_TRIM_THRESHOLD, 1 << 20), 1);
    CHECK_EQ(mallopt(M_ARENA_MAX, 1), 1);
    CHECK_EQ(mallopt(12345, 1), 1);
    CHECK_EQ(mallopt(M_MXFAST, 161), 0);
}

static void fam_print_stats(void *arg)
{
    (void)arg;
    void *p = malloc(fam_opaque(3 * FAM_MiB));
    malloc_stats();
    free(p);
}

static void test_malloc_stats(void)
{
    char out[4096];
    int st = th_run_child(fam_print_stats, NULL, out, sizeof out);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK_STR_HAS(out, "memkit: os_committed_bytes ");
    CHECK_STR_HAS(out, "memkit: huge_chunks 1\n");
    CHECK_STR_HAS(out, "memkit: segments ");
}

static void test_malloc_info(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    REQUIRE_NOT_NULL(f);
    void *big = malloc(fam_opaque(2 * FAM_MiB));
    CHECK_EQ(malloc_info(0, f), 0);
    fclose(f);
    CHECK_STR_HAS(buf, "<malloc version=\"memkit-");
    CHECK_STR_HAS(buf, "<total type=\"mmap\" count=\"");
    CHECK_STR_HAS(buf, "</malloc>");
    free(buf);
    free(big);
    errno = 0;
    CHECK_EQ(malloc_info(1, stdout), EINVAL); /* glibc: the value, not errno */
    CHECK_EQ(errno, 0);
}

/* Every test above; the includer's main() calls it. */
static void family_run_all(void)
{
    RUN(test_alignments);
    RUN(test_page_alignment);
    RUN(test_bad_alignment);
    RUN(test_sizes);
    RUN(test_zero_size);
    RUN(test_usable_size);
    RUN(test_realloc_steps);
    RUN(test_realloc_jumps);
    RUN(test_realloc_zero);
    RUN(test_calloc_zeroes);
    RUN(test_overflow);
    RUN(test_huge_alignment);
    RUN(test_memalign_round_to_2_63);
    RUN(test_free_sized);
    RUN(test_mallinfo);
    RUN(test_trim_opt);
    RUN(test_malloc_stats);
    RUN(test_malloc_info);
}

#endif /* OVR_FAMILY_H */
