/*
 * sizeclass.c - the size classes of shared (small) pages and page sizing.
 *
 * Classes (41, from 16 bytes to 32 KiB):
 *     16 24 32 48 64                        (8/16-byte steps)
 *     then four per doubling: 2^k * {1.25, 1.5, 1.75, 2}
 *     80 96 112 128 | 160 192 224 256 | 320 384 448 512 | 640 .. 1024 |
 *     1280 .. 2048 | 2560 .. 4096 | 5120 .. 8192 | 10240 .. 16384 |
 *     20480 24576 28672 32768
 * Worst-case internal waste (request one byte above a class):
 *     up to 64 B: 33->48 wastes 15/48 = 31%; 17->24 wastes 7/24 = 29%
 *     above 64 B: (2^k/4 - 1) / (1.25 * 2^k) < 20%   (e.g. 129 -> 160)
 * The smallest chunk is 16 bytes, not 8: a free chunk holds its free-list
 * link in its first word and its double-free key in its second (page.h),
 * which is what lets the release build report every double free.  A
 * request of 8 bytes or less takes 16 (glibc's smallest chunk is 32).
 *
 * Alignment: every class but 24 is a multiple of 16, and pages start on a
 * unit, so those chunks are 16-aligned.  The 24-byte class serves mk_alloc
 * only (its chunks are 8-aligned: a C object of 24 bytes cannot need
 * 16-byte alignment, and holding it in 32 bytes would cost a third more
 * memory on the commonest small-object size: Perl SVs, Godot Variants,
 * list nodes).  The malloc family promises what glibc gives, 16-byte
 * alignment for every request (C23 7.24.3 asks it for any object that fits
 * the request, and a struct of an __m128 and a flexible array member
 * allocated with 24 bytes is such an object), so malloc looks its classes up
 * in a table of its own that skips 24: malloc(17..24) costs 32 bytes, as
 * on glibc.
 *
 * Lookup: n <= 1 KiB is one load from a 129-byte table indexed by
 * (n + 7) / 8 (malloc's: a 65-byte table indexed by (n + 15) / 16); above
 * that, a count-leading-zeros and two shifts.
 *
 * Page sizing, per class: a context's first page of a class is small (1
 * KiB, or 8 chunks: ten 64-byte chunks cost one unit, not an OS page) and
 * each next page of the class doubles the one that ran out, up to 64 KiB,
 * so a class in heavy use pays one page acquisition per 64 KiB while
 * 10,000 tiny contexts stay tiny, and a context that uses many classes a
 * little (a thread heap: a few chunks of each of 28 sizes) holds a few
 * small pages, not 64 KiB per class.  (Sizing every next page by what the
 * whole context held made each new class's first page 64 KiB in such a
 * heap: 1.5 MiB of pages for 400 KiB of chunks, all of it resident in the
 * end as pages were given back and cut again; 10,000 threads of churn
 * grew resident memory by 3-4 MiB, where glibc grows by 0.5.)  Pages are a
 * power of two of units and naturally aligned, which keeps the unit bitmap
 * search to one word and gives every chunk of a power-of-two class the
 * alignment of its size (mk_alloc_aligned).
 */
#include "sizeclass.h"

const uint32_t mki_class_size[MKI_NCLASS] = {
    16,    24,    32,    48,    64,    80,    96,    112,   128,   160,
    192,   224,   256,   320,   384,   448,   512,   640,   768,   896,
    1024,  1280,  1536,  1792,  2048,  2560,  3072,  3584,  4096,  5120,
    6144,  7168,  8192,  10240, 12288, 14336, 16384, 20480, 24576, 28672,
    32768};

/* mki_class_direct[i] = smallest class >= max(1, 8 * i) */
const uint8_t mki_class_direct[MKI_DIRECT_MAX / 8 + 1] = {
    0,  0,  0,  1,  2,  3,  3,  4,  4,  5,  5,  6,  6,  7,  7,  8,  8,  9,
    9,  9,  9,  10, 10, 10, 10, 11, 11, 11, 11, 12, 12, 12, 12, 13, 13, 13,
    13, 13, 13, 13, 13, 14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15,
    15, 15, 15, 16, 16, 16, 16, 16, 16, 16, 16, 17, 17, 17, 17, 17, 17, 17,
    17, 17, 17, 17, 17, 17, 17, 17, 17, 18, 18, 18, 18, 18, 18, 18, 18, 18,
    18, 18, 18, 18, 18, 18, 18, 19, 19, 19, 19, 19, 19, 19, 19, 19, 19, 19,
    19, 19, 19, 19, 19, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20,
    20, 20, 20};

/* mki_class_a16[i] = smallest class >= max(1, 16 * i) that is a multiple
 * of 16 (malloc's classes: the 24-byte class is skipped) */
const uint8_t mki_class_a16[MKI_DIRECT_MAX / 16 + 1] = {
    0,  0,  2,  3,  4,  5,  6,  7,  8,  9,  9,  10, 10, 11, 11, 12, 12,
    13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15, 16, 16, 16, 16, 17,
    17, 17, 17, 17, 17, 17, 17, 18, 18, 18, 18, 18, 18, 18, 18, 19, 19,
    19, 19, 19, 19, 19, 19, 20, 20, 20, 20, 20, 20, 20, 20};

uint32_t mki_class_page_units(unsigned cls, uint32_t after, size_t held)
{
    size_t chunk = mki_class_size[cls];
    size_t target = (size_t)after * 2 * MKI_UNIT; /* double the last page */
    if (target < held / 64)
        target = held / 64;
    if (target < MKI_UNIT)
        target = MKI_UNIT;
    if (target < 8 * chunk) /* a page holds 8 chunks when it can */
        target = 8 * chunk;
    if (target > MKI_PAGE_MAX)
        target = MKI_PAGE_MAX;
    if (target < chunk)
        target = chunk;
    uint32_t units = (uint32_t)((target + MKI_UNIT - 1) >> MKI_UNIT_SHIFT);
    uint32_t pow2 = 1;
    while (pow2 < units)
        pow2 <<= 1;
    return pow2 > MKI_PAGE_MAX_UNITS ? MKI_PAGE_MAX_UNITS : pow2;
}
