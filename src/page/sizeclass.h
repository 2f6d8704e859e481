/*
 * sizeclass.h - request size -> size class, inline for the fast path.
 * The table and its rationale live in sizeclass.c.
 */
#ifndef MKI_SIZECLASS_H
#define MKI_SIZECLASS_H

#include "../types.h"

#pragma GCC visibility push(hidden)

extern const uint8_t mki_class_direct[MKI_DIRECT_MAX / 8 + 1];
extern const uint32_t mki_class_size[MKI_NCLASS];

/* Class of a request of n <= MKI_DIRECT_MAX bytes: one table load. */
MKI_INLINE unsigned mki_class_of_direct(size_t n)
{
    return mki_class_direct[(n + 7) >> 3];
}

/* Class of a request of n <= MKI_SMALL_MAX bytes. */
MKI_INLINE unsigned mki_class_of(size_t n)
{
    if (n <= MKI_DIRECT_MAX)
        return mki_class_direct[(n + 7) >> 3];
    /* Four classes per doubling: the two bits below the top one pick the
     * quarter of [2^k, 2^(k+1)) that n - 1 falls in. */
    size_t m = n - 1;
    unsigned k = 63u - (unsigned)__builtin_clzll((unsigned long long)m);
    return 6u + (k - 6u) * 4u + (unsigned)((m >> (k - 2u)) & 3u);
}

/* Units (a power of two) of the next page for class @cls in a context that
 * already holds @held bytes of small pages. */
uint32_t mki_class_page_units(unsigned cls, size_t held);

#pragma GCC visibility pop

#endif /* MKI_SIZECLASS_H */
