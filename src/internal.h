/*
 * internal.h - prototypes shared between memkit's files, grouped by the file
 * that defines them (the name says which: mki_<file-noun>_<verb>).
 * Nothing here is installed; everything is hidden from the shared library's
 * symbol table.
 */
#ifndef MKI_INTERNAL_H
#define MKI_INTERNAL_H

#include "os/os.h"
#include "types.h"

/* ---- page/meta.c: bookkeeping memory ------------------------------------ */
void *mki_meta_alloc(size_t size); /* zeroed; NULL on OOM */
void mki_meta_free(void *p, size_t size);
size_t mki_meta_bytes(void);

/* ---- page/segment.c: segments, units, pages ------------------------------ */
/*
 * Take a page of @units units (a power of two <= 64, or a multiple of 64)
 * for @ctx, naturally aligned, with its first @commit_bytes committed.
 * The descriptor comes back with seg/unit/units/start/size set, kind 0,
 * and every unit of the run mapped to it.  NULL on OOM (nothing leaks).
 * Thread-safe.
 */
mki_page *mki_segment_page_alloc(uint32_t units, size_t commit_bytes);
/* Give a page (and its descriptor) back.  Thread-safe. */
void mki_segment_page_release(mki_page *pg);
/* A chunk of @size bytes in its own segment, aligned to @align (power of
 * two); descriptor kind MKI_PAGE_HUGE, start = the chunk.  Thread-safe. */
mki_page *mki_segment_huge_alloc(size_t size, size_t align);
void mki_segment_huge_release(mki_page *pg);
/* Purge every empty page and segment now; returns bytes decommitted or
 * released.  Thread-safe. */
size_t mki_segment_trim(void);
size_t mki_segment_count(void);
/* Checking build: is @p inside a segment memkit holds?  Thread-safe. */
int mki_segment_owns(const void *p);

/* ---- page/page.h (inline): owner lookup and free-list ops ---------------- */
#include "page/page.h"

/* ---- ctx/context.c: the tree and dispatch -------------------------------- */
extern const mki_kind_ops *const mki_kinds[4];
uintptr_t mki_ctx_tid_slow(void);

/* ---- ctx/general.c: the GENERAL kind ------------------------------------- */
extern const mki_kind_ops mki_general_ops;
void *mki_general_alloc_slow(mki_general *g, size_t size);
void mki_general_collect(mk_ctx *ctx);

/* ---- check/error.c: reporting ------------------------------------------- */
/* Report a detected error: "memkit: <what>: pointer <p> (context <name>)".
 * Never allocates.  Aborts unless a handler returns or errors are silenced. */
void mki_error_report(const char *what, const void *p, const mk_ctx *ctx);

/* ---- check/check.c: the checking build's validation ---------------------- */
/* Returns the page of a pointer memkit returned, or reports and returns
 * NULL.  Only called when MK_CONFIG_CHECK. */
mki_page *mki_check_pointer(const void *p, const char *op);

/* ---- options.c ----------------------------------------------------------- */
enum mki_option {
    MKI_OPT_PURGE_DELAY_MS = 0, /* -1 never, 0 at once, else delay */
    MKI_OPT_COUNT
};
extern _Atomic long mki_options[MKI_OPT_COUNT];
void mki_options_init(void);
MKI_INLINE long mki_option(enum mki_option o)
{
    return atomic_load_explicit(&mki_options[o], memory_order_relaxed);
}

#endif /* MKI_INTERNAL_H */
