/* SPDX-License-Identifier: MIT */
/*
 * meta.c - memkit's own bookkeeping memory: page descriptors, context
 * structs, callback records, class tables.
 *
 * Metadata never lives in the pages it describes, so a page holds only
 * chunks (0-byte headers) and a stray write past a chunk cannot corrupt a
 * descriptor.  Objects are rounded to 16 bytes (those of a multiple of 64,
 * page descriptors, start on a 64-byte line) and kept on one LIFO free
 * list per rounded size; memory comes from the OS 64 KiB at a time and is
 * never given back (metadata is bounded by the peak number of pages and
 * contexts, and reusing it keeps descriptors of live pages packed together).
 *
 * One mutex guards it: metadata is taken on slow paths only (a new page, a
 * new context), never per chunk.  Page descriptors come here only while
 * the segment layer has none back to reuse (segment.c keeps those that went
 * back on a list under its own lock, which a page cut takes anyway).
 */

#include "page.h"

#include <errno.h>
#include <string.h>

#define META_ALIGN 16u
#define META_MAX 1024u
#define META_CHUNK ((size_t)64 << 10)

typedef struct meta_free {
    struct meta_free *next;
} meta_free;

static pthread_mutex_t meta_lock = PTHREAD_MUTEX_INITIALIZER;
static meta_free *free_lists[META_MAX / META_ALIGN + 1];
static char *bump, *bump_end;
static _Atomic size_t meta_total;

void *mki_meta_alloc(size_t size)
{
    if (size == 0 || size > META_MAX) {
        errno = ENOMEM;
        return NULL;
    }
    size_t idx = (size + META_ALIGN - 1) / META_ALIGN;
    size_t rounded = idx * META_ALIGN;
    void *p = NULL;
    mki_os_lock(&meta_lock);
    if (free_lists[idx]) {
        p = free_lists[idx];
        free_lists[idx] = free_lists[idx]->next;
    } else {
        /* a multiple of a cache line (a page descriptor) starts on one */
        if (rounded % 64 == 0) {
            char *a = (char *)(((uintptr_t)bump + 63) & ~(uintptr_t)63);
            bump = a < bump_end ? a : bump_end; /* (else a fresh chunk) */
        }
        if ((size_t)(bump_end - bump) < rounded) {
            char *fresh = mki_os_reserve(META_CHUNK, MKI_OS_PAGE);
            if (fresh && mki_os_commit(fresh, META_CHUNK) != 0) {
                mki_os_release(fresh, META_CHUNK, 0);
                fresh = NULL;
            }
            if (!fresh) {
                mki_os_unlock(&meta_lock);
                errno = ENOMEM;
                return NULL;
            }
            /* the rest of the old chunk is lost; at most META_MAX bytes */
            bump = fresh;
            bump_end = fresh + META_CHUNK;
            atomic_fetch_add_explicit(&meta_total, META_CHUNK,
                                      memory_order_relaxed);
        }
        p = bump;
        bump += rounded;
    }
    mki_os_unlock(&meta_lock);
    memset(p, 0, rounded);
    return p;
}

void *mki_meta_map(size_t size)
{
    char *p = mki_os_reserve(size, MKI_OS_PAGE); /* (zero) */
    if (p && mki_os_commit(p, size) != 0) {
        mki_os_release(p, size, 0);
        p = NULL;
    }
    if (!p) {
        errno = ENOMEM;
        return NULL;
    }
    atomic_fetch_add_explicit(&meta_total, size, memory_order_relaxed);
    return p;
}

void mki_meta_free(void *p, size_t size)
{
    if (!p)
        return;
    size_t idx = (size + META_ALIGN - 1) / META_ALIGN;
    meta_free *f = p;
    mki_os_lock(&meta_lock);
    f->next = free_lists[idx];
    free_lists[idx] = f;
    mki_os_unlock(&meta_lock);
}

size_t mki_meta_bytes(void)
{
    return atomic_load_explicit(&meta_total, memory_order_relaxed);
}

void mki_meta_fork(int phase)
{
    if (phase == 0)
        pthread_mutex_lock(&meta_lock);
    else
        pthread_mutex_unlock(&meta_lock);
}
