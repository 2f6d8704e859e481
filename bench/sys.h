/* SPDX-License-Identifier: MIT */
/*
 * sys.h - the bench's own dealings with the operating system: describing
 * the machine, reading resident memory, pinning to a CPU, and the buffers
 * the workloads keep their pointer arrays in.
 *
 * Those buffers come straight from mmap, pre-faulted, so that neither
 * allocator under test pays for (or is disturbed by) the bench's
 * bookkeeping: a 64 MiB array of pointers made with malloc would change
 * glibc's heap between runs, and faulting it in would land in a timed phase.
 */
#ifndef BENCH_SYS_H
#define BENCH_SYS_H

#include <stddef.h>
#include <stdio.h>

/** Print the machine lines of the report header (CPU, CPUs, memory, libc,
 *  compiler) to @p out; @p pinned_cpu is shown if >= 0. */
void bench_sys_describe(FILE *out, int pinned_cpu);

/** The CPU's model name ("AMD EPYC ...") into @p buf. */
void bench_sys_cpu(char *buf, size_t len);

/** The local date and time as "YYYY-MM-DD HH:MM:SS TZ" into @p buf. */
void bench_sys_date(char *buf, size_t len);

/** The 1-minute load average (/proc/loadavg), or -1 if unknown: above 0
 *  while the bench starts, other work shares the CPUs and adds noise. */
double bench_sys_load(void);

/** How many CPUs' worth of work other processes did over the next @p secs
 *  seconds (from /proc/stat; the caller sleeps meanwhile, so its own share
 *  is nil), or -1 if unknown.  Unlike the load average this does not
 *  remember the minute before - the build `make bench` runs first. */
double bench_sys_busy(double secs);

/** MemAvailable from /proc/meminfo in bytes (0 if unknown). */
size_t bench_sys_mem_available(void);

/** Resident set size of this process in bytes (/proc/self/statm). */
size_t bench_sys_rss(void);

/** Pin the process to the CPU it runs on now (less migration noise).
 *  @return the CPU, or -1 if that was not possible. */
int bench_sys_pin(void);

/** Give the calling process back the CPUs it had before bench_sys_pin()
 *  (a child about to exec a multi-threaded workload); async-signal-safe,
 *  for use between fork and exec. */
void bench_sys_unpin(void);

/** @p bytes of zeroed, pre-faulted memory outside every allocator under
 *  test; exits with a message if the OS refuses. */
void *bench_buf_new(size_t bytes);
void bench_buf_free(void *p, size_t bytes);

#endif /* BENCH_SYS_H */
