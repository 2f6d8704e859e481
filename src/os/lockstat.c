/* SPDX-License-Identifier: MIT */
/*
 * lockstat.c - the lock statistics of a diagnostic build (cmake
 * -DMEMKIT_LOCK_STATS=ON; in every other build this file is empty): for
 * each of memkit's global locks, how often it was taken, how often it was
 * found held, and how long the takers waited, printed to stderr at exit.
 * It is how the page pool's single lock was judged on 16 cores (docs/
 * DESIGN.md, "Threads").
 *
 * Trade-off: each acquisition adds a try-lock and a relaxed atomic add to
 * a counter beside the lock's entry, and a wait adds two clock reads. That
 * changes the timing it measures a little; the counts are what it is for.
 * The table holds the first 64 locks taken, keyed by address (each of a
 * pool's shard locks is a line of its own, under the same name); later
 * ones go uncounted.
 */
#include "os.h"

#if MKI_LOCK_STATS

#include "../base/base.h"

#include <stdatomic.h>

enum { SLOTS = 64 };

typedef struct lock_entry {
    _Atomic(pthread_mutex_t *) lock;
    _Atomic(const char *) name; /* set just after lock, by its winner */
    atomic_ulong taken, contended, waited_ns;
} lock_entry;

static lock_entry table[SLOTS];

/* @m's entry, made on first use; NULL when the table is full. */
static lock_entry *entry_of(pthread_mutex_t *m, const char *name)
{
    unsigned h = (unsigned)(((uintptr_t)m >> 4) * 2654435761u) % SLOTS;
    for (int i = 0; i < SLOTS; i++, h = (h + 1) % SLOTS) {
        lock_entry *e = &table[h];
        pthread_mutex_t *cur = atomic_load_explicit(&e->lock, memory_order_acquire);
        if (!cur && atomic_compare_exchange_strong(&e->lock, &cur, m)) {
            atomic_store_explicit(&e->name, name, memory_order_release);
            return e;
        }
        if (cur == m)
            return e;
    }
    return NULL;
}

void mki_os_lock_counted(pthread_mutex_t *m, const char *name)
{
    int held = pthread_mutex_trylock(m) != 0;
    unsigned long long waited = 0;
    if (held) {
        unsigned long long t0 = mki_os_now_ns();
        pthread_mutex_lock(m);
        waited = mki_os_now_ns() - t0;
    }
    lock_entry *e = entry_of(m, name);
    if (!e)
        return;
    atomic_fetch_add_explicit(&e->taken, 1, memory_order_relaxed);
    if (held) {
        atomic_fetch_add_explicit(&e->contended, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&e->waited_ns, waited, memory_order_relaxed);
    }
}

size_t mki_os_lock_report(char *buf, size_t len)
{
    mki_line l = {.sink = buf, .sink_cap = len ? len - 1 : 0};
    for (int i = 0; i < SLOTS; i++) {
        lock_entry *e = &table[i];
        if (!atomic_load_explicit(&e->lock, memory_order_acquire))
            continue;
        mki_line_str(&l, "memkit: lock ");
        const char *name = atomic_load_explicit(&e->name, memory_order_acquire);
        mki_line_str(&l, name ? name : "(being named)");
        mki_line_str(&l, ": taken ");
        mki_line_num(&l, (long long)atomic_load(&e->taken));
        mki_line_str(&l, ", found held ");
        mki_line_num(&l, (long long)atomic_load(&e->contended));
        mki_line_str(&l, ", waited ");
        mki_line_num(&l, (long long)(atomic_load(&e->waited_ns) / 1000));
        mki_line_str(&l, " us");
        mki_line_write(&l, -1); /* (into the sink) */
    }
    if (len)
        buf[l.sink_len] = '\0';
    return l.sink_len;
}

__attribute__((destructor)) static void report_at_exit(void)
{
    char buf[4096];
    mki_line l = {.sink = buf, .sink_cap = sizeof buf};
    l.sink_len = mki_os_lock_report(buf, sizeof buf);
    mki_line_sink_write(&l, 2);
}

#else
typedef int mki_lockstat_off; /* (ISO C wants a declaration in every file) */
#endif
