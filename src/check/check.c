/*
 * check.c - the checking build's validation of pointers handed to memkit.
 *
 * Compiled into both variants; only libmemkit-check calls it (the calls
 * sit behind `if (MK_CONFIG_CHECK)`).  A pointer is accepted when it lies
 * in a segment memkit holds (registry in segment.c), its unit is mapped to a
 * live page, and it is the start of a chunk that page has handed out.
 * Everything else is reported as a pointer memkit never returned.
 */
#include "../internal.h"

mki_page *mki_check_pointer(const void *p)
{
    if (!mki_segment_owns(p)) {
        mki_error_report("pointer memkit never returned", p, NULL);
        return NULL;
    }
    mki_segment *s = mki_segment_of(p);
    mki_page *pg;
    if (s->kind == MKI_SEG_HUGE) {
        pg = &s->huge_page;
        if (pg->kind == MKI_PAGE_FREE) { /* cached for reuse */
            mki_error_report("double free or pointer memkit never returned "
                             "(memory memkit holds free)",
                             p, NULL);
            return NULL;
        }
        if ((const char *)p != pg->start) {
            mki_error_report("pointer inside a chunk, not its start", p,
                             pg->ctx);
            return NULL;
        }
        return pg;
    }
    pg = mki_page_of(p);
    if (!pg || pg->kind == MKI_PAGE_FREE) {
        mki_error_report("double free or pointer memkit never returned "
                         "(memory memkit holds free)",
                         p, NULL);
        return NULL;
    }
    const char *c = p;
    if (pg->kind == MKI_PAGE_SMALL) {
        /* `end`, not `extend`: the owner moves extend while other threads
         * free; a never-used chunk is caught by the live bits instead */
        if (c >= pg->end ||
            (size_t)(c - pg->start) % pg->chunk_size != 0) {
            mki_error_report("pointer is not the start of a chunk", p,
                             pg->ctx);
            return NULL;
        }
    } else if (pg->kind == MKI_PAGE_LARGE && c != pg->start) {
        mki_error_report("pointer inside a chunk, not its start", p, pg->ctx);
        return NULL;
    }
    return pg;
}
