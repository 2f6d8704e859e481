/* SPDX-License-Identifier: MIT */
/*
 * large.c - W8, large blocks: `ops` iterations, each freeing the oldest of
 * `live` (default 4) blocks and allocating a new one of a random size
 * between 64 KiB and 32 MiB, log-uniform (a power-of-two octave drawn
 * uniformly from 64 KiB..16 MiB, then a size uniform within it), and
 * touching it: one write per 4 KiB page, as a program filling a buffer
 * would.  The timed figure is the whole loop; each iteration's cost is
 * dominated by how the allocator gets and returns big blocks: glibc maps
 * and unmaps blocks above its (dynamic) mmap threshold and pays the page
 * faults of every fresh mapping; an allocator that keeps freed pages
 * mapped (jemalloc, mimalloc, tcmalloc, memkit's segments) avoids the
 * faults but holds more memory - the peak RSS of the run says how much.
 *
 * Before freeing a block the first byte of each page is read back into the
 * checksum (the same for every allocator) and the stamp at both ends is
 * checked.
 */
#include <stdlib.h>

#include "wl.h"

#define W8_MAX_LIVE 64
#define W8_PAGE 4096u

static uint64_t read_back(unsigned char *b, size_t size, uint64_t *bad)
{
    uint64_t sum = 0;
    for (size_t off = 8; off < size - 8; off += W8_PAGE)
        sum += b[off];
    wl_unstamp(b, size, &sum, bad);
    return sum;
}

void wl_w8(const wl_params *p, wl_result *r)
{
    const size_t live = p->live ? (size_t)p->live : 4;
    if (live > W8_MAX_LIVE) {
        r->error = "w8: live > 64";
        return;
    }
    unsigned char *blk[W8_MAX_LIVE] = {0};
    size_t sz[W8_MAX_LIVE] = {0};
    uint64_t rng = wl_rng_seed(p->seed, 8), sum = 0, bad = 0;

    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < p->ops; i++) {
        size_t k = (size_t)(i % live);
        if (blk[k]) {
            sum += read_back(blk[k], sz[k], &bad);
            free(blk[k]);
        }
        size_t base = (size_t)64 * 1024 << (wl_rng(&rng) % 9); /* 64 KiB..16 MiB */
        size_t size = base + (size_t)(wl_rng(&rng) % base);
        unsigned char *b = malloc(size);
        if (BENCH_UNLIKELY(!b)) {
            r->error = "malloc returned NULL";
            return;
        }
        for (size_t off = 8; off < size - 8; off += W8_PAGE)
            b[off] = (unsigned char)(i + off / W8_PAGE);
        wl_stamp(b, size, i);
        blk[k] = b;
        sz[k] = size;
    }
    for (size_t k = 0; k < live; k++) {
        if (blk[k]) {
            sum += read_back(blk[k], sz[k], &bad);
            free(blk[k]);
        }
    }
    r->ns = bench_now_ns() - t0;
    r->ops = p->ops;
    r->check = sum;
    r->bad = bad;
}
