/* SPDX-License-Identifier: MIT */
/*
 * huge.c - chunks too big for a segment's pages (above 1 MiB, or aligned
 * beyond 64 KiB), each in a mapping of its own, and the cache that lets a
 * program allocate and free such chunks in a loop without a system call or
 * a page fault each time.
 *
 * A huge mapping starts with a one-OS-page segment header (its page map
 * entry is all the owner lookup needs, page.h) and the chunk follows at an
 * offset of one OS page, or of the requested alignment:
 *
 *     | header (mki_segment, huge_page = the descriptor) | chunk ... |
 *     s (4 MiB-aligned)                                   s + off
 *
 * The cache: a freed mapping of an ordinary offset is kept, resident, in a
 * small table (CACHE_SLOTS entries, CACHE_BYTES in all, and no more than
 * the live huge chunks are below their peak: live_peak), and a later request
 * takes the smallest cached mapping that holds it.  A mapping longer by a
 * segment or more is split, and its tail stays cached.  A request larger
 * than every cached mapping grows the largest one, and fills the growth
 * with the pages of the other cached mappings, moved in with mremap (none
 * is copied or faulted; fresh pages cost a fault each), so that a program
 * whose big blocks change size reuses the memory it already has.  Such a
 * mapping is made of several kernel mappings, which its header records
 * (its pieces, huge_pieces.h: mremap grows or moves one at a time).  And a
 * request that takes a mapping a segment or more longer than it moves the
 * rest to a cached mapping of its own, so that a chunk holds no resident
 * pages it does not use; a shorter rest stays with the chunk, within a
 * budget for all live chunks (keep_or_split).  Those moves are the choice
 * where fresh pages are 4 KiB ones; where fresh mappings get huge pages
 * and the machine charges a fault for each moved page at its next touch
 * (the OS layer's probe), nothing moves: the larger request gets a fresh
 * mapping, the cache giving up a quarter of its size, and the rest cut
 * off a chunk goes back to the OS (mki_huge_alloc).  Entries older than
 * purge_delay_ms go back to the OS on the next huge operation or mk_trim.
 * glibc gets the same effect by raising its mmap threshold after a free, so
 * that such sizes come from its heap; without the cache a loop of 64 KiB -
 * 32 MiB blocks would pay an mmap, a munmap and a fault per OS page touched
 * on every iteration.
 *
 * Realloc of a huge chunk resizes its mapping: mremap in place when the
 * address space after it is free, else to a new aligned place (the pages
 * move, none is copied); shrinking gives the tail back.  A chunk made of
 * pieces grows in place by its last piece, else its caller copies it.
 *
 * Zeroed memory: a fresh mapping is zero, so its chunk carries
 * MKI_PF_FRESH and calloc does not clear it; a reused one is cleared.
 *
 * A fresh mapping asks for transparent huge pages (below): a fault per
 * 2 MiB for a program that fills its block, at the price of 2 MiB resident
 * for any byte touched in one; calloc's fresh zeroes do not ask.
 *
 * One mutex guards the cache; mappings are made and released outside it.
 */

#include "huge_pieces.h"
#include "purge.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#define CACHE_SLOTS 16
/* The byte cap: the live peak bounds the cache first (cache_bound), and
 * the purge delay ages it out; the cap only bounds what MEMKIT_PURGE=off
 * keeps.  At 64 MiB it was the binding bound in W8 (4 live blocks of 64 KiB
 * - 32 MiB, live peak 80 - 110 MiB): a free with little else live trimmed
 * resident pages that the next large request faulted in again, 287 MiB of
 * trims in 3,000 iterations; at 256 MiB, 59k page faults a run instead of
 * 98k and 357 ms instead of 471 (medians of 7), peak RSS unchanged. */
#define CACHE_BYTES ((size_t)256 << 20)
#define SPLIT_MIN ((size_t)2 << 20)
#define TAIL_BUDGET ((size_t)16 << 20)

typedef struct cached {
    mki_segment *seg;
    unsigned long long since_ns; /* when it was freed */
} cached;

static pthread_mutex_t huge_lock = PTHREAD_MUTEX_INITIALIZER;
static cached cache[CACHE_SLOTS];
static unsigned ncached;
/* committed bytes of the cached mappings: written under the lock, read
 * without it too (mki_huge_use) */
static _Atomic size_t cached_bytes;
static _Atomic size_t live_count, live_committed;
/* The most the live huge chunks have held at once (committed bytes): the
 * cache holds at most what the live chunks have given up since, so that
 * live and cached together never pass it and the cache does not raise the
 * process's peak.  (Bounded by CACHE_BYTES alone, it did: W8, 64 KiB -
 * 32 MiB blocks with four live, peaked at 82.5 MiB where the chunks alone
 * need 67.7 and glibc takes 72.6.) */
static _Atomic size_t live_peak;
/* The tails of SPLIT_MIN or more that live chunks keep (keep_or_split):
 * their bytes, never much above TAIL_BUDGET. */
static _Atomic size_t tail_bytes;

#define COUNT(var, delta) \
    atomic_fetch_add_explicit(&(var), (delta), memory_order_relaxed)
#define UNCOUNT(var, delta) \
    atomic_fetch_sub_explicit(&(var), (delta), memory_order_relaxed)

static size_t round_page(size_t n)
{
    return (n + MKI_OS_PAGE - 1) & ~(size_t)(MKI_OS_PAGE - 1);
}

/* Bytes of header before a chunk whose map entry is unit @unit. */
static size_t header_bytes(unsigned unit)
{
    return round_page(offsetof(mki_segment, map) +
                      sizeof(mki_page *) * (unit + 1));
}

/* Unit (in the page map) of a chunk at @chunk. */
static unsigned unit_of(const char *chunk)
{
    return (unsigned)(((uintptr_t)chunk >> MKI_UNIT_SHIFT) & (MKI_UNITS - 1));
}

/* Write the header of mapping @s (of @total bytes, @committed of them
 * counted as committed) for a chunk of @body bytes at offset @off. */
static mki_page *header_set(mki_segment *s, size_t total, size_t committed,
                            size_t off, size_t body)
{
    char *chunk = (char *)s + off;
    /* all but the pieces (zero in a fresh mapping) */
    size_t p0 = offsetof(mki_segment, pieces), p1 = p0 + sizeof s->pieces;
    mki_mem_undefined(s, p0);
    mki_mem_undefined((char *)s + p1, header_bytes(unit_of(chunk)) - p1);
    s->magic = MKI_SEG_MAGIC;
    s->kind = MKI_SEG_HUGE;
    s->size = total;
    s->huge_committed = committed;
    memset(s->coarse, 0, sizeof s->coarse); /* (page.h ORs it in) */
    mki_page *pg = &s->huge_page;
    memset(pg, 0, sizeof *pg);
    pg->kind = MKI_PAGE_HUGE;
    pg->start = chunk;
    pg->size = total;
    pg->end = chunk + body;
    s->map[unit_of(chunk)] = pg;
    return pg;
}

/* ---- transparent huge pages ---------------------------------------------
 * A fresh mapping is advised for them (MKI_OPT_THP): a program that fills
 * its big blocks then takes a fault per 2 MiB, not per 4 KiB page.  W8
 * (`memkit-bench-malloc w8`, every 4 KiB page of each block written) took
 * 18,700 faults and 295 ms on 4 KiB pages, 4,400 and 164 - 248 ms with
 * them (tcmalloc 215 - 225, 23,700 faults), its peak RSS 70.6 -> 70.8 MiB:
 * on that machine (a virtual machine that shadows page tables) a fault
 * cost 9 us, and a fresh 32 MiB mapping written at every 4 KiB page took
 * 75 ms against 1.8 on huge pages (a /tmp program).  The cost is memory
 * a program does not touch: a block written at one byte in 2 MiB is
 * resident whole.  So
 * calloc's fresh mappings, whose zeroes the program may use sparsely (a
 * big table of which it writes a few entries), are not advised: calloc
 * says so for the calling thread (mki_huge_calloc), and a mapping taken
 * from the cache is resident already.  The header is written after the
 * advice, so that the first block is a huge page too. */
static _Thread_local int tls_calloc __attribute__((tls_model("initial-exec")));

void mki_huge_calloc(int on) { tls_calloc = on; }

/* Does a fresh mapping made now get huge pages: asked for (the option,
 * not calloc's) and made by the system? */
static int fresh_huge(void)
{
    return !tls_calloc && mki_option(MKI_OPT_THP) && mki_os_huge_pages_work();
}

static void advise(mki_segment *s, size_t size)
{
    if (fresh_huge())
        mki_os_huge_pages(s, size, 1);
}

/* ---- the cache ------------------------------------------------------------- */

/* Take out cache entry @i (lock held). */
static mki_segment *cache_take(unsigned i)
{
    mki_segment *s = cache[i].seg;
    UNCOUNT(cached_bytes, s->huge_committed);
    cache[i] = cache[--ncached];
    return s;
}

/* Unmap a mapping that holds no chunk. */
static void unmap(mki_segment *s)
{
    size_t size = s->size, committed = s->huge_committed;
    mki_mem_forget(s, size); /* the address may be mapped again */
    mki_segment_register(s, 0);
    mki_os_release(s, size, committed);
}

static void unmap_all(mki_segment **list, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        unmap(list[i]);
}

/* The header of a free mapping of @size bytes at @s, @committed of them
 * counted committed: a segment of kind HUGE whose descriptor is FREE. */
static void header_free(mki_segment *s, size_t size, size_t committed)
{
    /* a split tail's header lies in what was a chunk (poisoned, when
     * instrumented) */
    mki_mem_undefined(s, MKI_OS_PAGE);
    s->magic = MKI_SEG_MAGIC;
    s->kind = MKI_SEG_HUGE;
    s->size = size;
    s->huge_committed = committed;
    memset(&s->huge_page, 0, sizeof s->huge_page);
    s->huge_page.kind = MKI_PAGE_FREE;
    s->pieces.n = 0;
}

/* Mapping @s ends at @keep bytes now (what lay past it was split off,
 * moved or unmapped): its size, committed bytes and borders follow;
 * returns the committed bytes it lost. */
static size_t cut_to(mki_segment *s, size_t keep)
{
    size_t gone = s->huge_committed > keep ? s->huge_committed - keep : 0;
    s->size = keep;
    s->huge_committed -= gone;
    mki_huge_borders_cut(&s->pieces, keep);
    return gone;
}

/* Give the pages of mapping @s past its first @keep bytes back to the OS
 * (unmapped; its size, committed bytes and borders follow). */
static void release_tail(mki_segment *s, size_t keep)
{
    mki_mem_forget((char *)s + keep, s->size - keep);
    mki_os_release_tail(s, s->size, keep, s->huge_committed);
    cut_to(s, keep);
}

/* What the cache may hold now: CACHE_BYTES, and no more than the live
 * chunks are below their peak. */
static size_t cache_bound(void)
{
    size_t peak = atomic_load_explicit(&live_peak, memory_order_relaxed);
    size_t live = atomic_load_explicit(&live_committed, memory_order_relaxed);
    size_t room = peak > live ? peak - live : 0;
    return room < CACHE_BYTES ? room : CACHE_BYTES;
}

/* Which cached mappings cache_oldest looks at. */
enum { ANY, RESIDENT /* pages beyond the header */, WHOLE /* committed whole */ };

/* The entry of the oldest cached mapping of kind @which, or -1 (lock
 * held). */
static int cache_oldest(int which)
{
    int pick = -1;
    for (unsigned i = 0; i < ncached; i++) {
        const mki_segment *e = cache[i].seg;
        if ((which == RESIDENT && e->huge_committed <= MKI_OS_PAGE) ||
            (which == WHOLE && e->huge_committed != e->size))
            continue;
        if (pick < 0 || cache[i].since_ns < cache[pick].since_ns)
            pick = (int)i;
    }
    return pick;
}

/* What the cache gives up under its lock, for the caller to give back
 * without it (trim_release): whole mappings, and tails cut off mappings
 * that stay cached.  Start it zeroed (TRIM_INIT). */
#define TRIM_MAX (2 * CACHE_SLOTS + 2)
typedef struct trim {
    unsigned ng, nc;
    mki_segment *gone[TRIM_MAX];
    struct {
        char *at;
        size_t len, committed;
    } cut[TRIM_MAX];
} trim;
#define TRIM_INIT {0, 0, {0}, {{0, 0, 0}}}

/* Take about @want committed bytes out of the cache, the oldest mappings
 * first: a whole mapping when it holds no more than what is left to take
 * (or little else), else its tail, so that a small excess does not cost a
 * large mapping (lock held). */
static void cache_trim(size_t want, trim *t)
{
    size_t taken = 0;
    while (taken < want && t->ng < TRIM_MAX && t->nc < TRIM_MAX) {
        /* (a purged mapping holds its header page only: it goes whole, once
         * no other is left; else the bound could stay a page short, as
         * test_bound_and_reuse found under TSan, the purge thread having
         * had the time to thin the cache) */
        int pick = cache_oldest(RESIDENT);
        if (pick < 0)
            pick = cache_oldest(ANY);
        if (pick < 0)
            return;
        mki_segment *e = cache[pick].seg;
        size_t len = round_page(want - taken);
        if (len + MKI_OS_PAGE >= e->huge_committed) {
            taken += e->huge_committed;
            t->gone[t->ng++] = cache_take((unsigned)pick);
            continue;
        }
        /* its tail from where @len committed bytes are left to the end: a
         * mapping's committed bytes are a prefix, and one merged onto a
         * purged neighbour has an uncommitted end (a cut of that alone
         * took nothing, TRIM_MAX times, and left the bound exceeded) */
        size_t keep = e->huge_committed - len;
        t->cut[t->nc].at = (char *)e + keep;
        t->cut[t->nc].len = e->size - keep;
        t->cut[t->nc++].committed = cut_to(e, keep);
        UNCOUNT(cached_bytes, len);
        taken += len;
    }
}

/* Give back what the cache gave up into @t (lock not held); returns its
 * committed bytes. */
static size_t trim_release(trim *t)
{
    size_t bytes = 0;
    for (unsigned i = 0; i < t->ng; i++)
        bytes += t->gone[i]->huge_committed;
    unmap_all(t->gone, t->ng);
    for (unsigned i = 0; i < t->nc; i++) {
        mki_mem_forget(t->cut[i].at, t->cut[i].len);
        mki_os_release(t->cut[i].at, t->cut[i].len, t->cut[i].committed);
        bytes += t->cut[i].committed;
    }
    return bytes;
}

/* Trim the cache so that it and @adding more bytes fit its bound (lock
 * held; what goes, to @t). */
static void cache_fit(size_t adding, trim *t)
{
    size_t bound = cache_bound();
    size_t after = atomic_load_explicit(&cached_bytes, memory_order_relaxed) + adding;
    if (after > bound)
        cache_trim(after - bound, t);
}

/* Live chunks grew by @bytes: raise the peak, and give back what the cache
 * holds beyond its bound now (lock not held). */
static void live_grew(size_t bytes)
{
    mki_atomic_max(&live_peak, COUNT(live_committed, bytes) + bytes);
    trim t = TRIM_INIT;
    mki_os_lock(&huge_lock);
    cache_fit(0, &t);
    mki_os_unlock(&huge_lock);
    trim_release(&t);
}

/* Put free mapping @s in the cache (lock held), merged with the cached
 * mappings next to it in the address space (so a later large request
 * finds them whole).  What the cache gives up to stay within its bounds
 * goes to @t: the oldest entry when every slot is taken, the oldest
 * entries' tails for the bytes, or @s itself when it is too big.
 * A mapping's committed bytes are a prefix of it (huge_committed counts
 * them from its start: what a split and a purge rely on), so two mappings
 * merge only when the lower one is committed whole: a purged mapping (its
 * header page committed, the rest not) below a resident one would make
 * the resident pages look uncommitted, and no purge would find them
 * (found by review). */
static void cache_put(mki_segment *s, trim *t)
{
    for (unsigned i = 0; i < ncached;) {
        mki_segment *e = cache[i].seg;
        mki_segment *lo = e < s ? e : s, *hi = e < s ? s : e;
        if ((char *)lo + lo->size == (char *)hi &&
            lo->huge_committed == lo->size &&
            lo->pieces.n + 1 + hi->pieces.n <= MKI_HUGE_PIECES) {
            cache_take(i);
            mki_huge_pieces hb = hi->pieces;
            mki_huge_border_add(&lo->pieces, lo->size);
            for (unsigned k = 0; k < hb.n; k++)
                mki_huge_border_add(&lo->pieces, lo->size + hb.at[k]);
            lo->size += hi->size;
            lo->huge_committed += hi->huge_committed;
            mki_segment_register(hi, 0);
            s = lo;
            i = 0; /* it may now touch another one */
            continue;
        }
        i++;
    }
    if (s->huge_committed > cache_bound()) {
        t->gone[t->ng++] = s;
        return;
    }
    if (ncached == CACHE_SLOTS)
        t->gone[t->ng++] = cache_take((unsigned)cache_oldest(ANY));
    cache_fit(s->huge_committed, t);
    cache[ncached].seg = s;
    cache[ncached].since_ns = mki_os_now_ns();
    ncached++;
    COUNT(cached_bytes, s->huge_committed);
}

/* Put free mapping @s in the cache, and give back what that makes the
 * cache give up (lock not held). */
static void cache_give(mki_segment *s)
{
    trim over = TRIM_INIT;
    mki_os_lock(&huge_lock);
    cache_put(s, &over);
    mki_os_unlock(&huge_lock);
    trim_release(&over);
}

/* Take the cached mapping that best holds @need bytes (the smallest that
 * does, else, if @grow, the largest, to grow), or NULL.  A mapping longer
 * than @need by a segment or more is split at a segment boundary and its
 * tail stays in the cache: no system call, and the tail's pages stay
 * resident for the next request (lock held; what the cache gives up goes
 * to @t). */
static mki_segment *cache_find(size_t need, int grow, trim *t)
{
    int best = -1, largest = -1;
    for (unsigned i = 0; i < ncached; i++) {
        size_t sz = cache[i].seg->size;
        if (sz >= need && (best < 0 || sz < cache[best].seg->size))
            best = (int)i;
        if (largest < 0 || sz > cache[largest].seg->size)
            largest = (int)i;
    }
    int pick = best >= 0 ? best : grow ? largest : -1;
    if (pick < 0)
        return NULL;
    mki_segment *s = cache_take((unsigned)pick);
    size_t keep = (need + MKI_SEG_MASK) & ~(size_t)MKI_SEG_MASK;
    if (s->size >= keep + MKI_SEG_SIZE) {
        mki_segment *tail = (mki_segment *)((char *)s + keep);
        size_t tail_committed =
            s->huge_committed > keep ? s->huge_committed - keep : 0;
        header_free(tail, s->size - keep, tail_committed);
        tail->pieces.n = (uint32_t)mki_huge_borders_from(
            &s->pieces, keep, tail->pieces.at, MKI_HUGE_PIECES);
        if (mki_segment_register(tail, 1) == 0) {
            cut_to(s, keep);
            cache_put(tail, t);
        }
    }
    return s;
}

/* Resident pages taken from the cache for a mapping that grows: @len
 * bytes at @from, a whole cached mapping (out of the cache and the
 * registry) or the tail of one (which stays cached, shorter), with the
 * borders of its pieces. */
typedef struct donor {
    char *from;
    size_t len;
    unsigned b0, nb; /* its borders: gifts.b.at[b0 .. b0 + nb), from @from */
} donor;

typedef struct gifts {
    unsigned n;
    donor d[CACHE_SLOTS];
    mki_huge_pieces b;
} gifts;

/* Take from the cache resident pages for the @gap bytes by which mapping
 * @s (committed whole) is to grow, the oldest mappings first, into @g
 * (lock held): whole mappings while they fit, then the tail of the next.
 * A purged mapping has no pages to give, and @s has room for so many
 * borders: its own, one where it grows, and each gift's.  Returns the
 * bytes given. */
static size_t cache_donors(const mki_segment *s, size_t gap, gifts *g)
{
    size_t given = 0;
    g->n = 0;
    g->b.n = 0;
    if (s->pieces.n + 2 > MKI_HUGE_PIECES)
        return 0;
    unsigned room = MKI_HUGE_PIECES - s->pieces.n - 2;
    while (given < gap && g->n < CACHE_SLOTS) {
        int pick = cache_oldest(WHOLE);
        if (pick < 0)
            break;
        mki_segment *e = cache[pick].seg;
        size_t len = e->size <= gap - given ? e->size : gap - given;
        size_t lo = e->size - len; /* 0: the whole mapping */
        int nb = room ? mki_huge_borders_from(&e->pieces, lo,
                                              g->b.at + g->b.n, room - 1)
                      : -1;
        if (nb < 0)
            break;
        room -= 1 + (unsigned)nb;
        g->d[g->n++] = (donor){(char *)e + lo, len, g->b.n, (unsigned)nb};
        g->b.n += (uint32_t)nb;
        if (lo == 0) {
            mki_segment_register(e, 0);
            cache_take((unsigned)pick);
        } else {
            UNCOUNT(cached_bytes, cut_to(e, lo));
        }
        given += len;
    }
    return given;
}

/* Move the gifts @g into mapping @s from byte @at on (lock not held);
 * without @s (it could not grow), unmap them. */
static void take_donors(mki_segment *s, size_t at, const gifts *g)
{
    for (unsigned i = 0; i < g->n; i++) {
        const donor *d = &g->d[i];
        if (!s) {
            mki_mem_forget(d->from, d->len);
            mki_os_release(d->from, d->len, d->len);
            continue;
        }
        mki_huge_move_pieces(d->from, d->len, g->b.at + d->b0, d->nb, s, &s->pieces, at);
        at += d->len;
    }
    if (s && g->n && at < s->size)
        mki_huge_border_add(&s->pieces, at); /* where the fresh pages resume */
}

/* Commit the first @committed bytes of new reservation @s (of @size
 * bytes) and register it: 0, or -1 after giving the reservation back. */
static int commit_register(mki_segment *s, size_t size, size_t committed)
{
    if (mki_os_commit(s, committed) != 0) {
        mki_os_release(s, size, 0);
        return -1;
    }
    if (mki_segment_register(s, 1) != 0) {
        mki_os_release(s, size, committed);
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

/* A new mapping of @size bytes, aligned to a segment, committed and
 * registered, for pages to be moved into; NULL if any step failed (none
 * then holds). */
static mki_segment *fresh_place(size_t size)
{
    mki_segment *t = mki_os_reserve(size, MKI_SEG_SIZE);
    return t && commit_register(t, size, size) == 0 ? t : NULL;
}

/* Move cached mapping @s, made of pieces, to a new place of @need bytes,
 * piece by piece (its contents do not matter).  Returns the new place, or
 * NULL after giving @s back. */
static mki_segment *move_grown(mki_segment *s, size_t need)
{
    size_t have = s->size;
    mki_huge_pieces b = s->pieces, nb = {0};
    mki_segment *t = NULL;
    /* (mki_os_move's rule: committed whole; and room for one border) */
    if (s->huge_committed == have && b.n < MKI_HUGE_PIECES)
        t = fresh_place(need);
    if (!t) {
        unmap(s);
        return NULL;
    }
    advise(t, need); /* (for the pages past the moved ones) */
    mki_segment_register(s, 0);
    mki_huge_move_pieces((char *)s, have, b.at, b.n, t, &nb, 0);
    mki_huge_border_add(&nb, have);
    t->pieces = nb; /* (the header's own piece may not have moved) */
    t->size = need;
    t->huge_committed = need;
    return t;
}

/* Resize mapping @s, one kernel mapping, from @have to @need bytes with
 * mremap: in place, else moved to where byte @at is aligned to @align.
 * It leaves the registry and ASan's shadow before it moves: once its old
 * range is unmapped another thread may map that address, register it and
 * poison parts of it, which a late removal or forget would undo (a late
 * removal made that one's chunks look foreign: test_threads).  Forgetting
 * early loses nothing: memkit poisons no huge mapping that is resized
 * (instrumented contexts copy).  Returns the mapping, for the caller to
 * register, or NULL (ENOMEM) with @s as it was and registered again. */
static mki_segment *remap(mki_segment *s, size_t have, size_t need, size_t align,
                          size_t at)
{
    mki_segment_register(s, 0);
    mki_mem_forget(s, have);
    mki_segment *moved = mki_os_resize(s, have, need, align, at);
    if (!moved)
        mki_segment_register(s, 1); /* (it was there a moment ago) */
    return moved;
}

/* Grow cached mapping @s to @need bytes: in place, else moved.  Returns
 * the mapping, or NULL after giving @s back if that failed. */
static mki_segment *grow(mki_segment *s, size_t need)
{
    size_t have = s->size, committed = s->huge_committed;
    if (s->pieces.n) { /* only its last piece can grow in place */
        size_t last = s->pieces.at[s->pieces.n - 1];
        if (mki_os_extend((char *)s + last, have - last, need - last) == 0) {
            s->size = need;
            s->huge_committed = committed + (need - have);
            return s;
        }
        return move_grown(s, need);
    }
    mki_segment *moved = remap(s, have, need, MKI_SEG_SIZE, 0);
    if (!moved) {
        unmap(s);
        return NULL;
    }
    if (mki_segment_register(moved, 1) != 0) {
        mki_os_release(moved, need, committed + (need - have));
        errno = ENOMEM;
        return NULL;
    }
    moved->size = need;
    moved->huge_committed = committed + (need - have);
    return moved;
}

/* Take the pages of mapping @s (taken from the cache, committed whole)
 * past its first @total bytes, when there are SPLIT_MIN or more of them,
 * from the chunk: the chunk then keeps no resident pages it does not use.
 * With @move, they go to a mapping of their own (their first page becomes
 * its header), cached, and serve a later request without a fault (the
 * cache splits its mappings only at a segment boundary, where a header can
 * go); on any failure @s keeps them.  Without, they go back to the OS. */
static void split_excess(mki_segment *s, size_t total, int move)
{
    if (s->size < total + SPLIT_MIN || s->huge_committed != s->size)
        return;
    size_t excess = s->size - total;
    if (!move) {
        release_tail(s, total);
        return;
    }
    mki_segment *t = fresh_place(excess);
    if (!t)
        return;
    size_t at[MKI_HUGE_PIECES];
    int nb = mki_huge_borders_from(&s->pieces, total, at, MKI_HUGE_PIECES);
    mki_huge_pieces tb = {0};
    mki_huge_move_pieces((char *)s + total, excess, at, (unsigned)nb, t, &tb, 0);
    cut_to(s, total);
    header_free(t, excess, excess);
    t->pieces = tb;
    cache_give(t);
}

/* The tail of a chunk of @total bytes at the start of mapping @s: the bytes
 * past it when they are SPLIT_MIN or more (they count in tail_bytes while
 * the chunk lives), else 0. */
static size_t tail_of(const mki_segment *s, size_t total)
{
    size_t t = s->size - total;
    return t >= SPLIT_MIN ? t : 0;
}

/* The tail of live huge chunk @pg (what tail_of counted when it was cut). */
static size_t chunk_tail(const mki_page *pg)
{
    const mki_segment *s = mki_segment_of(pg->start);
    return tail_of(s, (size_t)(pg->end - (const char *)s));
}

/* Mapping @s (from the cache, committed whole) now holds a chunk of its
 * first @total bytes.  What lies past the chunk stays with it when it is
 * less than a segment and the live chunks' tails stay within TAIL_BUDGET;
 * else it moves to the cache (split_excess).  A move costs a system call
 * for each kernel mapping the tail is made of, and each move cuts the
 * cache's mappings into more of them: W8 at 3,000 iterations made 15,366
 * mremaps (27% of them for tails).  Keeping the tails under a segment took
 * that to 2,151 and the run from 377 to 234 ms (medians of 5; peak RSS
 * 112.2 -> 116.3 MiB, glibc 119.3; at 1,000 iterations 124 -> 97 ms, 83.1
 * -> 86.3 MiB, glibc 95.2; at the bench's 200 the same).  A tail of a
 * segment or more still moves (W8's peak at 200 iterations rose from 68.8
 * to 76.1 MiB, above glibc's 72.8, when those stayed too).  The budget
 * bounds what live chunks can hold resident for nothing: a program that
 * keeps many chunks cut from larger cached mappings has at most 16 MiB of
 * tails, where the cache would give them back after the purge delay. */
static void keep_or_split(mki_segment *s, size_t total, int move)
{
    size_t t = tail_of(s, total);
    if (t && (t >= MKI_SEG_SIZE ||
              atomic_load_explicit(&tail_bytes, memory_order_relaxed) + t > TAIL_BUDGET))
        split_excess(s, total, move);
    COUNT(tail_bytes, tail_of(s, total)); /* (what stayed, or a failed move left) */
}

/* ---- allocation and release ------------------------------------------------ */

/* A fresh mapping of @total bytes for a chunk aligned to @align: at a
 * segment boundary, or beyond one for a larger alignment. */
static mki_segment *reserve(size_t total, size_t align)
{
    return align > MKI_SEG_SIZE ? mki_os_reserve_offset(total, align, MKI_SEG_SIZE)
                                : mki_os_reserve(total, MKI_SEG_SIZE);
}

static mki_page *huge_alloc(size_t size, size_t align);

mki_page *mki_huge_alloc(size_t size, size_t align)
{
    int saved = errno;
    mki_page *pg = huge_alloc(size, align);
    if (pg)
        errno = saved; /* (what failed on the way: the cache's tries) */
    return pg;
}

static mki_page *huge_alloc(size_t size, size_t align)
{
    if (size == 0) /* room for a link word, as every chunk has */
        size = 1;
    size_t body = round_page(size);
    if (body < size || size > MKI_SIZE_MAX || align > MKI_SIZE_MAX) {
        errno = ENOMEM;
        return NULL;
    }
    /* The chunk sits at `off` from the mapping's start; its map entry
     * lies in the header, before the chunk.  An alignment of a segment or
     * more puts the chunk exactly one segment after the header, where
     * p - 1 maps back to it. */
    size_t off = align < MKI_OS_PAGE ? MKI_OS_PAGE : align;
    if (off > MKI_SEG_SIZE)
        off = MKI_SEG_SIZE;
    /* MEMKIT_SECURE=2: a guard page after the chunk, and no reuse of
     * mappings (the guard must follow each chunk's own end) */
    size_t guard = mki_secure >= 2 ? MKI_OS_PAGE : 0;
    size_t total = off + body + guard;
    mki_segment *s = NULL;
    if (off == MKI_OS_PAGE && !guard) {
        /* A mapping that must grow takes the pages of other cached ones
         * rather than fresh ones (each fresh page costs a fault), unless a
         * fresh mapping gets huge pages (a fault per 2 MiB) and a moved
         * page costs a fault of its own at its next touch (a hypervisor
         * that shadows page tables: the OS layer measures it).  Then
         * nothing moves: a request no cached mapping holds is served
         * fresh, while a quarter of its size goes from the cache (the
         * oldest first), and the tails that leave a chunk go back to the
         * OS ("Large and huge chunks", docs/DESIGN.md). */
        int move = !fresh_huge() || !mki_os_moves_costly();
        gifts g = {0};
        size_t have = 0, gifted = 0;
        mki_os_lock(&huge_lock);
        trim over = TRIM_INIT;
        s = cache_find(total, move, &over);
        if (!s && !move)
            cache_trim(total / 4, &over);
        if (s && s->size < total && s->huge_committed == s->size) {
            have = s->size;
            gifted = cache_donors(s, total - have, &g);
        }
        mki_os_unlock(&huge_lock);
        trim_release(&over);
        /* fresh pages (grown beyond the gifts, or purged): the peak rule */
        int fresh = s && (s->size + gifted < total || s->huge_committed < s->size);
        if (s && s->size < total)
            s = grow(s, total);
        take_donors(s, have, &g);
        if (s && s->huge_committed < s->size) { /* its pages were purged */
            if (mki_os_commit((char *)s + s->huge_committed,
                              s->size - s->huge_committed) != 0) {
                unmap(s);
                return NULL;
            }
            s->huge_committed = s->size;
        }
        if (s) {
            keep_or_split(s, total, move);
            mki_page *pg = header_set(s, s->size, s->huge_committed, off, body);
            COUNT(live_count, 1);
            live_grew(s->huge_committed);
            mki_purge_used(fresh);
            return pg; /* reused: not zero, no MKI_PF_FRESH */
        }
    }
    s = reserve(total, align);
    if (!s && mki_purge_reclaim()) /* (a limit: what memkit holds idle goes) */
        s = reserve(total, align);
    if (!s)
        return NULL;
    size_t committed = header_bytes(unit_of((char *)s + off)) + body;
    if (committed > total - guard)
        committed = total - guard;
    if (guard && mki_os_guard((char *)s + total - guard, guard) != 0) {
        mki_os_release(s, total, 0);
        errno = ENOMEM;
        return NULL;
    }
    if (commit_register(s, total, committed) != 0)
        return NULL;
    advise(s, total);
    mki_page *pg = header_set(s, total, committed, off, body);
    pg->flags = MKI_PF_FRESH;
    mki_purge_grew();
    COUNT(live_count, 1);
    live_grew(committed);
    mki_purge_used(1);
    return pg;
}

void mki_huge_release(mki_page *pg)
{
    if (pg->charged)
        mki_page_up.released(pg);
    if (atomic_load_explicit(&pg->samples, memory_order_relaxed))
        mki_page_up.unsampled(pg);
    mki_segment *s = mki_segment_of(pg->start);
    UNCOUNT(tail_bytes, chunk_tail(pg));
    /* a context that gives its memory back at once keeps no cached copy */
    int at_once = (pg->flags & MKI_PF_RELEASE) != 0;
    pg->kind = MKI_PAGE_FREE; /* a second free of it is seen as such */
    pg->ctx = NULL;
    UNCOUNT(live_count, 1);
    UNCOUNT(live_committed, s->huge_committed);
    if ((size_t)(pg->start - (char *)s) == MKI_OS_PAGE && !at_once &&
        mki_secure < 2 && mki_option(MKI_OPT_PURGE_DELAY_MS) != 0)
        cache_give(s);
    else
        unmap(s);
    mki_purge_note(); /* a cached mapping: purge it in time */
}

/* ---- resizing ------------------------------------------------------------------ */

static mki_page *huge_resize(mki_page *pg, size_t size);

mki_page *mki_huge_resize(mki_page *pg, size_t size)
{
    int saved = errno;
    mki_page *np = huge_resize(pg, size);
    if (np)
        errno = saved;
    return np;
}

static mki_page *huge_resize(mki_page *pg, size_t size)
{
    mki_segment *s = mki_segment_of(pg->start);
    size_t off = (size_t)(pg->start - (char *)s);
    size_t body = round_page(size);
    if (body < size || size > MKI_SIZE_MAX) {
        errno = ENOMEM;
        return NULL;
    }
    size_t need = off + body, have = s->size;
    size_t old_committed = s->huge_committed, committed = old_committed;
    size_t old_tail = chunk_tail(pg); /* (none after) */
    if (need <= have) { /* shrink: give the tail back */
        if (need < have) {
            release_tail(s, need);
            committed = s->huge_committed;
        }
    } else if (s->pieces.n) {
        /* made of pieces: only the last can grow, in place; else NULL,
         * and the caller copies the chunk (moving it piece by piece could
         * fail half-way, with the chunk's contents split) */
        size_t last = s->pieces.at[s->pieces.n - 1];
        if (mki_os_extend((char *)s + last, have - last, need - last) != 0)
            return NULL; /* errno ENOMEM; the chunk is untouched */
        committed += need - have;
    } else {
        /* the mapping's start must keep its alignment: a segment, or for a
         * chunk aligned beyond a segment, that chunk's alignment */
        size_t align = MKI_SEG_SIZE, at = 0;
        if (off == MKI_SEG_SIZE) {
            uintptr_t c = (uintptr_t)pg->start;
            align = (size_t)(c & (0 - c));
            at = MKI_SEG_SIZE;
        }
        /* (no other thread may free this chunk while it is out of the
         * registry: its owner is reallocating it) */
        mki_segment *moved = remap(s, have, need, align, at);
        if (!moved)
            return NULL; /* errno ENOMEM; the chunk is untouched */
        committed += need - have;
        if (mki_segment_register(moved, 1) != 0)
            errno = ENOMEM; /* checking build only; see below */
        s = moved;
    }
    /* the descriptor lives in the header, which may have moved with it */
    mki_page *np = &s->huge_page;
    s->size = need;
    s->huge_committed = committed;
    np->start = (char *)s + off;
    np->size = need;
    np->end = np->start + body;
    np->flags &= (uint8_t)~MKI_PF_FRESH;
    s->map[unit_of(np->start)] = np;
    UNCOUNT(live_committed, old_committed);
    UNCOUNT(tail_bytes, old_tail);
    live_grew(committed);
    return np;
}

/* ---- trimming, figures, fork ---------------------------------------------------- */

size_t mki_huge_purge(int force, int unmap_all_due,
                      unsigned long long delay_ns, int *pending,
                      unsigned long long *next_due)
{
    mki_segment *gone[CACHE_SLOTS], *thin[CACHE_SLOTS];
    unsigned ng = 0, nt = 0;
    unsigned long long now = mki_os_now_ns();
    mki_os_lock(&huge_lock);
    for (unsigned i = 0; i < ncached;) {
        mki_segment *e = cache[i].seg;
        int resident = e->huge_committed > MKI_OS_PAGE;
        if (!unmap_all_due && !resident) { /* decommitted: kept for reuse */
            i++;
            continue;
        }
        if (force || now - cache[i].since_ns >= delay_ns) {
            if (unmap_all_due)
                gone[ng++] = cache_take(i);
            else
                thin[nt++] = cache_take(i);
            continue;
        }
        *pending = 1;
        if (cache[i].since_ns + delay_ns < *next_due)
            *next_due = cache[i].since_ns + delay_ns;
        i++;
    }
    mki_os_unlock(&huge_lock);
    size_t total = 0;
    for (unsigned i = 0; i < ng; i++)
        total += gone[i]->huge_committed;
    unmap_all(gone, ng);
    /* keep the address space, drop the pages (all but the header's) */
    for (unsigned i = 0; i < nt; i++) {
        mki_segment *e = thin[i];
        size_t drop = e->huge_committed - MKI_OS_PAGE;
        if (mki_os_decommit((char *)e + MKI_OS_PAGE, e->size - MKI_OS_PAGE,
                            drop, MKI_OS_DONTNEED) != 0) {
            *pending = 1; /* still committed: a later pass */
            if (now + delay_ns < *next_due)
                *next_due = now + delay_ns;
            continue;
        }
        e->huge_committed = MKI_OS_PAGE;
        total += drop;
    }
    if (nt) {
        trim over = TRIM_INIT;
        mki_os_lock(&huge_lock);
        for (unsigned i = 0; i < nt; i++)
            cache_put(thin[i], &over);
        mki_os_unlock(&huge_lock);
        trim_release(&over);
    }
    return total;
}

size_t mki_huge_shed(size_t want)
{
    trim t = TRIM_INIT;
    mki_os_lock(&huge_lock);
    cache_trim(want, &t);
    mki_os_unlock(&huge_lock);
    return trim_release(&t);
}

void mki_huge_use(size_t *live_bytes, size_t *cache_bytes)
{
    *live_bytes = atomic_load_explicit(&live_committed, memory_order_relaxed);
    /* (without the lock: a stale figure only shifts one decision) */
    *cache_bytes = atomic_load_explicit(&cached_bytes, memory_order_relaxed);
}

void mki_huge_figures(size_t *count, size_t *live_bytes, size_t *cache_bytes)
{
    *count = atomic_load_explicit(&live_count, memory_order_relaxed);
    mki_huge_use(live_bytes, cache_bytes);
}

void mki_huge_fork(int phase)
{
    if (phase == 0)
        pthread_mutex_lock(&huge_lock);
    else
        pthread_mutex_unlock(&huge_lock);
}
