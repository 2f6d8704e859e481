/* SPDX-License-Identifier: MIT */
/*
 * override/thp.c - transparent huge pages under huge chunks (page/huge.c,
 * the thp option): the fresh mapping of a huge chunk that malloc hands out
 * is advised for them (its kernel mapping shows "hg" in /proc/self/smaps),
 * calloc's and mk_alloc_zero's are not (a program may use their zeroes
 * sparsely, and a huge page makes a touched byte cost 2 MiB), and with
 * mk_option_set("thp", 0) no mapping is.  mk_trim() before each request
 * empties the cache of freed mappings, so that each one is fresh.  Skipped
 * where the kernel has no transparent huge pages or the system turned
 * them off ("never").  With thp "all" (2), the segments made once
 * memkit holds four are advised too, and a purge takes the advice back.
 * memkit's own behaviour: glibc advises nothing unless its hugetlb
 * tunable asks it to.
 */
#include "harness.h"
#include "option.h"

#include <memkit.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK ((size_t)8 << 20)

/* Can a mapping be advised at all here? */
static int thp_possible(void)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f)
        return 0;
    char line[128] = "";
    int ok = fgets(line, sizeof line, f) != NULL && !strstr(line, "[never]");
    fclose(f);
    return ok;
}

/* 1 if the kernel mapping holding @p is advised for huge pages, 0 if not,
 * -1 if no mapping holds it. */
static int advised(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    CHECK(f != NULL);
    if (!f)
        return -1;
    char line[512];
    int inside = 0, answer = -1;
    while (answer < 0 && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char c;
        if (line[strspn(line, "0123456789abcdef")] == '-' &&
            sscanf(line, "%lx-%lx %c", &lo, &hi, &c) == 3)
            inside = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        else if (inside && strncmp(line, "VmFlags:", 8) == 0)
            answer = strstr(line, " hg") != NULL;
    }
    fclose(f);
    return answer;
}

/* A huge chunk from @how (0 malloc, 1 calloc, 2 mk_alloc_zero) in a fresh
 * mapping, written through; returns whether its mapping is advised. */
static int fresh_chunk_advised(int how)
{
    mk_trim(); /* no cached mapping to reuse */
    char *p = how == 0 ? malloc(CHUNK)
              : how == 1 ? calloc(1, CHUNK)
                         : mk_alloc_zero(mk_ctx_current(), CHUNK);
    CHECK(p != NULL);
    if (!p)
        return -1;
    int a = advised(p);
    CHECK(a >= 0);
    size_t dirty = 0;
    for (size_t i = 0; i < CHUNK; i += 4096) { /* zero (calloc's), then written */
        dirty += how != 0 && p[i] != 0;
        p[i] = 1;
    }
    CHECK_EQ(dirty, 0);
    free(p);
    return a;
}

static void test_malloc_advised(void) { CHECK_EQ(fresh_chunk_advised(0), 1); }

static void test_zeroed_not_advised(void)
{
    CHECK_EQ(fresh_chunk_advised(1), 0);
    CHECK_EQ(fresh_chunk_advised(2), 0);
    /* and the request after a calloc is advised again */
    CHECK_EQ(fresh_chunk_advised(0), 1);
}

static void test_option_off(void)
{
    CHECK_EQ(th_option("thp"), 1); /* the default */
    CHECK_EQ(mk_option_set("thp", 0), 0);
    CHECK_EQ(fresh_chunk_advised(0), 0);
    CHECK_EQ(mk_option_set("thp", 1), 0);
    CHECK_EQ(fresh_chunk_advised(0), 1);
}

/* With thp "all", the segments made once memkit holds four are advised
 * too; a purge takes the advice back (khugepaged would fill in what it
 * gave back); with "on" (the default) no segment is. */
enum { SMALL = 2000, NSMALL = (64 << 20) / SMALL };
static char *small[NSMALL];

/* How many of the segments holding small[] are advised, and how many
 * segments they are. */
static int segments_advised(int *segments)
{
    uintptr_t last = 0;
    int n = 0, adv = 0;
    for (int i = 0; i < NSMALL; i++) {
        uintptr_t seg = (uintptr_t)small[i] & ~(((uintptr_t)4 << 20) - 1);
        if (seg == last)
            continue;
        last = seg;
        n++;
        adv += advised(small[i]) == 1;
    }
    *segments = n;
    return adv;
}

static int fill_small(void)
{
    int bad = 0;
    for (int i = 0; i < NSMALL; i++) {
        small[i] = malloc(SMALL);
        bad += small[i] == NULL;
        if (small[i])
            memset(small[i], 1, SMALL);
    }
    return bad;
}

static void free_small(void)
{
    for (int i = 0; i < NSMALL; i++)
        free(small[i]);
}

static void test_segments(void)
{
    int segs = 0;
    mk_trim();
    CHECK_EQ(fill_small(), 0); /* "on": huge chunks only */
    CHECK_EQ(segments_advised(&segs), 0);
    CHECK(segs >= 8);
    free_small();
    mk_trim(); /* the segments go back: the next fill makes new ones */
    CHECK_EQ(mk_option_set("thp", 2), 0);
    CHECK_EQ(fill_small(), 0);
    int adv = segments_advised(&segs);
    CHECK(adv >= segs - 5); /* all but those made while four or fewer were held */
    CHECK(adv >= 3);
    free_small();
    mk_trim(); /* gives every segment's memory back, advice first */
    CHECK_EQ(segments_advised(&segs), 0);
    CHECK_EQ(mk_option_set("thp", 1), 0);
}

int main(void)
{
    if (!thp_possible()) {
        printf("[ SKIP ] no transparent huge pages on this system\n");
        return 77; /* ctest: skipped, not passed having checked nothing */
    }
    RUN(test_malloc_advised);
    RUN(test_zeroed_not_advised);
    RUN(test_option_off);
    RUN(test_segments);
    return th_done();
}
