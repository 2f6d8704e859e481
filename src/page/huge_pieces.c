/* SPDX-License-Identifier: MIT */
/*
 * huge_pieces.c - the borders between the kernel mappings a huge mapping
 * is made of, and moving its pages piece by piece (huge_pieces.h says why).
 * The trade-off: the borders are a small sorted array in the header (191
 * of them, in the bytes of the bitmaps a huge segment does not use), so
 * adding one is an append and a lookup a scan; a mapping that would need
 * more takes no more pages from elsewhere (huge.c).
 */
#include "huge_pieces.h"

_Static_assert(sizeof(mki_huge_pieces) <= 3 * sizeof(uint64_t) * MKI_BITMAP_WORDS,
               "a huge mapping's pieces fit in the bitmaps' bytes");

int mki_huge_border_add(mki_huge_pieces *b, size_t at)
{
    if (at == 0 || (b->n && b->at[b->n - 1] >= at))
        return 0;
    if (b->n == MKI_HUGE_PIECES)
        return -1;
    b->at[b->n++] = at;
    return 0;
}

void mki_huge_borders_cut(mki_huge_pieces *b, size_t size)
{
    while (b->n && b->at[b->n - 1] >= size)
        b->n--;
}

int mki_huge_borders_from(const mki_huge_pieces *b, size_t lo, size_t *out,
                          unsigned cap)
{
    unsigned i = 0;
    while (i < b->n && b->at[i] <= lo)
        i++;
    if (b->n - i > cap)
        return -1;
    for (unsigned k = i; k < b->n; k++)
        out[k - i] = b->at[k] - lo;
    return (int)(b->n - i);
}

void mki_huge_move_pieces(char *from, size_t len, const size_t *at, unsigned nb,
                          mki_segment *t, mki_huge_pieces *tb, size_t t_at)
{
    mki_mem_forget(from, len); /* moved or unmapped */
    size_t x = 0;
    for (unsigned i = 0; x < len; i++) {
        size_t y = i < nb ? at[i] : len;
        mki_huge_border_add(tb, t_at + x);
        if (mki_os_move(from + x, y - x, (char *)t + t_at + x) != 0)
            mki_os_release(from + x, y - x, y - x);
        x = y;
    }
}
