/*
 * peak.h - W3's kernel, FORM's sort buffers: a peak of large buffers, then
 * long work with small objects, then a quiet phase - does resident memory
 * come back down after the peak, how soon, and what does giving it back
 * cost?  Written once for both of W3's children: memkit-bench-malloc's
 * `w3` (malloc/free under each drop-in, peak.c) and memkit-bench's
 * in-process `--child w3 ALLOCATOR` (a context's alloc/free, w3_peak.c).
 * The allocator comes in as two functions that the caller passes as
 * constants, so that after inlining every call is a direct one (as the
 * in-process kernels, alloc_iface.h).
 *
 *  1. peak    `live` bytes (default 512 MiB) of 1 MiB buffers, each
 *             allocated and touched (one write per 4 KiB page: all
 *             resident), stamped at both ends;
 *  2. free    every buffer, after reading back a byte of every 16th page;
 *  3. churn   `ring` bytes (default 8 MiB) of 64-byte objects: the ring is
 *             filled, then `ops` times the oldest object is freed and a
 *             new one allocated and stamped - the long work with small
 *             objects that follows FORM's sort;
 *  4. quiet   no allocation at all: a sleep of `quiet_ms` (default 500)
 *             after the churn, longer if need be so that the process lives
 *             at least 1 s (and 3 samples) past the peak; then the ring is
 *             read back and freed, untimed.
 *
 * RSS over time comes from the sampler (sampler.h: a thread reading
 * /proc/self/statm every 10 ms, allocating nothing), started before the
 * peak; the kernel reads statm itself at the exact ends of the phases.
 * The figures, in the line's " key=value" form (r->extra):
 *   rss1s_kib     the first sample 1 s or more after the peak (the moment
 *                 the last buffer was touched): the claim's "within 1 s
 *                 after the peak";
 *   churn_kib     RSS at the end of the churn (8 MiB of objects live);
 *   quiet_kib     RSS at the end of the quiet phase;
 *   peak_us, free_us   wall time of the peak and the free phases;
 *   churn_cpu_us  CPU time of the whole process (all threads) during the
 *                 churn; other_cpu_us the part of it not spent by the main
 *                 thread (an allocator's background thread - memkit's purge
 *                 passes - and the sampler's few hundred microseconds);
 *   slice_med_us  the median time of the churn's slices of 1M free+alloc:
 *                 its steady pace, which neither a one-time cost (a purge
 *                 pass, the kernel freeing pages) nor a burst of noise
 *                 moves, where the churn's total includes both;
 * and r->ns = the churn phase (fill + ops, wall time), r->ops = the
 * allocations in it (fill + ops).  The peak RSS is the caller's VmHWM.
 * `trace=1` prints every sample on stderr ("t_ms rss_kib phase", t from
 * the start of the peak).
 *
 * The pointer arrays are mmap'ed and pre-faulted before the sampler
 * starts: outside every allocator, the same for all.
 */
#ifndef BENCH_MALLOC_PEAK_H
#define BENCH_MALLOC_PEAK_H

#include <stdio.h>
#include <sys/mman.h>
#include <time.h>

#include "../sampler.h"
#include "wl.h"

#define W3_BUF ((size_t)1 << 20) /* the peak's buffers */
#define W3_OBJ 64u               /* the churn's objects */
#define W3_PAGE 4096u
#define W3_MAX_BUFS 8192u        /* 8 GiB of buffers */
#define W3_MAX_RING (1u << 22)   /* 256 MiB of 64-byte objects */
#define W3_SLICE 1000000u        /* the churn is timed by slices of 1M too */
#define W3_MAX_SLICES 1024u

enum { W3_PH_PEAK, W3_PH_FREE, W3_PH_CHURN, W3_PH_QUIET };

/* CPU time of the whole process or of the calling thread, in ns. */
static inline uint64_t w3_cpu_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void w3_sleep_until(uint64_t t)
{
    struct timespec ts = {(time_t)(t / 1000000000ull), (long)(t % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0) {
        /* EINTR: sleep on */
    }
}

static inline void *w3_array(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* The kernel; @alloc and @free_ must be constants at the call site (and
 * @ctx what they take: a context, or nothing for malloc). */
static inline __attribute__((always_inline)) void
w3_kernel(const wl_params *p, wl_result *r, void *(*alloc)(void *ctx, size_t size),
          void (*free_)(void *ctx, void *ptr, size_t size), void *ctx)
{
    static char extra[320];
    static const char *const names[] = {"peak", "free", "churn", "quiet"};
    const size_t nbuf = (size_t)(p->live / W3_BUF);
    const size_t nring = (size_t)(p->ring / W3_OBJ);
    if (!nbuf || nbuf > W3_MAX_BUFS || !nring || nring > W3_MAX_RING) {
        r->error = "w3: live must be 1 MiB..8 GiB and ring 64 B..256 MiB";
        return;
    }
    unsigned char **bufs = w3_array(nbuf * sizeof *bufs);
    void **ring = w3_array(nring * sizeof *ring);
    double *slices = w3_array(W3_MAX_SLICES * sizeof *slices);
    unsigned nslices = 0;
    if (!bufs || !ring || !slices) {
        r->error = "w3: mmap of the pointer arrays failed";
        return;
    }
    if (bench_sampler_start() != 0) {
        r->error = "w3: cannot sample /proc/self/statm (no sampler thread)";
        return;
    }
    uint64_t sum = 0, bad = 0, t_peak = 0, t_churn = 0, t_end = 0;
    uint64_t cpu0 = 0, cpu1 = 0, main0 = 0, main1 = 0;
    uint32_t churn_kib = 0, quiet_kib = 0;

    /* 1. the peak */
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < nbuf; i++) {
        unsigned char *b = alloc(ctx, W3_BUF);
        if (BENCH_UNLIKELY(!b)) {
            r->error = "allocation failed (peak)";
            goto out;
        }
        for (size_t off = 8; off < W3_BUF - 8; off += W3_PAGE)
            b[off] = (unsigned char)(i + off / W3_PAGE);
        wl_stamp(b, W3_BUF, i);
        bufs[i] = b;
    }
    t_peak = bench_now_ns();

    /* 2. free it all */
    bench_sampler_phase(W3_PH_FREE);
    for (size_t i = 0; i < nbuf; i++) {
        unsigned char *b = bufs[i];
        for (size_t off = 8; off < W3_BUF - 8; off += W3_PAGE * 16)
            sum += b[off];
        wl_unstamp(b, W3_BUF, &sum, &bad);
        free_(ctx, b, W3_BUF);
        bufs[i] = NULL;
    }

    /* 3. churn */
    bench_sampler_phase(W3_PH_CHURN);
    t_churn = bench_now_ns();
    cpu0 = w3_cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
    main0 = w3_cpu_ns(CLOCK_THREAD_CPUTIME_ID);
    for (size_t k = 0; k < nring; k++) {
        void *o = alloc(ctx, W3_OBJ);
        if (BENCH_UNLIKELY(!o)) {
            r->error = "allocation failed (churn)";
            goto out;
        }
        wl_stamp(o, W3_OBJ, k);
        ring[k] = o;
    }
    size_t at = 0;
    uint64_t t_slice = bench_now_ns();
    for (uint64_t i = 0; i < p->ops; i++) {
        void *old = ring[at];
        wl_unstamp(old, W3_OBJ, &sum, &bad);
        free_(ctx, old, W3_OBJ);
        void *o = alloc(ctx, W3_OBJ);
        if (BENCH_UNLIKELY(!o)) {
            ring[at] = NULL;
            r->error = "allocation failed (churn)";
            goto out;
        }
        wl_stamp(o, W3_OBJ, nring + i);
        ring[at] = o;
        if (++at == nring)
            at = 0;
        if (BENCH_UNLIKELY((i + 1) % W3_SLICE == 0) && nslices < W3_MAX_SLICES) {
            uint64_t t = bench_now_ns();
            slices[nslices++] = (double)(t - t_slice);
            t_slice = t;
        }
    }
    t_end = bench_now_ns();
    main1 = w3_cpu_ns(CLOCK_THREAD_CPUTIME_ID);
    cpu1 = w3_cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
    churn_kib = bench_sampler_rss_kib();

    /* 4. quiet: no allocation, until 1 s (and 3 samples) past the peak at
     * least */
    bench_sampler_phase(W3_PH_QUIET);
    uint64_t until = t_end + p->quiet_ms * 1000000ull;
    if (until < t_peak + 1000000000ull + 3 * BENCH_SAMPLER_PERIOD_NS)
        until = t_peak + 1000000000ull + 3 * BENCH_SAMPLER_PERIOD_NS;
    w3_sleep_until(until);
    quiet_kib = bench_sampler_rss_kib();

out:
    bench_sampler_stop();
    for (size_t k = 0; k < nring; k++) { /* after the measurement: untimed */
        if (ring[k]) {
            wl_unstamp(ring[k], W3_OBJ, &sum, &bad);
            free_(ctx, ring[k], W3_OBJ);
        }
    }
    for (size_t i = 0; i < nbuf; i++) /* only after an error */
        if (bufs[i])
            free_(ctx, bufs[i], W3_BUF);
    uint32_t rss1s = bench_sampler_at(t_peak + 1000000000ull);
    if (!r->error && !rss1s)
        r->error = "w3: no RSS sample 1 s after the peak";
    if (!r->error && p->trace)
        bench_sampler_trace(2, t0, names);
    if (!r->error) {
        snprintf(extra, sizeof extra,
                 " rss1s_kib=%u churn_kib=%u quiet_kib=%u peak_us=%llu free_us=%llu "
                 "churn_cpu_us=%llu other_cpu_us=%llu slice_med_us=%.1f samples=%u",
                 rss1s, churn_kib, quiet_kib, (unsigned long long)(t_peak - t0) / 1000,
                 (unsigned long long)(t_churn - t_peak) / 1000,
                 (unsigned long long)(cpu1 - cpu0) / 1000,
                 (unsigned long long)(cpu1 - cpu0 > main1 - main0 ? cpu1 - cpu0 - (main1 - main0)
                                                                 : 0) / 1000,
                 bench_median(slices, (int)nslices) / 1000, bench_sampler_count());
        r->extra = extra;
        r->ns = t_end - t_churn;
        r->ops = nring + p->ops;
        r->check = sum;
        r->bad = bad;
    }
    munmap(slices, W3_MAX_SLICES * sizeof *slices);
    munmap(ring, nring * sizeof *ring);
    munmap(bufs, nbuf * sizeof *bufs);
}

#endif /* BENCH_MALLOC_PEAK_H */
