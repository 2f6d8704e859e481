/* SPDX-License-Identifier: MIT */
/*
 * general.c - the GENERAL context kind: any size, individual free, realloc.
 * PostgreSQL's AllocSet plays this role; memkit's version keeps no chunk
 * header at all.
 *
 * Data structure: for each of the 64 size classes, a list of pages holding
 * chunks of that class.  The head of a list is the *current* page, the one
 * the fast path pops from (mk_alloc in chunk.c); the slot of a class with no
 * page points at mki_page_empty so the fast path never tests for NULL.
 * Pages with no free chunk move to the `full` list and leave the fast free
 * path (their fast_tid is 0) so that the first chunk freed into them brings
 * them back to their class list.  Chunks above 32 KiB get a page of their
 * own (`large`), above 1 MiB a segment of their own (huge).
 *
 * Invariants:
 *  - a page's `used` counts its live chunks, plus one while it is current
 *    (the pin): so `--used == 0` in the fast free path can only happen on a
 *    non-current page, which is then given back at once, while the current
 *    page of a class never bounces between empty and new (the alloc/free
 *    ping-pong of a single object costs no page traffic);
 *  - the free list of a page holds only that page's chunks; never-used
 *    chunks lie beyond `extend` and are handed out by moving it (page.h),
 *    malloc's refill a run at a time (the chunks that start in one OS
 *    page go on the free list: extend_run), so a new page is touched only
 *    as far as it is used and a rewound page (reset) needs no work;
 *  - chunks freed by other threads wait on the context's atomic `remote`
 *    list and are collected by the owner on the allocation slow path.
 *
 * Trade-offs: one context holds a page per class it uses, which is why
 * first pages are 1 KiB and grow with the context (sizeclass.c); per-class
 * pages waste less than a header per chunk once a class has more than a few
 * chunks, and cost more for a context that holds one chunk of each of many
 * sizes.
 */

#include "general.h"
#include "../page/purge.h"

#include <errno.h>
#include <string.h>

#define NHI MKI_NCLASS_HI

#define E8 &mki_page_empty, &mki_page_empty, &mki_page_empty, &mki_page_empty, \
           &mki_page_empty, &mki_page_empty, &mki_page_empty, &mki_page_empty
mki_page *mki_general_hi_empty[MKI_NCLASS_HI] = {E8, E8, E8, E8, E8,
                                                 &mki_page_empty,
                                                 &mki_page_empty,
                                                 &mki_page_empty};
#undef E8
_Static_assert(MKI_NCLASS_HI == 43, "mki_general_hi_empty lists 43 entries");
_Static_assert(MKI_NCLASS <= 64, "the classes-in-use bitmap is one word");

/* Bytes of small pages per size class, process-wide, for the statistics
 * (MEMKIT_STATS=json shows the largest classes): changed once per page. */
_Atomic size_t mki_general_class_bytes[MKI_NCLASS];

static void class_count(unsigned c, size_t bytes, int add)
{
    if (add)
        atomic_fetch_add_explicit(&mki_general_class_bytes[c], bytes,
                                  memory_order_relaxed);
    else
        atomic_fetch_sub_explicit(&mki_general_class_bytes[c], bytes,
                                  memory_order_relaxed);
}

static mki_general *gen(mk_ctx *ctx) { return (mki_general *)ctx; }
/* Not instrumented (instrumented chunks keep a tail at their end). */
static int g_fast(const mk_ctx *ctx) { return ctx->fast_kind != MKI_KIND_SLOW; }

/* The list head for class @c; NULL only if the table of the classes above
 * 1 KiB could not be allocated. */
static mki_page **slot_of(mki_general *g, unsigned c)
{
    if (c < MKI_NCLASS_DIRECT)
        return &g->cls[c];
    if (g->cls_hi == mki_general_hi_empty) {
        mki_page **t = mki_meta_alloc(sizeof(mki_page *) * NHI);
        if (!t)
            return NULL;
        for (unsigned i = 0; i < NHI; i++)
            t[i] = &mki_page_empty;
        g->cls_hi = t;
    }
    return &g->cls_hi[c - MKI_NCLASS_DIRECT];
}

/* ---- page lists ------------------------------------------------------------
 * A class list is a queue: the head is the current page, and pages that get
 * chunks back join at the tail, so that each has gathered as many frees as
 * possible by the time its turn comes (fewer page changes in a random
 * workload).  It ends in NULL going forward, and the head's `prev` points at
 * the tail (at itself when alone); an empty list is &mki_page_empty.  The
 * full and large lists are plain (page.h), NULL for empty. */

/* Make @pg the current page of class @c's empty list. */
static void make_current(mki_general *g, mki_page **slot, mki_page *pg)
{
    pg->next = NULL;
    pg->prev = pg;
    pg->flags |= MKI_PF_CURRENT;
    pg->used++; /* the pin */
    *slot = pg;
    g->classes |= 1ull << pg->cls;
}

/* Make @pg the current page of its class ahead of the current one, which
 * stays second, unpinned; returns that one, or NULL if the list was empty. */
static mki_page *lead(mki_general *g, mki_page **slot, mki_page *pg)
{
    mki_page *old = *slot;
    make_current(g, slot, pg);
    if (old == &mki_page_empty)
        return NULL;
    old->flags &= (uint8_t)~MKI_PF_CURRENT;
    pg->next = old;
    pg->prev = old->prev; /* the tail (old itself when alone) */
    old->prev = pg;
    old->used--; /* the pin */
    return old;
}

/* Queue @pg at the tail of the non-empty class list whose head is @head. */
static void queue_behind(mki_page *head, mki_page *pg)
{
    mki_page *tail = head->prev;
    tail->next = pg;
    pg->prev = tail;
    pg->next = NULL;
    head->prev = pg;
}

/* Take @pg, not current, out of its class list, whose head is @head. */
static void unlink_behind(mki_page *head, mki_page *pg)
{
    pg->prev->next = pg->next;
    if (pg->next)
        pg->next->prev = pg->prev;
    else /* the tail: the head's prev moves back */
        head->prev = pg->prev;
    pg->next = pg->prev = NULL;
}

/* ---- chunks freed by other threads ------------------------------------------
 * A free from a thread that does not own the context pushes the chunk on its
 * page's `xfree` word (one compare-and-swap; the word also counts the list),
 * unless the page is full: a full page is on no class list, so the owner
 * would never look at it; its `xfree` then holds MKI_XF_DELAYED and the free
 * goes on the context's `remote` list, which the owner collects on its slow
 * paths and which brings the page back to its class.  The owner takes a
 * page's list with one exchange when the page runs out of chunks (refill),
 * before declaring it full (a compare-and-swap from 0 to MKI_XF_DELAYED,
 * which fails if a free came in meanwhile), and in a full collect. */

void mki_general_free_remote(mki_page *pg, void *p)
{
    uintptr_t old = atomic_load_explicit(&pg->xfree, memory_order_relaxed);
    for (;;) {
        if (old & MKI_XF_DELAYED) {
            mki_chunk_remote_push(pg->ctx, p);
            return;
        }
        mki_link_set(p, (void *)(old & MKI_XF_PTR)); /* (encoded if secure) */
        uintptr_t val = ((old & ~MKI_XF_PTR) + MKI_XF_ONE) | (uintptr_t)p;
        /* release: the link store above is visible to the owner's acquire;
         * after this CAS the page may go back: touch nothing of it */
        if (atomic_compare_exchange_weak_explicit(&pg->xfree, &old, val,
                                                  memory_order_release,
                                                  memory_order_relaxed))
            return;
    }
}

/* Take in the chunks other threads freed into @pg, a page of the owner's
 * class lists (not full); returns how many. */
static uint32_t take_remote(mki_page *pg)
{
    if (!atomic_load_explicit(&pg->xfree, memory_order_relaxed))
        return 0;
    uintptr_t x = atomic_exchange_explicit(&pg->xfree, 0, memory_order_acquire);
    void *head = (void *)(x & MKI_XF_PTR);
    uint32_t n = (uint32_t)(x >> 48);
    if (pg->free) { /* rare: splice in front of the local list */
        void *tail = head;
        for (void *nx; (nx = mki_link_get(tail)) != NULL;)
            tail = nx;
        mki_link_set(tail, pg->free);
    }
    pg->free = head;
    pg->used -= n;
    return n;
}

/* The current page has no free chunk: move it to the full list and let
 * the next page of the class become current.  Returns 0 without doing so
 * if a chunk freed by another thread came in meanwhile. */
static int retire_full(mki_general *g, mki_page **slot, mki_page *pg)
{
    uintptr_t none = 0;
    if (!atomic_compare_exchange_strong_explicit(&pg->xfree, &none,
                                                 MKI_XF_DELAYED,
                                                 memory_order_relaxed,
                                                 memory_order_relaxed))
        return 0;
    mki_page *next = pg->next, *tail = pg->prev;
    pg->flags = (uint8_t)((pg->flags & MKI_PF_RELEASE) | MKI_PF_FULL);
    pg->used--; /* unpin: all chunks are live, so used > 0 */
    mki_page_set_tid(pg, 0);
    mki_page_list_push(&g->full, pg);
    if (next) {
        next->prev = tail; /* (next itself, if it is the tail) */
        next->flags |= MKI_PF_CURRENT;
        next->used++;
        *slot = next;
    } else {
        *slot = &mki_page_empty;
        g->classes &= ~(1ull << pg->cls);
    }
    return 1;
}

static void page_drop(mki_general *g, mki_page *pg)
{
    g->page_bytes -= pg->size;
    class_count(pg->cls, pg->size, 0);
    mki_segment_page_release(pg);
}

/* mk_ctx_trim's page_drop: its memory goes back to the OS at once; the
 * bytes decommitted. */
static size_t page_trim(mki_general *g, mki_page *pg)
{
    g->page_bytes -= pg->size;
    class_count(pg->cls, pg->size, 0);
    return mki_segment_page_release_now(pg);
}

/* A non-current page whose last chunk was freed: keep it as the spare if
 * there is none (its free list intact, ready for the next page this
 * context needs), else give it back. */
void mki_general_page_empty(mki_page *pg)
{
    mki_general *g = gen(pg->ctx);
    mki_page **slot = slot_of(g, pg->cls), *cur = *slot;
    unlink_behind(cur, pg); /* not current, so not the head */
    if (pg->size > cur->size) {
        /* The current page is the smaller: the larger one takes its place,
         * and the smaller goes second, unpinned; if it holds nothing it is
         * the one kept or given back, now (there is no third swap: it is
         * not larger), else when it empties in its turn.  Otherwise a
         * class whose use swings past its current page cut a page every
         * swing and gave it back when the swing ended: the page that had
         * filled first (the small one) came back current with the first
         * frees, the overflow page emptied last (W6 prodcons, one thread:
         * 4,048 pages cut in 200,000 mallocs).  And a ring of as many
         * chunks as the smaller page holds (W1M, 128 B x 1 KiB: 8 chunks,
         * a 1 KiB page) kept the smaller current, overflowed it once a
         * turn into the larger, emptied the larger into the spare and took
         * it back: five slow paths every 9 operations, 105 instructions an
         * operation instead of 54 (docs/DESIGN.md). */
        mki_page *old = lead(g, slot, pg);
        if (old->used == 0 && !atomic_load_explicit(&old->xfree, memory_order_relaxed))
            mki_general_page_empty(old);
        return;
    }
    if (!g->spare)
        g->spare = pg;
    else
        page_drop(g, pg);
}

/* Cut small page @pg (none of its chunks handed out) for class @c. */
static void page_shape(mki_page *pg, unsigned c)
{
    uint32_t sz = mki_class_size[c];
    pg->cls = (uint8_t)c;
    pg->chunk_size = sz;
    pg->capacity = (uint32_t)(pg->size / sz);
    pg->free = NULL;
    pg->extend = pg->start;
    pg->end = pg->start + (size_t)pg->capacity * sz;
    mki_page_pos_init(pg);
}

/* The spare page, made ready for class @c if it is big enough; NULL if
 * there is no spare that fits. */
static mki_page *take_spare(mki_general *g, unsigned c, uint32_t units)
{
    mki_page *pg = g->spare;
    if (!pg)
        return NULL;
    g->spare = NULL;
    if (pg->cls == c && pg->units >= units)
        return pg; /* free list and extend as they were */
    if (pg->units < units || g->base.fast_kind == MKI_KIND_SLOW) {
        page_drop(g, pg); /* too small, or its check bitmap is sized */
        return NULL;
    }
    class_count(pg->cls, pg->size, 0);
    class_count(c, pg->size, 1);
    page_shape(pg, c);
    return pg;
}

/* A page the last reset left resting, woken and cut for class @c, if one
 * has at least @units units; NULL when none is left.  Those too small
 * for @c go back on the way (a round that needs other sizes than the
 * last one gives the last one's pages back as it goes). */
static mki_page *wake_rest(mki_general *g, unsigned c, uint32_t units)
{
    mki_page *pg;
    while ((pg = g->rest) != NULL) {
        g->rest = pg->next;
        if (pg->units >= units && mki_segment_page_wake(pg) == 0) {
            page_shape(pg, c);
            mki_page_set_tid(pg, g->base.fast_tid);
            g->page_bytes += pg->size;
            class_count(c, pg->size, 1);
            return pg;
        }
        mki_segment_page_release(pg);
    }
    return NULL;
}

/* MEMKIT_SECURE=2: hand the chunks of a fresh page out in an order an
 * attacker cannot predict (a stride through the page, coprime with its
 * capacity, and a start, both from the secret and the page's address), so
 * that an overflow cannot count on which chunk follows which. */
static uint32_t gcd(uint32_t a, uint32_t b)
{
    while (b) {
        uint32_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static void shuffle(mki_page *pg)
{
    uint32_t n = pg->capacity;
    if (n < 2)
        return;
    uint64_t r = (uint64_t)mki_link_key ^ ((uintptr_t)pg->start * 0x9E3779B97F4A7C15ull);
    r ^= r >> 29;
    r *= 0xBF58476D1CE4E5B9ull;
    uint32_t stride = (uint32_t)(r % (n - 1)) + 1, at = (uint32_t)((r >> 32) % n);
    while (gcd(n, stride) != 1) /* stride 1 always is */
        stride = stride % (n - 1) + 1;
    pg->free = NULL;
    /* every chunk is free from now on: it holds its double-free key, and
     * in a secure context its guard word too (page.h: the free of its
     * neighbour checks it) */
    int guard = pg->ctx->fast_kind == MKI_KIND_SECURE;
    for (uint32_t k = 0; k < n; k++, at = (at + stride) % n) {
        char *c = pg->start + (size_t)at * pg->chunk_size;
        mki_page_push(pg, c);
        if (guard) {
            mki_guard_set(pg, c);
            mki_page_chunk_set_freed(pg, c); /* (a 16-byte chunk: over its guard) */
        } else if (pg->ctx->fast_kind != MKI_KIND_SLOW) {
            mki_page_chunk_set_freed(pg, c);
        }
    }
    pg->extend = pg->end;
    mki_page_pos_init(pg); /* every chunk is on the free list */
}

/* A page for class @c, whose last page (of @after units, 0: none) ran out:
 * sized by sizeclass.c, with the context's floor (mk_ctx_opts.block_size)
 * unless MEMKIT_SECURE=2's shuffle touches every chunk of a new page. */
static mki_page *page_new(mki_general *g, unsigned c, uint32_t after)
{
    uint32_t units = mki_class_page_units(c, after, g->page_bytes,
                                          mki_secure < 2 ? g->page_floor : 0);
    mki_page *pg = take_spare(g, c, units);
    if (pg) {
        if (mki_secure >= 2 && pg->extend == pg->start && !pg->free)
            shuffle(pg); /* re-cut for another class */
        return pg;
    }
    if (g->rest && (pg = wake_rest(g, c, units)) != NULL)
        return pg;
    pg = mki_segment_page_alloc(units, (size_t)units * MKI_UNIT);
    if (!pg)
        return NULL;
    pg->kind = MKI_PAGE_SMALL;
    page_shape(pg, c);
    mki_page_set_tid(pg, g->base.fast_tid);
    if (mki_ctx_claim_page(&g->base, pg) != 0) {
        mki_segment_page_release(pg);
        return NULL;
    }
    if (mki_secure >= 2)
        shuffle(pg);
    g->page_bytes += pg->size;
    class_count(c, pg->size, 1);
    return pg;
}

/* A chunk of @pg (which has one) for a program: off the free list or the
 * never-used part, without its double-free key unless the context is
 * instrumented (whose chunks are poisoned and checked by a bitmap). */
static void *take(mki_general *g, mki_page *pg)
{
    void *b = mki_page_take(pg);
    if (g->base.fast_kind == MKI_KIND_SECURE)
        mki_guard_hand_out(pg, b);
    else if (g->base.fast_kind != MKI_KIND_SLOW)
        mki_page_chunk_set_live(b);
    return b;
}

/* Allocate a chunk of class @c: the slow path of mk_alloc, and the only
 * path for classes above 1 KiB. */
static void *class_alloc(mki_general *g, unsigned c)
{
    mki_page **slot = slot_of(g, c);
    if (!slot) {
        errno = ENOMEM;
        return NULL;
    }
    mki_page *pg = *slot;
    if (MKI_LIKELY(mki_page_has_chunk(pg)) || take_remote(pg))
        return take(g, pg);
    uint32_t after = pg->units; /* (mki_page_empty: 0) */
    mki_ctx_collect(&g->base);
    while ((pg = *slot) != &mki_page_empty) {
        if (mki_page_has_chunk(pg) || take_remote(pg))
            return take(g, pg);
        if (pg->units > after)
            after = pg->units;
        retire_full(g, slot, pg); /* on failure the loop takes the frees */
    }
    pg = page_new(g, c, after);
    if (!pg)
        return NULL;
    make_current(g, slot, pg);
    return take(g, pg);
}

/* At most this many never-used chunks are handed out or threaded at once
 * (a 16-byte class has 256 in an OS page). */
#define EXTEND_RUN 32

/* The next never-used chunk of @pg (a new or rewound page, whose free list
 * is empty), or NULL when it has none.  (Its one caller, the refill, has
 * taken the frees other threads made into the page first: they are warm,
 * and it read their word just before.)  The never-used chunks after it whose
 * first 16 bytes lie in the same OS page, EXTEND_RUN in all, go on the free
 * list as free chunks (link and key, as a free leaves them), in address
 * order: the chunks of a new page then cost malloc's inline pop and a call
 * per run, not a call each, and no OS page is touched before a chunk in it
 * is handed out (a page is resident as far as it is used).  (mk_alloc
 * hands never-used chunks out one at a time inline, general.h: a context
 * reset after a few chunks would pay for runs it drops.)
 * A free of one of them before it is handed out is reported as a double
 * free (its key), as a free of a chunk that was handed out and freed.
 * (The refill serves plain and profiled contexts only, whose links are
 * plain pointers and whose free chunks hold keys: secure and instrumented
 * contexts take their own paths.) */
static void *extend_run(mki_page *pg)
{
    char *b = pg->extend;
    if (MKI_UNLIKELY(b >= pg->end))
        return NULL;
    size_t sz = pg->chunk_size;
    /* the last start whose link and key lie in b's OS page, and in the page */
    uintptr_t last = ((uintptr_t)b | (MKI_OS_PAGE - 1)) + 1 - 2 * sizeof(void *);
    if (last > (uintptr_t)pg->end - sz)
        last = (uintptr_t)pg->end - sz;
    void **link = &pg->free; /* (NULL: the fast path found the list empty) */
    char *c = b + sz;
    uint32_t n = 1;
    for (; (uintptr_t)c <= last && n < EXTEND_RUN; c += sz, n++) {
        *link = c;
        mki_page_chunk_set_freed(pg, c);
        link = (void **)c;
    }
    *link = NULL;
    pg->extend = c;
    mki_page_pos_grow(pg, n);
    pg->used++;
    mki_page_chunk_set_live(b); /* (the memory may have held a key) */
    return b;
}

/* A fast path (malloc's, after its pop; mk_alloc's, after its inline
 * extend too) found no chunk on @pg (the current page of the class of
 * @size): take the chunks other threads freed into it (they are warm, and
 * reusing them keeps the page from growing), else hand out its next
 * never-used chunks (malloc's common case on a new page), else take the
 * slow path. */
void *mki_general_refill(mki_general *g, mki_page *pg, size_t size)
{
    if (MKI_UNLIKELY(atomic_load_explicit(&pg->xfree, memory_order_relaxed))) {
        take_remote(pg);
        return mki_general_pop(pg);
    }
    void *b = extend_run(pg);
    if (MKI_LIKELY(b != NULL))
        return b;
    return mki_general_alloc_slow(g, size);
}

static void *large_alloc(mki_general *g, size_t size, size_t align)
{
    mki_ctx_collect(&g->base); /* large chunks freed elsewhere go back */
    mki_page *pg = mki_ctx_chunk_page(&g->base, size, align);
    if (!pg)
        return NULL;
    mki_page_list_push(&g->large, pg);
    return pg->start;
}

void *mki_general_alloc_slow(mki_general *g, size_t size)
{
    mki_purge_safe_point(); /* before anything is touched (purge.c) */
    if (size <= MKI_SMALL_MAX)
        return class_alloc(g, mki_class_of(size));
    if (size > MKI_SIZE_MAX) {
        errno = ENOMEM;
        return NULL;
    }
    return large_alloc(g, size, 0);
}

/* Secure mode's allocation beyond the common case: a request above 1 KiB,
 * an empty free list, a bad size. */
static MKI_NOINLINE void *alloc_secure_slow(mki_general *g, size_t size)
{
    if (size > MKI_SIZE_MAX) {
        errno = ENOMEM;
        return NULL;
    }
    size_t need = size + MKI_GUARD;
    if (need > MKI_DIRECT_MAX && need <= MKI_SMALL_MAX) {
        mki_page *pg = mki_general_page_for(g, need);
        char *p = pg->free;
        if (p != NULL) {
            char *next = mki_link_get_enc(p);
            if (next && !mki_page_is_chunk_exact(pg, next))
                next = mki_page_bad_link(pg, p);
            pg->free = next;
            pg->used++;
            mki_guard_hand_out(pg, p);
            return p;
        }
    }
    void *p = mki_general_alloc_slow(g, mki_class_malloc_size(need));
    if (p) { /* (a small chunk has its guard: take) */
        mki_page *pg = mki_page_of(p);
        if (pg->kind == MKI_PAGE_LARGE)
            mki_guard_set(pg, p);
    }
    return p;
}

/* Secure mode's allocation: the fast path's work for @size bytes and a
 * guard word after them (page.h), in malloc's classes (multiples of 16:
 * a request of 9..16 bytes plus its guard would otherwise land in the
 * 8-aligned 24-byte class), with the link decoded and checked before it
 * is followed: a chunk of the page (a range test and the position test)
 * or the list's end. */
void *mki_general_alloc_secure(mki_general *g, size_t size)
{
    if (MKI_LIKELY(size <= MKI_DIRECT_MAX - MKI_GUARD)) {
        mki_page *pg = g->cls[mki_class_of_a16(size + MKI_GUARD)];
        char *p = pg->free;
        if (MKI_LIKELY(p != NULL)) {
            char *next = mki_link_get_enc(p);
            if (MKI_UNLIKELY(next && !mki_page_is_chunk_exact(pg, next)))
                next = mki_page_bad_link(pg, p);
            pg->free = next;
            pg->used++;
            mki_guard_hand_out(pg, p);
            return p;
        }
    }
    return alloc_secure_slow(g, size);
}

static void *general_alloc(mk_ctx *ctx, size_t size)
{
    return mki_general_alloc_slow(gen(ctx), size);
}

static void *general_alloc_aligned(mk_ctx *ctx, size_t size, size_t align)
{
    mki_general *g = gen(ctx);
    if (size > MKI_SIZE_MAX) {
        errno = ENOMEM;
        return NULL;
    }
    int guard = ctx->fast_kind == MKI_KIND_SECURE;
    if (guard)
        size += MKI_GUARD; /* (page.h) */
    void *p = NULL;
    if (size <= MKI_SMALL_MAX && align <= MKI_SMALL_MAX) {
        /* A class whose size is a multiple of align: its pages are aligned
         * to their (power-of-two) size, which is >= the chunk size. */
        unsigned c = mki_class_of(size);
        while (mki_class_size[c] % align != 0) /* (32 KiB always is) */
            c++;
        p = class_alloc(g, c);
    } else {
        p = large_alloc(g, size, align);
    }
    if (p && guard && mki_page_of(p)->kind != MKI_PAGE_HUGE)
        mki_guard_set(mki_page_of(p), p);
    return p;
}

/* ---- freeing (owner thread) ---------------------------------------------- */

/* Does the free list of @pg hold a chunk that was freed, rather than only
 * the never-used rest of the last run extend_run threaded (chunks in
 * address order up to `extend`, the last with no link)?  A walk of at most
 * EXTEND_RUN links, on the slow path of a free into a full page. */
static int holds_freed(const mki_page *pg)
{
    char *c = pg->free;
    size_t sz = pg->chunk_size;
    if (!c)
        return 0;
    if (c >= pg->extend || (size_t)(pg->extend - c) > EXTEND_RUN * sz)
        return 1;
    for (char *next; c; c = next) {
        next = mki_link_get(c);
        if (next ? next != c + sz : c + sz != pg->extend)
            return 1;
    }
    return 0;
}

void mki_general_free_owned(mki_page *pg, void *p)
{
    mki_general *g = gen(pg->ctx);
    if (pg->kind == MKI_PAGE_LARGE || pg->kind == MKI_PAGE_HUGE) {
        mki_page_list_remove(&g->large, pg);
        mki_page_release(pg);
        return;
    }
    mki_page_push(pg, p);
    pg->used--;
    if (pg->flags & MKI_PF_FULL) {
        /* Back from the full list to its class.  If the current page has
         * no freed chunk to give (only never-used ones, on its free list
         * or past `extend`, or none: holds_freed), this page
         * replaces it (the old one goes second): the chunk just freed is the next one handed out
         * (warm, as glibc's tcache would give it), and in a FIFO workload
         * the frees that follow land on this page too, so allocation keeps
         * reusing the chunk freed last (otherwise a free-oldest loop of
         * 1 KiB chunks with 4 MiB live reused it 1.6% of the time, glibc
         * 100%, and ran 1.5x slower).  Otherwise it goes behind the current
         * page and gathers frees until its turn comes: made current with
         * one free chunk while the current page still had freed chunks, a
         * page of a random workload would run out again at once, and every
         * free into a full page would cost two slow paths (Larson: +17%
         * instructions). */
        mki_page_list_remove(&g->full, pg);
        pg->flags &= (uint8_t)~MKI_PF_FULL;
        mki_page_set_tid(pg, g->base.fast_tid);
        /* other threads' frees may come to the page again (while it was
         * full its word held MKI_XF_DELAYED and nothing else) */
        atomic_store_explicit(&pg->xfree, 0, memory_order_relaxed);
        mki_page **slot = slot_of(g, pg->cls);
        mki_page *old = *slot;
        if (old != &mki_page_empty &&
            (holds_freed(old) ||
             atomic_load_explicit(&old->xfree, memory_order_relaxed))) {
            queue_behind(old, pg); /* join the queue at its tail */
            return;
        }
        if ((old = lead(g, slot, pg)) != NULL && old->used == 0)
            mki_general_page_empty(old); /* unpinned, and it held nothing */
        return;
    }
    if (pg->used == 0)
        mki_general_page_empty(pg);
}

/* Take in every chunk other threads freed: the context's list (large
 * chunks, chunks of full pages) and every page's. */
void mki_general_collect(mk_ctx *ctx)
{
    mki_general *g = gen(ctx);
    for (uint64_t bits = g->classes; bits; bits &= bits - 1) {
        unsigned c = (unsigned)__builtin_ctzll(bits);
        mki_page *pg = *slot_of(g, c), *next;
        for (; pg; pg = next) {
            next = pg->next;
            if (take_remote(pg) && pg->used == 0)
                mki_general_page_empty(pg); /* not current: no pin */
        }
    }
    void *list = atomic_exchange_explicit(&ctx->remote, NULL,
                                          memory_order_acquire);
    while (list) {
        void *next = mki_link_get(list);
        mki_page *pg = mki_page_of(list);
        if (pg->kind == MKI_PAGE_SMALL && !(pg->flags & MKI_PF_FULL)) {
            mki_page_push(pg, list);
            if (--pg->used == 0)
                mki_general_page_empty(pg);
        } else {
            mki_general_free_owned(pg, list);
        }
        list = next;
    }
}

/* ---- realloc, sizes ------------------------------------------------------- */

static size_t general_usable_size(const mki_page *pg, const void *p)
{
    (void)p;
    /* secure mode: up to the guard word (page.h) */
    size_t guard = pg->ctx->fast_kind == MKI_KIND_SECURE &&
                           pg->kind != MKI_PAGE_HUGE ? MKI_GUARD : 0;
    if (pg->kind == MKI_PAGE_SMALL)
        return pg->chunk_size - guard;
    return (size_t)(pg->end - pg->start) - guard;
}

static void *general_realloc(mki_page *pg, void *p, size_t size)
{
    size_t old = general_usable_size(pg, p);
    if (pg->kind == MKI_PAGE_HUGE && size > MKI_LARGE_MAX &&
        g_fast(pg->ctx) && mki_secure < 2 /* (guard pages: no resize) */) {
        /* resize the mapping: no copy, and no new chunk */
        mki_general *g = gen(pg->ctx);
        if (size > old && !mki_ctx_may_grow(&g->base, size - old, 1))
            return NULL; /* a limit (ENOMEM) */
        mki_page_list_remove(&g->large, pg);
        mki_page *np = mki_huge_resize(pg, size);
        mki_page_list_push(&g->large, np ? np : pg);
        if (np) {
            mki_ctx_recharge(np);
            return np->start;
        }
        /* the mapping could not grow where it is, nor move whole (it may
         * be made of pieces, huge.c): a new chunk, and a copy */
    }
    size_t guard = pg->ctx->fast_kind == MKI_KIND_SECURE ? MKI_GUARD : 0;
    if (pg->kind == MKI_PAGE_LARGE && size > old && size + guard <= MKI_LARGE_MAX &&
        g_fast(pg->ctx) && mki_ctx_may_grow(pg->ctx, size - old, 0) &&
        mki_segment_page_grow(pg, size + guard) == 0) {
        mki_ctx_recharge(pg);
        if (guard)
            mki_guard_set(pg, p); /* at the new end */
        return p; /* the units after it were free: grown in place */
    }
    /* a chunk of an 8-aligned class cannot stay for a size that mk_alloc
     * would align to 16 */
    size_t align = (size <= 8 || (size > 16 && size <= 24)) ? 8 : 16;
    if (mki_general_keeps(pg, p, old, size, align))
        return p;
    void *q = mk_alloc(pg->ctx, size);
    if (!q)
        return NULL;
    memcpy(q, p, size < old ? size : old);
    mk_free(p);
    return q;
}

/* ---- reset, delete, statistics ------------------------------------------- */

typedef void (*page_fn)(mki_page *pg, void *arg);

/* Call @fn on every page of @g (safe against @fn releasing the page).
 * Only classes marked in `classes` are visited. */
static void each_page(mki_general *g, page_fn fn, void *arg)
{
    for (uint64_t bits = g->classes; bits; bits &= bits - 1) {
        unsigned c = (unsigned)__builtin_ctzll(bits);
        mki_page *pg = c < MKI_NCLASS_DIRECT ? g->cls[c]
                                             : g->cls_hi[c - MKI_NCLASS_DIRECT];
        while (pg) {
            mki_page *next = pg->next;
            fn(pg, arg);
            pg = next;
        }
    }
    mki_page *lists[2] = {g->full, g->large};
    for (int i = 0; i < 2; i++)
        for (mki_page *pg = lists[i], *next; pg; pg = next) {
            next = pg->next;
            fn(pg, arg);
        }
    if (g->spare)
        fn(g->spare, arg);
}

/* Reset: small pages are kept, rewound, up to KEEP_BYTES in all, in the
 * order the walk meets them; the others that served this round rest (a
 * plain context's: below), the rest go back.  A context refilled after
 * its reset (the usual life of a per-query or per-frame context) then takes
 * no page from the page pool until it passes what it kept: a page costs
 * some 1,200 instructions to cut and give back (segment.c), 19 for every
 * 1 KiB chunk of a 64 KiB page, where BUMP and GENERATION keep one block
 * of up to 1 MiB.  The bound is BUMP's largest block, so that a reset
 * keeps no more in one kind than in another; mk_ctx_trim gives it back,
 * MK_CTX_RELEASE_ON_RESET keeps nothing. */
#define KEEP_BYTES ((size_t)1 << 20)

/* Past KEEP_BYTES, the small pages that served this round rest
 * (mki_segment_pages_rest): the context keeps them for the next round's
 * pages, and the purge may take their memory meanwhile as it takes free
 * units', after the same delay.  Waking one costs a lock and a bitmap
 * test (segment.c); a page cut and given back costs some 1,200
 * instructions, which a context of 64 MiB paid 1,000 times a round (W1
 * reset 1 KiB x 64 MiB: GENERAL 1.9x GENERATION's time, whose 1 MiB
 * blocks are 16 times fewer).  Resting pages the next round did not wake
 * go back at its reset: a context holds at most what its last round used,
 * in address space, and its resident memory follows the purge policy
 * (stats: bytes_resting).  Instrumented, secure and profiled contexts, and
 * those under a limit (where resting pages would count against the pages
 * of other kinds and contexts), keep the simple rule. */
struct keep {
    size_t limit;    /* KEEP_BYTES, or 0 (keep nothing) */
    mk_ctx *ctx;
    int may_rest;    /* pages past the limit may rest (-1: not asked yet;
                        most resets keep all they hold) */
    mki_page *pages; /* kept, linked by next */
    size_t bytes;
    mki_page *rest;  /* resting, linked by next */
    mki_page *drop;  /* pages going back, linked by next (one lock for all:
                        mki_segment_pages_release) */
};

static void release_or_keep(mki_page *pg, void *arg)
{
    struct keep *k = arg;
    /* (a page queued behind its class's current one that held nothing
     * since the last reset was not needed by this round: it goes, and a
     * context whose rounds fit one page comes back to general_reset's
     * one-page case; W1 reset 1 KiB x 16 KiB kept a 16 KiB page that the
     * 32 KiB one had taken over, and walked both at every reset) */
    if (pg->kind == MKI_PAGE_SMALL) {
        if (pg->used != 0 || (pg->flags & MKI_PF_CURRENT)) { /* it served */
            if (k->bytes + pg->size <= k->limit) {
                k->bytes += pg->size;
                pg->next = k->pages;
                k->pages = pg;
                return;
            }
            if (k->may_rest < 0)
                k->may_rest = k->limit && k->ctx->fast_kind == MK_GENERAL &&
                              !mki_ctx_limited(k->ctx);
            if (k->may_rest) {
                class_count(pg->cls, pg->size, 0);
                pg->next = k->rest;
                k->rest = pg;
                return;
            }
        }
        class_count(pg->cls, pg->size, 0);
    }
    pg->next = k->drop; /* (each_page read it already) */
    k->drop = pg;
}

/* Every chunk of @pg is free again: rewind it (no work per chunk; no
 * position is a chunk's any more, so a free of a chunk from before is
 * reported).  @used: 1 for a page that stays current (the pin), else 0. */
MKI_INLINE void rewind_page(mki_page *pg, uint32_t used)
{
    if (MKI_UNLIKELY(atomic_load_explicit(&pg->samples, memory_order_relaxed) != NULL))
        mki_ctx_up.unsample_page(pg); /* its chunks die */
    atomic_store_explicit(&pg->xfree, 0, memory_order_relaxed);
    pg->free = NULL;
    pg->extend = pg->start;
    mki_page_pos_rewind(pg);
    pg->used = used;
}

/* The reset of general_reset's other cases: every page walked, kept or
 * released (out of line, so that the common case saves no registers). */
static MKI_NOINLINE void reset_pages(mk_ctx *ctx, int keep_one)
{
    mki_general *g = gen(ctx);
    struct keep k = {keep_one ? KEEP_BYTES : 0, ctx, -1, NULL, 0, NULL, NULL};
    each_page(g, release_or_keep, &k);
    /* the pages the last reset left resting that this round never woke */
    for (mki_page *pg = g->rest, *next; pg; pg = next) {
        next = pg->next;
        pg->next = k.drop;
        k.drop = pg;
    }
    g->rest = NULL;
    if (k.rest) {
        for (mki_page *pg = k.rest; pg; pg = pg->next) {
            pg->flags = 0; /* (no RELEASE: such a context rests none) */
            rewind_page(pg, 0);
        }
        mki_segment_pages_rest(k.rest);
        g->rest = k.rest;
    }
    for (uint64_t bits = g->classes; bits; bits &= bits - 1) {
        unsigned c = (unsigned)__builtin_ctzll(bits);
        *slot_of(g, c) = &mki_page_empty;
    }
    g->classes = 0;
    g->full = g->large = g->spare = NULL;
    g->page_bytes = k.bytes;
    for (mki_page *pg = k.pages, *next; pg; pg = next) {
        next = pg->next;
        pg->flags &= MKI_PF_RELEASE;
        rewind_page(pg, 0);
        mki_page_set_tid(pg, ctx->fast_tid);
        mki_ctx_page_reset(ctx, pg);
        /* the largest page of a class is its current one (it serves the
         * most chunks before a page change); the others wait behind it,
         * holding nothing and no pin, until the page ahead is full
         * (retire_full).  But a class whose round took two pages or more
         * below the largest size keeps only the largest: the round's next
         * page is cut at twice its size, and in a round or two the class
         * fits one page (W1 reset 512 B x 16 KiB: an 8 and a 16 KiB page,
         * a page change every round and a reset that walked both, 1.6 -
         * 1.7x BUMP's time).  No memory is resident for it that the round
         * does not use: a rewound page is touched as far as it serves. */
        mki_page **slot = slot_of(g, pg->cls);
        mki_page *head = *slot, *out = NULL;
        if (head == &mki_page_empty || pg->size > head->size) {
            out = lead(g, slot, pg);
            if (out && pg->size < MKI_PAGE_MAX)
                unlink_behind(pg, out);
            else
                out = NULL;
        } else if (head->size < MKI_PAGE_MAX) {
            out = pg;
        } else {
            queue_behind(head, pg);
        }
        if (out) { /* (given back with the others, under one lock) */
            g->page_bytes -= out->size;
            class_count(out->cls, out->size, 0);
            out->next = k.drop;
            k.drop = out;
        }
    }
    mki_segment_pages_release(k.drop);
}

static void general_reset(mk_ctx *ctx, int keep_one)
{
    mki_general *g = gen(ctx);
    /* chunks queued by other threads die with their pages (stored
     * without a test: a line the reset has just read, its `ops`) */
    atomic_store_explicit(&ctx->remote, NULL, memory_order_relaxed);
    /* the common small case (a context used for one object, or a few of
     * one size): one page, current, nothing else held; rewound in place */
    uint64_t cl = g->classes;
    if (keep_one && cl && !(cl & (cl - 1)) &&
        !((uintptr_t)g->full | (uintptr_t)g->large | (uintptr_t)g->spare |
          (uintptr_t)g->rest) &&
        ctx->fast_kind != MKI_KIND_SLOW) {
        mki_page *pg = *slot_of(g, (unsigned)__builtin_ctzll(cl));
        if (!pg->next) { /* (a class's first page is its current one) */
            rewind_page(pg, 1);
            g->page_bytes = pg->size;
            return;
        }
    }
    reset_pages(ctx, keep_one);
}

static void general_destroy(mk_ctx *ctx)
{
    mki_general *g = gen(ctx);
    general_reset(ctx, 0);
    if (g->cls_hi != mki_general_hi_empty)
        mki_meta_free(g->cls_hi, sizeof(mki_page *) * NHI);
    g->cls_hi = mki_general_hi_empty;
}

static void add_stats(mki_page *pg, void *arg)
{
    mk_stats *out = arg;
    out->blocks++;
    out->bytes_reserved += pg->size;
    /* usable sizes: a secure chunk's guard word is memkit's (page.h) */
    size_t guard = pg->ctx->fast_kind == MKI_KIND_SECURE &&
                           pg->kind != MKI_PAGE_HUGE ? MKI_GUARD : 0;
    if (pg->kind == MKI_PAGE_SMALL) {
        size_t live = pg->used - ((pg->flags & MKI_PF_CURRENT) ? 1u : 0u);
        out->chunks += live;
        out->bytes_used += live * (pg->chunk_size - guard);
        out->bytes_resident += mki_ctx_reached(
            (size_t)(pg->extend - pg->start), pg->size,
            MK_CONFIG_CHECK && pg->live);
    } else {
        out->chunks += 1;
        out->bytes_used += (size_t)(pg->end - pg->start) - guard;
        out->bytes_resident +=
            mki_ctx_reached((size_t)(pg->end - pg->start), pg->size, 0);
    }
}

static void general_stats(const mk_ctx *ctx, mk_stats *out)
{
    mki_general *g = gen((mk_ctx *)ctx);
    each_page(g, add_stats, out);
    for (const mki_page *pg = g->rest; pg; pg = pg->next) { /* no chunk */
        out->blocks++;
        out->bytes_reserved += pg->size;
        out->bytes_resting += pg->size;
        out->bytes_resident += pg->size; /* (unless purged meanwhile) */
    }
}

static void set_tid(mki_page *pg, void *arg)
{
    if (pg->kind == MKI_PAGE_SMALL && !(pg->flags & MKI_PF_FULL))
        mki_page_set_tid(pg, *(uintptr_t *)arg);
}

/* mk_ctx_trim: resting pages, the spare page, and current pages that hold
 * nothing. */
static size_t general_trim(mk_ctx *ctx)
{
    mki_general *g = gen(ctx);
    size_t bytes = 0;
    for (mki_page *pg = g->rest, *next; pg; pg = next) {
        next = pg->next;
        bytes += mki_segment_page_release_now(pg);
    }
    g->rest = NULL;
    if (g->spare) {
        mki_page *pg = g->spare;
        g->spare = NULL;
        bytes += page_trim(g, pg);
    }
    for (uint64_t bits = g->classes; bits; bits &= bits - 1) {
        unsigned c = (unsigned)__builtin_ctzll(bits);
        mki_page **slot = slot_of(g, c), *pg;
        /* pages a reset kept and the class has not reached yet: behind the
         * current page, holding nothing (no pin) */
        for (mki_page *q = (*slot)->next, *next; q; q = next) {
            next = q->next;
            if (q->used == 0) {
                unlink_behind(*slot, q);
                bytes += page_trim(g, q);
            }
        }
        pg = *slot;
        if (pg->used != 1) /* the pin alone: no live chunk */
            continue;
        mki_page *next = pg->next, *tail = pg->prev;
        if (next) {
            next->prev = tail; /* the next page takes its place */
            next->flags |= MKI_PF_CURRENT;
            next->used++;
            *slot = next;
        } else {
            *slot = &mki_page_empty;
            g->classes &= ~(1ull << c);
        }
        bytes += page_trim(g, pg);
    }
    return bytes;
}

static void general_set_owner(mk_ctx *ctx, uintptr_t tid)
{
    each_page(gen(ctx), set_tid, &tid);
}

static void general_each_live(mk_ctx *ctx,
                              void (*fn)(mki_page *, void *, void *), void *arg)
{
    mki_live_walk w = {fn, arg};
    each_page(gen(ctx), mki_ctx_up.walk_page, &w);
}

static int general_init(mk_ctx *ctx, const mk_ctx_opts *opts)
{
    mki_general *g = gen(ctx);
    if (opts && opts->block_size) {
        size_t b = mki_ctx_block_size(opts, 0, MKI_PAGE_MAX);
        if (!b)
            return -1; /* (errno EINVAL) */
        g->page_floor = b;
    }
    for (unsigned c = 0; c < MKI_NCLASS_DIRECT; c++)
        g->cls[c] = &mki_page_empty;
    g->cls_hi = mki_general_hi_empty;
    return 0;
}

const mki_kind_ops mki_general_ops = {
    .name = "general",
    .ctx_size = sizeof(mki_general),
    .init = general_init,
    .destroy = general_destroy,
    .alloc = general_alloc,
    .alloc_aligned = general_alloc_aligned,
    .free = mki_general_free_owned,
    .collect = mki_general_collect,
    .realloc = general_realloc,
    .usable_size = general_usable_size,
    .reset = general_reset,
    .stats = general_stats,
    .set_owner = general_set_owner,
    .trim = general_trim,
    .each_live = general_each_live,
};
