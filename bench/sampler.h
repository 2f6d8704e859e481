/* SPDX-License-Identifier: MIT */
/*
 * sampler.h - a process's resident memory over time, sampled from inside:
 * a thread that reads /proc/self/statm every 10 ms into a static array.
 * W3 uses it in both of its children (memkit-bench-malloc's `w3` under
 * each drop-in, memkit-bench's in-process `--child w3`).
 *
 * It never calls malloc - pread on a descriptor opened once, a parser
 * written by hand, a static array, clock_nanosleep on absolute deadlines -
 * so it changes nothing in the allocator it watches; its thread's stack
 * (mmap'ed by the C library, a few KiB touched) is the same for every
 * allocator.  Creating the thread may call malloc once (the C library's
 * thread set-up), before the workload starts.  One sampler per process.
 */
#ifndef BENCH_SAMPLER_H
#define BENCH_SAMPLER_H

#include <stdint.h>

#define BENCH_SAMPLER_PERIOD_NS 10000000ull /* 10 ms */

/** Start sampling (tagging samples with phase 0); 0, or -1 if statm cannot
 *  be read or the thread cannot be started. */
int bench_sampler_start(void);

/** Tag the samples from now on with @p phase (a workload's own numbers). */
void bench_sampler_phase(int phase);

/** This process's RSS in KiB now (0 if unknown); allocates nothing. */
uint32_t bench_sampler_rss_kib(void);

/** This process's peak RSS (VmHWM) in KiB (0 if unknown); allocates
 *  nothing. */
uint32_t bench_sampler_hwm_kib(void);

/** Stop the thread and wait for it. */
void bench_sampler_stop(void);

/** The first sample taken at or after monotonic time @p t_ns (bench_now_ns),
 *  in KiB, or 0 if there is none. */
uint32_t bench_sampler_at(uint64_t t_ns);

/** How many samples were taken. */
unsigned bench_sampler_count(void);

/** Write every sample to @p fd as "t_ms rss_kib phase", t from @p t0_ns,
 *  the phase by @p names[phase]. */
void bench_sampler_trace(int fd, uint64_t t0_ns, const char *const *names);

#endif /* BENCH_SAMPLER_H */
