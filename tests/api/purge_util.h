/* SPDX-License-Identifier: MIT */
/*
 * api/purge_util.h - what the tests of memory going back (purge.c,
 * purge_runtime.c, trim.c) measure, and how they wait for it.
 *
 * A snapshot (pu_snap) holds memkit's figures (mk_process_stats: committed
 * and reserved bytes, segments, system calls, purged bytes and passes) and
 * the process's resident memory (th_rss_bytes).  Resident memory is only
 * meaningful in the plain builds: the sanitizers keep shadow memory for
 * every byte touched and never give it back, so PU_RSS is 0 there and the
 * tests then check memkit's own figures alone (they still run: the purge
 * thread is what TSan should see).
 *
 * A peak (pu_peak) is N chunks of one size, each filled (pu_fill: every
 * OS page written, so that it is resident; th_fill's pattern at the
 * start, a byte of the chunk's own on every page, which pu_intact checks
 * cheaply even under the sanitizers), made without a single free (a
 * program's growth alone must start the purge thread) and
 * kept in a static array: a test that waits for memory to come back must
 * not allocate meanwhile, since an allocation or a free would run the
 * purge paths itself and hide a background thread that does nothing.
 *
 * pu_wait() polls every 5 ms, with a deadline, until a condition on the
 * figures holds, and returns the seconds it took (or -1): the tests assert
 * that memory comes back before a generous deadline and print how long it
 * took, never that it took some exact time.
 *
 * pu_threads_named() counts the threads of this process whose name
 * (/proc/self/task/T/comm) is @name: the purge thread is "memkit-purge".
 */
#ifndef MK_TEST_PURGE_UTIL_H
#define MK_TEST_PURGE_UTIL_H

#include "respawn.h"

#include <dirent.h>
#include <memkit.h>

#define MiB ((size_t)1 << 20)
/* Chunk sizes whose place does not depend on the build: the checking
 * build adds a tail to every chunk, which would make a 960 KiB request
 * huge (a mapping of its own) and a 64 KiB one take a 128 KiB run.
 * PU_LARGE is a large chunk (a run of 896 units in a segment, four to a
 * segment), PU_PAGE fills one 64 KiB page. */
#define PU_LARGE ((size_t)896 << 10)
#define PU_PAGE ((size_t)63 << 10)

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PU_RSS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define PU_RSS 0
#endif
#endif
#ifndef PU_RSS
#define PU_RSS 1
#endif
/* ThreadSanitizer refuses to start a thread in the child of a fork from a
 * multi-threaded process: the fork test is skipped under it. */
#if defined(__SANITIZE_THREAD__)
#define PU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PU_TSAN 1
#endif
#endif
#ifndef PU_TSAN
#define PU_TSAN 0
#endif

typedef struct pu_snap {
    mk_process_figures f;
    size_t rss;
} pu_snap;

static pu_snap pu_now(void)
{
    pu_snap s;
    mk_process_stats(&s.f);
    s.rss = th_rss_bytes();
    return s;
}

static void pu_print(const char *what, const pu_snap *s)
{
    printf("  %-14s committed %6zu KiB  rss %6zu KiB  reserved %6zu KiB  "
           "segments %3zu  calls %5zu  purged %7zu KiB  passes %zu\n",
           what, s->f.os_committed >> 10, s->rss >> 10, s->f.os_reserved >> 10,
           s->f.segments, s->f.os_calls, s->f.purged_bytes >> 10,
           s->f.purge_passes);
    fflush(stdout);
}

#define PU_MAX_CHUNKS 4096
static void *pu_chunks[PU_MAX_CHUNKS];
static size_t pu_nchunks;

#define PU_HEAD 256

/* Write every byte of chunk @p (@size >= PU_HEAD bytes) for chunk @id. */
static void pu_fill(void *p, size_t size, uint64_t id)
{
    memset(p, (int)(id % 251) + 1, size);
    th_fill(p, PU_HEAD, id);
}

/* Does chunk @p still hold what pu_fill wrote (its head, and one byte in
 * every 4 KiB)? */
static int pu_intact(const void *p, size_t size, uint64_t id)
{
    const unsigned char *c = p;
    if (th_verify(c, PU_HEAD, id) != (size_t)-1)
        return 0;
    for (size_t off = PU_HEAD; off < size; off += 4096)
        if (c[off] != (unsigned char)(id % 251 + 1))
            return 0;
    return c[size - 1] == (unsigned char)(id % 251 + 1);
}

/* Allocate @total bytes in chunks of @size in @ctx, each filled
 * (pu_fill), without freeing anything; returns the number of chunks (0 if
 * one failed). */
static size_t pu_peak(mk_ctx *ctx, size_t size, size_t total)
{
    pu_nchunks = 0;
    for (size_t i = 0; i < total / size && i < PU_MAX_CHUNKS; i++) {
        void *p = mk_alloc(ctx, size);
        if (!p)
            return 0;
        pu_fill(p, size, i);
        pu_chunks[pu_nchunks++] = p;
    }
    return pu_nchunks;
}

/* Free the peak's chunks, except every @keep_every-th (0: free all). */
static void pu_free_peak(size_t keep_every)
{
    for (size_t i = 0; i < pu_nchunks; i++)
        if (!keep_every || i % keep_every != 0) {
            mk_free(pu_chunks[i]);
            pu_chunks[i] = NULL;
        }
}

typedef int (*pu_cond)(const pu_snap *now, const void *arg);

/* Poll until @cond holds or @deadline_s passed; returns the seconds since
 * @t0, or -1 on the deadline.  *@last gets the last snapshot. */
static double pu_wait(pu_cond cond, const void *arg, double t0,
                      double deadline_s, pu_snap *last)
{
    for (;;) {
        *last = pu_now();
        double t = rs_now() - t0;
        if (cond(last, arg))
            return t;
        if (t > deadline_s)
            return -1;
        rs_sleep_ms(5);
    }
}

/* Limits for pu_below: every non-zero field is an upper bound, but
 * @purged, a lower bound: committed bytes fall during a pass, purged_bytes
 * moves at its end, so waiting for both waits for the pass to be over. */
typedef struct pu_limits {
    size_t committed, rss, reserved;
    size_t purged;
} pu_limits;

static int pu_below(const pu_snap *s, const void *arg)
{
    const pu_limits *l = arg;
    return (!l->committed || s->f.os_committed <= l->committed) &&
           (!l->rss || !PU_RSS || s->rss <= l->rss) &&
           (!l->reserved || s->f.os_reserved <= l->reserved) &&
           s->f.purged_bytes >= l->purged;
}

static int pu_threads_named(const char *name)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(comm, sizeof comm, f)) {
            comm[strcspn(comm, "\n")] = '\0';
            n += strcmp(comm, name) == 0;
        }
        fclose(f);
    }
    closedir(d);
    return n;
}

#endif /* MK_TEST_PURGE_UTIL_H */
