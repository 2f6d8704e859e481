/* SPDX-License-Identifier: MIT */
/*
 * layout.h - the page layer's data structures and geometry, and the
 * glossary of the words the whole code uses.
 *
 * Glossary (one meaning per word, used everywhere in the code):
 *   OS page   the kernel's unit of mapping and residency (4 KiB here).
 *   segment   4 MiB of address space reserved from the OS at a 4 MiB
 *             boundary.  Its first bytes are a header holding the unit
 *             bitmap and the page map; the rest is cut into units.
 *   unit      1 KiB of a segment; the granule of the page map.
 *   page      a run of 2^k units (k = 0..6, so 1..64 KiB) owned by one
 *             context, described by an out-of-line mki_page.  A small page
 *             holds chunks of one size class; a large page holds one chunk.
 *   block     what a context kind calls its unit of memory; for every kind it
 *             is a page (or a huge segment).
 *   chunk     what mk_alloc returns.
 *   huge      a chunk too big for a segment's pages: its own segment.
 *
 * Owner lookup (the O(1) contract of mk_free / mk_ctx_of):
 *     seg  = (p - 1) & ~(SEGMENT_SIZE - 1)     mask, no load
 *     page = seg->map[(p >> UNIT_SHIFT) & (UNITS - 1)]   one load,
 *          | seg->coarse[(p >> SLOT_SHIFT) & (SLOTS - 1)]  ORed with a
 *            second beside it (one of the two is NULL: struct mki_segment)
 *     ctx  = page->ctx                                    one load
 * (the page layer keeps `ctx` as an opaque owner pointer: it never reads
 * a context; ctx/ctx.h defines them)
 * "p - 1" lets a huge chunk aligned to a segment boundary keep its header in
 * the segment before it; no other chunk starts on a segment boundary.
 */
#ifndef MKI_LAYOUT_H
#define MKI_LAYOUT_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/base.h"

/* ---- geometry ----------------------------------------------------------- */
#define MKI_OS_PAGE 4096u
#define MKI_SEG_SHIFT 22
#define MKI_SEG_SIZE ((size_t)1 << MKI_SEG_SHIFT) /* 4 MiB */
#define MKI_SEG_MASK (MKI_SEG_SIZE - 1)
#define MKI_UNIT_SHIFT 10
#define MKI_UNIT ((size_t)1 << MKI_UNIT_SHIFT) /* 1 KiB */
#define MKI_UNITS (MKI_SEG_SIZE >> MKI_UNIT_SHIFT) /* 4096 per segment */
#define MKI_BITMAP_WORDS (MKI_UNITS / 64)
#define MKI_PAGE_MAX_UNITS 64u /* a small page is at most 64 KiB */
#define MKI_PAGE_MAX (MKI_PAGE_MAX_UNITS * MKI_UNIT)
#define MKI_SLOT_SHIFT 16 /* a slot of the coarse map: 64 units */
#define MKI_SLOT_UNITS (1u << (MKI_SLOT_SHIFT - MKI_UNIT_SHIFT))
#define MKI_SLOTS (MKI_SEG_SIZE >> MKI_SLOT_SHIFT)
/* Borders a huge mapping can record between the pieces it is made of */
#define MKI_HUGE_PIECES 191 /* (the bytes of a segment's three bitmaps) */

/* ---- size classes (see page/sizeclass.c for the table) ------------------ */
#define MKI_NCLASS 64              /* 16 .. 32 KiB (at most 64: a bitmap word) */
#define MKI_NCLASS_DIRECT 21       /* classes <= 1040 B, inline in a context */
#define MKI_SMALL_MAX 32768u       /* largest chunk held in a shared page */
#define MKI_DIRECT_MAX 1040u       /* largest size of the class lookup table */
/* larger chunks get a huge segment: four chunks of this size fit a
 * segment beside its header (60 of its 63 whole 64 KiB words; at 1 MiB
 * three did, and a quarter of each segment held nothing) */
#define MKI_LARGE_MAX (960u << 10)
#define MKI_SLAB_MAX (1u << 20)    /* largest chunk size of a SLAB context */
#define MKI_SIZE_MAX ((size_t)1 << 46) /* larger requests fail at once */

/* ---- pages -------------------------------------------------------------- */
typedef struct mki_page mki_page;
typedef struct mki_segment mki_segment;

enum mki_page_kind {
    MKI_PAGE_FREE = 0, /* descriptor not in use */
    MKI_PAGE_SMALL,    /* chunks of one class, free list */
    MKI_PAGE_LARGE,    /* one chunk in a run of units */
    MKI_PAGE_HUGE,     /* one chunk in its own segment */
    MKI_PAGE_BLOCK     /* a kind-managed block (bump, generation) */
};

enum mki_page_flag {
    MKI_PF_FULL = 1,    /* on the context's full list */
    MKI_PF_CURRENT = 2, /* head of its class list; holds one pin in `used` */
    MKI_PF_FRESH = 4,   /* huge: its memory came zeroed from the OS */
    MKI_PF_RELEASE = 8, /* its owner gives memory back at once, keeping
                           nothing cached (set by the owner, a context of
                           MK_CTX_RELEASE_ON_RESET; the page layer only
                           reads it) */
    MKI_PF_REST = 16    /* resting: its owner keeps it with no chunk in
                           it, and a purge may decommit it meanwhile (set
                           and cleared by the page layer: segment.c,
                           mki_segment_pages_rest / mki_segment_page_wake) */
};

/*
 * A page descriptor, kept out of line (page memory holds only chunks).
 * The first cache line is what the fast paths touch.
 */
/* Aligned to a cache line (192 bytes a descriptor, from meta.c's 64-byte
 * slots): the fields every malloc and free touch, the first 64 bytes, are
 * one line.  Packed at 144 bytes on 16, three descriptors in four had them
 * across two lines (Larson, one thread: 6.18M first-level data misses a
 * million operations, against 3.94M on tcmalloc; cachegrind). */
struct mki_page {
    alignas(64) void *free; /* free list threaded through free chunks */
    _Atomic uintptr_t fast_tid; /* thread whose frees take the fast path;
                                   0: none (read by any thread: atomic) */
    uint32_t used;       /* live chunks, +1 while CURRENT (the pin) */
    uint32_t chunk_size; /* bytes per chunk (small pages) */
    char *start;         /* first chunk */
    char *extend;        /* first byte never threaded onto `free` */
    char *end;           /* start + capacity * chunk_size; large/huge: end
                            of the usable bytes */
    mk_ctx *ctx;         /* owner */
    /* Small pages: is q the start of a chunk handed out from this page?
     * (uint32)((q - start) * pos_magic) < pos_limit, one multiply: the
     * multiple k * chunk_size maps to k * (chunk_size * pos_magic mod 2^32),
     * below pos_limit exactly for the chunks below `extend`; anything else
     * maps to at least pos_magic (page.h, mki_page_pos_*).  pos_limit 0: no position passes (pages of
     * other kinds, pages above 64 KiB), the exact test is the slow path's. */
    uint32_t pos_magic, pos_limit;
    /* -- colder -- */
    mki_page *next, *prev; /* in the owner's class list / full / large list */
    uint32_t unit;  /* first unit in its segment (mki_segment_of(start)) */
    uint32_t units; /* length in units (huge: 0) */
    uint8_t kind;   /* enum mki_page_kind */
    uint8_t cls;    /* size class (GENERAL pages); bucket (SLAB pages) */
    uint8_t flags;  /* enum mki_page_flag */
    uint32_t capacity;
    size_t size;    /* bytes of the page (huge: of the mapping) */
    size_t charged; /* bytes charged to the owner for it (ctx/limit.c);
                       the page layer reports them when the page goes */
    uint32_t lo, hi; /* SLAB pages: `used` range that keeps the page where
                        it is; leaving it (used < lo after a free, used > hi
                        after an alloc) calls the slab's rebucket */
    _Atomic uint64_t *live; /* instrumented small pages: a bit per live
                               chunk (check/instrument.c) */
    /* GENERAL small pages: chunks freed by other threads, waiting for the
     * owner: a list through the chunks (bits 3..47: the head), its length
     * (bits 48..63) and MKI_XF_DELAYED (bit 0: the page is full, frees go
     * to the context's list instead).  One word, so a push and the owner's
     * moves change the list, its count and the state at once (general.c). */
    _Atomic uintptr_t xfree;
    /* The heap profile's records of the sampled chunks of this page (its
     * owner's business, prof/sample.c; NULL: none).  While it is not NULL
     * the page's fast_tid carries MKI_TID_SAMPLED, so that every free into
     * the page takes the slow path, which looks for the chunk here; the
     * page layer only tells the owner when such a page goes. */
    _Atomic(void *) samples;
};

#define MKI_XF_DELAYED ((uintptr_t)1)
#define MKI_XF_ONE ((uintptr_t)1 << 48)
#define MKI_XF_PTR (((uintptr_t)1 << 48) - 8)

/* ---- segments ----------------------------------------------------------- */
enum mki_seg_kind { MKI_SEG_NORMAL = 1, MKI_SEG_HUGE = 2 };

/* Where the kernel mappings that make up a huge mapping may begin: offsets
 * from its start, ascending, inside it (0 is implied).  Where there is no
 * entry the range is one kernel mapping; an entry where there is no border
 * costs a system call, no more (huge.c). */
typedef struct mki_huge_pieces {
    uint32_t n;
    size_t at[MKI_HUGE_PIECES];
} mki_huge_pieces;

/*
 * The header at the start of every segment.  The map sits at a fixed
 * offset so that a huge segment can keep a one-page header: its chunk
 * starts right after the entry that describes it.
 */
struct mki_segment {
    uint32_t magic;
    uint32_t kind;          /* enum mki_seg_kind */
    size_t size;            /* bytes reserved (huge: the whole mapping) */
    mki_segment *next, *prev; /* arena lists */
    uint32_t free_units;
    uint32_t max_run_hint;  /* upper bound of the largest free aligned run */
    uint32_t warm_run_hint; /* the same, of runs free and still committed
                               (raised when a page goes back, tightened
                               when a search fails; segment.c) */
    uint32_t fixed_units;   /* units never handed out: the header, and in
                               MEMKIT_SECURE=2 the guard page at the end */
    _Atomic uint32_t thp;   /* normal segments: advised for transparent
                               huge pages (segment.c, thp_off) */
    uint32_t low_word;      /* every unit of the `used` words below it is
                               handed out: the unit searches start there
                               (segment.c, units_taken / units_freed) */
    uint32_t open_units;    /* units from the start that are mapped
                               read-write; the rest is not mapped (not in
                               VmSize, VmData, the commit charge or
                               mlockall's locked memory) until a page
                               needs it (segment.c, open_to) */
    uint32_t guarded;       /* MEMKIT_SECURE=2: its last OS page is a guard
                               page of its own */
    uint64_t empty_since_ns; /* when it last became empty (purge delay) */
    uint64_t freed_ns;      /* when a page of it last went back to it */
    size_t huge_committed;  /* huge: bytes committed */
    union {
        struct {
            uint64_t used[MKI_BITMAP_WORDS];      /* unit handed out */
            uint64_t committed[MKI_BITMAP_WORDS]; /* unit may be resident */
            uint64_t aged[MKI_BITMAP_WORDS]; /* free or resting, and
                                                committed, at the last purge
                                                pass (segment.c) */
            uint64_t rest[MKI_BITMAP_WORDS]; /* unit of a resting page
                                                (MKI_PF_REST), not held by
                                                a purge */
        };
        /* huge segments: the kernel mappings it is made of (huge.c moves
         * pages in from other mappings; mremap moves one at a time) */
        mki_huge_pieces pieces;
    };
    mki_page huge_page;     /* the descriptor of a huge segment's chunk */
    /* The page map in 64 KiB slots (segment.c, map_set).  A slot that a
     * page covers whole (64 units, or part of a larger page) has its page
     * in coarse[k] (&mki_page_gone once it went back) and its map[]
     * entries NULL, never written; a slot with smaller pages has an entry
     * in map[] for each of its units (NULL: never in a page) and its bit
     * in fine_slots, and its coarse entry NULL.  So one of a unit's two
     * entries is NULL, and the lookup ORs them (no branch).  A
     * heap of 64 KiB pages thus leaves most of the 32 KiB map untouched,
     * not resident (reading it maps the kernel's zero page): it is 0.8%
     * of the memory such a heap holds. */
    uint64_t fine_slots;
    alignas(64) mki_page *coarse[MKI_SLOTS];
    alignas(64) mki_page *map[MKI_UNITS];
};

#define MKI_SEG_MAGIC 0x6d6b7367u /* "mksg" */
#define MKI_SEG_HEADER_BYTES (sizeof(mki_segment))
#define MKI_SEG_HEADER_UNITS \
    ((MKI_SEG_HEADER_BYTES + MKI_UNIT - 1) / MKI_UNIT)

#endif /* MKI_LAYOUT_H */
