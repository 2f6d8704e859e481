/* SPDX-License-Identifier: MIT */
/*
 * timing.c - the clock and the statistics of repeated runs.
 *
 * Every figure the bench prints is the median of several runs, because the
 * median ignores the odd run that an interrupt, a page-cache flush or a
 * frequency change made slow, where the mean would absorb it.  The minimum
 * and maximum go to the CSV so the spread of a figure can be judged.
 */
#include "timing.h"

#include <stdlib.h>
#include <time.h>

uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, int n)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void bench_minmax(const double *v, int n, double *min, double *max)
{
    *min = *max = n > 0 ? v[0] : 0;
    for (int i = 1; i < n; i++) {
        if (v[i] < *min)
            *min = v[i];
        if (v[i] > *max)
            *max = v[i];
    }
}
