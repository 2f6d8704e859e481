/* SPDX-License-Identifier: MIT */
/*
 * fuzz/fuzz.h - what memkit's libFuzzer targets share: a reader that turns
 * the fuzz input into choices, fill patterns that prove a chunk's bytes are
 * its own, the alignment rules of memkit.h, and the check that stops the
 * run (libFuzzer then saves the input that broke a rule).
 *
 * The reader hands out bytes of the input and zeros once it is exhausted;
 * the targets stop when the input is used up, so every input is a finite
 * program of operations and a shorter input is a shorter program (what
 * libFuzzer's minimiser needs).
 *
 * Fill patterns: byte i of a chunk with id @id is a function of (id, i),
 * so a chunk handed out twice, a copy that lost bytes, a write by memkit
 * into a live chunk (a free-list link stored in the wrong place) all show.
 * Chunks up to 64 KiB are filled whole; larger ones at their first and last
 * 4 KiB and 8 bytes in every 64 KiB between (touching every page of
 * megabytes on every operation would make each run slow, and the fuzzer's
 * speed is its coverage).
 *
 * FZ_CHECK prints the rule that broke and the operation number, with what
 * the flight recorder holds (fuzz/record.h: the operation, the last calls
 * into memkit, the modes; the ring of inputs written out), then aborts: a
 * crash to libFuzzer, with the input saved as crash-<sha1>.
 */
#ifndef MK_FUZZ_H
#define MK_FUZZ_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "record.h"

/* (FZ_NOCOV, record.h: the harness's own loops over chunk bytes are not
 * memkit's code, and are left out of libFuzzer's coverage instrumentation,
 * which would make them the bulk of every run's time and add no useful
 * feedback) */

typedef struct fz_reader {
    const uint8_t *d;
    size_t n, i;
} fz_reader;

static inline unsigned fz_u8(fz_reader *r)
{
    return r->i < r->n ? r->d[r->i++] : 0;
}

static inline unsigned fz_u16(fz_reader *r)
{
    unsigned a = fz_u8(r);
    return a | fz_u8(r) << 8;
}

static inline int fz_more(const fz_reader *r) { return r->i < r->n; }

/* (fz_op, record.h: the operation being run, in reports) */

#define FZ_CHECK(cond, ...)                                                 \
    do {                                                                    \
        if (!(cond))                                                        \
            fz_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);                \
    } while (0)

/* A size drawn from the input: mostly small, some up to 32 KiB (the
 * largest class), some large (to 1 MiB) and huge (to ~5 MiB), and the
 * edges of memkit's ranges. */
static size_t fz_size(fz_reader *r)
{
    static const size_t edges[] = {0,     1,     7,     8,      9,
                                   15,    16,    17,    24,     25,
                                   1024,  1025,  32767, 32768,  32769,
                                   65536, 65537, 1 << 20, (1 << 20) + 1,
                                   (size_t)2 << 20};
    unsigned t = fz_u8(r);
    switch (t >> 5) {
    case 0:
    case 1:
    case 2:
        return fz_u8(r) % 129;
    case 3:
        return fz_u16(r) % 2049;
    case 4:
        return fz_u16(r) % 32769;
    case 5:
        return (size_t)fz_u16(r) * 16 % ((size_t)1 << 20);
    case 6:
        return edges[fz_u8(r) % (sizeof edges / sizeof edges[0])];
    default:
        if (fz_u8(r) & 1)
            return ((size_t)1 << 20) + (size_t)fz_u16(r) * 64;
        return 32768 + (size_t)fz_u16(r) * 4;
    }
}

/* A power of two from 1 to 2^max_log2. */
static size_t fz_align(fz_reader *r, unsigned max_log2)
{
    return (size_t)1 << (fz_u8(r) % (max_log2 + 1));
}

/* ---- fill patterns --------------------------------------------------------- */

/* Word @w (bytes 8w .. 8w+7) of the pattern of chunk @id. */
FZ_NOCOV static inline uint64_t fz_word(uint64_t id, size_t w)
{
    uint64_t x = (id + 1) * 0x9E3779B97F4A7C15ull + w * 0xBF58476D1CE4E5B9ull;
    return x ^ (x >> 29);
}

/* Is byte @i one of those a chunk of @n bytes carries a pattern in? */
FZ_NOCOV static inline int fz_sampled(size_t i, size_t n)
{
    return n <= 65536 || i < 4096 || i >= n - 4096 || (i & 65535) < 8;
}

/* The next sampled byte from byte @i of a chunk of @n bytes. */
FZ_NOCOV static inline size_t fz_next(size_t i, size_t n)
{
    if (fz_sampled(i, n))
        return i;
    size_t next = (i | 65535) + 1;
    return next < n - 4096 ? next : n - 4096;
}

/* (noinline: an inlined copy would be instrumented as its caller is) */
FZ_NOCOV __attribute__((noinline)) static void fz_fill(void *p, size_t n,
                                                       uint64_t id)
{
    uint8_t *c = p;
    for (size_t i = fz_next(0, n); i < n; i = fz_next(i, n)) {
        uint64_t w = fz_word(id, i >> 3);
        if ((i & 7) == 0 && i + 8 <= n) { /* a whole word (little-endian) */
            memcpy(c + i, &w, 8);
            i += 8;
            continue;
        }
        for (size_t end = (i | 7) + 1 < n ? (i | 7) + 1 : n; i < end; i++)
            c[i] = (uint8_t)(w >> ((i & 7) * 8));
    }
}

/* The first byte of the first @n bytes of @p (a chunk of @full bytes filled
 * with @id) that lost its pattern, or (size_t)-1. */
FZ_NOCOV __attribute__((noinline)) static size_t
fz_bad(const void *p, size_t n, size_t full, uint64_t id)
{
    const uint8_t *c = p;
    for (size_t i = fz_next(0, full); i < n; i = fz_next(i, full)) {
        uint64_t w = fz_word(id, i >> 3), got;
        if ((i & 7) == 0 && i + 8 <= n) { /* a whole word (little-endian) */
            memcpy(&got, c + i, 8);
            if (got == w) {
                i += 8;
                continue;
            }
        }
        for (size_t end = (i | 7) + 1 < n ? (i | 7) + 1 : n; i < end; i++)
            if (c[i] != (uint8_t)(w >> ((i & 7) * 8)))
                return i;
    }
    return (size_t)-1;
}

/* Are the first @n bytes of @p zero (the bytes a pattern would sample)? */
FZ_NOCOV __attribute__((noinline)) static int fz_zero(const void *p, size_t n)
{
    const uint8_t *c = p;
    for (size_t i = fz_next(0, n); i < n; i = fz_next(i, n))
        for (size_t end = (i | 7) + 1 < n ? (i | 7) + 1 : n; i < end; i++)
            if (c[i])
                return 0;
    return 1;
}

/* The alignment memkit.h promises a chunk of @size from mk_alloc (GENERAL,
 * GENERATION, and malloc in the drop-in). */
static inline size_t fz_rule_align(size_t size)
{
    return (size <= 8 || (size >= 17 && size <= 24)) ? 8 : 16;
}

#endif /* MK_FUZZ_H */
