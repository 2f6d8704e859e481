/* SPDX-License-Identifier: MIT */
/*
 * huge_pieces.h - the kernel mappings a huge mapping is made of (huge.c).
 *
 * Pages that huge.c moves in from another mapping stay a kernel mapping of
 * their own (they belong to another anon_vma), and two cached mappings
 * merged stay two.  mremap grows or moves one kernel mapping at a time, so
 * a huge mapping's header records where each may begin (layout.h,
 * mki_huge_pieces: its borders), and a mapping moves piece by piece.  The
 * trade-off: a border recorded where the kernel has none costs one system
 * call more; one missing would make a move fail (and its pages be lost).
 */
#ifndef MKI_HUGE_PIECES_H
#define MKI_HUGE_PIECES_H

#include "page.h"

#pragma GCC visibility push(hidden)

/* Add a border at @at to @b (ascending; 0 or a repeat adds none).  0, or
 * -1 when @b is full. */
int mki_huge_border_add(mki_huge_pieces *b, size_t at);

/* Drop the borders of @b at or past @size (the mapping ends there). */
void mki_huge_borders_cut(mki_huge_pieces *b, size_t size);

/* The borders of @b past @lo, less @lo (those of the range from @lo on),
 * into @out, ascending; returns how many, or -1 (nothing written) when
 * there are more than @cap. */
int mki_huge_borders_from(const mki_huge_pieces *b, size_t lo, size_t *out,
                          unsigned cap);

/* Move the @len bytes at @from, committed whole, whose kernel mappings
 * begin at the @nb offsets @at (ascending, inside), to byte @t_at of
 * mapping @t, piece by piece, and record each piece's start as a border
 * of @t in @tb (the caller made room: 1 + @nb).  A piece that cannot move
 * is unmapped, and the pages under it stay: callers move free memory
 * only, whose contents do not matter.  No lock: the caller owns both
 * ranges. */
void mki_huge_move_pieces(char *from, size_t len, const size_t *at, unsigned nb,
                          mki_segment *t, mki_huge_pieces *tb, size_t t_at);

#pragma GCC visibility pop

#endif /* MKI_HUGE_PIECES_H */
