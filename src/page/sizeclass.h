/* SPDX-License-Identifier: MIT */
/*
 * sizeclass.h - request size -> size class, inline for the fast path.
 * The table and its rationale live in sizeclass.c.
 */
#ifndef MKI_SIZECLASS_H
#define MKI_SIZECLASS_H

#include "layout.h"

#pragma GCC visibility push(hidden)

extern const uint8_t mki_class_direct[MKI_DIRECT_MAX / 8 + 1];
extern const uint8_t mki_class_a16[MKI_DIRECT_MAX / 16 + 1];
extern const uint32_t mki_class_size[MKI_NCLASS];
extern const uint8_t mki_class_hi[(MKI_SMALL_MAX - MKI_DIRECT_MAX) / 16];

/* Class of a request of n <= MKI_DIRECT_MAX bytes: one table load. */
MKI_INLINE unsigned mki_class_of_direct(size_t n)
{
    return mki_class_direct[(n + 7) >> 3];
}

/* The class malloc uses for a request of n <= MKI_DIRECT_MAX bytes: the
 * smallest multiple of 16 that holds it (one table load). */
MKI_INLINE unsigned mki_class_of_a16(size_t n)
{
    return mki_class_a16[(n + 15) >> 4];
}

/* The request malloc makes of a GENERAL context for @n bytes, on its slow
 * paths (where the class is found from the size again): 17..24 bytes are
 * asked as 32, so that the chunk is 16-aligned.  Every other class is. */
MKI_INLINE size_t mki_class_malloc_size(size_t n)
{
    return n - 17 < 8 ? 32 : n;
}

/* Class of a request of n <= MKI_SMALL_MAX bytes. */
MKI_INLINE unsigned mki_class_of(size_t n)
{
    if (n <= MKI_DIRECT_MAX)
        return mki_class_direct[(n + 7) >> 3];
    /* Above 1 KiB: one load too, from a table of 16-byte steps (its
     * classes follow no formula a few instructions compute: sizeclass.c) */
    return mki_class_hi[(n - MKI_DIRECT_MAX - 1) >> 4];
}

/* Units (a power of two) of a context's next page for class @cls, after
 * its page of @after units ran out (0: its first page of the class), in a
 * context that holds @held bytes of small pages and whose pages of classes
 * up to 1 KiB are at least @floor bytes (a power of two up to 64 KiB, 0:
 * none) once it holds half of that. */
uint32_t mki_class_page_units(unsigned cls, uint32_t after, size_t held, size_t floor);

#pragma GCC visibility pop

#endif /* MKI_SIZECLASS_H */
