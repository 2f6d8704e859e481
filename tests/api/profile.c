/* SPDX-License-Identifier: MIT */
/*
 * api/profile.c - the sampled heap profile (docs/PROFILE.md), read back
 * from its own dumps as a user's tool would read them.
 *
 * Accuracy: three allocation sites hold 60%, 30% and 10% of the live bytes
 * of one context, in sizes from 16 B to 1 MiB; the profile's shares by
 * stack are within 5 points at the default rate and exact at rate 1.
 * Leaks: at rate 1, a context that keeps 3 known blocks shows exactly
 * those 3.  Frees, resets, deletes and reallocs leave no sample behind;
 * 8 threads that allocate and free across threads keep their contents and
 * end with an empty table.  The profile is switched on at run time
 * (mk_option_set), so the contexts made after it are profiled; a profile
 * never switched on is no profile (ENOTSUP).  Sites are told apart by
 * the return addresses in their stacks: each site is a function of its
 * own, and a frame belongs to the site whose code it lies in.
 */
#include "harness.h"

#include <memkit.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

/* ---- reading a dump ------------------------------------------------------------ */

typedef struct site_sum {
    double bytes[4]; /* per site (0: none of them), from the folded file */
    long live_count; /* the heap file's header */
    long long live_bytes;
    long stacks;
} site_sum;

/* (the empty asm after the call: no tail call, so each site has a frame;
 * noipa: nor is it merged with its identical twins) */
#define SITE(name)                                                            \
    __attribute__((noinline, noipa)) static void *name(mk_ctx *c, size_t n)  \
    {                                                                         \
        void *p = mk_alloc(c, n);                                             \
        __asm__ volatile("" : : "r"(p) : "memory");                           \
        return p;                                                             \
    }
SITE(site_a)
SITE(site_b)
SITE(site_c)

/* Which site's code holds return address @a (0: none): the nearest site
 * below it, within 256 bytes (each is a few instructions). */
static int site_of(uintptr_t a)
{
    uintptr_t s[3] = {(uintptr_t)site_a, (uintptr_t)site_b, (uintptr_t)site_c};
    int best = 0;
    uintptr_t at = 0;
    for (int i = 0; i < 3; i++)
        if (a > s[i] && a - s[i] < 256 && s[i] >= at) {
            at = s[i];
            best = i + 1;
        }
    return best;
}

/* Dump now under @name and read the live figures back: the heap file's
 * header, and the folded file's bytes per site for the stacks whose
 * context path is @ctx_path (NULL: any). */
static int read_dump(const char *name, const char *ctx_path, site_sum *out)
{
    memset(out, 0, sizeof *out);
    char prefix[128], path[160];
    snprintf(prefix, sizeof prefix, "%s/%s", dir, name);
    if (mk_profile_dump(prefix) != 0)
        return -1;
    snprintf(path, sizeof path, "%s.heap", prefix);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long tc;
    long long tb;
    int ok = fscanf(f, "heap profile: %ld: %lld [%ld: %lld]", &out->live_count,
                    &out->live_bytes, &tc, &tb) == 4;
    fclose(f);
    if (!ok)
        return -1;
    snprintf(path, sizeof path, "%s.folded", prefix);
    f = fopen(path, "r");
    if (!f)
        return -1;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        char *sp = strrchr(line, ' ');
        if (!sp)
            continue;
        double bytes = atof(sp + 1);
        *sp = '\0';
        char *semi = strchr(line, ';');
        if (semi)
            *semi = '\0';
        if (ctx_path && strcmp(line, ctx_path) != 0)
            continue;
        out->stacks++;
        int site = 0;
        for (char *t = semi ? semi + 1 : NULL; t && *t && !site;) {
            site = site_of((uintptr_t)strtoull(t, &t, 16));
            if (*t == ';')
                t++;
        }
        out->bytes[site] += bytes;
    }
    fclose(f);
    return 0;
}

/* ---- accuracy ------------------------------------------------------------------------ */

/* A size from 16 B to 1 MiB, uniform in its logarithm. */
static size_t some_size(th_rng *r)
{
    unsigned bits = 4 + (unsigned)th_below(r, 17); /* 2^4 .. 2^20 */
    size_t lo = (size_t)1 << bits;
    return lo + (size_t)th_below(r, lo) / 2;
}

typedef struct held {
    void **p;
    size_t n, cap;
} held;

static void keep(held *h, void *p)
{
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 1024;
        h->p = realloc(h->p, h->cap * sizeof *h->p);
    }
    h->p[h->n++] = p;
}

/* Fill context @c until the sites hold @total bytes in shares 60/30/10,
 * freeing half of what each makes along the way (churn); returns the
 * bytes each holds. */
static void fill(mk_ctx *c, size_t total, held *h, size_t want_out[3], uint64_t seed)
{
    th_rng r = {seed};
    const double share[3] = {0.6, 0.3, 0.1};
    void *(*site[3])(mk_ctx *, size_t) = {site_a, site_b, site_c};
    for (int s = 0; s < 3; s++) {
        size_t want = (size_t)(share[s] * (double)total), have = 0;
        while (have < want) {
            size_t n = some_size(&r);
            if (n > want - have)
                n = want - have < 16 ? 16 : want - have;
            void *p = site[s](c, n);
            if (!p)
                break;
            memset(p, s + 1, n < 64 ? n : 64);
            if (th_below(&r, 2)) { /* churn: freed at once */
                mk_free(p);
                continue;
            }
            keep(h, p);
            have += n;
        }
        want_out[s] = have;
    }
}

static void test_off_is_enotsup(void)
{
    errno = 0;
    CHECK_EQ(mk_profile_dump(NULL), -1);
    CHECK_ERRNO(ENOTSUP);
}

static void check_shares(const site_sum *s, const size_t truth[3], double tol,
                         const char *what)
{
    double est = s->bytes[1] + s->bytes[2] + s->bytes[3];
    double all = (double)(truth[0] + truth[1] + truth[2]);
    for (int i = 0; i < 3; i++) {
        double got = est > 0 ? 100 * s->bytes[i + 1] / est : 0;
        double want = 100 * (double)truth[i] / all;
        if (!(got > want - tol && got < want + tol))
            fprintf(stderr, "%s: site %d holds %.2f%% of the estimate, %.2f%% in truth\n",
                    what, i, got, want);
        CHECK(got > want - tol && got < want + tol);
    }
    CHECK(s->bytes[0] == 0); /* every stack of the context is one of them */
}

static void test_shares_default_rate(void)
{
    CHECK_EQ(mk_option_set("profile_rate", 512 << 10), 0);
    mk_ctx *c = mk_ctx_new(NULL, "accuracy", MK_GENERAL, NULL);
    REQUIRE(c);
    held h = {0};
    size_t truth[3];
    fill(c, (size_t)256 << 20, &h, truth, 12345);
    site_sum s;
    REQUIRE(read_dump("default", "accuracy", &s) == 0);
    CHECK(s.stacks >= 3);
    check_shares(&s, truth, 5.0, "rate 512 KiB");
    /* the estimate of the whole is near the truth too (a sanity bound) */
    double est = s.bytes[1] + s.bytes[2] + s.bytes[3];
    double all = (double)(truth[0] + truth[1] + truth[2]);
    CHECK(est > 0.85 * all && est < 1.15 * all);
    mk_ctx_delete(c);
    free(h.p);
    /* the delete took the samples with it */
    REQUIRE(read_dump("default-gone", "accuracy", &s) == 0);
    CHECK_EQ(s.stacks, 0);
}

static void test_shares_rate_1_exact(void)
{
    CHECK_EQ(mk_option_set("profile_rate", 1), 0);
    mk_ctx *c = mk_ctx_new(NULL, "exact", MK_GENERAL, NULL);
    REQUIRE(c);
    held h = {0};
    size_t truth[3];
    fill(c, (size_t)24 << 20, &h, truth, 777);
    site_sum s;
    REQUIRE(read_dump("exact", "exact", &s) == 0);
    for (int i = 0; i < 3; i++)
        CHECK_EQ((long long)(s.bytes[i + 1] + 0.5), (long long)truth[i]);
    CHECK(s.bytes[0] == 0);
    /* free them all: nothing of the context is left in the table */
    for (size_t i = 0; i < h.n; i++)
        mk_free(h.p[i]);
    REQUIRE(read_dump("exact-freed", "exact", &s) == 0);
    CHECK_EQ(s.stacks, 0);
    mk_ctx_delete(c);
    free(h.p);
}

/* ---- leaks, resets, reallocs ------------------------------------------------------------- */

SITE(leaky)

static void test_leaks_exactly_three(void)
{
    CHECK_EQ(mk_option_set("profile_rate", 1), 0);
    mk_ctx *top = mk_ctx_new(NULL, "server", MK_GENERAL, NULL);
    mk_ctx *c = mk_ctx_new(top, "leaky", MK_GENERAL, NULL);
    REQUIRE(top && c);
    void *lost[3] = {leaky(c, 40), leaky(c, 3000), leaky(c, 200000)};
    for (int i = 0; i < 10000; i++) /* what is freed is no leak */
        mk_free(leaky(c, (size_t)(i % 700) + 1));
    site_sum s;
    REQUIRE(read_dump("leaks", "server/leaky", &s) == 0);
    CHECK_EQ(s.stacks, 3); /* three calls, three return addresses */
    double all = s.bytes[0] + s.bytes[1] + s.bytes[2] + s.bytes[3];
    CHECK_EQ((long long)(all + 0.5), 40 + 3000 + 200000);
    mk_free(lost[0]);
    REQUIRE(read_dump("leaks-2", "server/leaky", &s) == 0);
    CHECK_EQ(s.stacks, 2);
    all = s.bytes[0] + s.bytes[1] + s.bytes[2] + s.bytes[3];
    CHECK_EQ((long long)(all + 0.5), 3000 + 200000);
    (void)lost;
    mk_ctx_delete(top);
}

static void test_reset_and_realloc_drop_samples(void)
{
    CHECK_EQ(mk_option_set("profile_rate", 1), 0);
    const mk_kind kinds[3] = {MK_GENERAL, MK_GENERATION, MK_BUMP};
    for (int k = 0; k < 3; k++) {
        mk_ctx *c = mk_ctx_new(NULL, "resettable", kinds[k], NULL);
        REQUIRE(c);
        for (int round = 0; round < 3; round++) {
            for (int i = 0; i < 500; i++)
                CHECK_NOT_NULL(mk_alloc(c, (size_t)(i * 37 % 5000) + 1));
            site_sum s;
            REQUIRE(read_dump("reset", "resettable", &s) == 0);
            CHECK(s.bytes[0] > 0);
            mk_ctx_reset(c);
            REQUIRE(read_dump("reset-2", "resettable", &s) == 0);
            CHECK_EQ(s.stacks, 0); /* the reset took them all */
        }
        mk_ctx_delete(c);
    }
    /* a realloc replaces its sample: what is live is the new size only */
    mk_ctx *c = mk_ctx_new(NULL, "realloc", MK_GENERAL, NULL);
    REQUIRE(c);
    char *p = mk_alloc(c, 100);
    REQUIRE(p);
    for (size_t n = 200; n < (size_t)4 << 20; n *= 3) {
        p = mk_realloc(p, n);
        REQUIRE(p);
    }
    site_sum s;
    REQUIRE(read_dump("realloc", "realloc", &s) == 0);
    CHECK_EQ(s.stacks, 1);
    size_t last = 200;
    while (last * 3 < (size_t)4 << 20)
        last *= 3;
    CHECK_EQ((long long)(s.bytes[0] + 0.5), (long long)last);
    mk_free(p);
    REQUIRE(read_dump("realloc-2", "realloc", &s) == 0);
    CHECK_EQ(s.stacks, 0);
    mk_ctx_delete(c);
}

/* ---- threads ---------------------------------------------------------------------------- */

enum { THREADS = 8, SLOTS = 4096, ROUNDS = 60000 };
static _Atomic(void *) ring[SLOTS];
static _Atomic int failures;

/* A chunk of @n bytes holds @n in its first word and n's low byte after. */
static int intact(const unsigned char *p)
{
    size_t n;
    memcpy(&n, p, sizeof n);
    if (n < 16 || n >= 16 + 3000)
        return 0;
    for (size_t j = sizeof n; j < n; j++)
        if (p[j] != (unsigned char)n)
            return 0;
    return 1;
}

static void *worker(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    th_rng r = {id * 7919 + 1};
    mk_ctx *c = mk_ctx_new(NULL, "worker", MK_GENERAL, NULL);
    for (int i = 0; i < ROUNDS && c; i++) {
        size_t n = 16 + (size_t)th_below(&r, 3000);
        unsigned char *p = mk_alloc(c, n);
        if (!p) {
            atomic_fetch_add(&failures, 1);
            break;
        }
        memcpy(p, &n, sizeof n);
        memset(p + sizeof n, (unsigned char)n, n - sizeof n);
        /* swap it into the ring; whatever was there (any thread's) is
         * checked and freed here: cross-thread frees */
        unsigned char *old = atomic_exchange(&ring[th_below(&r, SLOTS)], (void *)p);
        if (old) {
            if (!intact(old))
                atomic_fetch_add(&failures, 1);
            mk_free(old);
        }
    }
    return c; /* its chunks may still be in the ring: deleted at the end */
}

static void test_threads_table_stays_true(void)
{
    CHECK_EQ(mk_option_set("profile_rate", 4096), 0);
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        REQUIRE(pthread_create(&t[i], NULL, worker, (void *)i) == 0);
    mk_ctx *ctxs[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], (void **)&ctxs[i]);
    CHECK_EQ(atomic_load(&failures), 0);
    site_sum s;
    REQUIRE(read_dump("threads", "worker", &s) == 0);
    CHECK(s.stacks > 0); /* the ring still holds samples */
    for (int k = 0; k < SLOTS; k++) {
        void *p = atomic_exchange(&ring[k], NULL);
        if (p)
            mk_free(p);
    }
    REQUIRE(read_dump("threads-2", "worker", &s) == 0);
    CHECK_EQ(s.stacks, 0); /* no freed chunk is still a sample */
    for (int i = 0; i < THREADS; i++) {
        mk_ctx_set_owner(ctxs[i]);
        mk_ctx_delete(ctxs[i]);
    }
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/memkit-profile-test.%d", (int)getpid());
    if (mkdir(dir, 0700) != 0) {
        perror(dir);
        return 1;
    }
    RUN(test_off_is_enotsup);
    CHECK_EQ(mk_option_set("profile", 1), 0);
    RUN(test_shares_default_rate);
    RUN(test_shares_rate_1_exact);
    RUN(test_leaks_exactly_three);
    RUN(test_reset_and_realloc_drop_samples);
    RUN(test_threads_table_stays_true);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return th_done();
}
