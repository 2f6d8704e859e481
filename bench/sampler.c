/* SPDX-License-Identifier: MIT */
/*
 * sampler.c - RSS over time from inside the process (see sampler.h).
 *
 * The thread keeps absolute deadlines (one every BENCH_SAMPLER_PERIOD_NS
 * from its start), so a late wake-up does not shift the samples after it.
 * Samples go into a static array of 4096 (40 s at 10 ms; later ones are
 * dropped); the count is published with release order, so a reader that
 * loads it with acquire order sees the samples it counts.  statm's second
 * field is the resident set in pages: the same figure as VmRSS.
 */
#include "sampler.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "timing.h"

#define MAX_SAMPLES 4096

static struct {
    uint64_t t;
    uint32_t kib;
    uint32_t phase;
} samples[MAX_SAMPLES];
static atomic_uint nsamples;
static atomic_int stop, phase;
static int statm_fd = -1;
static long page_kib = 4;
static pthread_t thread;

uint32_t bench_sampler_rss_kib(void)
{
    char buf[128];
    ssize_t got = statm_fd >= 0 ? pread(statm_fd, buf, sizeof buf - 1, 0) : -1;
    if (got <= 0)
        return 0;
    buf[got] = '\0';
    const char *s = buf;
    while (*s && *s != ' ')
        s++;
    while (*s == ' ')
        s++;
    unsigned long long pages = 0;
    while (*s >= '0' && *s <= '9')
        pages = pages * 10 + (unsigned)(*s++ - '0');
    return (uint32_t)(pages * (unsigned long long)page_kib);
}

uint32_t bench_sampler_hwm_kib(void)
{
    static char buf[8192];
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t got = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (got <= 0)
        return 0;
    buf[got] = '\0';
    const char *v = strstr(buf, "VmHWM:");
    if (!v)
        return 0;
    v += 6;
    while (*v == ' ' || *v == '\t')
        v++;
    uint32_t kib = 0;
    while (*v >= '0' && *v <= '9')
        kib = kib * 10 + (uint32_t)(*v++ - '0');
    return kib;
}

static void record(void)
{
    unsigned i = atomic_load_explicit(&nsamples, memory_order_relaxed);
    if (i >= MAX_SAMPLES)
        return;
    samples[i].t = bench_now_ns();
    samples[i].kib = bench_sampler_rss_kib();
    samples[i].phase = (uint32_t)atomic_load_explicit(&phase, memory_order_relaxed);
    atomic_store_explicit(&nsamples, i + 1, memory_order_release);
}

static void *sampler_main(void *arg)
{
    (void)arg;
    uint64_t next = bench_now_ns();
    while (!atomic_load_explicit(&stop, memory_order_acquire)) {
        record();
        next += BENCH_SAMPLER_PERIOD_NS;
        struct timespec ts = {(time_t)(next / 1000000000ull), (long)(next % 1000000000ull)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0) {
            /* EINTR: sleep on */
        }
    }
    return NULL;
}

int bench_sampler_start(void)
{
    statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (statm_fd < 0 || !bench_sampler_rss_kib())
        return -1;
    long ps = sysconf(_SC_PAGESIZE);
    page_kib = ps >= 1024 ? ps / 1024 : 4;
    atomic_store(&stop, 0);
    atomic_store(&phase, 0);
    atomic_store(&nsamples, 0);
    return pthread_create(&thread, NULL, sampler_main, NULL) == 0 ? 0 : -1;
}

void bench_sampler_phase(int ph)
{
    atomic_store_explicit(&phase, ph, memory_order_relaxed);
}

void bench_sampler_stop(void)
{
    atomic_store_explicit(&stop, 1, memory_order_release);
    pthread_join(thread, NULL);
}

unsigned bench_sampler_count(void)
{
    return atomic_load_explicit(&nsamples, memory_order_acquire);
}

uint32_t bench_sampler_at(uint64_t t_ns)
{
    unsigned n = bench_sampler_count();
    for (unsigned i = 0; i < n; i++)
        if (samples[i].t >= t_ns)
            return samples[i].kib;
    return 0;
}

void bench_sampler_trace(int fd, uint64_t t0_ns, const char *const *names)
{
    char line[96];
    unsigned n = bench_sampler_count();
    for (unsigned i = 0; i < n; i++) {
        long long ms = ((long long)samples[i].t - (long long)t0_ns) / 1000000;
        snprintf(line, sizeof line, "%6lld ms %8u KiB %s\n", ms, samples[i].kib,
                 names[samples[i].phase]);
        if (write(fd, line, strlen(line)) < 0)
            break;
    }
}
