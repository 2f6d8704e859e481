/* SPDX-License-Identifier: MIT */
/*
 * os.h - the OS contract: how memkit gets address space and gives it back.
 *
 * Every request for memory from the kernel goes through these five calls,
 * so that accounting (reserved / committed bytes) and failure injection have
 * one home.  The layer knows *how* to return memory; purge.c decides *when*.
 *
 * Terms: to reserve is to obtain address space; to commit is to declare a
 * range usable (it may become resident when touched); to decommit is to let
 * the kernel drop a committed range's pages (contents are lost) while the
 * address space stays reserved; to release is to give the address space back.
 *
 * On Linux a reservation is mapped read-write with MAP_NORESERVE, so commit
 * costs no system call: it is bookkeeping (and the failure-injection point).
 * Decommit is madvise(MADV_DONTNEED) or MADV_FREE as the caller chooses.
 */
#ifndef MKI_OS_H
#define MKI_OS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

/* How mki_os_decommit gives pages back. */
enum mki_os_purge {
    MKI_OS_DONTNEED = 0, /* pages dropped at once; RSS falls now */
    MKI_OS_FREE = 1      /* kernel may drop them lazily (MADV_FREE) */
};

/*
 * Reserve @size bytes (a multiple of the OS page) aligned to @align (a power
 * of two, at least the OS page), read-write.  Pre: size > 0.  Returns the
 * address, or NULL (errno ENOMEM) on failure or injected failure.  Counts
 * as reserved, not committed.  It maps no more than @size bytes plus the
 * alignment's slack for a moment, and where even that is refused (a limit
 * of address space nearly reached) it looks for an aligned place of
 * exactly @size bytes.  Keeps errno when it succeeds, as does every call
 * below.
 */
void *mki_os_reserve(size_t size, size_t align);

/* As mki_os_reserve, but it is p + @offset that is aligned to @align
 * (offset < align); used to put a header right before an aligned chunk. */
void *mki_os_reserve_offset(size_t size, size_t align, size_t offset);

/*
 * Give back a reservation made by mki_os_reserve (the whole of it, or an
 * OS-page-aligned part).  Committed bytes inside must have been decommitted
 * first or be passed as @committed so the counters stay right.  Never fails.
 */
void mki_os_release(void *p, size_t size, size_t committed);

/*
 * Shorten a reservation of @size bytes at @p to its first @keep bytes (an
 * OS-page multiple) and give the rest back; @committed is how many of the
 * @size bytes were counted committed (those past @keep are uncounted).
 * Never fails.
 */
void mki_os_release_tail(void *p, size_t size, size_t keep, size_t committed);

/*
 * Grow a reservation of @size bytes at @p to @new_size bytes, keeping its
 * contents: in place when the address space after it is free, else moved
 * (mremap; the pages move, nothing is copied) to an address where
 * p + @offset is aligned to @align, as mki_os_reserve_offset gives.  The
 * new bytes count as reserved and committed.  Returns the (perhaps new)
 * address, or NULL (errno ENOMEM; the reservation is untouched).
 */
void *mki_os_resize(void *p, size_t size, size_t new_size, size_t align,
                    size_t offset);

/*
 * Grow a reservation of @size bytes at @p to @new_size bytes in place, when
 * the address space after it is free (mremap).  The new bytes count as
 * reserved and committed.  0, or -1 (errno ENOMEM; nothing changed).
 */
int mki_os_extend(void *p, size_t size, size_t new_size);

/*
 * Move the pages of [@from, @from + @len) over [@to, @to + @len), both
 * OS-page aligned, each inside a reservation, the source committed whole:
 * the pages keep their contents and stay resident (mremap; nothing is
 * copied or faulted), the target's old pages are dropped, and the source's
 * address space is given back (its reserved and committed bytes leave the
 * counters; the target's stay as they were).  Returns 0, or -1 (errno
 * ENOMEM, or an injected failure) with both ranges untouched.
 */
int mki_os_move(void *from, size_t len, void *to);

/*
 * Declare [p, p+size) usable.  Pre: inside a reservation, OS-page aligned
 * unless the caller counts sub-page units itself.  Returns 0, or -1 on
 * (injected) failure, in which case nothing changed.
 */
int mki_os_commit(void *p, size_t size);

/*
 * @on: ask the kernel to back [p, p+size) (OS-page aligned, mapped) with
 * transparent huge pages where it can (MADV_HUGEPAGE): a fault in a whole
 * 2 MiB block then maps the block at once.  0: take that back
 * (MADV_NOHUGEPAGE): the kernel splits no huge page for it, but makes
 * none there again, nor fills in one a purge split.  Advice only: a
 * kernel without them, or a refusal, leaves 4 KiB pages, and nothing is
 * reported.
 */
void mki_os_huge_pages(void *p, size_t size, int on);

/*
 * Does that advice work here: 1 when the system makes transparent huge
 * pages for advised mappings (its policy is "always" or "madvise"), 0 when
 * it makes none ("never", no such setting, or a kernel without them).
 * Read from the system once (a file in /sys), then remembered; errno kept;
 * any thread.
 */
int mki_os_huge_pages_work(void);

/*
 * Does a page that mremap moved cost a fault at its next touch here, as on
 * a virtual machine whose hypervisor shadows the guest's page tables (a
 * move rewrites each page-table entry, and the hypervisor then fills in
 * its copy of each, one exit per page)?  Measured once, on the first call:
 * 16 pages faulted in, moved with mremap, and each one's first
 * read timed; 1 when the median read takes over a microsecond (a page
 * walk takes a tenth of that; on a virtual machine that shadows page tables
 * such a read took 3.5 us, a fresh page's fault 9 us).  0
 * where the probe cannot run.  Any thread; costs a fraction of a
 * millisecond, once.
 */
int mki_os_moves_costly(void);
/* Tests: make mki_os_moves_costly answer @costly (0 or 1), or measure
 * again on its next call (-1). */
void mki_os_moves_costly_set(int costly);

/*
 * Let the kernel take the pages of [p, p+size) (OS-page aligned) back;
 * @account is how many committed bytes this removes from the counter (the
 * caller may decommit ranges it only partly counted).  Returns 0, or -1 if
 * madvise failed (or failure was injected): the pages are then untouched,
 * still committed and usable, and nothing was uncounted.
 */
int mki_os_decommit(void *p, size_t size, size_t account, int how);

/*
 * The calling thread's identity, unique over the whole life of the process
 * (never reused by a later thread, nor by a thread a forked child starts on
 * a stack its parent's threads used): what contexts and pages record as
 * their owner.  mki_os_self is 1 until the thread first asks for its
 * identity (1 is never an identity, nor is 0), so comparing it with a
 * recorded owner needs no set-up; mki_os_self_assign gives the thread its
 * identity and returns it.
 */
extern _Thread_local uintptr_t mki_os_self
    __attribute__((tls_model("initial-exec")));
uintptr_t mki_os_self_assign(void);

/*
 * The arena: one contiguous range of address space from which the caller
 * carves equal, aligned pieces (segment.c: its normal segments).  What it
 * buys is a contiguous range: "is this pointer in a piece handed out?" is
 * a subtraction and a comparison (mki_os_arena), with no lookup.  Each
 * piece's first bytes are always mapped and readable (a piece given back
 * reads as zeros there), so a caller that keeps its own data there (a
 * segment's header) may read it for any pointer that passes.
 *
 * The range is not reserved ahead: it starts at an address of its own,
 * far from where the kernel places mappings (a random place above 32 TiB),
 * and grows a piece at a time.  A piece is mapped only as far as its
 * caller uses it: the rest is left unmapped, for the caller to map when
 * it needs more (mki_os_map_at), so the process's address space (VmSize,
 * RLIMIT_AS, the lock limit mlockall checks) holds only what is mapped.
 * Every mapping is made where nothing is (MAP_FIXED_NOREPLACE), never over
 * anything: where the place of a new piece is taken by something else, or
 * the arena reached its size, it stops growing, and the caller maps
 * further pieces elsewhere.
 *
 * mki_os_arena_init(max, align): pick the arena's place, for at most @max
 * bytes in all, pieces aligned to @align; 0, or -1 when no arena could be
 * made (every piece then comes from mki_os_reserve).  Called once, under
 * the caller's lock.
 * mki_os_arena_take(size, map): the next @size bytes (a multiple of the
 * alignment), its first @map bytes mapped read-write and counted as
 * reserved, the rest unmapped; NULL with *@full set when the arena is at
 * its end or the place is taken (the caller reserves elsewhere), NULL with
 * errno ENOMEM otherwise (a limit, or an injected failure).  Caller's
 * lock.
 * mki_os_arena_drop(p, size, mapped, keep, committed): a piece taken
 * before goes back: of its @mapped first bytes, the first @keep become
 * fresh zero pages, readable only (out of VmData and the commit charge),
 * and the rest is unmapped; its place stays in the arena for the caller
 * to take again with mki_os_arena_reuse (which counts its @keep readable
 * bytes as reserved again; the caller makes them writable with
 * mki_os_access and maps more with mki_os_map_at).
 * mki_os_arena_shrink(used, keep): the arena's pieces from byte @used on
 * (all given back, and the caller's last) leave it, their first @keep
 * bytes unmapped: address space given back when a mapping failed
 * (RLIMIT_AS); the next take maps them again.  Caller's lock.
 * Each keeps errno as it was when it succeeds.
 */
typedef struct mki_os_span {
    uintptr_t lo, len; /* [lo, lo + len): the pieces handed out so far */
} mki_os_span;
extern mki_os_span mki_os_arena;
int mki_os_arena_init(size_t max, size_t align);
void *mki_os_arena_take(size_t size, size_t map, int *full);
void mki_os_arena_drop(void *p, size_t size, size_t mapped, size_t keep,
                       size_t committed);
void mki_os_arena_reuse(void *p, size_t keep);
void mki_os_arena_shrink(size_t used, size_t keep);

/* Map [p, p+size) read-write (OS-page aligned), counted as reserved, where
 * nothing is mapped: 0; -1 with errno EEXIST when something is (the range
 * is left as it was), or ENOMEM (a limit). */
int mki_os_map_at(void *p, size_t size);

/* Make [p, p+size) of a reservation (OS-page aligned) read-write
 * (MKI_OS_RW), readable (MKI_OS_READ) or inaccessible (MKI_OS_NONE), its
 * contents kept: 0, or -1 with errno ENOMEM (a limit refused the charge:
 * nothing changed). */
enum mki_os_how { MKI_OS_NONE = 0, MKI_OS_READ = 1, MKI_OS_RW = 3 };
int mki_os_access(void *p, size_t size, int how);

/* Is @p in [lo, lo + len)?  Lock-free (relaxed: a reader that sees an old
 * length sees a shorter range, and sends a pointer of a new piece to its
 * caller's slow path, which looks it up). */
static inline __attribute__((always_inline)) int mki_os_arena_has_addr(uintptr_t a)
{
    uintptr_t lo = __atomic_load_n(&mki_os_arena.lo, __ATOMIC_RELAXED);
    uintptr_t len = __atomic_load_n(&mki_os_arena.len, __ATOMIC_RELAXED);
    return a - lo < len;
}
static inline __attribute__((always_inline)) int mki_os_arena_has(const void *p)
{
    return mki_os_arena_has_addr((uintptr_t)p);
}

/*
 * memkit's global locks (the page pool, bookkeeping, huge mappings, heaps,
 * the purge policy, pool shards) are taken and released through these.
 * fork() is why: memkit's prepare handler takes every one of them, so that
 * the child inherits none in the middle of a change, and then sets
 * mki_os_forking on the forking thread until its parent or child handler
 * has given them back.  While it is set, that thread holds every lock, so
 * taking one is skipped: the other fork handlers, which run between
 * memkit's prepare and its parent or child handler whatever the order they
 * were registered in, may allocate as they may on glibc (whose malloc
 * locks inside fork() itself), and no other thread can be inside memkit's
 * locked state meanwhile.  A trylock of a held lock fails, as it would.
 */
extern _Thread_local int mki_os_forking
    __attribute__((tls_model("initial-exec")));

/* A build with -DMEMKIT_LOCK_STATS=ON (MKI_LOCK_STATS) counts, for each
 * lock, the acquisitions, those that found it held, and the time spent
 * waiting, and prints them at exit (lockstat.c): how the page pool's lock
 * was judged on 16 cores.  @name is the argument's text ("&arena_lock"). */
#if MKI_LOCK_STATS
void mki_os_lock_counted(pthread_mutex_t *m, const char *name);
/* The report: one line per lock into @buf (at most @len bytes, NUL-ended);
 * returns its length. */
size_t mki_os_lock_report(char *buf, size_t len);
#endif

static inline __attribute__((always_inline)) void mki_os_lock_named(pthread_mutex_t *m,
                                                                    const char *name)
{
    if (!mki_os_forking) {
#if MKI_LOCK_STATS
        mki_os_lock_counted(m, name);
#else
        (void)name;
        pthread_mutex_lock(m);
#endif
    }
}
#define mki_os_lock(m) mki_os_lock_named((m), #m)

static inline __attribute__((always_inline)) void mki_os_unlock(pthread_mutex_t *m)
{
    if (!mki_os_forking)
        pthread_mutex_unlock(m);
}

static inline __attribute__((always_inline)) int mki_os_trylock(pthread_mutex_t *m)
{
    return mki_os_forking ? -1 : pthread_mutex_trylock(m);
}

/*
 * A token for the calling thread that outlives it (its kernel thread id),
 * and whether the thread a token names has certainly exited: 1 only when
 * the kernel has no such thread in this process any more (a token reused
 * by a later thread reads as alive: the answer may come late, never
 * early).  Where the system cannot tell, never 1.  errno is kept.
 */
long mki_os_thread_token(void);
int mki_os_thread_gone(long token);

/* Make [p, p+size) (OS-page aligned, inside a reservation) a guard: any
 * access faults.  0, or -1 (nothing changed).  The reservation's release
 * gives it back with the rest. */
int mki_os_guard(void *p, size_t size);

/* Undo mki_os_guard: [p, p+size) is read-write again.  0 or -1. */
int mki_os_unguard(void *p, size_t size);

/* Monotonic time in nanoseconds (purge delays). */
unsigned long long mki_os_now_ns(void);

/* Counters (relaxed atomics; exact when no other thread is allocating). */
size_t mki_os_reserved(void);
size_t mki_os_committed(void);
size_t mki_os_committed_peak(void); /* the most mki_os_committed has been */
size_t mki_os_calls(void);

/*
 * Failure injection for tests: the @n-th OS request from now (reserve,
 * commit, decommit, resize, move; 1 = the next one) fails.  With @repeat
 * non-zero every request from the n-th on fails.  n = 0 switches injection
 * off.
 */
void mki_os_fail_at(long n, int repeat);

#pragma GCC visibility pop

#endif /* MKI_OS_H */
