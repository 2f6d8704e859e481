/* SPDX-License-Identifier: MIT */
/*
 * prof.h - the heap profile layer (sample.c, dump.c): sampled allocations
 * by call stack and by context, live samples, the peak, and the dumps.
 *
 * It sits above the context layer (it reads contexts' names and parents)
 * and below the heaps; the context and page layers reach it only through
 * the tables bound at the top (mki_ctx_up.sample / unsample /
 * unsample_page / profiled, mki_page_up.unsampled; bind.c).  Nothing here
 * runs unless MEMKIT_PROFILE is on: a context that is not profiled never
 * calls it, and a free calls it only for a page that holds a sample.
 * Its memory is memkit's bookkeeping (page/meta.c) and one table mapped
 * from the OS, never the heap it describes.  docs/PROFILE.md is the
 * user's description.
 */
#ifndef MKI_PROF_H
#define MKI_PROF_H

#include "../ctx/ctx.h"

#pragma GCC visibility push(hidden)

/* ---- sample.c ----------------------------------------------------------------- */
/* Is the profile on (new contexts are profiled)?  Reads the options once. */
int mki_prof_active(void);
/* The hooks of mki_ctx_up and mki_page_up (ctx.h, page.h say when). */
void mki_prof_sample(mk_ctx *ctx, void *p, size_t size);
void mki_prof_unsample(mki_page *pg, const void *p);
void mki_prof_unsample_page(mki_page *pg);
/* An option changed (mk_option_set): the rate, the signal. */
void mki_prof_options_changed(void);
/* The fork handlers' part (0 prepare, 1 parent, 2 child). */
void mki_prof_fork(int phase);

/* What the dumps read: one call stack in one context, with its figures.
 * Counts and bytes are the samples' own ("raw", what the pprof format
 * holds); est_* scale each sample by the inverse of its probability of
 * being sampled (its estimate of the bytes and allocations it stands for). */
typedef struct mki_prof_fig {
    uint64_t count, bytes;       /* raw samples */
    double est_count, est_bytes; /* estimated */
} mki_prof_fig;
typedef struct mki_prof_stack {
    struct mki_prof_stack *next; /* hash chain */
    struct mki_prof_stack *all;  /* every stack, newest first */
    uint64_t hash;
    const char *ctx_path;        /* "top/child/leaf" (interned) */
    mki_prof_fig live, peak, total; /* now; at the peak; ever allocated */
    uint32_t depth;
    uintptr_t frames[];          /* innermost first (return addresses) */
} mki_prof_stack;
/* The figures of the whole process. */
typedef struct mki_prof_totals {
    mki_prof_fig live, peak, total;
    long rate;                   /* mean interval in bytes; 1: every one */
    uint64_t samples_dropped;    /* no memory for a record (bookkeeping OOM) */
} mki_prof_totals;
/* Call @fn on every stack (@fn NULL: none), with the profile's lock held
 * (the figures do not move meanwhile); @tot gets the totals. */
void mki_prof_walk(void (*fn)(const mki_prof_stack *s, void *arg), void *arg,
                   mki_prof_totals *tot);

/* ---- dump.c --------------------------------------------------------------------- */
/* Write the profile of what is live now (@peak 0) or at the peak (1) to
 * PREFIX.heap (pprof's text format) and PREFIX.folded; 0, or -1 with errno. */
int mki_prof_write(const char *prefix, int peak);
/* The exit dump (a destructor) and the signal's (the handler asks; the next
 * sample, or the purge thread, writes). */
void mki_prof_dump_due(void);
extern _Atomic int mki_prof_dump_asked;
/* The profile is on (sample.c's set-up): dumps will be due at exit, and
 * MEMKIT_PROFILE_SIGNAL gets its handler. */
void mki_prof_started(void);

#pragma GCC visibility pop

#endif /* MKI_PROF_H */
