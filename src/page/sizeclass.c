/* SPDX-License-Identifier: MIT */
/*
 * sizeclass.c - the size classes of shared (small) pages and page sizing.
 *
 * Classes (64, from 16 bytes to 32 KiB):
 *     16 24 32 48 64                        (8/16-byte steps)
 *     then four per doubling up to 256: 2^k * {1.25, 1.5, 1.75, 2}
 *     80 96 112 128 | 160 192 224 256 | 320 384 448 528 | 640 768 896 1040
 *     (528 and 1040, not 512 and 1024: below), and above 1040 the chunk
 *     counts of a full 64 KiB page: the class of count k is 64 KiB / k
 *     rounded down to a multiple of 16, 16 * floor(4096 / k), for k in
 *       (63: 1040) 62 60 57 54 51 49 46 44 42 40 38 36 34 32, 30 29 ... 3 2
 *     1056 1088 1136 1200 1280 1328 1424 1488 1552 1632 1712 1808 1920
 *     2048 | 2176 2256 ... 3840 4096 | 4368 4672 5040 5456 5952 6544 7280
 *     8192 | 9360 10912 13104 16384 | 21840 32768
 * Why 1040 and not 1024 for the requests of 897..1024 bytes, and 528, not
 * 512, for 449..512: chunks 512 or 1024 bytes apart are a stride this
 * hardware handles badly when a program walks many of them in order.  A
 * free-oldest ring of 1 KiB chunks with 64 MiB live (bench W1M, the
 * drop-in; W1, a GENERAL context) ran at 15.5 ns an operation in 1024-byte
 * chunks and 8.1 in 1040-byte ones, glibc's size for the same request
 * (alternating runs, medians of 7; an in-process loop: 17 against 10 ns);
 * 512-byte requests in that loop, 17.9 ns in 512-byte chunks and 13.2 in
 * 528-byte ones (8.7..10.0 against 12.9..13.4 touching only the first
 * byte); the smaller cells did not move, nor did 256 against 272.  2048 and
 * 4096 show it too (15.1 against 11.7 ns for 2176-byte chunks, 12.8
 * against 10.5 for 4368), but there the next class costs 6% or more of
 * memory, where 528 and 1040 cost 3.1% and 1.6% on a power-of-two request
 * (glibc's chunks for 512 and 1024 are 528 and 1040 bytes too).  A
 * 528- or 1040-byte chunk is not aligned to its power of two, nor to 32
 * or 64: mk_alloc_aligned(ctx, 512, 512) and (ctx, 1024, 1024) take the
 * 2048-byte class, a 64-aligned request of 449..512 bytes 640 (512 before).
 * Why counts above 1 KiB: a small page is at most 64 KiB, so what a chunk
 * of class c really costs in a full page is 64 KiB / floor(64 KiB / c).
 * The old classes above 1 KiB (four per doubling, 1280 .. 32768) left
 * both kinds of waste: a request just above 2^k landed in 1.25 * 2^k
 * (up to 20% of the chunk), and the page's tail held no whole chunk
 * (5120-byte chunks: 12 in 64 KiB, 4 KiB left over).  A class that is
 * 64 KiB / k has no tail, and taking every k from 30 down (and 14 of the
 * 33 counts from 63 to 31, spaced evenly, and all those of the old classes
 * among them: 51 42 36 32) bounds the waste up to 4 KiB by 6.7% (1329 ->
 * 1424) and never costs more than an old class did, for any request.
 * Above 8 KiB the page cap, not the class, sets the waste (16385 bytes:
 * three chunks a page, as before).  Measured on `sqlite3 :memory:` (bench
 * W7): its page cache asks 4,368 bytes a page (4 KiB and a 272-byte
 * header) and its in-memory journal 1,032 bytes a chunk (1 KiB and a
 * link): 5120- and 1280-byte chunks before (17% and 24% over glibc's
 * 4384 and 1040), 4368 = 64 KiB / 15 and 1040 = 64 KiB / 63 now.
 * The cost: 23 more classes above 1 KiB, so a context that holds a few
 * chunks of many sizes there has more pages partly used; and a realloc that
 * grows by a few percent moves more often.  64 classes is also what the
 * classes-in-use bitmap of a GENERAL context holds (one word).
 * Worst-case internal waste (request one byte above a class):
 *     up to 64 B: 33->48 wastes 15/48 = 31%; 17->24 wastes 7/24 = 29%
 *     65 B .. 1 KiB: (2^k/4 - 1) / (1.25 * 2^k) < 20%   (e.g. 129 -> 160;
 *     897 -> 1040: 13.8%)
 *     1 .. 4 KiB: under 6.7% (1329 -> 1424); 4 .. 8 KiB: under 11.1%
 *     (7281 -> 8192); above 8 KiB up to 33% (21841 -> 32768): the 64 KiB
 *     page holds two such chunks whatever the class, as before
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
 * Lookup: n <= 1040 is one load from a 131-byte table indexed by
 * (n + 7) / 8 (malloc's: a 66-byte table indexed by (n + 15) / 16); above
 * that (the drop-in's inline malloc path too, up to 32 KiB) one load from
 * a 1,983-byte table indexed by (n - 1041) / 16 (mki_class_hi).  Tried
 * and dropped, on a malloc/free pair of 2,000 bytes in a loop on the
 * 2-core VM: 4096 / ceil(n / 16), the chunk count, and a 64-byte table
 * (7.79 ns against 6.83 before the change, best of 7: a division); a
 * 496-byte table of 64-byte slices and a compare with the class's size
 * (7.98 against 6.71, medians of 15: two loads in a row).  This table:
 * 7.63 against 7.47 (medians of 15; 4,300 bytes 6.71 against 7.04), noise.
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
 * grew resident memory by 3-4 MiB, where glibc grows by 0.5.)  A page of
 * a class up to 1 KiB is also at least a 64th of the context's small
 * pages, so a large heap takes fewer, larger pages; the classes above 1 KiB
 * are sized by their own use alone: a page of them holds 63 chunks or
 * fewer, a program uses many of them a little, and each one's page keeps
 * resident the most it ever held at once (clang -O2 on W7's file, at exit:
 * 43 classes above 1 KiB, 2.6 MiB of pages, 0.8 MiB of chunks; its peak
 * RSS 106.2 MiB with the rule for every class, 105.7 without it for these,
 * glibc 103.7; python3 68.7 against 68.3, glibc 67.6).  Pages are a
 * power of two of units and naturally aligned, which keeps the unit bitmap
 * search to one word and gives every chunk of a power-of-two class the
 * alignment of its size (mk_alloc_aligned).  A context may also set a
 * floor for its pages of classes up to 1 KiB (mk_ctx_opts.block_size),
 * applied once it holds half of it: a class that grows then no longer
 * leaves its smaller pages behind at each doubling, free and resident
 * until a purge, while a context that stays below it keeps pages that
 * several classes' first chunks share an OS page of.  The thread heaps
 * take 64 KiB pages from 32 KiB held on (heap.c); the classes above 1 KiB
 * keep their own sizing (with the floor, clang's peak in W7 rose 0.3 MiB:
 * docs/DESIGN.md, "Pages inside a GENERAL context").
 */
#include "sizeclass.h"

const uint32_t mki_class_size[MKI_NCLASS] = {
    16,    24,    32,    48,    64,    80,    96,    112,   128,   160,
    192,   224,   256,   320,   384,   448,   528,   640,   768,   896,
    1040,  1056,  1088,  1136,  1200,  1280,  1328,  1424,  1488,  1552,
    1632,  1712,  1808,  1920,  2048,  2176,  2256,  2336,  2416,  2512,
    2608,  2720,  2848,  2976,  3120,  3264,  3440,  3632,  3840,  4096,
    4368,  4672,  5040,  5456,  5952,  6544,  7280,  8192,  9360,  10912,
    13104, 16384, 21840, 32768};

/* mki_class_hi[i] = the smallest class >= 1040 + 16 * (i + 1): the class
 * of a request of 1041 + 16 * i .. 1056 + 16 * i bytes */
const uint8_t mki_class_hi[(MKI_SMALL_MAX - MKI_DIRECT_MAX) / 16] = {
    21, 22, 22, 23, 23, 23, 24, 24, 24, 24, 25, 25, 25, 25, 25, 26, 26, 26, 27, 27,
    27, 27, 27, 27, 28, 28, 28, 28, 29, 29, 29, 29, 30, 30, 30, 30, 30, 31, 31, 31,
    31, 31, 32, 32, 32, 32, 32, 32, 33, 33, 33, 33, 33, 33, 33, 34, 34, 34, 34, 34,
    34, 34, 34, 35, 35, 35, 35, 35, 35, 35, 35, 36, 36, 36, 36, 36, 37, 37, 37, 37,
    37, 38, 38, 38, 38, 38, 39, 39, 39, 39, 39, 39, 40, 40, 40, 40, 40, 40, 41, 41,
    41, 41, 41, 41, 41, 42, 42, 42, 42, 42, 42, 42, 42, 43, 43, 43, 43, 43, 43, 43,
    43, 44, 44, 44, 44, 44, 44, 44, 44, 44, 45, 45, 45, 45, 45, 45, 45, 45, 45, 46,
    46, 46, 46, 46, 46, 46, 46, 46, 46, 46, 47, 47, 47, 47, 47, 47, 47, 47, 47, 47,
    47, 47, 48, 48, 48, 48, 48, 48, 48, 48, 48, 48, 48, 48, 48, 49, 49, 49, 49, 49,
    49, 49, 49, 49, 49, 49, 49, 49, 49, 49, 49, 50, 50, 50, 50, 50, 50, 50, 50, 50,
    50, 50, 50, 50, 50, 50, 50, 50, 51, 51, 51, 51, 51, 51, 51, 51, 51, 51, 51, 51,
    51, 51, 51, 51, 51, 51, 51, 52, 52, 52, 52, 52, 52, 52, 52, 52, 52, 52, 52, 52,
    52, 52, 52, 52, 52, 52, 52, 52, 52, 52, 53, 53, 53, 53, 53, 53, 53, 53, 53, 53,
    53, 53, 53, 53, 53, 53, 53, 53, 53, 53, 53, 53, 53, 53, 53, 53, 54, 54, 54, 54,
    54, 54, 54, 54, 54, 54, 54, 54, 54, 54, 54, 54, 54, 54, 54, 54, 54, 54, 54, 54,
    54, 54, 54, 54, 54, 54, 54, 55, 55, 55, 55, 55, 55, 55, 55, 55, 55, 55, 55, 55,
    55, 55, 55, 55, 55, 55, 55, 55, 55, 55, 55, 55, 55, 55, 55, 55, 55, 55, 55, 55,
    55, 55, 55, 55, 56, 56, 56, 56, 56, 56, 56, 56, 56, 56, 56, 56, 56, 56, 56, 56,
    56, 56, 56, 56, 56, 56, 56, 56, 56, 56, 56, 56, 56, 56, 56, 56, 56, 56, 56, 56,
    56, 56, 56, 56, 56, 56, 56, 56, 56, 56, 57, 57, 57, 57, 57, 57, 57, 57, 57, 57,
    57, 57, 57, 57, 57, 57, 57, 57, 57, 57, 57, 57, 57, 57, 57, 57, 57, 57, 57, 57,
    57, 57, 57, 57, 57, 57, 57, 57, 57, 57, 57, 57, 57, 57, 57, 57, 57, 57, 57, 57,
    57, 57, 57, 57, 57, 57, 57, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58,
    58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58,
    58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58,
    58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58, 58,
    59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59,
    59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59,
    59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59,
    59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59,
    59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 59, 60, 60, 60,
    60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60,
    60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60,
    60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60,
    60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60,
    60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60,
    60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60,
    60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 60, 61, 61, 61, 61, 61, 61,
    61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61,
    61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61,
    61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61,
    61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61,
    61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61,
    61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61,
    61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61,
    61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61,
    61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61,
    61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 61, 62,
    62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62,
    62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62,
    62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62,
    62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62,
    62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62,
    62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62,
    62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62,
    62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62,
    62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62,
    62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62,
    62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62,
    62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62,
    62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62,
    62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62,
    62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62,
    62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62,
    62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62, 62,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
    63, 63, 63};

/* mki_class_direct[i] = smallest class >= max(1, 8 * i) */
const uint8_t mki_class_direct[MKI_DIRECT_MAX / 8 + 1] = {
     0,  0,  0,  1,  2,  3,  3,  4,  4,  5,  5,  6,  6,  7,  7,  8,  8,  9,
     9,  9,  9, 10, 10, 10, 10, 11, 11, 11, 11, 12, 12, 12, 12, 13, 13, 13,
    13, 13, 13, 13, 13, 14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15,
    15, 15, 15, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 17, 17, 17, 17, 17,
    17, 17, 17, 17, 17, 17, 17, 17, 17, 18, 18, 18, 18, 18, 18, 18, 18, 18,
    18, 18, 18, 18, 18, 18, 18, 19, 19, 19, 19, 19, 19, 19, 19, 19, 19, 19,
    19, 19, 19, 19, 19, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20,
    20, 20, 20, 20, 20};

/* mki_class_a16[i] = smallest class >= max(1, 16 * i) that is a multiple
 * of 16 (malloc's classes: the 24-byte class is skipped) */
const uint8_t mki_class_a16[MKI_DIRECT_MAX / 16 + 1] = {
     0,  0,  2,  3,  4,  5,  6,  7,  8,  9,  9, 10, 10, 11, 11, 12, 12,
    13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15, 16, 16, 16, 16, 16,
    17, 17, 17, 17, 17, 17, 17, 18, 18, 18, 18, 18, 18, 18, 18, 19, 19,
    19, 19, 19, 19, 19, 19, 20, 20, 20, 20, 20, 20, 20, 20, 20};

uint32_t mki_class_page_units(unsigned cls, uint32_t after, size_t held, size_t floor)
{
    size_t chunk = mki_class_size[cls];
    size_t target = (size_t)after * 2 * MKI_UNIT; /* double the last page */
    if (cls < MKI_NCLASS_DIRECT) {
        if (target < held / 64)
            target = held / 64;
        if (target < floor && held >= floor / 2)
            target = floor;
    }
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
