/* SPDX-License-Identifier: MIT */
/*
 * page.h - the inline heart of memkit: owner lookup from a pointer, the
 * calling thread's identity, and the free-list operations of a page.
 * Everything here is a handful of instructions with no atomic operation,
 * no lock and no call; anything rarer lives out of line in the callers.
 * Also the two facts every free of the release build checks: is the
 * address the start of a chunk (positions), and was the chunk freed
 * already (its key).
 */
#ifndef MKI_PAGE_H
#define MKI_PAGE_H

#include "../base/annotate.h"
#include "../base/base.h"
#include "../os/os.h"
#include "layout.h"

#pragma GCC visibility push(hidden)

/* ---- page/meta.c: bookkeeping memory ------------------------------------ */
void *mki_meta_alloc(size_t size); /* zeroed; NULL on OOM */
void mki_meta_free(void *p, size_t size);
/* Bookkeeping memory of @size bytes (an OS-page multiple) mapped whole,
 * zeroed, never given back (the leaves of segment.c's map); NULL on OOM.
 * Lock-free (its caller's lock). */
void *mki_meta_map(size_t size);
size_t mki_meta_bytes(void);
/* fork(): 0 before (take the lock), 1 in the parent and 2 in the child
 * after (release it).  The same for the page pool in segment.c. */
void mki_meta_fork(int phase);

/* ---- page/segment.c: segments, units, pages ------------------------------ */
/*
 * Take a page of @units units (a power of two <= 64, or a multiple of 64)
 * for @ctx, naturally aligned, with its first @commit_bytes committed.
 * The descriptor comes back with seg/unit/units/start/size set, kind 0,
 * and every unit of the run mapped to it.  NULL on OOM (nothing leaks).
 * Thread-safe.
 */
mki_page *mki_segment_page_alloc(uint32_t units, size_t commit_bytes);
/* Units of the run for a page of @bytes: a power of two up to 64 (64 KiB),
 * else whole 64-unit words. */
uint32_t mki_segment_units_for(size_t bytes);
/* A page (up to 1 MiB and 64 KiB alignment) or huge segment holding one
 * chunk of @size bytes aligned to @align, kind LARGE or HUGE, owned by
 * @ctx, `end` at the end of its usable bytes.  NULL on OOM. */
mki_page *mki_segment_chunk_alloc(mk_ctx *ctx, size_t size, size_t align);
/* Grow large page @pg in place to hold a chunk of @bytes (<= 1 MiB) from
 * its start, taking the free units that follow it; 0, or -1 if they are
 * not free (nothing changed).  Thread-safe. */
int mki_segment_page_grow(mki_page *pg, size_t bytes);
/* Give a page (and its descriptor) back.  Thread-safe.  The pages of a
 * context made with MK_CTX_RELEASE_ON_RESET go back to the OS at once. */
void mki_segment_page_release(mki_page *pg);
/* The same, and its memory goes back to the OS now (its OS pages are
 * decommitted); returns the bytes decommitted. */
size_t mki_segment_page_release_now(mki_page *pg);
/* mki_page_release for every page of list @pgs (linked through `next`,
 * which it overwrites), the pages of segments with one clock read, one
 * lock and one purge note for them all (a GENERAL reset gives back every
 * page beyond what it keeps). */
void mki_segment_pages_release(mki_page *pgs);
/* The pages of list @pgs (linked through `next`, kept) rest: their owner
 * keeps them, with no chunk in them, for the pages it will need next, and
 * a purge may decommit their memory meanwhile, as it does free units'
 * (a reset's pages beyond what it keeps: ctx/general.c).  A resting page
 * is woken before use, or given back as any page.  Thread-safe. */
void mki_segment_pages_rest(mki_page *pgs);
/* Resting page @pg back in use by its owner, its units committed again
 * where a purge took them (their contents are then zero or stale): 0; -1
 * with ENOMEM if that commit failed (the page still rests).  Waits out a
 * purge pass that is decommitting it.  Thread-safe. */
int mki_segment_page_wake(mki_page *pg);
/* Count a huge mapping at @base as a segment memkit holds (@add 1) or no
 * longer holds (0); the checking build records it in its registry.  0, or
 * -1 when the registry cannot record it.  Thread-safe. */
int mki_segment_register(void *base, int add);
/* One purge pass (purge.c decides when): decommit, with @how
 * (MKI_OS_DONTNEED / MKI_OS_FREE), the OS pages of free units that were
 * free at the previous pass too (@force: every free unit), and give back
 * segments empty for @delay_ns (@force: all): unmapped with @unmap_empty,
 * else decommitted and kept for reuse (a few).  Sets *@pending if free
 * memory remains for a later pass, and lowers *@next_due to when it will
 * be due.  Returns the bytes purged.  Thread-safe; one pass at a time
 * (purge.c). */
size_t mki_segment_purge(int force, int how, int unmap_empty,
                         unsigned long long delay_ns, int *pending,
                         unsigned long long *next_due);
size_t mki_segment_count(void);
/* Are there empty segments, or arena slots given back (address space held
 * idle)?  Relaxed.  And: unmap the arena's given-back slots at its end. */
int mki_segment_idle(void);
void mki_segment_trim_arena(void);
/* Decommit (with @how) free units of the normal segments that are still
 * committed, whole OS pages, about @bytes of them whatever their age (the
 * purge policy's shed, purge.c); returns the bytes given back. */
size_t mki_segment_shed(size_t bytes, int how);
/* Pages cut from segments since the process started (a test's measure of
 * page traffic). */
size_t mki_segment_cuts(void);
/* Process figures in the terms of mallinfo2 (see mki_malloc_figures). */
typedef struct mki_malloc_figures {
    size_t segment_bytes; /* committed in normal segments (headers too) */
    size_t page_bytes;    /* of those, in pages held by contexts */
    size_t huge_count;    /* chunks in a mapping of their own */
    size_t huge_bytes;    /* committed in those mappings */
    size_t huge_cached;   /* committed in freed mappings kept for reuse */
    size_t used_bytes;    /* page_bytes + huge_bytes */
} mki_malloc_figures;
void mki_segment_figures(mki_malloc_figures *f);
/* Bytes of the normal segments in use (pages handed out, headers), and
 * of their free units still committed; relaxed, thread-safe. */
void mki_segment_use(size_t *live, size_t *slack);
void mki_segment_fork(int phase); /* as mki_meta_fork */
/* Checking build: is @p inside a segment memkit holds?  Thread-safe. */
int mki_segment_owns(const void *p);

/* ---- page/huge.c: chunks in a mapping of their own ----------------------- */
/* A chunk of @size bytes aligned to @align (a power of two) in a mapping of
 * its own (from the cache when one fits); descriptor kind MKI_PAGE_HUGE,
 * start = the chunk, MKI_PF_FRESH when the memory is fresh (zero).  NULL
 * with errno ENOMEM.  Thread-safe. */
mki_page *mki_huge_alloc(size_t size, size_t align);
/* While @on, the calling thread's fresh huge mappings are for zeroed
 * requests (calloc, mk_alloc_zero), whose zero pages a program may use
 * sparsely: they are not advised for transparent huge pages (huge.c). */
void mki_huge_calloc(int on);
/* Give a huge chunk's mapping back (to the cache, or to the OS). */
void mki_huge_release(mki_page *pg);
/* Resize huge chunk @pg to @size bytes (> MKI_LARGE_MAX) in place or by
 * moving its mapping (no copy).  Returns its descriptor (it moves with the
 * mapping: unlink it from lists first), or NULL (errno ENOMEM; untouched). */
mki_page *mki_huge_resize(mki_page *pg, size_t size);
/* One purge pass over the cache (purge.c decides when): mappings cached
 * for @delay_ns (@force: all) are unmapped (@unmap_due), or keep their
 * address space and give their pages back.  Sets *@pending if a cached
 * mapping will be due later.  Returns the bytes purged. */
size_t mki_huge_purge(int force, int unmap_due, unsigned long long delay_ns,
                      int *pending, unsigned long long *next_due);
/* Give back (unmap) about @want bytes of the cached mappings' resident
 * pages, the oldest first, whole mappings or their tails; returns the
 * committed bytes given back (the peak rule, purge.c). */
size_t mki_huge_shed(size_t want);
/* Committed bytes of the live huge chunks and of the cached mappings,
 * without the cache's lock (relaxed). */
void mki_huge_use(size_t *live_bytes, size_t *cache_bytes);
void mki_huge_figures(size_t *count, size_t *live_bytes, size_t *cache_bytes);
void mki_huge_fork(int phase); /* as mki_meta_fork */

/* ---- page/page.h (inline): owner lookup and free-list ops ---------------- */
/* (included at the top) */

/* Give back any page or huge chunk descriptor. */
MKI_INLINE void mki_page_release(mki_page *pg)
{
    if (pg->kind == MKI_PAGE_HUGE)
        mki_huge_release(pg);
    else
        mki_segment_page_release(pg);
}

/* ---- free-list links ----------------------------------------------------------
 * Secure mode (MEMKIT_SECURE, read once at start, options.c): the link
 * word of a free chunk is stored encoded, as glibc's safe-linking and
 * mimalloc's secure mode do: XORed with the chunk's own address shifted by
 * 12 (the random bits of the address) and with a secret drawn at start, so
 * that an overflow or a use-after-free write cannot plant an address of
 * its choosing, and a link that was overwritten decodes to garbage that
 * the reader's check (page.h) reports.  Only slow paths read and write
 * links in secure mode: its contexts never take the inline fast paths
 * (nor do the checking build's, which encodes its links the same way). */
MKI_INLINE uintptr_t mki_link_mask(const void *p)
{
    /* the checking build encodes too: a link overwritten with zeros (the
     * commonest write to a freed object, `obj->next = NULL`) then decodes
     * to no chunk and is reported, where NULL would pass as the list's end */
    return MK_CONFIG_CHECK || mki_secure ? ((uintptr_t)p >> 12) ^ mki_link_key
                                         : 0;
}

/* The link word of a free chunk of an uninstrumented secure context (its
 * own paths, ctx/general.c and general.h): encoded, with no test of the
 * mode and, like the inline paths, no annotation (such a context's memory
 * is never poisoned). */
MKI_INLINE void *mki_link_get_enc(void *p)
{
    return (void *)(*(uintptr_t *)p ^ ((uintptr_t)p >> 12) ^ mki_link_key);
}
MKI_INLINE void mki_link_set_enc(void *p, void *v)
{
    *(uintptr_t *)p = (uintptr_t)v ^ ((uintptr_t)p >> 12) ^ mki_link_key;
}

/* The link word of a free chunk (slow paths only). */
MKI_INLINE void *mki_link_get(void *p)
{
    mki_mem_defined(p, sizeof(void *));
    void *v = (void *)(*(uintptr_t *)p ^ mki_link_mask(p));
    mki_mem_noaccess(p, sizeof(void *));
    return v;
}

MKI_INLINE void mki_link_set(void *p, void *v)
{
    mki_mem_undefined(p, sizeof(void *));
    *(uintptr_t *)p = (uintptr_t)v ^ mki_link_mask(p);
    mki_mem_noaccess(p, sizeof(void *));
}


/* A descriptor that never has a free chunk: the class slot of a context
 * that holds no page of that class points here, so the fast path needs no
 * NULL test (its fast_tid is 0, so no free ever reaches it). */
extern mki_page mki_page_empty;
/* The page map's entry for the units of a page that went back (segment.c):
 * kind MKI_PAGE_FREE, fast_tid 0. */
extern mki_page mki_page_gone;

/* Is @p in a normal segment memkit holds, or at the start of a huge
 * mapping?  A byte per 4 MiB of address space (segment.c): 1 at every
 * normal segment's base, 2 at every huge mapping's.  The release build's
 * slow free path tests it first, so that a pointer memkit never returned
 * is reported, not followed: only a known segment's page map is read.
 * (Past its first 4 MiB a huge chunk's data lies where a segment's header
 * would, so a pointer into it must never lead to a page map.)  The map
 * has two levels: a table of 512 leaves in the library's data (4 KiB),
 * and the leaves, 64 KiB each for 256 GiB of address space, mapped when a
 * segment is first made in their range: the whole map, flat, would be
 * 32 MiB of static data, which programs with a limit on their data
 * (RLIMIT_DATA), garbage collectors that scan it, and mlockall all pay
 * for.  Readers are lock-free (a leaf is published once, and never goes). */
#define MKI_SEGMAP_BITS ((size_t)1 << (47 - MKI_SEG_SHIFT))
#define MKI_SEGMAP_LEAF_SHIFT 16
#define MKI_SEGMAP_LEAVES (MKI_SEGMAP_BITS >> MKI_SEGMAP_LEAF_SHIFT)
enum { MKI_SEGMAP_NORMAL = 1, MKI_SEGMAP_HUGE = 2 };
extern unsigned char *mki_segmap[MKI_SEGMAP_LEAVES];
/* The map's byte for @p's 4 MiB of address space (0: none). */
MKI_INLINE unsigned mki_segmap_get(const void *p)
{
    uintptr_t i = ((uintptr_t)p - 1) >> MKI_SEG_SHIFT;
    if (i >= MKI_SEGMAP_BITS)
        return 0;
    const unsigned char *leaf =
        __atomic_load_n(&mki_segmap[i >> MKI_SEGMAP_LEAF_SHIFT], __ATOMIC_ACQUIRE);
    return leaf ? __atomic_load_n(&leaf[i & ((1u << MKI_SEGMAP_LEAF_SHIFT) - 1)],
                                  __ATOMIC_RELAXED)
                : 0;
}
MKI_INLINE int mki_segment_known(const void *p)
{
    return mki_segmap_get(p) == MKI_SEGMAP_NORMAL;
}
/* Is @p in a normal segment of the arena (os.h, segment.c)?  The free
 * path's test: a subtraction and a comparison, and everything in the
 * arena's range is mapped, so the page map of @p's segment may be read.
 * A pointer it refuses may still be memkit's (a huge chunk, a segment
 * outside the arena): mki_segment_find, on the slow path, knows. */
MKI_INLINE int mki_segment_fast(const void *p)
{
    return mki_os_arena_has_addr((uintptr_t)p - 1); /* (NULL: no) */
}
MKI_INLINE int mki_huge_known(const void *p)
{
    return mki_segmap_get(p) == MKI_SEGMAP_HUGE;
}

/* The segment holding chunk @p (see layout.h for why p - 1). */
MKI_INLINE mki_segment *mki_segment_of(const void *p)
{
    return (mki_segment *)(((uintptr_t)p - 1) & ~(uintptr_t)MKI_SEG_MASK);
}

/* The page descriptor of chunk @p: a mask and two loads, side by side
 * (layout.h).  Pre: @p is in a
 * normal segment (mki_segment_known) or is the start of a huge chunk.
 * NULL for a unit no page ever covered (a segment's header, say). */
MKI_INLINE mki_page *mki_page_of(const void *p)
{
    mki_segment *s = mki_segment_of(p);
    unsigned u = (unsigned)((uintptr_t)p >> MKI_UNIT_SHIFT) & (MKI_UNITS - 1);
    /* one of the two is NULL (layout.h): the map's entry of a unit in a
     * slot a page covers whole (read from an OS page no one wrote: the
     * kernel's zero page), or the coarse entry of a slot of smaller pages */
    return (mki_page *)((uintptr_t)s->map[u] |
                        (uintptr_t)s->coarse[u / MKI_SLOT_UNITS]);
}

/* The descriptor of the page or huge mapping that holds address @p, found
 * without reading anything @p leads to unless it is memory memkit holds:
 * NULL when it is not (a stack, a global, another allocator's heap, the
 * data of a huge chunk past its first 4 MiB), or when its unit is in no
 * page; the descriptor of a page that went back is mki_page_gone.  Slow
 * paths: the callers validate @p against it (the chunk API, ctx/). */
mki_page *mki_segment_find(const void *p);

/* ---- positions: is an address the start of a chunk? -----------------------
 * A small page knows which addresses start a chunk it has handed out: the
 * multiples of its chunk size below `extend`.  The inline test is one
 * multiply (layout.h, pos_magic): with m = ceil(2^32 / size) (plus one when
 * size is a power of two), (uint32)(off * m) is k * e for off = k * size,
 * where e = (size * m) mod 2^32, and is at least m for any other off below
 * 64 KiB (the divisibility test of Lemire, Kaser and Kurz, "Faster
 * remainder by direct computation", 2019, for 16-bit offsets and 32-bit
 * arithmetic; tests/unit/positions.c checks every class and slab size), so
 * `< n * e` says "a chunk start, one of the first n".  Pages above 64 KiB
 * (slab pages of big chunks) keep pos_limit 0: the exact test, a
 * division, is mki_page_is_chunk_exact's. */
MKI_INLINE uint32_t mki_page_pos_magic(uint32_t size)
{
    uint32_t m = (uint32_t)((((uint64_t)1 << 32) + size - 1) / size);
    return (uint32_t)(size * m) == 0 ? m + 1 : m; /* (a power of two) */
}

/* Set the position test of small page @pg (chunk_size, start, extend set). */
MKI_INLINE void mki_page_pos_init(mki_page *pg)
{
    if (pg->size > MKI_PAGE_MAX) {
        pg->pos_magic = pg->pos_limit = 0;
        return;
    }
    pg->pos_magic = mki_page_pos_magic(pg->chunk_size);
    uint32_t n = (uint32_t)((size_t)(pg->extend - pg->start) / pg->chunk_size);
    __atomic_store_n(&pg->pos_limit, n * (pg->chunk_size * pg->pos_magic),
                     __ATOMIC_RELAXED);
}

/* `extend` moved back to `start` (a rewound page, same chunk size): no
 * position passes; pos_magic stays. */
MKI_INLINE void mki_page_pos_rewind(mki_page *pg)
{
    __atomic_store_n(&pg->pos_limit, 0, __ATOMIC_RELAXED);
}

/* `extend` moved past @n more chunks. */
MKI_INLINE void mki_page_pos_grow(mki_page *pg, uint32_t n)
{
    if (MKI_LIKELY(pg->pos_magic != 0))
        __atomic_store_n(&pg->pos_limit,
                         pg->pos_limit + n * pg->chunk_size * pg->pos_magic,
                         __ATOMIC_RELAXED);
}

/* Is @q the start of a chunk small page @pg has handed out (live or
 * freed)?  The inline test (false for pages above 64 KiB: use the exact
 * one).  Pre: @q lies in @pg's units. */
MKI_INLINE int mki_page_is_chunk(const mki_page *pg, const void *q)
{
    uint32_t off = (uint32_t)((uintptr_t)q - (uintptr_t)pg->start);
    return off * pg->pos_magic < pg->pos_limit;
}

/* The same for every small page and any address @q (slow paths; any
 * thread: the position test's limit and `extend` are read relaxed): the
 * multiply where the page has it, else a division. */
MKI_INLINE int mki_page_is_chunk_exact(const mki_page *pg, const void *q)
{
    const char *c = q;
    if ((uintptr_t)c - (uintptr_t)pg->start >= pg->size)
        return 0;
    if (MKI_LIKELY(pg->pos_magic != 0)) {
        uint32_t off = (uint32_t)(c - pg->start);
        return off * pg->pos_magic <
               __atomic_load_n(&((mki_page *)pg)->pos_limit, __ATOMIC_RELAXED);
    }
    const char *ext = __atomic_load_n(&((mki_page *)pg)->extend,
                                      __ATOMIC_RELAXED);
    return c < ext && (size_t)(c - pg->start) % pg->chunk_size == 0;
}

/* ---- the double-free key ------------------------------------------------------
 * A free chunk of a small page holds its free-list link in its first word
 * and the key in its second: the address of its page's descriptor, which
 * memkit never gives a program (descriptors are its bookkeeping, page/
 * meta.c), so that the program's own data holds it only by reading
 * memkit's internals; and the free path has it in a register already.
 * (glibc's tcache keeps a secret there; a secret would have to be loaded,
 * and buys nothing here: a program that writes a freed chunk can defeat
 * either, and no innocent one stores the descriptor's address.)  Every free
 * of the release build checks it before anything else (a chunk freed
 * twice, wherever it waits: its page's free list, another thread's list,
 * a pool's front) and stores it; every hand-out clears it (a chunk memkit
 * hands out never holds its key).  Chunks are at least 16 bytes
 * (sizeclass.c; slab slots too).  Instrumented contexts do not use it:
 * their bitmap of live chunks knows (check/instrument.c). */
MKI_INLINE int mki_page_chunk_freed(const mki_page *pg, const void *p)
{
    return ((const uintptr_t *)p)[1] == (uintptr_t)pg;
}
MKI_INLINE void mki_page_chunk_set_freed(const mki_page *pg, void *p)
{
    ((uintptr_t *)p)[1] = (uintptr_t)pg;
}
MKI_INLINE void mki_page_chunk_set_live(void *p) { ((uintptr_t *)p)[1] = 0; }

/* ---- secure mode: guard words --------------------------------------------------
 * MEMKIT_SECURE=1 and up: the last 8 bytes of every chunk of a small or
 * large page of a secure context hold a guard word, a value only memkit
 * knows for that address (its secret, the chunk's address), written when
 * the chunk is handed out and never by the program (the chunk's usable
 * size stops before it).  A write past the end of a chunk into its
 * neighbour crosses it, and is reported when either of the two is freed:
 * a free checks its chunk's guard and the one of the chunk before it in
 * its page (chunk.c).  A freed 16-byte chunk holds its double-free key
 * where its guard was (its second word), which passes too.  Huge chunks
 * have no guard (their neighbour is another mapping; MEMKIT_SECURE=2 puts
 * a guard page after them). */
#define MKI_GUARD 8u
MKI_INLINE uintptr_t mki_guard_value(const void *chunk)
{
    return (uintptr_t)chunk ^ mki_link_key ^ 0x5a5a5a5a5a5a5a5aull;
}
/* Where the guard of @chunk of small or large page @pg is. */
MKI_INLINE uintptr_t *mki_guard_at(const mki_page *pg, const void *chunk)
{
    return (uintptr_t *)(pg->kind == MKI_PAGE_SMALL
                             ? (char *)chunk + pg->chunk_size - MKI_GUARD
                             : pg->end - MKI_GUARD);
}
MKI_INLINE void mki_guard_set(const mki_page *pg, void *chunk)
{
    *mki_guard_at(pg, chunk) = mki_guard_value(chunk);
}
/* Chunk @chunk of small page @pg of a secure context is handed out: its
 * double-free key goes and its guard word is written, in one store where
 * they share a word (a 16-byte chunk: its guard stands for "live"), so
 * that the free of the chunk after it, on any thread, never reads a word
 * that is neither. */
MKI_INLINE void mki_guard_hand_out(const mki_page *pg, void *chunk)
{
    uintptr_t *g = (uintptr_t *)((char *)chunk + pg->chunk_size - MKI_GUARD);
    if (g != (uintptr_t *)chunk + 1)
        mki_page_chunk_set_live(chunk);
    *g = mki_guard_value(chunk);
}
/* The chunk whose guard a write past its end broke, among @chunk and the
 * chunk before it in small page @pg (large: @chunk alone), or NULL. */
MKI_INLINE const void *mki_guard_broken(const mki_page *pg, const char *chunk)
{
    if (*mki_guard_at(pg, chunk) != mki_guard_value(chunk))
        return chunk;
    if (pg->kind == MKI_PAGE_SMALL && chunk > pg->start) {
        const char *prev = chunk - pg->chunk_size;
        uintptr_t w = ((const uintptr_t *)chunk)[-1];
        if (w != mki_guard_value(prev) &&
            !(pg->chunk_size == 16 && w == (uintptr_t)pg))
            return prev;
    }
    return NULL;
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

/* A page holding sampled chunks (layout.h, `samples`) has this bit in its
 * fast_tid: no thread's identity has it (a counter, os.h), so no inline
 * free takes the page, while its owner's slow path still knows it.  (Bit
 * 63 is secure mode's, ctx.h.) */
#define MKI_TID_SAMPLED ((uintptr_t)1 << 62)

MKI_INLINE void mki_page_set_tid(mki_page *pg, uintptr_t tid)
{
    if (MKI_UNLIKELY(atomic_load_explicit(&pg->samples, memory_order_relaxed) != NULL) &&
        tid)
        tid |= MKI_TID_SAMPLED;
    atomic_store_explicit(&pg->fast_tid, tid, memory_order_relaxed);
}

/* Prefetch, for a write, memory @at of page or block @pg that a free will
 * soon reach (a FIFO program frees the chunks ahead next), if the page has
 * handed it out (below `extend`): a prefetch into memory never touched
 * finds no page-table entry, and on a virtual machine that shadows page
 * tables that cost W1M's ring of two 1 KiB chunks 7 - 25 ns an operation,
 * where it takes 4 with this bound (docs/DESIGN.md, "The fast paths"). */
MKI_INLINE void mki_page_prefetch(const mki_page *pg, const char *at)
{
    if (at < pg->extend)
        __builtin_prefetch(at, 1);
}

/* Push a free chunk (the free list is threaded through the chunks' first
 * word; a chunk is at least 16 bytes: its second holds the double-free
 * key).  Slow paths; the fast path in chunk.c
 * writes the link itself. */
MKI_INLINE void mki_page_push(mki_page *pg, void *p)
{
    mki_link_set(p, pg->free);
    pg->free = p;
}

/* Can the page hand out a chunk: a free one, or one never used yet?
 * (Never-used chunks lie in [extend, end) and are not on the free list: a
 * page is threaded onto it only an OS page at a time, as malloc's refill
 * hands out a chunk of that OS page (ctx/general.c, extend_run), so it is
 * touched only where chunks are handed out, and a rewound page needs no
 * work.) */
MKI_INLINE int mki_page_has_chunk(const mki_page *pg)
{
    return pg->free != NULL || pg->extend < pg->end;
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
            MKI_UNLIKELY(!mki_page_is_chunk_exact(pg, next)))
            next = mki_page_bad_link(pg, b);
        pg->free = next;
    } else {
        b = pg->extend;
        pg->extend += pg->chunk_size;
        mki_page_pos_grow(pg, 1);
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

/* ---- page/validate.c: pointers handed back --------------------------------- */
/* The page of pointer @p if it is the start of a chunk a page holds (the
 * checking build's validation of every pointer handed to memkit); else
 * reports it, as a misuse of function @fn (a free if @is_free: memory
 * memkit holds free is then a double free), and returns NULL.  Live or
 * freed is the owner's to say. */
mki_page *mki_page_validate(const void *p, const char *fn, int is_free);

/* The bytes of an instrumented small page's live bitmap (`live`: a bit
 * per chunk; allocated by the checking layer, freed with the page). */
MKI_INLINE size_t mki_page_live_bytes(const mki_page *pg)
{
    return ((size_t)pg->capacity + 63) / 64 * 8;
}

/* ---- what the page layer asks of the layers above ------------------------------
 * Bound once at the top (bind.c) by a constant initialiser, so that it
 * holds before any constructor runs.  The page layer treats a page's
 * owner (`ctx`) as an opaque pointer; these are all it needs from one. */
struct mki_page_up {
    /* The name of a page's owner, for a report (NULL: none). */
    const char *(*owner_name)(const mki_page *pg);
    /* Take in chunks freed into heaps no thread owns; @force 1 (mk_trim)
     * gives back every empty one.  Returns 1 to be run again later. */
    int (*collect)(int force);
    /* Create the background thread (pthread_create's arguments), with
     * what the new thread allocates charged to memkit's own context. */
    int (*spawn)(pthread_t *t, const pthread_attr_t *attr,
                 void *(*fn)(void *));
    /* A page with charged bytes goes back: its owner takes them off its
     * figures and limits.  Called by the thread giving it back, before
     * the page is reused. */
    void (*released)(mki_page *pg);
    /* A page whose `samples` is not NULL goes back (its chunks die with
     * it): the heap profile forgets them.  Called before the page is
     * reused. */
    void (*unsampled)(mki_page *pg);
};
extern const struct mki_page_up mki_page_up;

#pragma GCC visibility pop

#endif /* MKI_PAGE_H */
