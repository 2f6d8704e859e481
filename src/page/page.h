/*
 * page.h - the inline heart of memkit: owner lookup from a pointer, the
 * calling thread's identity, and the free-list operations of a page.
 * Everything here is a handful of instructions with no atomic operation,
 * no lock and no call; anything rarer lives out of line in the callers.
 */
#ifndef MKI_PAGE_H
#define MKI_PAGE_H

#include "../check/annotate.h"
#include "../os/os.h"
#include "../types.h"

#pragma GCC visibility push(hidden)

/* A descriptor that never has a free chunk: the class slot of a context
 * that holds no page of that class points here, so the fast path needs no
 * NULL test (its fast_tid is 0, so no free ever reaches it). */
extern mki_page mki_page_empty;
/* The page map's entry for the units of a page that went back (segment.c):
 * kind MKI_PAGE_FREE, fast_tid 0. */
extern mki_page mki_page_gone;

/* Is @p in a segment memkit holds?  A bit per 4 MiB of address space
 * (segment.c); the release build's free tests it first, so that a pointer
 * memkit never returned is reported, not followed. */
#define MKI_SEGMAP_BITS ((size_t)1 << (47 - MKI_SEG_SHIFT))
extern uint64_t mki_segmap[MKI_SEGMAP_BITS / 64];
MKI_INLINE int mki_segment_known(const void *p)
{
    uintptr_t i = ((uintptr_t)p - 1) >> MKI_SEG_SHIFT;
    return i < MKI_SEGMAP_BITS &&
           ((__atomic_load_n(&mki_segmap[i / 64], __ATOMIC_RELAXED) >> (i % 64)) & 1);
}

/* The span of address space memkit's segments have covered so far (every
 * 4 MiB a segment was ever registered at, and the holes between them), so
 * that the fast free path can tell at the cost of a subtraction and a
 * comparison that a pointer lies outside it (a stack, a global, a heap
 * of the program's own below or above memkit's mappings) and must go to
 * the checked path, which reports it rather than follow it.  @from is the
 * lowest segment base + 1 (the fast path tests p, whose segment is that of
 * p - 1), @len the span; p - from >= len is "outside".  Only grows; written
 * under the arena lock, read with relaxed loads (a reader that sees one
 * field new and the other old sees a narrower span, and a pointer it then
 * sends to the checked path is freed there all the same).  Secure mode
 * keeps len 0, so every free takes its checked path. */
typedef struct mki_seg_span {
    uintptr_t from, len;
} mki_seg_span;
extern mki_seg_span mki_span;

MKI_INLINE int mki_outside_span(const void *p)
{
    uintptr_t from = __atomic_load_n(&mki_span.from, __ATOMIC_RELAXED);
    uintptr_t len = __atomic_load_n(&mki_span.len, __ATOMIC_RELAXED);
    return (uintptr_t)p - from >= len;
}

/* The segment holding chunk @p (see types.h for why p - 1). */
MKI_INLINE mki_segment *mki_segment_of(const void *p)
{
    return (mki_segment *)(((uintptr_t)p - 1) & ~(uintptr_t)MKI_SEG_MASK);
}

/* The page descriptor of chunk @p: a mask and one load. */
MKI_INLINE mki_page *mki_page_of(const void *p)
{
    return mki_segment_of(p)
        ->map[((uintptr_t)p >> MKI_UNIT_SHIFT) & (MKI_UNITS - 1)];
}

/* The calling thread's identity (os.h: unique for the life of the process,
 * so a thread that reuses a dead thread's stack, or one a forked child
 * starts, never passes for the owner of that thread's contexts). */
MKI_INLINE uintptr_t mki_tid(void)
{
    uintptr_t id = mki_os_self;
    return MKI_LIKELY(id != 1) ? id : mki_os_self_assign();
}

/* The same, possibly still 1 (no identity yet): good enough to compare with
 * a recorded owner, which is never 1.  The fast free path uses it. */
MKI_INLINE uintptr_t mki_tid_now(void) { return mki_os_self; }

/* The thread whose frees may take the fast path (relaxed: any thread may
 * read it, only the owner writes it, and a reader only tests it against its
 * own identity, which no value it might see can spuriously equal). */
MKI_INLINE uintptr_t mki_page_tid(mki_page *pg)
{
    return atomic_load_explicit(&pg->fast_tid, memory_order_relaxed);
}

MKI_INLINE void mki_page_set_tid(mki_page *pg, uintptr_t tid)
{
    atomic_store_explicit(&pg->fast_tid, tid, memory_order_relaxed);
}

/* Push a free chunk (the free list is threaded through the chunks' first
 * word; a chunk is at least 8 bytes).  Slow paths; the fast path in chunk.c
 * writes the link itself. */
MKI_INLINE void mki_page_push(mki_page *pg, void *p)
{
    mki_link_set(p, pg->free);
    pg->free = p;
}

/* Can the page hand out a chunk: a free one, or one never used yet?
 * (Never-used chunks lie in [extend, end) and are not on the free list: a
 * page is never threaded, it is touched only where chunks are handed out,
 * and a rewound page needs no work.) */
MKI_INLINE int mki_page_has_chunk(const mki_page *pg)
{
    return pg->free != NULL || pg->extend < pg->end;
}

/* Is @q the start of a chunk of small page @pg? */
MKI_INLINE int mki_page_holds(const mki_page *pg, const void *q)
{
    const char *c = q;
    return c >= pg->start && c < pg->end &&
           (size_t)(c - pg->start) % pg->chunk_size == 0;
}

/* A free chunk's link word does not lead to a chunk of its page (a write to
 * freed memory, or a forged link): report it; returns the list's new head
 * (none: the rest of the list is dropped). */
void *mki_page_bad_link(mki_page *pg, void *chunk);

/* A chunk from a page that has one: the free list first, else the next
 * never-used chunk.  Pre: mki_page_has_chunk(pg).  The checking build and
 * secure mode check the link before following it. */
MKI_INLINE void *mki_page_take(mki_page *pg)
{
    void *b = pg->free;
    if (b) {
        void *next = mki_link_get(b);
        if ((MK_CONFIG_CHECK || mki_secure) && next &&
            MKI_UNLIKELY(!mki_page_holds(pg, next)))
            next = mki_page_bad_link(pg, b);
        pg->free = next;
    } else {
        b = pg->extend;
        pg->extend += pg->chunk_size;
    }
    pg->used++;
    return b;
}

/* Doubly linked lists of pages (NULL-terminated; `*head` NULL when empty). */
MKI_INLINE void mki_page_list_push(mki_page **head, mki_page *pg)
{
    pg->prev = NULL;
    pg->next = *head;
    if (*head)
        (*head)->prev = pg;
    *head = pg;
}

MKI_INLINE void mki_page_list_remove(mki_page **head, mki_page *pg)
{
    if (pg->prev)
        pg->prev->next = pg->next;
    else
        *head = pg->next;
    if (pg->next)
        pg->next->prev = pg->prev;
    pg->next = pg->prev = NULL;
}

#pragma GCC visibility pop

#endif /* MKI_PAGE_H */
