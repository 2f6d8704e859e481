/* SPDX-License-Identifier: MIT */
/*
 * validate.c - what the page layer can say of a pointer handed back to
 * memkit, and its reports: the checking build's validation of every
 * pointer, and a free-list link found overwritten.
 *
 * mki_page_validate is compiled into both variants; only libmemkit-check
 * calls it (behind `if (MK_CONFIG_CHECK)`): the release build validates
 * on its free path with the position test and the double-free key
 * (page.h), which need no search.  A pointer is accepted when it lies in
 * a segment memkit holds (the registry in segment.c), its unit is mapped
 * to a live page, and it is the start of a chunk of that page; whether
 * the chunk is live is its owner's to say.  Owners are named through the
 * hook table bound at the top (mki_page_up).
 */

#include "page.h"

static const char *owner(const mki_page *pg) { return mki_page_up.owner_name(pg); }

void *mki_page_bad_link(mki_page *pg, void *chunk)
{
    mki_error_report(NULL, "write to freed memory at", chunk,
                     "its free-list link was overwritten", owner(pg));
    return NULL; /* if a handler returned: the rest of the list is lost */
}

/* Memory memkit holds, free: a double free, when a free met it. */
static void held_free(const void *p, const char *fn, int is_free)
{
    if (is_free)
        mki_error_double_free(fn, p, NULL);
    else
        mki_error_report(fn, "invalid pointer", p, "memory memkit holds free",
                         NULL);
}

mki_page *mki_page_validate(const void *p, const char *fn, int is_free)
{
    if (!mki_segment_owns(p)) {
        mki_error_invalid(fn, p);
        return NULL;
    }
    mki_segment *s = mki_segment_of(p);
    mki_page *pg;
    if (s->kind == MKI_SEG_HUGE) {
        pg = &s->huge_page;
        if (pg->kind == MKI_PAGE_FREE) { /* cached for reuse */
            held_free(p, fn, is_free);
            return NULL;
        }
        if ((const char *)p != pg->start) {
            mki_error_invalid_in(fn, p, owner(pg), 0);
            return NULL;
        }
        return pg;
    }
    pg = mki_page_of(p);
    if (!pg || pg->kind == MKI_PAGE_FREE) {
        held_free(p, fn, is_free);
        return NULL;
    }
    const char *c = p;
    if (pg->kind == MKI_PAGE_SMALL) {
        /* `end`, not `extend`: the owner moves extend while other threads
         * free; a never-used chunk is caught by the live bits instead */
        if (c >= pg->end ||
            (size_t)(c - pg->start) % pg->chunk_size != 0) {
            mki_error_invalid_in(fn, p, owner(pg), 0);
            return NULL;
        }
    } else if (pg->kind == MKI_PAGE_LARGE && c != pg->start) {
        mki_error_invalid_in(fn, p, owner(pg), 0);
        return NULL;
    }
    return pg;
}
