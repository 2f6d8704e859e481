/* SPDX-License-Identifier: MIT */
/*
 * purge.c - *when* memory goes back to the OS (os/ knows *how*, segment.c
 * and huge.c know *what*): the purge policy, its background thread, and
 * mk_trim.
 *
 * Policy (options `purge`, `purge_delay_ms`): free memory is given back
 * once it has stayed free for the delay, in passes, never one system call
 * per free: a pass decommits the OS pages of units that were already free
 * at the previous pass, gives back segments empty for the delay and
 * mappings of huge chunks cached for the delay.  Modes: off (nothing, but
 * mk_trim), dontneed (madvise MADV_DONTNEED: resident memory falls at once;
 * address space of empty segments and huge mappings is kept, a few, for
 * reuse), free (MADV_FREE: the kernel takes the pages when it needs them,
 * cheaper, but resident memory falls only then), unmap (as dontneed, and
 * empty segments and cached huge mappings give their address space back).
 * A delay of 0 purges at once, on the free that made the memory free.
 *
 * When: the first time something becomes free, a pass is scheduled for
 * `delay` later; a pass that leaves free memory behind schedules the next.
 * Passes run on a background thread, so that a program that goes quiet
 * after its peak (no allocation, no free) still gets its memory back.  The
 * thread is started only once the process has taken PURGE_THREAD_AT from
 * the OS (a program that never grows that far never gets one) and only at
 * a safe point: creating a thread allocates (glibc's thread set-up calls
 * malloc, which may be memkit's), so it is started from the allocation slow
 * path, before it touches anything (mki_purge_safe_point), never from a
 * free or under a lock.  It blocks every signal (a program's handler must
 * not run on it), sleeps on a condition variable when nothing is due,
 * exits after PURGE_THREAD_IDLE_NS with nothing to do and no growth (a
 * quiet program is single-threaded again: unshare(CLONE_NEWUSER) refuses
 * a multi-threaded caller) and is started again at the next safe point
 * that finds work, in a forked child too once that child frees pages or
 * grows.  It also runs the collect hook (mki_page_up.collect, heap/:
 * chunks freed into heaps of exited threads) when one is wanted, at most
 * every quarter of a delay, which also wants a thread for a process below
 * PURGE_THREAD_AT.  Without it (option
 * purge_thread 0, or pthread_create failing) passes run on the slow paths
 * that free pages, once due, and collects at thread exits and mk_trim.
 */

#include "purge.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

#define PURGE_THREAD_AT ((size_t)16 << 20) /* reserved bytes */
#define PURGE_THREAD_IDLE_NS 1000000000ull /* exit after 1 s of nothing */

/* ThreadSanitizer cannot start threads in the child of a multithreaded
 * fork (it makes the child die): in a TSan build a forked child runs its
 * passes on the slow paths instead (thread state 3, "never"). */
#define FORK_CHILD_STATE (MKI_TSAN ? 3 : 0)
#define NS_PER_MS 1000000ull

static pthread_mutex_t purge_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t purge_cond;
static pthread_once_t cond_once = PTHREAD_ONCE_INIT;
static _Atomic int scheduled;        /* a pass is due `delay` after sched_ns */
/* when the due pass was scheduled; written under purge_lock, read without
 * it by the slow paths' "is it due?" (relaxed: a stale value only delays
 * or advances one try) */
static _Atomic unsigned long long sched_ns;
static unsigned long long sched_at(void)
{
    return atomic_load_explicit(&sched_ns, memory_order_relaxed);
}
static _Atomic int thread_state; /* 0 none, 1 starting, 2 running, 3 never */
static pthread_mutex_t pass_lock = PTHREAD_MUTEX_INITIALIZER; /* one pass */
static _Atomic size_t purged_bytes, passes;
static _Atomic unsigned long notes; /* frees noted so far (see purge_main) */
static _Atomic int collect_wanted;   /* run mki_page_up.collect (mki_purge_collect) */
static _Atomic unsigned long long grew_ns; /* when memory last came from the OS */
static unsigned long long last_collect_ns;

static void cond_init(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&purge_cond, &a);
    pthread_condattr_destroy(&a);
}

static unsigned long long delay_ns(void)
{
    long d = mki_option(MKI_OPT_PURGE_DELAY_MS);
    return d <= 0 ? 0 : (unsigned long long)d * NS_PER_MS;
}

/* How pages go back in purge mode @mode: MADV_FREE in mode free, unless
 * @force (mk_trim, which wants them gone now). */
static int os_how(long mode, int force)
{
    return mode == MKI_PURGE_FREE && !force ? MKI_OS_FREE : MKI_OS_DONTNEED;
}

/* One pass; returns 1 if free memory is left for a later pass, due at
 * *@next_due (when given). */
static int run_pass(int force, size_t *bytes, unsigned long long *next_due)
{
    long mode = mki_option(MKI_OPT_PURGE);
    int how = os_how(mode, force);
    int unmap = mode == MKI_PURGE_UNMAP || force;
    int pending = 0;
    unsigned long long due = ~0ull;
    mki_os_lock(&pass_lock);
    size_t b = mki_huge_purge(force, unmap, delay_ns(), &pending, &due);
    b += mki_segment_purge(force, how, unmap, delay_ns(), &pending, &due);
    mki_os_unlock(&pass_lock);
    if (next_due)
        *next_due = due;
    atomic_fetch_add_explicit(&purged_bytes, b, memory_order_relaxed);
    atomic_fetch_add_explicit(&passes, 1, memory_order_relaxed);
    if (bytes)
        *bytes = b;
    return pending;
}

static int policy_active(void)
{
    return mki_option(MKI_OPT_PURGE) != MKI_PURGE_OFF &&
           mki_option(MKI_OPT_PURGE_DELAY_MS) >= 0;
}

/* ---- the background thread ------------------------------------------------- */

/* Sleep on the condition variable until @until (CLOCK_MONOTONIC ns). */
static void wait_until(unsigned long long until)
{
    struct timespec ts = {(time_t)(until / 1000000000ull),
                          (long)(until % 1000000000ull)};
    pthread_cond_timedwait(&purge_cond, &purge_lock, &ts);
}

/* Run the collect hook (chunks freed into contexts no thread owns) now,
 * unless the last run was less than a quarter of a delay ago: then
 * returns when it will be due.  0 when it ran or was not wanted.  Lock
 * held; released while the hook runs. */
static unsigned long long collect_if_due(void)
{
    if (!atomic_load(&collect_wanted))
        return 0;
    unsigned long long now = mki_os_now_ns(), at = last_collect_ns + delay_ns() / 4;
    if (last_collect_ns && now < at)
        return at;
    atomic_store(&collect_wanted, 0);
    last_collect_ns = now;
    int (*fn)(int) = mki_page_up.collect;
    mki_os_unlock(&purge_lock);
    int again = fn && fn(0); /* its frees note purges of their own */
    mki_os_lock(&purge_lock);
    if (again) /* (due a quarter of a delay from now) */
        atomic_store(&collect_wanted, 1);
    return 0;
}

/* The thread: passes when they fall due, collects when wanted, and an
 * exit once it has had nothing to do for PURGE_THREAD_IDLE_NS, so that a
 * program that has gone quiet is single-threaded again (unshare(2) and
 * setns(2) into a user namespace refuse a multi-threaded caller); the next
 * allocation slow path that finds memory waiting starts a new one. */
static void *purge_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "memkit-purge");
    mki_os_lock(&purge_lock);
    atomic_store(&thread_state, 2);
    pthread_cond_broadcast(&purge_cond); /* the starter waits for it */
    unsigned long long idle_since = mki_os_now_ns();
    for (;;) {
        unsigned long long collect_at = collect_if_due();
        if (collect_at) {
            if (!atomic_load(&scheduled) || sched_at() + delay_ns() > collect_at) {
                wait_until(collect_at);
                continue;
            }
        } else if (last_collect_ns >= idle_since) {
            idle_since = last_collect_ns;
        }
        if (!atomic_load(&scheduled)) {
            /* idle: no pass due, no collect, and no growth (mki_purge_grew) */
            unsigned long long since = idle_since,
                               grew = atomic_load_explicit(&grew_ns, memory_order_relaxed);
            unsigned long long quit = (grew > since ? grew : since) + PURGE_THREAD_IDLE_NS;
            if (mki_os_now_ns() >= quit && !atomic_load(&collect_wanted))
                break;
            wait_until(quit);
            continue;
        }
        unsigned long long due = sched_at() + delay_ns();
        if (mki_os_now_ns() < due) {
            wait_until(due);
            continue; /* (the delay may have changed meanwhile) */
        }
        /* a free noted while the pass runs found a pass scheduled and
         * added none: if one came, the pass is scheduled again, even when
         * this one (which may have looked before that free) left nothing */
        unsigned long before = atomic_load(&notes);
        unsigned long long next_due = 0;
        mki_os_unlock(&purge_lock);
        int again = policy_active() && run_pass(0, NULL, &next_due);
        mki_os_lock(&purge_lock);
        unsigned long long now = mki_os_now_ns(), d = delay_ns();
        idle_since = now;
        if (again) {
            /* the next pass when the memory left becomes due (memory freed
             * in a burst goes back one delay after the burst, not two),
             * but not sooner than an eighth of a delay from now, nor later
             * than one delay (a piece with no due time of its own) */
            if (next_due < now + d / 8)
                next_due = now + d / 8;
            if (next_due > now + d)
                next_due = now + d;
            atomic_store_explicit(&sched_ns, next_due - d, memory_order_relaxed);
        } else if (atomic_load(&notes) != before) {
            atomic_store_explicit(&sched_ns, now, memory_order_relaxed);
        } else {
            atomic_store(&scheduled, 0);
            /* a free noted between the load of `notes` above and this
             * store saw `scheduled` still set and added no pass: look
             * again, now that a later free would schedule its own */
            if (atomic_load(&notes) != before) {
                atomic_store_explicit(&sched_ns, now, memory_order_relaxed);
                atomic_store(&scheduled, 1);
            }
        }
    }
    /* nothing scheduled, nothing wanted, under the lock: a note from now
     * on finds no thread and wants one (mki_purge_note) */
    atomic_store(&thread_state, 0);
    mki_os_unlock(&purge_lock);
    return NULL;
}

static void start_thread(void)
{
    int expect = 0;
    if (!atomic_compare_exchange_strong(&thread_state, &expect, 1))
        return;
    pthread_once(&cond_once, cond_init);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, (size_t)128 << 10);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old); /* the thread inherits it */
    /* glibc allocates the new thread's bookkeeping with malloc, which may
     * be memkit's: the top has it land in a context of memkit's own */
    pthread_t t;
    int r = mki_page_up.spawn(&t, &attr, purge_main);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (r != 0) {
        mki_os_lock(&purge_lock);
        atomic_store(&thread_state, 3); /* none, and never again */
        atomic_store(&collect_wanted, 0); /* (none will run it) */
        mki_os_unlock(&purge_lock);
        return;
    }
    /* wait until it runs (it names itself, says so with state 2, and
     * looks at what is due first), so that the thread exists when this
     * returns */
    mki_os_lock(&purge_lock);
    while (atomic_load(&thread_state) == 1)
        pthread_cond_wait(&purge_cond, &purge_lock);
    mki_os_unlock(&purge_lock);
}

/* Set when the next safe point has work: a thread to start (thread_wanted:
 * the process has grown past PURGE_THREAD_AT, os figures, and has none), or
 * with no thread, a pass that is scheduled (the safe point runs it when it
 * is due). */
_Atomic int mki_purge_want;
static _Atomic int thread_wanted;

static void want_if_large(void);

static int run_due_pass(void);

void mki_purge_safe_point_slow(void)
{
    if (mki_os_forking)
        return; /* a fork handler: no thread now (the want stays) */
    if (atomic_load_explicit(&thread_wanted, memory_order_relaxed) &&
        atomic_exchange(&thread_wanted, 0) &&
        atomic_load_explicit(&thread_state, memory_order_relaxed) == 0 &&
        mki_option(MKI_OPT_PURGE_THREAD) && policy_active()) {
        atomic_store_explicit(&mki_purge_want, 0, memory_order_relaxed);
        start_thread();
        return;
    }
    if (atomic_load_explicit(&thread_state, memory_order_relaxed) == 2) {
        atomic_store_explicit(&mki_purge_want, 0, memory_order_relaxed);
        return;
    }
    /* no thread: a collect that is wanted and a pass that is due run here
     * (the want stays while either waits, so that the next slow path
     * looks again; a clock read each, while they wait) */
    if (atomic_load(&collect_wanted) && mki_os_trylock(&purge_lock) == 0) {
        (void)collect_if_due(); /* (not yet due: it stays wanted) */
        mki_os_unlock(&purge_lock);
    }
    if (atomic_load(&scheduled))
        run_due_pass();
    if (!atomic_load(&scheduled) && !atomic_load(&collect_wanted))
        atomic_store_explicit(&mki_purge_want, 0, memory_order_relaxed);
}

/* The OS layer's reservations grew: want a thread once they are large
 * (called where memory is taken, so that a program that only grows, then
 * frees and goes quiet, has its thread before it goes quiet), and keep a
 * running thread from taking the growth for idleness: a program that
 * grows for more than PURGE_THREAD_IDLE_NS without freeing anything, then
 * frees it all and makes no further call, had its memory kept for good
 * (the thread had exited, and only an allocation restarts it: api_purge
 * slow_growth; most likely what made override_trim_rss fail once, whose
 * 256 MiB of 4 MiB blocks took more than a second to write on a loaded
 * machine, and whose 64 MiB of cached mappings never went back). */
void mki_purge_grew(void)
{
    /* (only while a thread runs: one that starts counts from its start,
     * and a small program never reads the clock here, whose page of the C
     * library costs it 64 KiB of resident text through fault-around:
     * programs_fixed_cost_hello) */
    if (atomic_load_explicit(&thread_state, memory_order_relaxed) == 2)
        atomic_store_explicit(&grew_ns, mki_os_now_ns(), memory_order_relaxed);
    want_if_large();
}

static void want_if_large(void)
{
    if (atomic_load_explicit(&thread_state, memory_order_relaxed) == 0 &&
        mki_option(MKI_OPT_PURGE_THREAD) && mki_os_reserved() >= PURGE_THREAD_AT) {
        atomic_store_explicit(&thread_wanted, 1, memory_order_relaxed);
        atomic_store_explicit(&mki_purge_want, 1, memory_order_relaxed);
    }
}

/* ---- the peak rule -----------------------------------------------------------
 * Memory kept committed while free (free units of segments, cached huge
 * mappings: slack) saves a page fault when it is used again, but should
 * not raise the process's peak: when the segments or a huge chunk take
 * fresh memory from the OS, what memkit holds (in use + slack) may pass
 * the most it ever had in use (pages, segment headers, live huge chunks:
 * use_peak) by a margin only (1 MiB, or a 64th of the peak), and the free
 * units beyond go back at once, whatever their age.  Only when what memkit
 * holds reaches a new high: units given back and used again are not (larson
 * with 4 threads, whose pages come and go, ran 26% slower when every fresh
 * commit could shed, and be shed again).  The cached huge mappings count,
 * and go after the units, oldest first, their tails cut (shed first, they
 * made W8's loop of 64 KiB - 32 MiB blocks 17% slower for 0.5 MiB); after
 * the units, they keep a huge cache that the huge chunks' own peak allows
 * from piling onto a peak of small chunks (api_huge_cache test_shed).
 * Without the rule a program whose new blocks do not fit the holes its
 * freed ones left grew by the holes until the delay: Python (W7) held 4.6
 * MiB of free units at its peak, and peaked at 68.4 MiB against glibc's
 * 67.5 (66.3 with it).  While the huge cache holds mappings, the margin
 * grows by an eighth of them: memory goes between the segments' units and
 * the huge cache only through the OS, so a program whose blocks go back and
 * forth between the two (W8: 64 KiB - 1 MiB blocks in segments, larger ones
 * in mappings) reached a new high at every other turn, shed the units the
 * next large blocks took again, and faulted them in (1,000 iterations: 234
 * sheds; with the eighth 102 -> 74 ms, medians of 3, and peak RSS 86.3 ->
 * 88.5 MiB, glibc 95.2). */
#define PEAK_MARGIN_MIN ((size_t)1 << 20)
static _Atomic size_t use_peak;  /* the most in use */
static void shed_too_soon(size_t use);
static _Atomic unsigned long long shed_ns; /* the free rule's (below) */
static _Atomic size_t held_high; /* the most held (in use + slack) */
static _Atomic size_t shed_stuck; /* free units the last shed could not take */
_Atomic size_t mki_purge_sheds;
#define SHED_MIN ((size_t)64 << 10) /* a shed for less is not worth a walk */
#define SHED_MIN_RULE ((size_t)1 << 20) /* (the free rule's: a walk per MiB) */

void mki_purge_used(int fresh)
{
    size_t seg_live, seg_slack, huge_live, huge_cached;
    mki_segment_use(&seg_live, &seg_slack);
    mki_huge_use(&huge_live, &huge_cached);
    size_t use = seg_live + huge_live, peak = mki_atomic_max(&use_peak, use);
    if (fresh && atomic_load_explicit(&shed_ns, memory_order_relaxed))
        shed_too_soon(use);
    size_t slack = seg_slack + huge_cached, held = use + slack;
    if (!fresh || held <= atomic_load_explicit(&held_high, memory_order_relaxed) ||
        !policy_active())
        return; /* (memory used again after a shed is not a new high) */
    size_t margin = peak / 64 > PEAK_MARGIN_MIN ? peak / 64 : PEAK_MARGIN_MIN;
    margin += huge_cached / 8;
    size_t room = peak - use + margin;
    /* the segments' free units go first (then the cached huge mappings,
     * below), and of them only whole OS pages: a shed that took less than
     * it was asked for leaves the rest (`stuck`), and the
     * next one waits until there is more than that.  (Without it, sqlite3
     * (W7), whose slack was 2 MiB of cached huge mappings, walked every
     * segment's bitmap on each of 241 fresh commits and took nothing: 0.75%
     * of its time.) */
    size_t over = slack > room ? slack - room : 0, want = over;
    if (want > seg_slack)
        want = seg_slack;
    size_t stuck = atomic_load_explicit(&shed_stuck, memory_order_relaxed);
    if (seg_slack < stuck) /* units used again: the floor follows */
        atomic_store_explicit(&shed_stuck, stuck = seg_slack, memory_order_relaxed);
    int units = want >= SHED_MIN && seg_slack >= stuck + SHED_MIN;
    int mappings = over >= SHED_MIN && huge_cached;
    /* one shed at a time: two threads that reach a new high together
     * would each take the whole overshoot (the other's figures are as
     * stale as its own); the one that does not get the lock leaves it to
     * the one that does */
    if ((units || mappings) && mki_os_trylock(&pass_lock) == 0) {
        if (units) {
            atomic_fetch_add_explicit(&mki_purge_sheds, 1, memory_order_relaxed);
            size_t b = mki_segment_shed(want, os_how(mki_option(MKI_OPT_PURGE), 0));
            atomic_store_explicit(&shed_stuck, b < want ? seg_slack - b : 0,
                                  memory_order_relaxed);
            atomic_fetch_add_explicit(&purged_bytes, b, memory_order_relaxed);
            held -= b < held ? b : held;
            over -= b < over ? b : over;
        }
        if (over >= SHED_MIN && huge_cached) { /* then the cached mappings */
            size_t b = mki_huge_shed(over);
            atomic_fetch_add_explicit(&purged_bytes, b, memory_order_relaxed);
            held -= b < held ? b : held;
        }
        mki_os_unlock(&pass_lock);
    }
    mki_atomic_max(&held_high, held);
}

/* ---- scheduling ------------------------------------------------------------ */

/* No thread runs passes: the pass that is scheduled runs here if it is
 * due (a slow path: a free that gave pages back, an allocation that cut
 * a page).  Returns 1 when a pass ran. */
static int run_due_pass(void)
{
    if (!policy_active()) /* (switched off since it was scheduled) */
        return 0;
    if (mki_os_now_ns() < sched_at() + delay_ns() || mki_os_trylock(&purge_lock) != 0)
        return 0;
    int due = atomic_load(&scheduled) && mki_os_now_ns() >= sched_at() + delay_ns();
    if (due)
        atomic_store(&scheduled, 0);
    mki_os_unlock(&purge_lock);
    if (!due)
        return 0;
    if (run_pass(0, NULL, NULL))
        mki_purge_note(); /* (schedules the next, and wants it) */
    return 1;
}

/* ---- the free rule ---------------------------------------------------------
 * Without a thread of its own, memkit gives memory back only when the
 * program calls it, and a program that frees its peak and then sleeps (FORM
 * between two sorts, a server between two bursts) would keep its free
 * memory for good.  So a free that leaves more free memory held (slack:
 * the segments' free units still committed, the cached huge mappings)
 * than a margin, or a SLACK_SHARE of what is in use, gives the excess back
 * at once, whatever its age: the program comes down to what it uses and
 * that margin, in the call that dropped its peak.  Below it, free memory
 * waits the delay, as before, for the program to use it again, and goes
 * back in the passes its later calls run.  (With the thread, the passes
 * run on time anyway, and the rule stands aside.)
 *
 * The margin is learned, as glibc's mmap threshold is: it starts at
 * SLACK_FLOOR, and a shed that the program undoes within a purge delay (it
 * takes fresh memory from the OS again: the loop of large blocks of W8,
 * whose every free dropped most of what it held) was too soon, and doubles
 * it, up to the most ever in use; a shed a second or more after the last
 * one found too soon halves it again, down to the floor.  A program that
 * frees its peak once and sleeps is down to the floor; one that frees and
 * takes back in a loop keeps what the loop needs, and pays no fault.  What
 * a quiet program keeps is the margin at its last free (docs/OPTIONS.md). */
#ifndef SLACK_FLOOR_MB /* (a build may try others: -DSLACK_FLOOR_MB=...) */
#define SLACK_FLOOR_MB 2
#endif
#ifndef SLACK_SHARE
#define SLACK_SHARE 4 /* a quarter of what is in use */
#endif
#define SLACK_FLOOR ((size_t)SLACK_FLOOR_MB << 20)
#define CALM_NS 1000000000ull /* a second with no shed found too soon */
static _Atomic size_t margin = SLACK_FLOOR;
static _Atomic unsigned long long too_soon_ns; /* a shed last found so */
_Atomic size_t mki_purge_drops; /* (how many times the rule gave back) */

size_t mki_purge_margin(void)
{
    return atomic_load_explicit(&margin, memory_order_relaxed);
}

/* Fresh memory is taken while the free rule's last shed is recent (@use:
 * in use now): within a delay of it, the shed was too soon. */
static void shed_too_soon(size_t use)
{
    unsigned long long at = atomic_exchange_explicit(&shed_ns, 0, memory_order_relaxed);
    if (!at)
        return; /* (another thread judged it) */
    unsigned long long now = mki_os_now_ns();
    if (now - at >= delay_ns())
        return;
    size_t m = atomic_load_explicit(&margin, memory_order_relaxed);
    size_t top = atomic_load_explicit(&use_peak, memory_order_relaxed);
    if (top < use)
        top = use;
    m = 2 * m < top ? 2 * m : (top > m ? top : m);
    atomic_store_explicit(&margin, m, memory_order_relaxed);
    atomic_store_explicit(&too_soon_ns, now, memory_order_relaxed);
}

static void free_rule(void)
{
    size_t seg_live, seg_slack, huge_live, huge_cached;
    mki_segment_use(&seg_live, &seg_slack);
    mki_huge_use(&huge_live, &huge_cached);
    size_t use = seg_live + huge_live, slack = seg_slack + huge_cached;
    size_t m = atomic_load_explicit(&margin, memory_order_relaxed);
    size_t bound = use / SLACK_SHARE > m ? use / SLACK_SHARE : m;
    if (slack <= bound + SHED_MIN_RULE)
        return;
    if (mki_os_trylock(&pass_lock) != 0)
        return; /* another thread sheds or runs a pass: it will see */
    int saved = errno;
    size_t over = slack - bound, b = 0;
    atomic_fetch_add_explicit(&mki_purge_drops, 1, memory_order_relaxed);
    /* the cached huge mappings first (whole mappings, unmapped: no walk),
     * then the segments' free units */
    if (huge_cached)
        b = mki_huge_shed(over < huge_cached ? over : huge_cached);
    if (b < over && seg_slack)
        b += mki_segment_shed(over - b, os_how(mki_option(MKI_OPT_PURGE), 0));
    atomic_fetch_add_explicit(&purged_bytes, b, memory_order_relaxed);
    unsigned long long now = mki_os_now_ns();
    if (m > SLACK_FLOOR &&
        now - atomic_load_explicit(&too_soon_ns, memory_order_relaxed) >= CALM_NS)
        atomic_store_explicit(&margin, m / 2 > SLACK_FLOOR ? m / 2 : SLACK_FLOOR,
                              memory_order_relaxed);
    atomic_store_explicit(&shed_ns, now, memory_order_relaxed);
    mki_os_unlock(&pass_lock);
    errno = saved;
}

void mki_purge_note(void)
{
    if (!policy_active())
        return;
    /* sequentially consistent, with the load of `scheduled` below: the
     * thread stores `scheduled` 0 and then reads `notes` (purge_main), so
     * either it sees this note or this note sees 0 and schedules a pass */
    atomic_fetch_add(&notes, 1);
    want_if_large();
    if (mki_option(MKI_OPT_PURGE_DELAY_MS) == 0) { /* at once */
        run_pass(1, NULL, NULL);
        return;
    }
    int ts = atomic_load_explicit(&thread_state, memory_order_relaxed);
    if (ts != 2)
        free_rule();
    if (atomic_load(&scheduled)) {
        if (ts != 2) /* no thread: run the pass here once it is due */
            run_due_pass();
        return;
    }
    pthread_once(&cond_once, cond_init);
    mki_os_lock(&purge_lock);
    if (!atomic_load(&scheduled)) {
        atomic_store_explicit(&sched_ns, mki_os_now_ns(), memory_order_relaxed);
        atomic_store(&scheduled, 1);
        pthread_cond_signal(&purge_cond);
    }
    mki_os_unlock(&purge_lock);
    /* no thread: the allocation slow paths look at the pass (safe point) */
    if (ts != 2)
        atomic_store_explicit(&mki_purge_want, 1, memory_order_relaxed);
}

/* ---- a mapping failed ------------------------------------------------------ */

int mki_purge_reclaim(void)
{
    size_t seg_live, seg_slack, huge_live, huge_cached;
    mki_segment_use(&seg_live, &seg_slack);
    mki_huge_use(&huge_live, &huge_cached);
    (void)seg_live, (void)huge_live;
    /* (empty segments and cached mappings hold address space even when
     * their pages are gone: one pass finds out) */
    if (!mki_segment_idle() && !huge_cached && !seg_slack)
        return 0;
    int saved = errno;
    size_t a = 0, b = 0;
    run_pass(1, &a, NULL);
    run_pass(1, &b, NULL); /* (pages purged may have emptied segments) */
    mki_segment_trim_arena();
    errno = saved;
    return 1;
}

int mki_purge_collect(void)
{
    /* wanted already, with a thread: the flag is set only under the lock
     * while a thread runs or starts, and the thread exits only with it
     * clear, so a run will come (the common case of a burst of frees into
     * an orphan: no lock); without one, the flag asks the next safe point,
     * and 0 says that no run may come */
    int now = atomic_load_explicit(&thread_state, memory_order_relaxed);
    if ((now == 1 || now == 2) &&
        atomic_load_explicit(&collect_wanted, memory_order_relaxed))
        return 1;
    pthread_once(&cond_once, cond_init);
    mki_os_lock(&purge_lock);
    int ts = atomic_load(&thread_state);
    int will = ts == 1 || ts == 2;
    if (will) {
        atomic_store(&collect_wanted, 1);
        pthread_cond_signal(&purge_cond);
    } else if (ts == 0 && mki_option(MKI_OPT_PURGE_THREAD) && policy_active()) {
        /* no thread: the next thread exit or mk_trim collects, and the
         * next safe point starts one */
        atomic_store_explicit(&thread_wanted, 1, memory_order_relaxed);
        atomic_store_explicit(&mki_purge_want, 1, memory_order_relaxed);
    } else if (ts != 3) {
        /* no thread of memkit's own (the default): the next allocation
         * slow path collects (a safe point), or the next thread exit, or
         * mk_trim */
        atomic_store(&collect_wanted, 1);
        atomic_store_explicit(&mki_purge_want, 1, memory_order_relaxed);
    }
    mki_os_unlock(&purge_lock);
    return will;
}

void mki_purge_options_changed(void)
{
    /* memory freed while the policy was off counts as free since then:
     * switched on (or to a new delay), a pass is scheduled */
    mki_purge_note();
    if (atomic_load(&thread_state) != 2)
        return;
    mki_os_lock(&purge_lock);
    pthread_cond_signal(&purge_cond); /* it recomputes what is due */
    mki_os_unlock(&purge_lock);
}

void mki_purge_fork(int phase)
{
    if (phase == 0) {
        pthread_mutex_lock(&pass_lock);
        pthread_mutex_lock(&purge_lock);
        return;
    }
    pthread_mutex_unlock(&purge_lock);
    pthread_mutex_unlock(&pass_lock);
    if (phase == 2) {
        /* The child has no purge thread.  One starts once the child itself
         * frees pages or takes memory from the OS (mki_purge_note and
         * mki_purge_grew want it, the next safe point starts it): a child
         * that only execs, or allocates a little and exits, never pays for
         * a thread.  Until then the memory it inherited free
         * stays as it is (its pages are shared with the parent's anyway).
         * The condition variable may list the parent's thread as a waiter:
         * signalling it would wait for that thread forever; start afresh. */
        if (atomic_load(&thread_state) != 0)
            cond_init();
        int ts = atomic_load(&thread_state); /* 1: another thread was
                                                 starting one, not here */
        if (ts == 1 || ts == 2)
            atomic_store(&thread_state, FORK_CHILD_STATE);
        atomic_store(&mki_purge_want, 0);
        atomic_store(&scheduled, 0);
        atomic_store(&collect_wanted, 0);
        last_collect_ns = 0;
    }
}

void mki_purge_figures(size_t *bytes, size_t *npasses)
{
    *bytes = atomic_load_explicit(&purged_bytes, memory_order_relaxed);
    *npasses = atomic_load_explicit(&passes, memory_order_relaxed);
}

/* ---- mk_trim ---------------------------------------------------------------- */

size_t mk_trim(void)
{
    (void)mki_page_up.collect(1); /* heaps of exited threads (heap/) */
    size_t bytes = 0, more = 0;
    run_pass(1, &bytes, NULL);
    /* purging free pages may have emptied segments: they go too */
    run_pass(1, &more, NULL);
    return bytes + more;
}
