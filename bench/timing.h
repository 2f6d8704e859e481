/* SPDX-License-Identifier: MIT */
/*
 * timing.h - the clock, the median, and the barriers that keep the measured
 * work from being optimised away.
 *
 * The clock is CLOCK_MONOTONIC in nanoseconds (vDSO, ~20 ns a read): the
 * workloads read it twice per timed phase, never per operation, so its cost
 * vanishes in phases of millions of operations.
 *
 * bench_escape(p) tells the compiler that @p escapes into code it cannot see
 * and that all memory may be read or written there: every store before it
 * must happen and every load after it must really load.  It emits no
 * instruction.  It is what stops the compiler from deleting a
 * malloc/write/read/free sequence whose result it could compute (GCC removes
 * unused malloc/free pairs).  Both allocators' loops use it identically.
 */
#ifndef BENCH_TIMING_H
#define BENCH_TIMING_H

#include <stdint.h>

/** Monotonic time in nanoseconds. */
uint64_t bench_now_ns(void);

/** The median of @p v[0..n) (mean of the middle two when n is even); @p v is
 *  sorted in place.  0 for n == 0. */
double bench_median(double *v, int n);

/** Smallest and largest of @p v[0..n). */
void bench_minmax(const double *v, int n, double *min, double *max);

static inline void bench_escape(const void *p)
{
    __asm__ volatile("" : : "r"(p) : "memory");
}

#define BENCH_LIKELY(x) __builtin_expect(!!(x), 1)
#define BENCH_UNLIKELY(x) __builtin_expect(!!(x), 0)

#endif /* BENCH_TIMING_H */
