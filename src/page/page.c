/*
 * page.c - free-list operations on a page that are too big to inline.
 *
 * A new page is not threaded onto its free list all at once: chunks beyond
 * `extend` have never been handed out, and mki_page_extend threads the next
 * OS page worth of them (at least one chunk) when the list runs dry.  A
 * page is thus touched, and made resident, only as far as it is used, and
 * the cost of threading is paid a few KiB at a time, close to the use.
 */
#include "../internal.h"

void mki_page_extend(mki_page *pg)
{
    size_t sz = pg->chunk_size;
    char *first = pg->extend;
    size_t n = MKI_OS_PAGE / sz;
    size_t left = (size_t)(pg->end - first) / sz;
    if (n == 0)
        n = 1;
    if (n > left)
        n = left;
    char *last = first + (n - 1) * sz;
    for (char *q = first; q < last; q += sz)
        mki_link_set(q, q + sz);
    mki_link_set(last, pg->free);
    pg->free = first;
    pg->extend = last + sz;
}
