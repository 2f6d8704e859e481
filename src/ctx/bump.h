/* SPDX-License-Identifier: MIT */
/*
 * bump.h - the BUMP kind's struct: a pointer and a limit, the fastest
 * allocation there is, and no individual free (bump.c).
 */
#ifndef MKI_BUMP_H
#define MKI_BUMP_H

#include "ctx.h"

#pragma GCC visibility push(hidden)

/* BUMP: a pointer and a limit; blocks listed for reset. */
typedef struct mki_bump {
    mk_ctx base;
    char *ptr, *end;      /* free space of the current block */
    mki_page *blocks;     /* every block, current first */
    mki_page *large;      /* chunks with a page of their own */
    size_t block_size;    /* size of the next block */
} mki_bump;

#pragma GCC visibility pop

#endif /* MKI_BUMP_H */
