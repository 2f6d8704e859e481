/* SPDX-License-Identifier: MIT */
/*
 * sys.c - the bench's own dealings with the OS (see sys.h): /proc readers,
 * CPU pinning, pre-faulted mmap buffers.
 *
 * Nothing here runs inside a timed phase.  The readers parse /proc by hand
 * with fixed buffers so that reading the RSS does not itself allocate
 * through the allocator being measured.
 */
#include "sys.h"

#include <fcntl.h>
#include <gnu/libc-version.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* Read up to len-1 bytes of @path into @buf; 0 on failure. */
static size_t read_file(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    size_t got = 0;
    while (got + 1 < len) {
        ssize_t r = read(fd, buf + got, len - 1 - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    buf[got] = '\0';
    return got;
}

/* The value after "key:" in a /proc file of "key: value" lines, copied
 * into @out (trimmed); 0 if absent. */
static int proc_field(const char *path, const char *key, char *out, size_t len)
{
    static char buf[1 << 16];
    if (!read_file(path, buf, sizeof buf))
        return 0;
    size_t klen = strlen(key);
    for (char *line = buf; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        if (strncmp(line, key, klen) != 0)
            continue;
        char *v = line + klen;
        while (*v == ' ' || *v == '\t')
            v++;
        if (*v != ':')
            continue;
        v++;
        while (*v == ' ' || *v == '\t')
            v++;
        size_t n = strcspn(v, "\n");
        if (n >= len)
            n = len - 1;
        memcpy(out, v, n);
        out[n] = '\0';
        return 1;
    }
    return 0;
}

static size_t meminfo_bytes(const char *key)
{
    char v[64];
    if (!proc_field("/proc/meminfo", key, v, sizeof v))
        return 0;
    return (size_t)strtoull(v, NULL, 10) * 1024; /* "123456 kB" */
}

size_t bench_sys_mem_available(void)
{
    return meminfo_bytes("MemAvailable");
}

double bench_sys_load(void)
{
    char buf[128];
    double load;
    if (!read_file("/proc/loadavg", buf, sizeof buf) || sscanf(buf, "%lf", &load) != 1)
        return -1;
    return load;
}

/* The busy and total jiffies of all CPUs (the "cpu" line of /proc/stat). */
static int cpu_jiffies(unsigned long long *busy, unsigned long long *total)
{
    char buf[512];
    unsigned long long v[8] = {0};
    if (!read_file("/proc/stat", buf, sizeof buf) ||
        sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
               &v[4], &v[5], &v[6], &v[7]) < 4)
        return -1;
    *total = 0;
    for (int i = 0; i < 8; i++)
        *total += v[i];
    *busy = *total - v[3] - v[4]; /* less idle and iowait */
    return 0;
}

double bench_sys_busy(double secs)
{
    unsigned long long b0, t0, b1, t1;
    if (cpu_jiffies(&b0, &t0) != 0)
        return -1;
    struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
    nanosleep(&ts, NULL);
    if (cpu_jiffies(&b1, &t1) != 0 || t1 <= t0)
        return -1;
    return (double)(b1 - b0) / (double)(t1 - t0) * (double)sysconf(_SC_NPROCESSORS_ONLN);
}

size_t bench_sys_rss(void)
{
    char buf[256];
    if (!read_file("/proc/self/statm", buf, sizeof buf))
        return 0;
    unsigned long long size = 0, resident = 0;
    if (sscanf(buf, "%llu %llu", &size, &resident) != 2)
        return 0;
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

void bench_sys_cpu(char *buf, size_t len)
{
    snprintf(buf, len, "unknown CPU");
    if (!proc_field("/proc/cpuinfo", "model name", buf, len))
        proc_field("/proc/cpuinfo", "Processor", buf, len);
}

void bench_sys_describe(FILE *out, int pinned_cpu)
{
    char model[256];
    bench_sys_cpu(model, sizeof model);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    fprintf(out, "machine:    %s, nproc %ld", model, online);
    if (pinned_cpu >= 0)
        fprintf(out, " (bench pinned to CPU %d)", pinned_cpu);
    fprintf(out, "\n");
    fprintf(out, "memory:     %.1f GiB total, %.1f GiB available; page size %ld\n",
            meminfo_bytes("MemTotal") / 1073741824.0,
            meminfo_bytes("MemAvailable") / 1073741824.0, sysconf(_SC_PAGESIZE));
#ifdef __OPTIMIZE__
    const char *opt = "optimised";
#else
    const char *opt = "NOT OPTIMISED: figures are meaningless, build with -O2";
#endif
    fprintf(out, "software:   glibc %s; bench compiled by %s %s (%s)\n",
            gnu_get_libc_version(),
#if defined(__clang__)
            "clang",
#else
            "gcc",
#endif
            __VERSION__, opt);
}

void bench_sys_date(char *buf, size_t len)
{
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%d %H:%M:%S %Z", &tm);
}

static cpu_set_t unpinned; /* the CPU set before bench_sys_pin */
static int have_unpinned;

int bench_sys_pin(void)
{
    int cpu = sched_getcpu();
    if (cpu < 0)
        return -1;
    have_unpinned = sched_getaffinity(0, sizeof unpinned, &unpinned) == 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set) == 0 ? cpu : -1;
}

void bench_sys_unpin(void)
{
    if (have_unpinned)
        sched_setaffinity(0, sizeof unpinned, &unpinned);
}

void *bench_buf_new(size_t bytes)
{
    if (bytes == 0)
        bytes = 1;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "memkit-bench: cannot map %zu bytes for the bench's own arrays\n", bytes);
        exit(2);
    }
    return p;
}

void bench_buf_free(void *p, size_t bytes)
{
    if (p)
        munmap(p, bytes ? bytes : 1);
}
