/* SPDX-License-Identifier: MIT */
/*
 * check.h - the checking layer (instrument.c): the decorator that wraps
 * the kinds for instrumented contexts (the checking build,
 * AddressSanitizer, Valgrind).  It sits above the context layer; the
 * context layer reaches it only through the table bound at the top
 * (mki_ctx_up, bind.c).
 */
#ifndef MKI_CHECK_H
#define MKI_CHECK_H

#include "../ctx/ctx.h"

#pragma GCC visibility push(hidden)

/* Should new contexts be instrumented (the build, or Valgrind found). */
int mki_instrument_active(void);
/* The wrapper table of every instrumented context (its `ops`). */
extern const mki_kind_ops mki_instrument_ops;
/* The page hooks (mki_ctx_up): a kind made a page (0, or -1 on OOM); a
 * reset kept a page; call a mki_live_walk on a page's live chunks. */
int mki_instrument_page_new(mki_page *pg);
void mki_instrument_page_reset(mki_page *pg);
void mki_instrument_walk_page(mki_page *pg, void *walk);

#pragma GCC visibility pop

#endif /* MKI_CHECK_H */
