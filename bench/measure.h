/* SPDX-License-Identifier: MIT */
/*
 * measure.h - the one run loop every timed workload uses, so the method is
 * written once: each allocator runs the same kernel on the same job; the
 * allocators alternate run by run (memkit, malloc, memkit, malloc, ...) so
 * that drift - frequency, a noisy neighbour, the heap's history - touches
 * both; each figure is the median of the runs, in ns per operation.
 */
#ifndef BENCH_MEASURE_H
#define BENCH_MEASURE_H

#include "alloc_iface.h"
#include "report.h"

#define BENCH_MAX_RUNS 99

/**
 * Run @p kernel_for[a] on @p job @p runs times for every usable allocator a
 * that joins @p needs (BJ_*), alternating, and record ns/op in @p row.  An
 * allocator that fails (NULL) is dropped from the row with a note; kernels
 * whose checksums differ between allocators or runs get a note too (the
 * data read back was not the data written).
 * @return 0, or -1 if something was noted.
 */
int bench_measure(bench_row *row, unsigned needs, const bench_kernel_fn *kernel_for,
                  const void *job, int runs);

/**
 * As bench_measure, for a kernel that also times @p nparts parts of its
 * phase (bench_sample.part_ns): rows[0] gets ns/ops, rows[1 + k] gets
 * part_ns[k]/ops, all from the same runs.
 */
int bench_measure_parts(bench_row **rows, int nparts, unsigned needs,
                        const bench_kernel_fn *kernel_for, const void *job, int runs);

#endif /* BENCH_MEASURE_H */
