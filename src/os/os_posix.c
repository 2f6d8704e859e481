/* SPDX-License-Identifier: MIT */
/*
 * os_posix.c - the OS contract (os.h) on Linux/POSIX: mmap, munmap, madvise.
 *
 * Aligned reservations over-map by the alignment and unmap the two ends,
 * which costs one extra munmap but never leaves a hole that a later call
 * must search.  Counters are relaxed atomics: they feed statistics and tests,
 * never decisions that need ordering.
 *
 * Trade-off: read-write MAP_NORESERVE reservations make commit free of
 * system calls (the kernel commits on first touch).  On a system with strict
 * overcommit accounting a PROT_NONE reservation plus mprotect on commit
 * would be kinder; that variant would live here and nowhere else.
 */

#include "os.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef MAP_NORESERVE
#define MAP_NORESERVE 0
#endif
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000 /* (Linux 4.17; older headers) */
#endif

static _Atomic size_t reserved_bytes;
static _Atomic size_t committed_bytes;
static _Atomic size_t committed_peak; /* the high-water mark of committed_bytes */

/* @add more bytes committed: count them and raise the peak (slow paths
 * only: an OS call or about to make one). */
static void count_committed(size_t add)
{
    size_t now = atomic_fetch_add_explicit(&committed_bytes, add,
                                           memory_order_relaxed) + add;
    size_t peak = atomic_load_explicit(&committed_peak, memory_order_relaxed);
    while (now > peak &&
           !atomic_compare_exchange_weak_explicit(&committed_peak, &peak, now,
                                                  memory_order_relaxed,
                                                  memory_order_relaxed))
        ;
}
static _Atomic size_t os_calls;
static _Atomic long fail_countdown; /* 0: off; 1: the next request fails */
static _Atomic int fail_repeat;

void mki_os_fail_at(long n, int repeat)
{
    atomic_store(&fail_repeat, repeat);
    atomic_store(&fail_countdown, n);
}

/* One OS request is about to be made: does injection say it fails? */
static int injected_failure(void)
{
    long n = atomic_load_explicit(&fail_countdown, memory_order_relaxed);
    if (n <= 0)
        return 0;
    if (n == 1) {
        if (!atomic_load(&fail_repeat))
            atomic_store(&fail_countdown, 0);
        return 1;
    }
    atomic_fetch_sub(&fail_countdown, 1);
    return 0;
}

void *mki_os_reserve(size_t size, size_t align)
{
    return mki_os_reserve_offset(size, align, 0);
}

/* The kernel's page size (from the values it gives every program at exec:
 * no system call, errno untouched). */
static size_t os_page(void)
{
    return 4096;
}

/* Map @size bytes read-write, anywhere (@at NULL) or exactly at @at (never
 * over a mapping: MAP_FIXED_NOREPLACE, which a kernel older than 4.17
 * takes as a hint: an answer elsewhere is unmapped); NULL on failure. */
static char *map_rw(void *at, size_t size, int prot)
{
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    if (at)
        flags |= MAP_FIXED_NOREPLACE;
    char *p = mmap(at, size, prot, flags, -1, 0);
    if (p == MAP_FAILED)
        return NULL; /* (errno: EEXIST where something is at @at) */
    if (at && p != at) {
        munmap(p, size);
        errno = EEXIST; /* (taken as a hint: the place was not free) */
        return NULL;
    }
    return p;
}

/* @p + @offset rounded up (@up) or down to a multiple of @align, less
 * @offset. */
static uintptr_t aligned_at(uintptr_t p, size_t align, size_t offset, int up)
{
    uintptr_t a = (p + offset + (up ? align - 1 : 0)) & ~(uintptr_t)(align - 1);
    return a - offset;
}

void *mki_os_reserve_offset(size_t size, size_t align, size_t offset)
{
    atomic_fetch_add_explicit(&os_calls, 1, memory_order_relaxed);
    int saved = errno;
    const size_t pg = os_page();
    if (injected_failure() || size + align < size) {
        errno = ENOMEM;
        return NULL;
    }
    /* mmap's answers are page-aligned: align - pg bytes more hold an
     * aligned place of @size, whose two ends are then unmapped */
    size_t span = size + (align > pg ? align - pg : 0);
    char *p = map_rw(NULL, span, PROT_READ | PROT_WRITE);
    uintptr_t a;
    if (p) {
        a = aligned_at((uintptr_t)p, align, offset, 1);
        size_t head = a - (uintptr_t)p;
        size_t tail = span - head - size;
        if (head)
            munmap(p, head);
        if (tail)
            munmap((char *)a + size, tail);
    } else {
        /* even the slack is refused (RLIMIT_AS nearly reached): @size
         * bytes where the kernel puts them, if aligned, else at the
         * aligned places on either side of them, if free */
        p = map_rw(NULL, size, PROT_READ | PROT_WRITE);
        if (!p) {
            errno = ENOMEM;
            return NULL;
        }
        a = (uintptr_t)p;
        if (aligned_at(a, align, offset, 0) != a) {
            munmap(p, size);
            a = aligned_at((uintptr_t)p, align, offset, 0);
            if (!map_rw((void *)a, size, PROT_READ | PROT_WRITE)) {
                a = aligned_at((uintptr_t)p, align, offset, 1);
                if (!map_rw((void *)a, size, PROT_READ | PROT_WRITE)) {
                    errno = ENOMEM;
                    return NULL;
                }
            }
        }
    }
    atomic_fetch_add_explicit(&reserved_bytes, size, memory_order_relaxed);
    errno = saved;
    return (void *)a;
}

void mki_os_release(void *p, size_t size, size_t committed)
{
    atomic_fetch_add_explicit(&os_calls, 1, memory_order_relaxed);
    munmap(p, size);
    atomic_fetch_sub_explicit(&reserved_bytes, size, memory_order_relaxed);
    atomic_fetch_sub_explicit(&committed_bytes, committed,
                              memory_order_relaxed);
}

void mki_os_release_tail(void *p, size_t size, size_t keep, size_t committed)
{
    if (keep >= size)
        return;
    atomic_fetch_add_explicit(&os_calls, 1, memory_order_relaxed);
    munmap((char *)p + keep, size - keep);
    atomic_fetch_sub_explicit(&reserved_bytes, size - keep, memory_order_relaxed);
    if (committed > keep)
        atomic_fetch_sub_explicit(&committed_bytes, committed - keep,
                                  memory_order_relaxed);
}

void *mki_os_resize(void *p, size_t size, size_t new_size, size_t align,
                    size_t offset)
{
    atomic_fetch_add_explicit(&os_calls, 1, memory_order_relaxed);
    if (injected_failure()) {
        errno = ENOMEM;
        return NULL;
    }
    int saved = errno;
    void *q = mremap(p, size, new_size, 0); /* in place */
    if (q == MAP_FAILED) { /* (ENOMEM; EFAULT if [p, p + size) spans two
                              kernel mappings, and then so does the move) */
        /* a place of the right alignment, then move the pages there */
        char *to = mki_os_reserve_offset(new_size, align, offset);
        if (!to)
            return NULL;
        atomic_fetch_sub_explicit(&reserved_bytes, new_size,
                                  memory_order_relaxed); /* counted below */
        q = mremap(p, size, new_size, MREMAP_MAYMOVE | MREMAP_FIXED, to);
        if (q == MAP_FAILED) {
            munmap(to, new_size);
            errno = ENOMEM;
            return NULL;
        }
    }
    atomic_fetch_add_explicit(&reserved_bytes, new_size - size,
                              memory_order_relaxed);
    count_committed(new_size - size);
    errno = saved; /* (the in-place attempt's ENOMEM) */
    return q;
}

int mki_os_extend(void *p, size_t size, size_t new_size)
{
    atomic_fetch_add_explicit(&os_calls, 1, memory_order_relaxed);
    if (injected_failure() || mremap(p, size, new_size, 0) == MAP_FAILED) {
        errno = ENOMEM;
        return -1;
    }
    atomic_fetch_add_explicit(&reserved_bytes, new_size - size,
                              memory_order_relaxed);
    count_committed(new_size - size);
    return 0;
}

int mki_os_move(void *from, size_t len, void *to)
{
    atomic_fetch_add_explicit(&os_calls, 1, memory_order_relaxed);
    if (injected_failure()) {
        errno = ENOMEM;
        return -1;
    }
    if (mremap(from, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, to) == MAP_FAILED) {
        errno = ENOMEM; /* (EFAULT: the source spans two mappings) */
        return -1;
    }
    atomic_fetch_sub_explicit(&reserved_bytes, len, memory_order_relaxed);
    atomic_fetch_sub_explicit(&committed_bytes, len, memory_order_relaxed);
    return 0;
}

/* ---- the arena (os.h) -------------------------------------------------------- */

mki_os_span mki_os_arena;
static char *arena_base;
static size_t arena_max;  /* the most it may grow to */
static size_t arena_used; /* pieces handed out: [base, base + used) */
static size_t arena_align; /* a piece's size */
static int arena_stuck;   /* a new piece's place was taken: no more */

/* ThreadSanitizer keeps its shadow where the arena would go, and takes a
 * fixed mapping there as a hint for address 0: in its builds the arena
 * lies in the low range it leaves to programs (below 512 GiB). */
#if defined(__SANITIZE_THREAD__)
#define ARENA_LOW 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ARENA_LOW 1
#endif
#endif
#ifndef ARENA_LOW
#define ARENA_LOW 0
#endif

/* Where the arena starts: 32 TiB and up, a multiple of @align chosen at
 * random in a range of 1 TiB.  The kernel places mappings top-down from
 * below 128 TiB, and programs and their heaps low or near 85 TiB, so the
 * arena grows there undisturbed; AddressSanitizer's shadow ends below
 * 16 TiB.  The randomness is what address randomisation already gave:
 * the places of the stack and of this library (the kernel's AT_RANDOM
 * bytes would be better, but reading them costs a small program a page of
 * the C library: getauxval; a fixed place would make memkit's addresses
 * known in advance). */
static uintptr_t arena_hint(size_t align, unsigned attempt)
{
    uint64_t r = 0x9e3779b97f4a7c15ull * (attempt + 1);
    r ^= (uintptr_t)__builtin_frame_address(0) * 0xff51afd7ed558ccdull;
    r ^= (uintptr_t)&arena_base >> 12;
    r ^= r >> 29;
    if (ARENA_LOW) /* (128 - 448 GiB) */
        return ((uintptr_t)128 << 30) + (uintptr_t)attempt * ((uintptr_t)32 << 30) +
               (uintptr_t)(r % (((uintptr_t)32 << 30) / align)) * align;
    uintptr_t base = ((uintptr_t)32 << 40) + (uintptr_t)attempt * ((uintptr_t)1 << 40);
    return base + (uintptr_t)(r % (((uintptr_t)1 << 40) / align)) * align;
}

int mki_os_arena_init(size_t max, size_t align)
{
    if (arena_base)
        return 0;
    int saved = errno;
    /* a place whose first page is free (the pieces are mapped as they come) */
    for (unsigned attempt = 0; attempt < 8; attempt++) {
        uintptr_t at = arena_hint(align, attempt);
        char *p = map_rw((void *)at, os_page(), PROT_NONE);
        if (p) {
            munmap(p, os_page());
            arena_base = p;
            arena_max = max;
            arena_align = align;
            __atomic_store_n(&mki_os_arena.lo, at, __ATOMIC_RELAXED);
            errno = saved;
            return 0;
        }
    }
    errno = saved;
    return -1;
}

void *mki_os_arena_take(size_t size, size_t map, int *full)
{
    *full = 0;
    if (!arena_base || arena_stuck || arena_max - arena_used < size) {
        *full = 1;
        return NULL;
    }
    atomic_fetch_add_explicit(&os_calls, 1, memory_order_relaxed);
    if (injected_failure()) {
        errno = ENOMEM;
        return NULL;
    }
    int saved = errno;
    char *p = arena_base + arena_used;
    if (!map_rw(p, map, PROT_READ | PROT_WRITE)) {
        if (errno == EEXIST)
            arena_stuck = *full = 1; /* something else is there */
        else
            errno = ENOMEM; /* (a limit: this piece fails, not the arena) */
        return NULL;
    }
    arena_used += size;
    /* the new piece is in the range once it is mapped */
    __atomic_store_n(&mki_os_arena.len, arena_used, __ATOMIC_RELEASE);
    atomic_fetch_add_explicit(&reserved_bytes, map, memory_order_relaxed);
    errno = saved;
    return p;
}

/* Fresh zero pages over [p, p+size), with access @how: the old pages,
 * their place in VmData and their commit charge go, in one call. */
static void discard(void *p, size_t size, int how)
{
    if (mmap(p, size, how, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
             -1, 0) == MAP_FAILED)
        madvise(p, size, MADV_DONTNEED); /* (too many mappings): the pages */
}

void mki_os_arena_drop(void *p, size_t size, size_t mapped, size_t keep,
                       size_t committed)
{
    (void)size; /* (past @mapped: not the arena's, may be another mapping) */
    atomic_fetch_add_explicit(&os_calls, 1, memory_order_relaxed);
    int saved = errno;
    discard(p, keep, PROT_READ);
    if (mapped > keep)
        munmap((char *)p + keep, mapped - keep);
    errno = saved;
    atomic_fetch_sub_explicit(&reserved_bytes, mapped, memory_order_relaxed);
    atomic_fetch_sub_explicit(&committed_bytes, committed,
                              memory_order_relaxed);
}

void mki_os_arena_reuse(void *p, size_t keep)
{
    (void)p;
    atomic_fetch_add_explicit(&reserved_bytes, keep, memory_order_relaxed);
}

void mki_os_arena_shrink(size_t used, size_t keep)
{
    if (!arena_base || used >= arena_used)
        return;
    atomic_fetch_add_explicit(&os_calls, 1, memory_order_relaxed);
    int saved = errno;
    /* out of the range first: a racing free of a stale pointer into it
     * then takes the slow path, which finds no segment there */
    __atomic_store_n(&mki_os_arena.len, used, __ATOMIC_RELEASE);
    /* each piece's readable first bytes, and nothing between them (which
     * may be another mapping's now) */
    for (size_t at = used; at < arena_used; at += arena_align)
        munmap(arena_base + at, keep);
    arena_used = used;
    arena_stuck = 0; /* (the place may be free again) */
    errno = saved;
}

int mki_os_map_at(void *p, size_t size)
{
    atomic_fetch_add_explicit(&os_calls, 1, memory_order_relaxed);
    int saved = errno;
    if (injected_failure()) {
        errno = ENOMEM;
        return -1;
    }
    if (!map_rw(p, size, PROT_READ | PROT_WRITE)) {
        if (errno != EEXIST)
            errno = ENOMEM;
        return -1;
    }
    atomic_fetch_add_explicit(&reserved_bytes, size, memory_order_relaxed);
    errno = saved;
    return 0;
}

int mki_os_access(void *p, size_t size, int how)
{
    atomic_fetch_add_explicit(&os_calls, 1, memory_order_relaxed);
    int saved = errno;
    if (injected_failure() || mprotect(p, size, how) != 0) {
        errno = ENOMEM;
        return -1;
    }
    errno = saved;
    return 0;
}

int mki_os_guard(void *p, size_t size)
{
    atomic_fetch_add_explicit(&os_calls, 1, memory_order_relaxed);
    int saved = errno, r = mprotect(p, size, PROT_NONE) == 0 ? 0 : -1;
    errno = saved;
    return r;
}

int mki_os_unguard(void *p, size_t size)
{
    atomic_fetch_add_explicit(&os_calls, 1, memory_order_relaxed);
    int saved = errno, r = mprotect(p, size, PROT_READ | PROT_WRITE) == 0 ? 0 : -1;
    errno = saved;
    return r;
}

int mki_os_commit(void *p, size_t size)
{
    (void)p;
    if (injected_failure()) {
        errno = ENOMEM;
        return -1;
    }
    count_committed(size);
    return 0;
}

void mki_os_huge_pages(void *p, size_t size, int on)
{
#ifdef MADV_HUGEPAGE
    atomic_fetch_add_explicit(&os_calls, 1, memory_order_relaxed);
    /* (EINVAL: no THP in this kernel; ENOMEM: a hole in the range, the
     * rest advised) */
    int saved = errno;
    (void)madvise(p, size, on ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    errno = saved;
#else
    (void)p;
    (void)size;
    (void)on;
#endif
}

/* The policy's line names the one in force in brackets: "always
 * [madvise] never".  Read with plain system calls (no stdio, which would
 * allocate), once, when the first huge chunk is mapped (with the option
 * thp off, never), errno kept (where /sys is absent the open fails).  Not
 * at load: the C library's pages that open, read and close take would
 * cost every small program 64 - 192 KiB of resident text (fault-around;
 * programs_fixed_cost_hello).  -1 until read (two threads that read it at
 * once agree). */
static _Atomic int huge_pages_work = -1;

int mki_os_huge_pages_work(void)
{
    int w = atomic_load_explicit(&huge_pages_work, memory_order_relaxed);
    if (w >= 0)
        return w;
    w = 0;
#ifdef MADV_HUGEPAGE
    int saved = errno;
    int fd = open("/sys/kernel/mm/transparent_hugepage/enabled", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        char line[128];
        ssize_t n = read(fd, line, sizeof line - 1);
        close(fd);
        /* "[always]" or "[madvise]" in force (no strstr: a page of the
         * C library that a small program would not touch otherwise) */
        for (ssize_t i = 0; i + 1 < n; i++)
            if (line[i] == '[')
                w = line[i + 1] == 'a' || line[i + 1] == 'm';
    }
    errno = saved;
#endif
    atomic_store_explicit(&huge_pages_work, w, memory_order_relaxed);
    return w;
}

/* The probe's pages are its own (an anonymous mapping made and unmapped
 * here, not counted as memkit's); the destination is PROBE_PAGES + 1 pages
 * past the source, so that the two do not agree modulo 2 MiB (a move
 * between agreeing addresses can carry whole page tables, which costs no
 * fault: docs/DESIGN.md, "No moves where moved pages fault"). */
#define PROBE_PAGES 16
static _Atomic int moves_costly = -1;

static int probe_moves(void)
{
#if defined(MREMAP_FIXED) && defined(MREMAP_MAYMOVE)
    long ps = sysconf(_SC_PAGESIZE);
    const size_t pg = ps > 0 ? (size_t)ps : 4096, len = PROBE_PAGES * pg;
    char *a = mmap(NULL, 2 * len + pg, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED)
        return 0;
    for (size_t i = 0; i < PROBE_PAGES; i++)
        ((volatile char *)a)[i * pg] = 1;
    char *to = a + len + pg;
    if (mremap(a, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, to) == MAP_FAILED) {
        munmap(a, 2 * len + pg);
        return 0;
    }
    /* costly when the median read is over 1 us: half of them or more */
    unsigned slow = 0;
    for (size_t i = 0; i < PROBE_PAGES; i++) {
        unsigned long long t0 = mki_os_now_ns();
        (void)((volatile char *)to)[i * pg];
        slow += mki_os_now_ns() - t0 > 1000;
    }
    int costly = slow >= PROBE_PAGES / 2;
    /* only what is still the probe's: the moved pages and the one before
     * them; the range they left is unmapped, and another thread may have
     * mapped something there since (an unmap of it took ASan's record of
     * a thread: api_huge_cache under ASan, test_threads) */
    munmap(a + len, len + pg);
    return costly;
#else
    return 0;
#endif
}

int mki_os_moves_costly(void)
{
    int c = atomic_load_explicit(&moves_costly, memory_order_relaxed);
    if (c < 0) {
        int saved = errno;
        c = probe_moves();
        errno = saved;
        atomic_store_explicit(&moves_costly, c, memory_order_relaxed);
    }
    return c;
}

void mki_os_moves_costly_set(int costly)
{
    atomic_store_explicit(&moves_costly, costly, memory_order_relaxed);
}

int mki_os_decommit(void *p, size_t size, size_t account, int how)
{
    if (size) {
        atomic_fetch_add_explicit(&os_calls, 1, memory_order_relaxed);
        if (injected_failure())
            return -1;
#ifdef MADV_FREE
        int advice = how == MKI_OS_FREE ? MADV_FREE : MADV_DONTNEED;
#else
        int advice = MADV_DONTNEED;
        (void)how;
#endif
        int saved = errno;
        int r = madvise(p, size, advice);
        if (r != 0 && advice != MADV_DONTNEED)
            r = madvise(p, size, MADV_DONTNEED); /* old kernel: no MADV_FREE */
        errno = saved;
        if (r != 0)
            return -1;
    }
    atomic_fetch_sub_explicit(&committed_bytes, account, memory_order_relaxed);
    return 0;
}

#if MK_CONFIG_FAULTS
/* The test build's failure injection from the environment:
 * MEMKIT_FAIL_OS=N makes the N-th OS request fail, MEMKIT_FAIL_OS=N+ the
 * N-th and every one after.  Read before main (libmemkit-malloc-faults). */
#include <stdlib.h>
__attribute__((constructor)) static void fail_from_environment(void)
{
    const char *v = getenv("MEMKIT_FAIL_OS");
    if (!v || !*v)
        return;
    char *end;
    long n = strtol(v, &end, 10);
    if (n > 0)
        mki_os_fail_at(n, *end == '+');
}
#endif

size_t mki_os_reserved(void) { return atomic_load(&reserved_bytes); }
size_t mki_os_committed(void) { return atomic_load(&committed_bytes); }
size_t mki_os_committed_peak(void) { return atomic_load(&committed_peak); }
size_t mki_os_calls(void) { return atomic_load(&os_calls); }

_Thread_local uintptr_t mki_os_self __attribute__((tls_model("initial-exec"))) = 1;
_Thread_local int mki_os_forking __attribute__((tls_model("initial-exec")));
static _Atomic uintptr_t next_self = 2;

uintptr_t mki_os_self_assign(void)
{
    uintptr_t id = atomic_fetch_add_explicit(&next_self, 1, memory_order_relaxed);
    mki_os_self = id;
    return id;
}

long mki_os_thread_token(void)
{
#if defined(__linux__) && defined(SYS_gettid)
    return (long)syscall(SYS_gettid);
#else
    return 0;
#endif
}

int mki_os_thread_gone(long token)
{
#if defined(__linux__) && defined(SYS_tgkill)
    if (token <= 0)
        return 0;
    int saved = errno;
    /* signal 0: no signal is sent, the kernel only looks the thread up */
    int gone = syscall(SYS_tgkill, (long)getpid(), token, 0) != 0 &&
               errno == ESRCH;
    errno = saved;
    return gone;
#else
    (void)token;
    return 0;
#endif
}

unsigned long long mki_os_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull +
           (unsigned long long)ts.tv_nsec;
}
