/* SPDX-License-Identifier: MIT */
/*
 * override/preload.c - a plain program, linked with the C library only and
 * knowing nothing of memkit, run with LD_PRELOAD=libmemkit-malloc.so.
 *
 * First it proves that the preload took, so that nothing below passes by
 * testing glibc's malloc instead:
 *  - libmemkit-malloc is mapped into the process (/proc/self/maps);
 *  - malloc_usable_size(malloc(1)) is 16 (memkit's smallest class; glibc's
 *    smallest chunk gives 24), also for memory the C library allocates
 *    itself (strdup("")), so libc's internal calls reach memkit too;
 *  - malloc_info() writes memkit's version tag.
 * Then it runs every check of family.h (the malloc family's contract) and
 * exercises the C library's own users of malloc on the drop-in: strdup,
 * asprintf, getline, open_memstream, fopen/fclose, opendir/readdir, qsort,
 * and threads that allocate and hand their chunks to the main thread.
 *
 * Run without the preload it fails at once (it is not a test of glibc).
 * Fixed seeds; about a second.
 */
#include "family.h"

#include <dirent.h>
#include <pthread.h>

/* ---- the preload took --------------------------------------------------- */

static void test_preload_took(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    REQUIRE_NOT_NULL(f);
    char line[4096];
    int found = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, "libmemkit-malloc"))
            found = 1;
    fclose(f);
    th_checks++;
    if (!found)
        th_fail(__FILE__, __LINE__, "libmemkit-malloc is not mapped: was "
                "the test run with LD_PRELOAD=libmemkit-malloc.so?");

    void *one = malloc(fam_opaque(1));
    CHECK_EQ(malloc_usable_size(one), 16u); /* glibc: 24 */
    free(one);
    char *s = strdup(""); /* the C library's own malloc call */
    REQUIRE_NOT_NULL(s);
    CHECK_EQ(malloc_usable_size(s), 16u);
    free(s);

    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    REQUIRE_NOT_NULL(m);
    CHECK_EQ(malloc_info(0, m), 0);
    fclose(m);
    CHECK_STR_HAS(buf, "memkit-");
    free(buf);
}

/* ---- the C library's own allocations ------------------------------------ */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void test_libc_users(void)
{
    /* strdup, strndup, asprintf: freed by the program */
    char *d = strdup("memkit drop-in");
    char *nd = strndup("memkit drop-in", 6);
    char *as = NULL;
    CHECK(asprintf(&as, "%s-%d-%0100d", "x", 42, 7) > 0);
    REQUIRE(d && nd && as);
    CHECK_STR_EQ(d, "memkit drop-in");
    CHECK_STR_EQ(nd, "memkit");
    CHECK_EQ(strlen(as), 105u);
    free(d);
    free(nd);
    free(as);

    /* getline grows its buffer with realloc */
    char *text = NULL;
    size_t tlen = 0;
    FILE *w = open_memstream(&text, &tlen);
    REQUIRE_NOT_NULL(w);
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 20000 * (i + 1); j++)
            fputc('a' + i, w);
        fputc('\n', w);
    }
    fclose(w);
    CHECK_EQ(tlen, 120003u);
    FILE *r = fmemopen(text, tlen, "r");
    REQUIRE_NOT_NULL(r);
    char *lbuf = NULL;
    size_t lcap = 0;
    for (int i = 0; i < 3; i++) {
        ssize_t n = getline(&lbuf, &lcap, r);
        CHECK_EQ(n, (ssize_t)(20000 * (i + 1) + 1));
        CHECK_EQ(lbuf[0], 'a' + i);
        CHECK_EQ(lbuf[n - 2], 'a' + i);
    }
    CHECK_GE(malloc_usable_size(lbuf), lcap);
    free(lbuf);
    fclose(r);
    free(text);

    /* opendir allocates a 32 KiB buffer */
    DIR *dir = opendir("/proc/self");
    REQUIRE_NOT_NULL(dir);
    int entries = 0;
    while (readdir(dir))
        entries++;
    closedir(dir);
    CHECK_GT(entries, 10);

    /* qsort of a big array takes a temporary buffer from malloc */
    enum { N = 200000 };
    uint64_t *v = malloc(N * sizeof *v);
    REQUIRE_NOT_NULL(v);
    th_rng rng = {0x5eed0003};
    for (int i = 0; i < N; i++)
        v[i] = th_rand(&rng);
    qsort(v, N, sizeof *v, cmp_u64);
    int sorted = 1;
    for (int i = 1; i < N; i++)
        sorted &= v[i - 1] <= v[i];
    CHECK(sorted);
    free(v);
}

/* ---- threads ------------------------------------------------------------ */

enum { THREADS = 4, PER_THREAD = 2000 };
static void *handed[THREADS][PER_THREAD];

static void *alloc_thread(void *arg)
{
    int t = (int)(intptr_t)arg;
    th_rng rng = {0x5eed0100 + (uint64_t)t};
    for (int i = 0; i < PER_THREAD; i++) {
        size_t n = 1 + (size_t)th_below(&rng, 3000);
        void *p = malloc(n);
        if (!p)
            return (void *)1;
        if (malloc_usable_size(p) < n)
            return (void *)2;
        th_fill(p, n, (uint64_t)(t * PER_THREAD + i));
        handed[t][i] = p;
        if (i % 2) { /* churn of its own */
            void *q = calloc(1, n);
            if (!q || !th_all_zero(q, n))
                return (void *)3;
            free(q);
        }
    }
    return NULL;
}

/* Threads allocate; the main thread verifies and frees (remote frees). */
static void test_threads(void)
{
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        REQUIRE(pthread_create(&th[t], NULL, alloc_thread,
                               (void *)(intptr_t)t) == 0);
    for (int t = 0; t < THREADS; t++) {
        void *ret = (void *)-1;
        pthread_join(th[t], &ret);
        CHECK_NULL(ret);
    }
    th_rng rng[THREADS];
    for (int t = 0; t < THREADS; t++)
        rng[t].s = 0x5eed0100 + (uint64_t)t;
    for (int t = 0; t < THREADS; t++) {
        for (int i = 0; i < PER_THREAD; i++) {
            size_t n = 1 + (size_t)th_below(&rng[t], 3000);
            CHECK_PATTERN(handed[t][i], n, (uint64_t)(t * PER_THREAD + i));
            free(handed[t][i]);
        }
    }
}

int main(void)
{
    RUN(test_preload_took);
    family_run_all();
    RUN(test_libc_users);
    RUN(test_threads);
    return th_done();
}
