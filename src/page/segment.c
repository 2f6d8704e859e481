/* SPDX-License-Identifier: MIT */
/*
 * segment.c - segments and the pages cut from them: the shared page pool.
 *
 * A segment is 4 MiB of address space at a 4 MiB boundary.  Its header
 * holds two bitmaps over its 4096 units of 1 KiB (handed out; committed)
 * and the page map: for every unit, the descriptor of the page covering it.
 * The map is what makes owner lookup a mask and a load (page.h).
 *
 * Pages are runs of 2^k units (k <= 6) aligned to their own size, so the
 * search for a free run looks at one 64-bit word at a time: a few shifts
 * find every aligned free run of 2^k bits in a word.  Large chunks take runs
 * of whole words (multiples of 64 KiB).  Alignment to the run size is what
 * gives mk_alloc_aligned its alignment for free.
 *
 * Segments sit on three lists: `avail` (some units free), `full`, and
 * `empty` (every data unit free).  What goes back to the OS, and when, is
 * the purge policy's (purge.c): this file runs its passes (mki_segment_purge:
 * free OS pages inside live segments once they have been free for a pass,
 * empty segments once they have been empty for the delay).
 *
 * Huge chunks (> 1 MiB, or aligned beyond 64 KiB) get a mapping of their
 * own (page/huge.c); this file only registers them as segments.
 *
 * One mutex guards the pool.  It is taken once per page (1..64 KiB of
 * chunks), never per chunk; on 16 cores its waits came to at most 1.8% of
 * the threads' time, so it is not sharded (docs/DESIGN.md, "Threads").
 */

#include "purge.h"

#include <errno.h>
#include <sched.h>
#include <string.h>

static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t arena_once = PTHREAD_ONCE_INIT;
static mki_segment *avail_list, *full_list, *empty_list;
static _Atomic size_t segment_count;
/* Figures for mallinfo2 and MEMKIT_STATS (relaxed; exact when quiet). */
static _Atomic size_t seg_committed; /* committed bytes of normal segments */
static _Atomic size_t units_out;     /* units handed out as pages */
static _Atomic size_t units_resting; /* of them, in resting pages */
static _Atomic size_t normal_count;  /* normal segments held */
static _Atomic size_t page_cuts;     /* pages cut */

#define COUNT(var, delta) \
    atomic_fetch_add_explicit(&(var), (delta), memory_order_relaxed)
#define UNCOUNT(var, delta) \
    atomic_fetch_sub_explicit(&(var), (delta), memory_order_relaxed)

/* Registry of segment bases for the checking build's foreign-pointer test:
 * a small open-addressing set keyed by segment number, guarded by
 * arena_lock for writers and read under it too (checks are slow anyway).
 * Made with the first segment; without it the checking build takes no
 * segment (its chunks would look foreign). */
#define REG_CAP 65536u
static uintptr_t *registry;

mki_page mki_page_empty; /* all zero: no free chunk, fast_tid 0 */
/* What the page map holds for the units of a page that went back: a free
 * of a chunk that was there (a double free of a large chunk, most often)
 * meets fast_tid 0 and kind FREE, and is reported by the slow path, with
 * no NULL test on the fast path.  (Units never handed out hold NULL.) */
mki_page mki_page_gone = {.kind = MKI_PAGE_FREE};

/* The normal segments come from one contiguous range (os.h, the arena),
 * so that the free path's "is this pointer in a normal segment?" is a
 * subtraction and a comparison: up to 64 GiB of address space, taken a
 * segment at a time; past it, or where something else took the place
 * after it, segments are mappings of their own, whose frees take the slow
 * path (mki_segment_known).  Option arena_mb (MEMKIT_ARENA_MB) sets the
 * size; below 256 MiB there is none.  A segment given back keeps its
 * place in the arena, its header's pages readable zeros (a stale pointer
 * into it finds no page), for the next one.
 *
 * A segment is mapped only as far as its pages need it, from its start
 * (open_units; open_to maps more): the rest of its 4 MiB is not mapped at
 * all, so that a program's address space and limits (VmSize and
 * RLIMIT_AS, its data and RLIMIT_DATA, the commit charge under strict
 * overcommit, mlockall's lock limit) count what it uses, not 4 MiB a
 * segment.  Nothing but a page's chunks lies past the header, and the
 * lookups read only the header, so a hole costs nothing; where something
 * else was mapped into it meanwhile (a mapping made at a fixed place), the
 * segment's units there are taken for good (open_to). */
#define ARENA_MAX ((size_t)64 << 30)
#define ARENA_SLOTS (ARENA_MAX / MKI_SEG_SIZE)
static uint64_t arena_free_bits[ARENA_SLOTS / 64]; /* slots given back */
static size_t arena_free_count;
/* A segment opens in steps of OPEN_STEP units (a system call each: at most
 * 16 for a segment, against its 1,024 page faults) */
#define OPEN_STEP 256u
/* The pages a segment given back keeps readable: its header's */
#define HEADER_MAP \
    ((MKI_SEG_HEADER_BYTES + MKI_OS_PAGE - 1) & ~(size_t)(MKI_OS_PAGE - 1))

static void arena_init(void)
{
    mki_options_init();
    size_t mb = (size_t)mki_option(MKI_OPT_ARENA_MB);
    size_t want = mb << 20 < ARENA_MAX ? mb << 20 : ARENA_MAX;
    if (want >= 64 * MKI_SEG_SIZE) /* (below that: no arena) */
        mki_os_arena_init(want, MKI_SEG_SIZE);
}

/* The units a segment may open: all but a guard page at its end
 * (MEMKIT_SECURE=2). */
static unsigned open_limit(void)
{
    return mki_secure >= 2 ? MKI_UNITS - MKI_OS_PAGE / MKI_UNIT : MKI_UNITS;
}

/* The bytes of @s that are mapped (its guard page aside). */
static size_t open_bytes(const mki_segment *s)
{
    return (size_t)s->open_units * MKI_UNIT;
}

static void list_remove(mki_segment **head, mki_segment *s);
static void list_push(mki_segment **head, mki_segment *s);
static mki_segment **list_of(mki_segment *s);
static void units_taken(mki_segment *s, unsigned first, unsigned n);
static unsigned bits_count(const uint64_t *bits, unsigned first, unsigned n);

/* Something else is mapped past @s's open units (a mapping made at a fixed
 * place, in the hole: segment.c's opening comment): the units there are
 * taken for good, as the header's are.  arena_lock held; @listed: @s is
 * on one of the lists. */
static int stuck; /* open_stuck happened (arena_lock; page_alloc looks) */

static void open_stuck(mki_segment *s, int listed)
{
    stuck = 1;
    unsigned first = s->open_units, n = open_limit() - first;
    unsigned taken = bits_count(s->used, first, n);
    if (listed)
        list_remove(list_of(s), s);
    units_taken(s, first, n);
    s->fixed_units += n - taken;
    s->free_units -= n - taken;
    if (listed)
        list_push(list_of(s), s);
}

/* Map @s's memory up to unit @end at least (arena_lock held, or @s not
 * yet shared; @listed: it is on a list): 0, or -1 with errno ENOMEM when
 * the system refuses (a limit reached), or when something else is there
 * (its units are then taken for good: open_stuck). */
static int open_to(mki_segment *s, unsigned end, int listed)
{
    if (end <= s->open_units)
        return 0;
    unsigned to = (end + OPEN_STEP - 1) / OPEN_STEP * OPEN_STEP;
    if (to > open_limit())
        to = open_limit();
    char *at = (char *)s + open_bytes(s);
    if (mki_os_map_at(at, (size_t)to * MKI_UNIT - open_bytes(s)) != 0) {
        if (errno == EEXIST)
            open_stuck(s, listed);
        errno = ENOMEM;
        return -1;
    }
    if (atomic_load_explicit(&s->thp, memory_order_relaxed))
        mki_os_huge_pages(at, (size_t)to * MKI_UNIT - open_bytes(s), 1);
    s->open_units = to;
    return 0;
}

/* Slot @p of the arena goes back to its free slots, mapped as @mapped
 * first bytes (and a guard page at its end, in MEMKIT_SECURE=2).
 * arena_lock held. */
static void slot_free(char *p, size_t mapped, size_t committed)
{
    if (((mki_segment *)p)->guarded)
        mki_os_release(p + MKI_SEG_SIZE - MKI_OS_PAGE, MKI_OS_PAGE, 0);
    mki_os_arena_drop(p, MKI_SEG_SIZE, mapped, HEADER_MAP, committed);
    size_t i = ((uintptr_t)p - mki_os_arena.lo) / MKI_SEG_SIZE;
    arena_free_bits[i / 64] |= 1ull << (i % 64);
    arena_free_count++;
}

/* A 4 MiB piece for a new segment, its first OPEN_STEP units mapped
 * read-write: a slot given back, else the arena's next one, else a mapping
 * of its own (read-write whole).  arena_lock held. */
static mki_segment *segment_reserve(void)
{
    const size_t step = (size_t)OPEN_STEP * MKI_UNIT;
    char *p = NULL;
    if (arena_free_count) {
        for (size_t w = 0; w < ARENA_SLOTS / 64 && !p; w++)
            if (arena_free_bits[w]) {
                unsigned b = (unsigned)__builtin_ctzll(arena_free_bits[w]);
                arena_free_bits[w] &= arena_free_bits[w] - 1;
                arena_free_count--;
                p = (char *)mki_os_arena.lo + (w * 64 + b) * MKI_SEG_SIZE;
            }
        if (p) { /* its header's pages readable, the rest unmapped */
            mki_os_arena_reuse(p, HEADER_MAP);
            if (mki_os_access(p, HEADER_MAP, MKI_OS_RW) != 0 ||
                mki_os_map_at(p + HEADER_MAP, step - HEADER_MAP) != 0) {
                int taken = errno == EEXIST; /* (something else is there) */
                if (!taken)
                    slot_free(p, HEADER_MAP, 0); /* (a limit: later) */
                errno = ENOMEM;
                return NULL;
            }
        }
    }
    int full = 0;
    if (!p) {
        p = mki_os_arena_take(MKI_SEG_SIZE, step, &full);
        if (!p && !full)
            return NULL;
    }
    if (p) {
        mki_segment *s = (mki_segment *)p;
        s->open_units = OPEN_STEP;
        return s;
    }
    mki_segment *s = mki_os_reserve(MKI_SEG_SIZE, MKI_SEG_SIZE);
    if (s)
        s->open_units = MKI_UNITS;
    return s;
}

/* The arena's slots at its end that were given back leave it: the
 * address space they hold goes back to the OS (after a mapping failed:
 * RLIMIT_AS).  arena_lock held. */
static void arena_trim(void)
{
    size_t used = mki_os_arena.len / MKI_SEG_SIZE;
    while (used) {
        size_t i = used - 1;
        if (!(arena_free_bits[i / 64] & (1ull << (i % 64))))
            break;
        arena_free_bits[i / 64] &= ~(1ull << (i % 64));
        arena_free_count--;
        used--;
    }
    mki_os_arena_shrink(used * MKI_SEG_SIZE, HEADER_MAP);
}

/* ---- transparent huge pages (option thp "all") ---------------------------
 * A segment made once memkit holds THP_AFTER of them is advised for huge
 * pages: a program with a big heap then takes a fault per 2 MiB of its
 * pages, not per 4 KiB (perl's hash of a million strings, W7, on a virtual
 * machine whose faults cost 9 us: 1.56 -> 1.28 s and 42,100 -> 7,800
 * faults), at the price of the last, partly used 2 MiB block of each
 * segment, resident whole (perl's peak 196.4 -> 198.2 MiB, sqlite3's 74.1
 * -> 75.7: so not the default).  A small program (four segments or
 * fewer, 16 MiB) gets none.  The first purge that gives back part of such
 * a segment takes the advice back (thp_off), for good: the kernel's
 * khugepaged would otherwise fill in the huge pages the purge split, and
 * the memory given back would come back resident. */
#define THP_AFTER 4

static void thp_on(mki_segment *s)
{
    if (mki_option(MKI_OPT_THP) == 2 &&
        atomic_load_explicit(&normal_count, memory_order_relaxed) >= THP_AFTER) {
        mki_os_huge_pages(s, MKI_SEG_SIZE, 1);
        atomic_store_explicit(&s->thp, 1, memory_order_relaxed);
    }
}

/* Before any of @s's memory goes back. */
static void thp_off(mki_segment *s)
{
    if (atomic_load_explicit(&s->thp, memory_order_relaxed) &&
        atomic_exchange_explicit(&s->thp, 0, memory_order_relaxed))
        mki_os_huge_pages(s, MKI_SEG_SIZE, 0);
}

/* Give segment @s's address space back: to the arena's free slots (its
 * header's pages readable zeros, the rest unmapped), or to the OS.
 * arena_lock held. */
static void segment_unreserve(mki_segment *s, size_t committed)
{
    if (!mki_os_arena_has((char *)s + 1)) {
        /* what is its own: a mapping may have taken a hole it closed */
        if (s->guarded && s->open_units < MKI_UNITS)
            mki_os_release((char *)s + MKI_SEG_SIZE - MKI_OS_PAGE, MKI_OS_PAGE, 0);
        mki_os_release(s, open_bytes(s), committed);
        return;
    }
    thp_off(s); /* (the slot's next segment decides for itself) */
    slot_free((char *)s, open_bytes(s), committed);
}

/* ---- unit bitmap ---------------------------------------------------------- */

/* Bits at every multiple of 2^k within a word. */
static const uint64_t run_starts[7] = {
    ~0ull,
    0x5555555555555555ull,
    0x1111111111111111ull,
    0x0101010101010101ull,
    0x0001000100010001ull,
    0x0000000100000001ull,
    0x0000000000000001ull,
};

/* The units of word @w of @s a page cannot take: handed out, and for a
 * warm run (@warm) also those not committed.  @warm is a constant at every
 * call, so each search below compiles to a loop of its own. */
static inline uint64_t taken_word(const mki_segment *s, unsigned w, int warm)
{
    return warm ? s->used[w] | ~s->committed[w] : s->used[w];
}

/* First unit of a free run of 2^k units aligned to 2^k, or -1. */
static inline int find_aligned_run(const mki_segment *s, int warm, unsigned k)
{
    unsigned n = 1u << k;
    for (unsigned w = s->low_word; w < MKI_BITMAP_WORDS; w++) {
        uint64_t word = taken_word(s, w, warm);
        if (word == ~0ull)
            continue;
        uint64_t free = ~word;
        /* after the loop bit i is set iff units i .. i+n-1 are all free */
        for (unsigned sh = 1; sh < n; sh <<= 1)
            free &= free >> sh;
        free &= run_starts[k];
        if (free)
            return (int)(w * 64 + (unsigned)__builtin_ctzll(free));
    }
    return -1;
}

/* First unit of @nw consecutive free words, or -1. */
static inline int find_word_run(const mki_segment *s, int warm, unsigned nw)
{
    unsigned run = 0;
    for (unsigned w = s->low_word; w < MKI_BITMAP_WORDS; w++) {
        run = taken_word(s, w, warm) == 0 ? run + 1 : 0;
        if (run == nw)
            return (int)((w + 1 - nw) * 64);
    }
    return -1;
}

/* The bits of units @first .. @first + @n - 1 that lie in @first's word;
 * *@take: how many. */
static uint64_t span_mask(unsigned first, unsigned n, unsigned *take)
{
    unsigned b = first % 64;
    *take = 64 - b < n ? 64 - b : n;
    return *take == 64 ? ~0ull : ((1ull << *take) - 1) << b;
}

static void bits_set(uint64_t *bits, unsigned first, unsigned n, int on)
{
    while (n) {
        unsigned w = first / 64, take;
        uint64_t mask = span_mask(first, n, &take);
        if (on)
            bits[w] |= mask;
        else
            bits[w] &= ~mask;
        first += take;
        n -= take;
    }
}

/* Units @first .. @first + @n - 1 of @s are handed out (or held by a
 * purge): their `used` bits, and `low_word` past the words that filled.
 * (A segment whose low units are all taken, as the many 1 KiB pages of
 * 10,000 small contexts leave it, is searched from its first free word:
 * W5's page cuts scanned 20-60 full words each.) */
static void units_taken(mki_segment *s, unsigned first, unsigned n)
{
    bits_set(s->used, first, n, 1);
    while (s->low_word < MKI_BITMAP_WORDS && s->used[s->low_word] == ~0ull)
        s->low_word++;
}

/* Units @first .. @first + @n - 1 of @s are free again. */
static void units_freed(mki_segment *s, unsigned first, unsigned n)
{
    bits_set(s->used, first, n, 0);
    if (first / 64 < s->low_word)
        s->low_word = first / 64;
}

/* How many of units @first .. @first + @n - 1 have their bit set. */
static unsigned bits_count(const uint64_t *bits, unsigned first, unsigned n)
{
    unsigned c = 0;
    while (n) {
        unsigned w = first / 64, take;
        uint64_t mask = span_mask(first, n, &take);
        c += (unsigned)__builtin_popcountll(bits[w] & mask);
        first += take;
        n -= take;
    }
    return c;
}

/* Are units @first .. @first + @n - 1 all set in @bits? */
static int bits_all(const uint64_t *bits, unsigned first, unsigned n)
{
    while (n) {
        unsigned w = first / 64, take;
        uint64_t mask = span_mask(first, n, &take);
        if ((bits[w] & mask) != mask)
            return 0;
        first += take;
        n -= take;
    }
    return 1;
}

/* Resting page @pg of @s back with its owner (lock held): its `rest` bits
 * cleared.  A purge pass that holds some of them (collect_runs cleared
 * them while it decommits) puts them back when its system calls are done:
 * wait for that, without the lock.  (A fork waits for the pass: the
 * purge's fork handler.) */
static void unrest(mki_segment *s, mki_page *pg)
{
    while (!bits_all(s->rest, pg->unit, pg->units)) {
        mki_os_unlock(&arena_lock);
        sched_yield();
        mki_os_lock(&arena_lock);
    }
    bits_set(s->rest, pg->unit, pg->units, 0);
    UNCOUNT(units_resting, pg->units);
    pg->flags &= (uint8_t)~MKI_PF_REST;
}

/* Point @n entries of a page map at @pg, four stores a step (a slot has 64
 * entries, written when smaller pages come into it: one store at a time
 * took some 200 instructions each time). */
static void map_fill(mki_page **map, unsigned n, mki_page *pg)
{
    unsigned i = 0;
    for (; i + 4 <= n; i += 4) {
        map[i] = pg;
        map[i + 1] = pg;
        map[i + 2] = pg;
        map[i + 3] = pg;
    }
    for (; i < n; i++)
        map[i] = pg;
}

/* Units @unit .. @unit + @n - 1 of @s now belong to page @pg, or went
 * back (@pg is &mki_page_gone); the caller holds arena_lock.  A 64 KiB
 * slot they cover whole is said in its coarse entry, and its map[] entries
 * are NULL (layout.h): made so if smaller pages had written them.  In a
 * slot they cover in part, map[] entries are written, after every unit of
 * the slot has been given one if the slot had none (each says what its
 * coarse entry said: gone, or NULL if it never was in a page).  A heap of
 * 64 KiB pages thus writes no map[] entry at all: one store for a page
 * cut or given back instead of 64, and the map is not made resident.
 * The lookup ORs a unit's map[] entry with its slot's coarse entry, so the
 * two are never both set, even in passing: map[] entries are cleared
 * before the coarse entry is set, and given the coarse entry's value
 * before it is cleared.  (Lock-free readers: a valid chunk's page was
 * mapped before the chunk was handed out; a racing free of a bad pointer
 * reads an entry of the page, of one gone, NULL, or of its successor.) */
static void map_set(mki_segment *s, unsigned unit, unsigned n, mki_page *pg)
{
    const unsigned per = MKI_SLOT_UNITS;
    for (unsigned u = unit, end = unit + n; u < end;) {
        unsigned k = u / per, slot_end = (k + 1) * per;
        unsigned stop = end < slot_end ? end : slot_end;
        uint64_t bit = 1ull << k;
        if (u == k * per && stop == slot_end) {
            if (s->fine_slots & bit) {
                map_fill(s->map + u, per, NULL);
                s->fine_slots &= ~bit;
            }
            __atomic_store_n(&s->coarse[k], pg, __ATOMIC_RELEASE);
        } else {
            if (!(s->fine_slots & bit)) {
                if (s->coarse[k]) /* (gone | gone is gone meanwhile) */
                    map_fill(s->map + k * per, per, s->coarse[k]);
                __atomic_store_n(&s->coarse[k], NULL, __ATOMIC_RELEASE);
                s->fine_slots |= bit;
            }
            map_fill(s->map + u, stop - u, pg);
        }
        u = stop;
    }
}

/* ---- lists ---------------------------------------------------------------- */

static void list_remove(mki_segment **head, mki_segment *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        *head = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->next = s->prev = NULL;
}

static void list_push(mki_segment **head, mki_segment *s)
{
    s->prev = NULL;
    s->next = *head;
    if (*head)
        (*head)->prev = s;
    *head = s;
}

static mki_segment **list_of(mki_segment *s)
{
    if (s->free_units == 0)
        return &full_list;
    if (s->free_units == MKI_UNITS - s->fixed_units)
        return &empty_list;
    return &avail_list;
}

/* ---- registry (checking build) ------------------------------------------- */

/* The map of every 4 MiB of address space memkit holds a normal segment
 * or a huge mapping at (page.h, mki_segmap: a byte each, in leaves of 64 KiB
 * mapped when first needed), which the slow paths ask before they read
 * what a pointer handed to free leads to (mki_segment_find).  Readers are
 * lock-free; writers hold arena_lock. */
unsigned char *mki_segmap[MKI_SEGMAP_LEAVES];

/* Mark @base's 4 MiB as @kind (MKI_SEGMAP_NORMAL or _HUGE), or unmark it
 * (@add 0: only if it is marked @kind).  0, or -1 when a leaf of the map
 * cannot be made (nothing marked). */
static int segmap_put(int kind, uintptr_t base, int add)
{
    uintptr_t i = base >> MKI_SEG_SHIFT;
    if (i >= MKI_SEGMAP_BITS)
        return 0; /* outside the map: its pointers are taken as foreign */
    unsigned char **slot = &mki_segmap[i >> MKI_SEGMAP_LEAF_SHIFT];
    unsigned char *leaf = *slot;
    const size_t leaf_bytes = (size_t)1 << MKI_SEGMAP_LEAF_SHIFT;
    if (!leaf) {
        if (!add)
            return 0;
        leaf = mki_meta_map(leaf_bytes); /* (zero) */
        if (!leaf)
            return -1;
        __atomic_store_n(slot, leaf, __ATOMIC_RELEASE);
    }
    unsigned char *b = &leaf[i & (leaf_bytes - 1)];
    if (add) {
        __atomic_store_n(b, (unsigned char)kind, __ATOMIC_RELAXED);
    } else {
        unsigned char was = (unsigned char)kind;
        __atomic_compare_exchange_n(b, &was, 0, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    }
    return 0;
}

mki_page *mki_segment_find(const void *p)
{
    if (mki_segment_known(p))
        return mki_page_of(p);
    if (mki_huge_known(p))
        return &mki_segment_of(p)->huge_page;
    return NULL;
}

/* Add or remove a segment (@kind: MKI_SEGMAP_NORMAL or _HUGE); 0, or -1
 * when it cannot be recorded (its map's leaf, or in the checking build
 * its registry entry: the segment must then not be used, its chunks would
 * look foreign). */
static int registry_put(uintptr_t base, int add, int kind)
{
    if (segmap_put(kind, base, add) != 0)
        return -1;
    if (!MK_CONFIG_CHECK)
        return 0;
    if (!registry) /* made with the first segment; a failure is retried */
        registry = mki_os_reserve(REG_CAP * sizeof(uintptr_t), MKI_OS_PAGE);
    if (!registry) {
        segmap_put(kind, base, 0);
        return -1;
    }
    uintptr_t key = base >> MKI_SEG_SHIFT;
    size_t i = (size_t)(key * 0x9E3779B97F4A7C15ull) % REG_CAP;
    for (size_t n = 0; n < REG_CAP; n++, i = (i + 1) % REG_CAP) {
        if (add && (registry[i] == 0 || registry[i] == 1)) {
            registry[i] = key; /* keys are unique: no need to look further */
            return 0;
        }
        if (!add && registry[i] == key) {
            registry[i] = 1; /* tombstone */
            return 0;
        }
        if (registry[i] == 0)
            return 0;
    }
    segmap_put(kind, base, 0);
    return -1; /* full: 256 GiB of segments */
}

int mki_segment_register(void *base, int add)
{
    mki_os_lock(&arena_lock);
    int r = add ? registry_put((uintptr_t)base, 1, MKI_SEGMAP_HUGE) : 0;
    if (!add)
        registry_put((uintptr_t)base, 0, MKI_SEGMAP_HUGE);
    mki_os_unlock(&arena_lock);
    if (r == 0) {
        if (add)
            atomic_fetch_add_explicit(&segment_count, 1, memory_order_relaxed);
        else
            atomic_fetch_sub_explicit(&segment_count, 1, memory_order_relaxed);
    }
    return r;
}

int mki_segment_owns(const void *p)
{
    if (!p)
        return 0;
    uintptr_t key = ((uintptr_t)p - 1) >> MKI_SEG_SHIFT;
    int found = 0;
    mki_os_lock(&arena_lock);
    if (!registry) {
        mki_os_unlock(&arena_lock);
        return 0;
    }
    size_t i = (size_t)(key * 0x9E3779B97F4A7C15ull) % REG_CAP;
    for (size_t n = 0; n < REG_CAP; n++, i = (i + 1) % REG_CAP) {
        if (registry[i] == key) {
            found = 1;
            break;
        }
        if (registry[i] == 0)
            break;
    }
    mki_os_unlock(&arena_lock);
    return found;
}

/* ---- segments ------------------------------------------------------------- */

static size_t committed_units_bytes(const mki_segment *s)
{
    size_t n = 0;
    for (unsigned w = 0; w < MKI_BITMAP_WORDS; w++)
        n += (size_t)__builtin_popcountll(s->committed[w]);
    return n * MKI_UNIT;
}

static mki_segment *segment_new(void)
{
    mki_segment *s = segment_reserve();
    if (!s)
        return NULL;
    size_t header = MKI_SEG_HEADER_UNITS * MKI_UNIT;
    if (mki_os_commit(s, header) != 0) {
        segment_unreserve(s, 0);
        return NULL;
    }
    thp_on(s); /* (before the header's first write: its block too) */
    /* fresh mappings are zero: only the non-zero fields are written */
    s->magic = MKI_SEG_MAGIC;
    s->kind = MKI_SEG_NORMAL;
    s->size = MKI_SEG_SIZE;
    s->fixed_units = MKI_SEG_HEADER_UNITS;
    s->max_run_hint = MKI_UNITS;
    units_taken(s, 0, MKI_SEG_HEADER_UNITS);
    bits_set(s->committed, 0, MKI_SEG_HEADER_UNITS, 1);
    if (mki_secure >= 2) {
        /* a guard page at the end, its own: an overflow off the segment's
         * last chunk faults instead of running into the next mapping (where
         * the segment is not mapped whole, the page is mapped first, so
         * that nothing else is mapped there) */
        char *g = (char *)s + MKI_SEG_SIZE - MKI_OS_PAGE;
        int whole = s->open_units == MKI_UNITS;
        if (!whole && mki_os_map_at(g, MKI_OS_PAGE) != 0) {
            segment_unreserve(s, header);
            errno = ENOMEM;
            return NULL;
        }
        s->guarded = 1; /* (its own, from here on) */
        if (mki_os_guard(g, MKI_OS_PAGE) != 0) {
            segment_unreserve(s, header);
            errno = ENOMEM;
            return NULL;
        }
        unsigned n = MKI_OS_PAGE / MKI_UNIT;
        units_taken(s, MKI_UNITS - n, n);
        s->fixed_units += n;
    }
    s->free_units = MKI_UNITS - s->fixed_units;
    if (registry_put((uintptr_t)s, 1, MKI_SEGMAP_NORMAL) != 0) {
        segment_unreserve(s, header);
        errno = ENOMEM;
        return NULL;
    }
    atomic_fetch_add_explicit(&segment_count, 1, memory_order_relaxed);
    COUNT(normal_count, 1);
    COUNT(seg_committed, header);
    mki_purge_grew();
    return s;
}

/* @locked: the caller holds arena_lock (the registry's writers' lock). */
static void segment_release(mki_segment *s, int locked)
{
    mki_mem_forget(s, MKI_SEG_SIZE); /* the address may be mapped again */
    if (!locked)
        mki_os_lock(&arena_lock);
    registry_put((uintptr_t)s, 0, MKI_SEGMAP_NORMAL);
    atomic_fetch_sub_explicit(&segment_count, 1, memory_order_relaxed);
    UNCOUNT(normal_count, 1);
    size_t committed = committed_units_bytes(s);
    UNCOUNT(seg_committed, committed);
    segment_unreserve(s, committed);
    if (!locked)
        mki_os_unlock(&arena_lock);
}

/* The first unit in [@u, @end) whose bit in @bits is @on, or @end: a word
 * at a time (a 64-unit page whose units are all committed is one test). */
static unsigned next_bit(const uint64_t *bits, unsigned u, unsigned end, int on)
{
    while (u < end) {
        unsigned w = u / 64, b = u % 64;
        uint64_t x = (on ? bits[w] : ~bits[w]) >> b;
        if (x) {
            u += (unsigned)__builtin_ctzll(x);
            return u < end ? u : end;
        }
        u = (w + 1) * 64;
    }
    return end;
}

/* Commit the not-yet-committed units of [first, first+n); 0 or -1. */
static int commit_units(mki_segment *s, unsigned first, unsigned n, size_t *fresh,
                        int listed)
{
    unsigned end = first + n;
    if (open_to(s, end, listed) != 0)
        return -1;
    for (unsigned u = next_bit(s->committed, first, end, 0); u < end;) {
        unsigned v = next_bit(s->committed, u, end, 1);
        if (mki_os_commit((char *)s + (size_t)u * MKI_UNIT,
                          (size_t)(v - u) * MKI_UNIT) != 0)
            return -1; /* units committed so far stay committed: counted */
        bits_set(s->committed, u, v - u, 1);
        COUNT(seg_committed, (size_t)(v - u) * MKI_UNIT);
        *fresh += (size_t)(v - u) * MKI_UNIT;
        u = next_bit(s->committed, v, end, 0);
    }
    return 0;
}

/* A run of @units free in @s (a page's run is aligned to its own size up
 * to 64 units, else whole words; @warm: committed all through), or -1,
 * which tightens @hint, the segment's bound on the longest such run. */
static inline int find_clear_run(const mki_segment *s, int warm, uint32_t *hint,
                                 uint32_t units)
{
    int at = units <= 64 ? find_aligned_run(s, warm, (unsigned)__builtin_ctz(units))
                         : find_word_run(s, warm, units / 64);
    if (at < 0)
        *hint = units - 1; /* no run this long: tighten the bound */
    return at;
}

static int find_run(mki_segment *s, uint32_t units)
{
    if (s->free_units < units || s->max_run_hint < units)
        return -1;
    return find_clear_run(s, 0, &s->max_run_hint, units);
}

/* A free run of @units that is committed all through (memory a page gave
 * back and no purge has taken yet: reusing it costs no fault and no new
 * resident memory), or -1. */
static int find_warm_run(mki_segment *s, uint32_t units)
{
    if (s->free_units < units || s->warm_run_hint < units)
        return -1;
    return find_clear_run(s, 1, &s->warm_run_hint, units);
}

/* Page descriptors that went back, for the next page cuts: a list under
 * arena_lock, which a cut and a release take anyway, where meta.c's lock
 * was a second one each way.  They never go back to meta.c, which never
 * gives memory back either: what the list holds is bounded by the peak
 * number of pages, as the descriptors were. */
static mki_page *desc_spares;

/* A zeroed page descriptor, or NULL (under arena_lock: meta.c's lock
 * nests inside it, the order of the fork handlers). */
static mki_page *desc_get(void)
{
    mki_page *pg = desc_spares;
    if (!pg)
        return mki_meta_alloc(sizeof(mki_page));
    desc_spares = pg->next;
    memset(pg, 0, sizeof *pg);
    return pg;
}

/* @pg's page went back (under arena_lock). */
static void desc_put(mki_page *pg)
{
    pg->kind = MKI_PAGE_FREE;
    pg->next = desc_spares;
    desc_spares = pg;
}

static mki_page *page_alloc(uint32_t units, size_t commit_bytes)
{
    mki_os_lock(&arena_lock);
    mki_page *pg = desc_get();
    if (!pg) {
        mki_os_unlock(&arena_lock);
        errno = ENOMEM;
        return NULL;
    }
    mki_segment *s;
    int at;
again:
    s = NULL;
    at = -1;
    /* a page committed whole (the small pages of the kinds) goes first
     * where memory is still committed, wherever it is: taking fresh units
     * of one segment while another holds freed committed ones (a
     * context's pages after its reset) would double what is resident
     * until a purge.  A run committed in part (a large chunk's) takes the
     * first fit, which may already hold most of its committed units. */
    unsigned ncommit = (unsigned)((commit_bytes + MKI_UNIT - 1) / MKI_UNIT);
    int whole = ncommit >= units;
    for (s = avail_list; whole && s; s = s->next)
        if ((at = find_warm_run(s, units)) >= 0)
            break;
    if (whole && at < 0)
        for (s = empty_list; s; s = s->next)
            if ((at = find_warm_run(s, units)) >= 0)
                break;
    if (at < 0)
        for (s = avail_list; s; s = s->next)
            if ((at = find_run(s, units)) >= 0)
                break;
    if (at < 0)
        for (s = empty_list; s; s = s->next)
            if ((at = find_run(s, units)) >= 0)
                break;
    int fresh_segment = 0;
    if (at < 0) {
        s = segment_new();
        if (!s)
            goto fail;
        fresh_segment = 1;
        at = find_run(s, units);
    }
    size_t fresh = 0;
    if (commit_units(s, (unsigned)at, ncommit < units ? ncommit : units, &fresh,
                     !fresh_segment) != 0) {
        if (stuck) { /* its units there are taken now: look again */
            stuck = 0;
            if (fresh_segment)
                list_push(list_of(s), s);
            goto again;
        }
        if (fresh_segment)
            segment_release(s, 1);
        goto fail;
    }
    if (!fresh_segment)
        list_remove(list_of(s), s);
    units_taken(s, (unsigned)at, units);
    bits_set(s->aged, (unsigned)at, units, 0); /* its free time starts over */
    s->free_units -= units;
    COUNT(units_out, units);
    COUNT(page_cuts, 1);
    list_push(list_of(s), s);
    map_set(s, (unsigned)at, units, pg);
    mki_os_unlock(&arena_lock);
    mki_purge_used(fresh != 0 || fresh_segment);

    pg->unit = (uint32_t)at;
    pg->units = units;
    pg->size = (size_t)units * MKI_UNIT;
    pg->start = (char *)s + (size_t)at * MKI_UNIT;
    return pg;

fail:
    desc_put(pg);
    mki_os_unlock(&arena_lock);
    errno = ENOMEM;
    return NULL;
}

mki_page *mki_segment_page_alloc(uint32_t units, size_t commit_bytes)
{
    pthread_once(&arena_once, arena_init);
    int saved = errno;
    mki_page *pg = page_alloc(units, commit_bytes);
    if (MKI_UNLIKELY(!pg) && mki_purge_reclaim()) /* (a limit: RLIMIT_AS...) */
        pg = page_alloc(units, commit_bytes);
    if (pg)
        errno = saved; /* (what failed on the way, a try) */
    return pg;
}

static void release(mki_page *pg);

size_t mki_segment_page_release_now(mki_page *pg)
{
    /* the OS pages that lie wholly in this page: nobody else can cut a
     * page from them before it is released, so no lock is needed */
    uintptr_t a = ((uintptr_t)pg->start + MKI_OS_PAGE - 1) & ~(uintptr_t)(MKI_OS_PAGE - 1);
    uintptr_t b = ((uintptr_t)pg->start + pg->size) & ~(uintptr_t)(MKI_OS_PAGE - 1);
    mki_segment *s = mki_segment_of(pg->start);
    size_t bytes = 0;
    if (pg->flags & MKI_PF_REST) { /* (no purge may take its units now) */
        mki_os_lock(&arena_lock);
        unrest(s, pg);
        mki_os_unlock(&arena_lock);
    }
    if (b > a) {
        unsigned first = (unsigned)((a - (uintptr_t)s) >> MKI_UNIT_SHIFT);
        unsigned n = (unsigned)((b - a) >> MKI_UNIT_SHIFT);
        mki_os_lock(&arena_lock);
        bytes = (size_t)bits_count(s->committed, first, n) * MKI_UNIT;
        mki_os_unlock(&arena_lock);
        thp_off(s);
        if (mki_os_decommit((void *)a, b - a, bytes, MKI_OS_DONTNEED) == 0) {
            mki_os_lock(&arena_lock);
            bits_set(s->committed, first, n, 0);
            UNCOUNT(seg_committed, bytes);
            mki_os_unlock(&arena_lock);
        } else {
            bytes = 0; /* still committed, still usable: a later pass */
        }
    }
    release(pg);
    return bytes;
}

void mki_segment_page_release(mki_page *pg)
{
    if (pg->flags & MKI_PF_RELEASE) {
        mki_segment_page_release_now(pg);
        return;
    }
    release(pg);
}

/* Give back the pages of list @pgs (linked through `next`): the owner's
 * and the profile's callbacks and an instrumented page's bitmap first, then
 * every page's units under one clock read and one lock, the descriptors
 * last, and one purge note for them all (a GENERAL reset gives back every
 * page beyond what it keeps: mki_segment_pages_release). */
static void release_list(mki_page *pgs)
{
    for (mki_page *pg = pgs; pg; pg = pg->next) {
        if (pg->charged)
            mki_page_up.released(pg);
        if (atomic_load_explicit(&pg->samples, memory_order_relaxed))
            mki_page_up.unsampled(pg);
        if (pg->live) { /* an instrumented page's bitmap goes with it */
            mki_meta_free((void *)pg->live, mki_page_live_bytes(pg));
            pg->live = NULL;
        }
    }
    unsigned long long now = mki_os_now_ns();
    mki_os_lock(&arena_lock);
    for (mki_page *pg = pgs, *next; pg; pg = next) {
        next = pg->next;
        mki_segment *s = mki_segment_of(pg->start);
        if (pg->flags & MKI_PF_REST)
            unrest(s, pg);
        list_remove(list_of(s), s);
        map_set(s, pg->unit, pg->units, &mki_page_gone);
        units_freed(s, pg->unit, pg->units);
        s->free_units += pg->units;
        UNCOUNT(units_out, pg->units);
        s->max_run_hint = MKI_UNITS; /* freed units may join a longer run */
        s->warm_run_hint = MKI_UNITS; /* (still committed, until a purge) */
        mki_segment **list = list_of(s);
        s->freed_ns = now;
        if (list == &empty_list)
            s->empty_since_ns = now;
        list_push(list, s);
        desc_put(pg);
    }
    mki_os_unlock(&arena_lock);
    mki_purge_note(); /* their units are free: purge them in time */
}

static void release(mki_page *pg)
{
    pg->next = NULL;
    release_list(pg);
}

void mki_segment_pages_rest(mki_page *pgs)
{
    if (!pgs)
        return;
    unsigned long long now = mki_os_now_ns();
    mki_os_lock(&arena_lock);
    for (mki_page *pg = pgs; pg; pg = pg->next) {
        mki_segment *s = mki_segment_of(pg->start);
        bits_set(s->rest, pg->unit, pg->units, 1);
        bits_set(s->aged, pg->unit, pg->units, 0); /* its idle time starts */
        s->freed_ns = now;
        COUNT(units_resting, pg->units);
        pg->flags |= MKI_PF_REST;
    }
    mki_os_unlock(&arena_lock);
    mki_purge_note(); /* their memory may go back in time */
}

int mki_segment_page_wake(mki_page *pg)
{
    mki_segment *s = mki_segment_of(pg->start);
    size_t fresh = 0;
    int saved = errno;
    mki_os_lock(&arena_lock);
    unrest(s, pg);
    if (!bits_all(s->committed, pg->unit, pg->units) &&
        commit_units(s, pg->unit, pg->units, &fresh, 1) != 0) {
        /* (what it committed stays committed, and counted) */
        bits_set(s->rest, pg->unit, pg->units, 1);
        COUNT(units_resting, pg->units);
        pg->flags |= MKI_PF_REST;
        mki_os_unlock(&arena_lock);
        errno = ENOMEM;
        return -1;
    }
    mki_os_unlock(&arena_lock);
    if (fresh)
        mki_purge_used(1);
    errno = saved;
    return 0;
}

void mki_segment_pages_release(mki_page *pgs)
{
    mki_page *batch = NULL, *next;
    for (mki_page *pg = pgs; pg; pg = next) {
        next = pg->next;
        if (pg->kind == MKI_PAGE_HUGE) {
            mki_huge_release(pg);
        } else if (pg->flags & MKI_PF_RELEASE) {
            mki_segment_page_release_now(pg);
        } else {
            pg->next = batch;
            batch = pg;
        }
    }
    if (batch)
        release_list(batch);
}

static int page_grow(mki_page *pg, size_t bytes);

int mki_segment_page_grow(mki_page *pg, size_t bytes)
{
    int saved = errno, r = page_grow(pg, bytes);
    errno = saved; /* a try: the caller moves the chunk instead */
    return r;
}

static int page_grow(mki_page *pg, size_t bytes)
{
    mki_segment *s = mki_segment_of(pg->start);
    size_t body = (bytes + MKI_OS_PAGE - 1) & ~(size_t)(MKI_OS_PAGE - 1);
    size_t need = (body + MKI_UNIT - 1) >> MKI_UNIT_SHIFT;
    if (pg->unit + need > MKI_UNITS)
        return -1;
    uint32_t have = pg->units;
    mki_os_lock(&arena_lock);
    if (need > have && next_bit(s->used, pg->unit + have, pg->unit + (unsigned)need, 1) <
                           pg->unit + (unsigned)need) {
        mki_os_unlock(&arena_lock);
        return -1;
    }
    /* the units past the old body may never have been committed */
    size_t fresh = 0;
    if (commit_units(s, pg->unit, (unsigned)need, &fresh, 1) != 0) {
        mki_os_unlock(&arena_lock);
        return -1;
    }
    if (need > have) {
        list_remove(list_of(s), s);
        units_taken(s, pg->unit + have, (unsigned)(need - have));
        bits_set(s->aged, pg->unit + have, (unsigned)(need - have), 0);
        s->free_units -= (uint32_t)(need - have);
        COUNT(units_out, need - have);
        map_set(s, pg->unit, (unsigned)need, pg); /* (slots it now covers whole) */
        list_push(list_of(s), s);
        pg->units = (uint32_t)need;
        pg->size = need * MKI_UNIT;
    }
    mki_os_unlock(&arena_lock);
    pg->end = pg->start + body;
    mki_purge_used(fresh != 0);
    return 0;
}

uint32_t mki_segment_units_for(size_t bytes)
{
    size_t units = (bytes + MKI_UNIT - 1) >> MKI_UNIT_SHIFT;
    if (units <= MKI_PAGE_MAX_UNITS) {
        uint32_t p2 = 1;
        while (p2 < units)
            p2 <<= 1;
        return p2;
    }
    return (uint32_t)((units + 63) & ~(size_t)63);
}

mki_page *mki_segment_chunk_alloc(mk_ctx *ctx, size_t size, size_t align)
{
    /* a chunk always has room for what a free writes into it (a link
     * word, when another thread frees it): size 0 gets an OS page */
    if (size == 0)
        size = 1;
    size_t body = (size + MKI_OS_PAGE - 1) & ~(size_t)(MKI_OS_PAGE - 1);
    mki_page *pg;
    if (size <= MKI_LARGE_MAX && align <= MKI_PAGE_MAX) {
        /* a run is aligned to its own size, so a run of at least `align`
         * bytes aligns the chunk */
        pg = mki_segment_page_alloc(mki_segment_units_for(body > align ? body : align),
                                    body);
        if (!pg)
            return NULL;
        pg->kind = MKI_PAGE_LARGE;
        pg->end = pg->start + body;
    } else {
        pg = mki_huge_alloc(size, align);
        if (!pg)
            return NULL;
    }
    pg->ctx = ctx;
    pg->used = 1;
    pg->capacity = 1;
    return pg;
}

/* ---- trimming and figures ------------------------------------------------- */

/* ---- purging ---------------------------------------------------------------
 * What the purge policy (purge.c) gives back, and how: OS pages that lie
 * wholly in free, committed units, once they have been free for a whole
 * pass interval (the `aged` bitmap: free and committed at the last pass),
 * and segments empty for the purge delay.  The system calls run without
 * the pool's lock: the units being purged are marked used meanwhile (no
 * page can be cut from them), and given back to the pool afterwards.  An
 * empty segment is unmapped (mode unmap), or decommitted and kept for
 * reuse, up to KEEP_EMPTY of them (its header stays resident: 34 KiB). */

#define KEEP_EMPTY 8
#define MAX_RUNS 256
#define UPP (MKI_OS_PAGE / MKI_UNIT) /* units per OS page */

typedef struct purge_run {
    mki_segment *s;
    unsigned first, n;
    int rest; /* units of resting pages (else free ones) */
} purge_run;

/* Bits of @x whose whole OS page (group of UPP bits) is set. */
static uint64_t whole_pages(uint64_t x)
{
    uint64_t m = x;
    for (unsigned i = 1; i < UPP; i <<= 1)
        m &= m >> i;
    m &= 0x1111111111111111ull; /* one bit per OS page: its first unit */
    return m * ((1ull << UPP) - 1);
}

/* The run collect_runs is building: units @start .. @start + @len - 1,
 * free ones or (@rest) those of resting pages. */
typedef struct run_build {
    unsigned start, len;
    int rest;
} run_build;

/* Close run @r of @s: to purge in this pass (its units held meanwhile: a
 * free run's marked used, a resting run's `rest` bits cleared), or, with
 * no room left in this pass, aged for the next one (*@later). */
static void close_run(mki_segment *s, run_build *r, purge_run *runs,
                      unsigned *nr, int *took, int *later, size_t *budget)
{
    if (*nr < MAX_RUNS) {
        runs[(*nr)++] = (purge_run){s, r->start, r->len, r->rest};
        if (r->rest) {
            bits_set(s->rest, r->start, r->len, 0);
        } else {
            if (!*took)
                list_remove(list_of(s), s);
            *took = 1;
            units_taken(s, r->start, r->len);
            s->free_units -= r->len;
        }
    } else if (!budget) {
        *later = 1; /* no room in this pass: the next one */
        bits_set(s->aged, r->start, r->len, 1);
    }
    r->len = 0;
}

/* Collect the runs of @s to purge (lock held): the free or resting,
 * committed units that have been so for the delay: all of them if no page
 * of @s went back or to rest for the delay (`quiet`) or @force, else those
 * that were so at the last pass too (`aged`: a busy segment's long-idle
 * units).  A run spans bitmap words (one system call per run, not per
 * word), and holds free units or resting ones, not both (they are given
 * back differently: purge).  Returns 1 if units stay to purge later, and
 * lowers *@next_due to when they will be due.  With @budget (a shed,
 * mki_segment_shed): any such units, whole words of them until *@budget
 * bytes are taken, `aged` left as it was. */
static int collect_runs(mki_segment *s, int force, unsigned long long now,
                        unsigned long long delay_ns, purge_run *runs,
                        unsigned *nr, unsigned long long *next_due,
                        size_t *budget)
{
    int later = 0, took = 0;
    int quiet = budget || force || now - s->freed_ns >= delay_ns;
    run_build r = {0, 0, 0};
    for (unsigned w = 0; w <= MKI_BITMAP_WORDS; w++) {
        uint64_t cand = 0, rest = 0;
        if (w < MKI_BITMAP_WORDS) {
            /* only whole OS pages can go back: the rest is not counted */
            uint64_t idle_free = whole_pages(~s->used[w] & s->committed[w]);
            uint64_t idle_rest = whole_pages(s->rest[w] & s->committed[w]);
            uint64_t idle = idle_free | idle_rest;
            cand = quiet ? idle : idle & s->aged[w];
            if (*nr >= MAX_RUNS || (budget && !*budget))
                cand = 0;
            rest = cand & idle_rest;
            if (budget) { /* a shed: any idle unit, and `aged` as it was */
                size_t bytes = (size_t)__builtin_popcountll(cand) * MKI_UNIT;
                *budget -= bytes < *budget ? bytes : *budget;
            } else {
                s->aged[w] = idle & ~cand;
                later |= s->aged[w] != 0;
            }
        }
        /* the common words at once: nothing to take and no run open (past
         * the last word too: nothing to close), or every unit taken, of
         * the open run's sort (the run goes on through the word) */
        if (!cand && !r.len)
            continue;
        if (cand == ~0ull && (rest == 0 || rest == ~0ull) &&
            (!r.len || r.rest == (rest != 0))) {
            if (!r.len)
                r = (run_build){w * 64, 0, rest != 0};
            r.len += 64;
            continue;
        }
        for (unsigned b = 0; b < 64; b++) {
            int in = w < MKI_BITMAP_WORDS && ((cand >> b) & 1);
            int is_rest = (int)((rest >> b) & 1);
            if (r.len && (!in || is_rest != r.rest))
                close_run(s, &r, runs, nr, &took, &later, budget);
            if (in) {
                if (!r.len)
                    r = (run_build){w * 64 + b, 0, is_rest};
                r.len++;
            }
            if (w >= MKI_BITMAP_WORDS)
                break;
        }
    }
    if (took)
        list_push(list_of(s), s);
    if (later) {
        unsigned long long due = quiet ? now + delay_ns : s->freed_ns + delay_ns;
        if (due < *next_due)
            *next_due = due;
    }
    return later;
}

/* Committed bytes of the data units of an empty segment. */
static int has_committed_data(const mki_segment *s)
{
    return committed_units_bytes(s) > MKI_SEG_HEADER_UNITS * MKI_UNIT;
}

static size_t purge(int force, int how, int unmap_empty,
                    unsigned long long delay_ns, int *pending,
                    unsigned long long *next_due, size_t *budget)
{
    static purge_run runs[MAX_RUNS]; /* one pass at a time (purge.c) */
    static mki_segment *drop[MAX_RUNS];
    unsigned nr = 0, nd = 0, kept = 0;
    size_t total = 0;
    unsigned long long now = mki_os_now_ns();
    mki_os_lock(&arena_lock);
    for (mki_segment *s = budget ? NULL : empty_list, *next; s; s = next) {
        next = s->next;
        int due = force || now - s->empty_since_ns >= delay_ns;
        if (!unmap_empty && !has_committed_data(s) && kept < KEEP_EMPTY) {
            kept++; /* already decommitted: kept for reuse */
            continue;
        }
        if (due && nd < MAX_RUNS) {
            list_remove(&empty_list, s);
            drop[nd++] = s;
        } else {
            *pending = 1;
            unsigned long long when = due ? now + delay_ns
                                          : s->empty_since_ns + delay_ns;
            if (when < *next_due)
                *next_due = when;
        }
    }
    /* (a shed takes the empty segments' free units too, after the others:
     * those it takes move to avail_list, already walked) */
    for (int l = 0; l < (budget ? 3 : 2); l++)
        for (mki_segment *s = l == 2 ? empty_list : l ? full_list : avail_list, *next;
             s; s = next) {
            next = s->next;
            *pending |= collect_runs(s, force, now, delay_ns, runs, &nr,
                                     next_due, budget);
        }
    mki_os_unlock(&arena_lock);

    /* the system calls, without the lock */
    size_t header = MKI_SEG_HEADER_UNITS * MKI_UNIT;
    int failed = 0;
    static unsigned char run_failed[MAX_RUNS], drop_failed[MAX_RUNS], closed[MAX_RUNS];
    for (unsigned i = 0; i < nr; i++) {
        thp_off(runs[i].s);
        run_failed[i] =
            mki_os_decommit((char *)runs[i].s + (size_t)runs[i].first * MKI_UNIT,
                            (size_t)runs[i].n * MKI_UNIT,
                            (size_t)runs[i].n * MKI_UNIT, how) != 0;
        failed |= run_failed[i];
    }
    for (unsigned i = 0; i < nd; i++) {
        mki_segment *s = drop[i];
        drop_failed[i] = closed[i] = 0;
        if (unmap_empty || kept + i >= KEEP_EMPTY) {
            total += committed_units_bytes(s);
            segment_release(s, 0); /* counts its own bytes */
            drop[i] = NULL;
        } else {
            /* the data units (not the header: its first units share an
             * OS page with data only in the first data page, kept),
             * unmapped: an empty segment kept for reuse holds no memory
             * in the process's address space, data or commit charge
             * either (MADV_FREE, the purge mode free, keeps them mapped:
             * the kernel takes its pages lazily) */
            size_t data = HEADER_MAP;
            size_t acct = committed_units_bytes(s) - header;
            size_t open = open_bytes(s);
            thp_off(s);
            if (open <= data) {
                mki_os_decommit(s, 0, acct, how); /* (the count alone) */
            } else if (how == MKI_OS_FREE) {
                drop_failed[i] = mki_os_decommit((char *)s + data, open - data,
                                                 acct, how) != 0;
            } else {
                mki_os_release((char *)s + data, open - data, 0);
                mki_os_decommit(s, 0, acct, how); /* (the count alone) */
                closed[i] = 1;
            }
            failed |= drop_failed[i];
        }
    }
    /* a purge that failed leaves its memory committed and usable; a later
     * pass, one delay from now, tries again */
    if (failed) {
        *pending = 1;
        if (now + delay_ns < *next_due)
            *next_due = now + delay_ns;
    }

    mki_os_lock(&arena_lock);
    for (unsigned i = 0; i < nr; i++) {
        mki_segment *s = runs[i].s;
        if (runs[i].rest) { /* still resting, with its owner */
            bits_set(s->rest, runs[i].first, runs[i].n, 1);
            if (run_failed[i]) {
                bits_set(s->aged, runs[i].first, runs[i].n, 1);
                continue;
            }
            bits_set(s->committed, runs[i].first, runs[i].n, 0);
            size_t bytes = (size_t)runs[i].n * MKI_UNIT;
            UNCOUNT(seg_committed, bytes);
            total += bytes;
            continue;
        }
        list_remove(list_of(s), s);
        units_freed(s, runs[i].first, runs[i].n);
        if (run_failed[i]) {
            bits_set(s->aged, runs[i].first, runs[i].n, 1);
            s->free_units += runs[i].n;
            s->max_run_hint = MKI_UNITS;
            s->warm_run_hint = MKI_UNITS; /* free, and still committed */
            list_push(list_of(s), s);
            continue;
        }
        bits_set(s->committed, runs[i].first, runs[i].n, 0);
        s->free_units += runs[i].n;
        s->max_run_hint = MKI_UNITS;
        mki_segment **list = list_of(s);
        if (list == &empty_list)
            s->empty_since_ns = now;
        list_push(list, s);
        size_t bytes = (size_t)runs[i].n * MKI_UNIT;
        UNCOUNT(seg_committed, bytes);
        total += bytes;
    }
    for (unsigned i = 0; i < nd; i++) {
        mki_segment *s = drop[i];
        if (!s)
            continue;
        if (drop_failed[i]) { /* back as it was: empty, still committed */
            list_push(&empty_list, s);
            continue;
        }
        size_t bytes = committed_units_bytes(s) - header;
        if (closed[i])
            s->open_units = (unsigned)(HEADER_MAP / MKI_UNIT);
        bits_set(s->committed, MKI_SEG_HEADER_UNITS,
                 MKI_UNITS - MKI_SEG_HEADER_UNITS, 0);
        memset(s->aged, 0, sizeof s->aged);
        UNCOUNT(seg_committed, bytes);
        total += bytes;
        list_push(&empty_list, s);
    }
    mki_os_unlock(&arena_lock);
    return total;
}

size_t mki_segment_purge(int force, int how, int unmap_empty,
                         unsigned long long delay_ns, int *pending,
                         unsigned long long *next_due)
{
    return purge(force, how, unmap_empty, delay_ns, pending, next_due, NULL);
}

int mki_segment_idle(void)
{
    return __atomic_load_n(&empty_list, __ATOMIC_RELAXED) != NULL ||
           __atomic_load_n(&arena_free_count, __ATOMIC_RELAXED) != 0;
}

void mki_segment_trim_arena(void)
{
    mki_os_lock(&arena_lock);
    arena_trim();
    mki_os_unlock(&arena_lock);
}

size_t mki_segment_shed(size_t bytes, int how)
{
    int pending = 0;
    unsigned long long due = ~0ull;
    return purge(0, how, 0, 0, &pending, &due, &bytes);
}

void mki_segment_fork(int phase)
{
    if (phase == 0)
        pthread_mutex_lock(&arena_lock);
    else
        pthread_mutex_unlock(&arena_lock);
}

/* Units in pages that are not resting (a resting page's units are its
 * owner's, and slack: no chunk in them).  Two relaxed loads, which other
 * threads' cuts and rests may pass between: never below 0. */
static size_t units_live(void)
{
    size_t out = atomic_load_explicit(&units_out, memory_order_relaxed);
    size_t rest = atomic_load_explicit(&units_resting, memory_order_relaxed);
    return out > rest ? out - rest : 0;
}

void mki_segment_use(size_t *live, size_t *slack)
{
    size_t committed = atomic_load_explicit(&seg_committed, memory_order_relaxed);
    size_t held = units_live() * MKI_UNIT +
                  atomic_load_explicit(&normal_count, memory_order_relaxed) *
                      (MKI_SEG_HEADER_UNITS * MKI_UNIT);
    *live = held;
    *slack = committed > held ? committed - held : 0;
}

void mki_segment_figures(mki_malloc_figures *f)
{
    f->segment_bytes = atomic_load_explicit(&seg_committed, memory_order_relaxed);
    f->page_bytes = units_live() * MKI_UNIT;
    mki_huge_figures(&f->huge_count, &f->huge_bytes, &f->huge_cached);
    f->used_bytes = f->page_bytes + f->huge_bytes;
}

size_t mki_segment_cuts(void)
{
    return atomic_load_explicit(&page_cuts, memory_order_relaxed);
}

size_t mki_segment_count(void)
{
    return atomic_load_explicit(&segment_count, memory_order_relaxed);
}
