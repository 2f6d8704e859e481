/*
 * record.c - the life of a context's record (the struct a handle points
 * to): where it comes from, what it becomes when its context is deleted,
 * and the check every public operation makes of the handle it is given.
 * Also, in the checking build, who is inside a context now, and the list
 * of live contexts reported at exit.
 *
 * Stale handles.  A handle is the record's address, and the release fast
 * paths read the record through it (chunk.c), so a handle has no room for
 * a generation: a generation kept in the record would be the new
 * context's once the record is reused, equal to the old handle's.  What
 * tells a stale handle is therefore the record itself, for as long as it
 * is not reused.  So a deleted context's record is *poisoned* (fast_kind
 * MKI_KIND_DEAD, which no fast path takes; `ops` a table whose every entry
 * reports; the name copied in, since the program's string may be gone) and
 * goes on a FIFO of its kind, from which a new context of that kind takes
 * the oldest record only while more than MEMKIT_CTX_QUARANTINE wait.  The
 * checking build keeps 65,536 of each kind (its records are 184 to 376
 * bytes: at most 24 MiB of bookkeeping per kind, for a program that
 * deletes that many), so a use of a deleted context is reported until
 * 65,536 later contexts of its kind were deleted; a quarantine without a
 * bound would grow with every context a long run deletes, and a bound is
 * what every quarantine (AddressSanitizer's too) trades for it.  The
 * release build keeps none by default, yet a record stays poisoned until
 * the next mk_ctx_new of its kind, and FIFO reuse lets it wait as long as
 * possible: a double delete or an allocation into a deleted context is
 * reported there too unless a new context took the record meanwhile (then
 * the stale handle *is* the new context, and no cheap check can tell).  The cost: records never go back to the general
 * bookkeeping (page/meta.c), which never gave them back to the OS either;
 * nothing on any fast path.
 *
 * One thread at a time.  A context is used by one thread at a time
 * (memkit.h), but nothing in the release build knows who is inside one:
 * two threads in a context corrupt its lists, reported later, if at all,
 * as something else.  The checking build marks each public operation's
 * context with the calling thread's kernel thread id (a compare-and-swap
 * from 0 on entry, a store of 0 on exit; a nested entry by the same
 * thread, such as a reset callback that allocates, passes), and a second
 * thread that enters meanwhile is reported, naming both threads.  A
 * thread that frees into a context it does not own only queues the chunk
 * (an atomic push), which the rule allows: it does not enter.
 */

#include "general.h"
#include "generation.h"
#include "slab.h"
#include "bump.h"

#include <errno.h>
#include <string.h>

#define TLS_IE __attribute__((tls_model("initial-exec")))

/* A deleted context's record: the shared part, and the name's copy. */
#define NAME_COPY 32
typedef struct dead_ctx {
    mk_ctx base;
    char name[NAME_COPY];
} dead_ctx;
_Static_assert(sizeof(dead_ctx) <= sizeof(mki_general) &&
                   sizeof(dead_ctx) <= sizeof(mki_slab) &&
                   sizeof(dead_ctx) <= sizeof(mki_generation) &&
                   sizeof(dead_ctx) <= sizeof(mki_bump),
               "every kind's record holds a dead record");

/* The records waiting to be reused, per kind, oldest first (linked through
 * next_sibling), and in the checking build the live contexts. */
static pthread_mutex_t records_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    mk_ctx *head, *tail;
    size_t n;
} dead[4];
static mk_ctx *live_head;

/* ---- the dead table: every use of a deleted context is reported ------------ */

MKI_COLD void mki_ctx_report_dead(const mk_ctx *c, const char *fn)
{
    mki_error_report(fn, "use of deleted context", c, NULL, c->name);
}

static void *dead_alloc(mk_ctx *ctx, size_t size)
{
    (void)size;
    mki_ctx_report_dead(ctx, "mk_alloc");
    errno = EINVAL;
    return NULL;
}

static void *dead_alloc_aligned(mk_ctx *ctx, size_t size, size_t align)
{
    (void)size, (void)align;
    mki_ctx_report_dead(ctx, "mk_alloc_aligned");
    errno = EINVAL;
    return NULL;
}

static void dead_destroy(mk_ctx *ctx) { mki_ctx_report_dead(ctx, "mk_ctx_delete"); }
static void dead_collect(mk_ctx *ctx) { (void)ctx; /* (nothing to take in) */ }

static void dead_reset(mk_ctx *ctx, int keep_one)
{
    (void)keep_one;
    mki_ctx_report_dead(ctx, "mk_ctx_reset");
}

static void dead_stats(const mk_ctx *ctx, mk_stats *out)
{
    (void)out;
    mki_ctx_report_dead(ctx, "mk_ctx_stats");
}

static void dead_set_owner(mk_ctx *ctx, uintptr_t tid)
{
    (void)tid;
    mki_ctx_report_dead(ctx, "mk_ctx_set_owner");
}

static size_t dead_trim(mk_ctx *ctx)
{
    mki_ctx_report_dead(ctx, "mk_ctx_trim");
    return 0;
}

/* (No chunk of a deleted context exists: the chunk entries are never
 * called; the allocation entries are, through a stale handle.) */
static const mki_kind_ops dead_ops = {
    .name = "deleted",
    .destroy = dead_destroy,
    .alloc = dead_alloc,
    .alloc_aligned = dead_alloc_aligned,
    .collect = dead_collect,
    .reset = dead_reset,
    .stats = dead_stats,
    .set_owner = dead_set_owner,
    .trim = dead_trim,
};

/* ---- records ----------------------------------------------------------------- */

static void live_add(mk_ctx *c)
{
    mki_ctx_check *k = mki_ctx_check_of(c);
    k->live_prev = NULL;
    k->live_next = live_head;
    if (live_head)
        mki_ctx_check_of(live_head)->live_prev = c;
    live_head = c;
}

static void live_remove(mk_ctx *c)
{
    mki_ctx_check *k = mki_ctx_check_of(c);
    if (k->live_prev)
        mki_ctx_check_of(k->live_prev)->live_next = k->live_next;
    else if (live_head == c)
        live_head = k->live_next;
    if (k->live_next)
        mki_ctx_check_of(k->live_next)->live_prev = k->live_prev;
    k->live_next = k->live_prev = NULL;
}

mk_ctx *mki_ctx_record_new(mk_kind kind)
{
    size_t size = mki_kinds[kind]->ctx_size;
    size_t keep = (size_t)mki_option(MKI_OPT_CTX_QUARANTINE);
    mk_ctx *c = NULL;
    mki_os_lock(&records_lock);
    if (dead[kind].head && dead[kind].n > keep) {
        c = dead[kind].head;
        dead[kind].head = c->next_sibling;
        if (!dead[kind].head)
            dead[kind].tail = NULL;
        dead[kind].n--;
    }
    mki_os_unlock(&records_lock);
    if (c)
        memset(c, 0, size);
    else if (!(c = mki_meta_alloc(size)))
        return NULL;
    if (MK_CONFIG_CHECK) {
        mki_os_lock(&records_lock);
        live_add(c);
        mki_os_unlock(&records_lock);
    }
    return c;
}

void mki_ctx_record_abandon(mk_ctx *c)
{
    size_t size = mki_kinds[c->kind]->ctx_size;
    if (MK_CONFIG_CHECK) {
        mki_os_lock(&records_lock);
        live_remove(c);
        mki_os_unlock(&records_lock);
    }
    mki_meta_free(c, size);
}

void mki_ctx_record_free(mk_ctx *c)
{
    dead_ctx *d = (dead_ctx *)c;
    size_t n = 0;
    for (const char *s = c->name; s && s[n] && n < NAME_COPY - 1; n++)
        d->name[n] = s[n];
    d->name[n] = '\0';
    c->name = d->name;
    c->fast_kind = MKI_KIND_DEAD;
    c->fast_tid = 0;
    c->ops = &dead_ops;
    c->callbacks = NULL;
    c->first_child = NULL;
    unsigned kind = c->kind;
    mki_os_lock(&records_lock);
    if (MK_CONFIG_CHECK) {
        live_remove(c);
        atomic_store_explicit(&mki_ctx_check_of(c)->inside, 0,
                              memory_order_relaxed);
    }
    c->next_sibling = NULL;
    if (dead[kind].tail)
        dead[kind].tail->next_sibling = c;
    else
        dead[kind].head = c;
    dead[kind].tail = c;
    dead[kind].n++;
    mki_os_unlock(&records_lock);
}

/* ---- who is inside a context (checking build) ------------------------------- */

/* The calling thread's kernel thread id, asked once (0: not asked yet). */
static _Thread_local long self TLS_IE;

long mki_ctx_self(void)
{
    long t = self;
    if (MKI_UNLIKELY(t == 0)) {
        t = mki_os_thread_token();
        if (t <= 0) /* (no kernel id here: memkit's own) */
            t = (long)mki_tid();
        self = t;
    }
    return t;
}

int mki_ctx_enter_checked(mk_ctx *c, const char *fn)
{
    mki_ctx_check *k = mki_ctx_check_of(c);
    if (!k)
        return 2;
    long me = mki_ctx_self(), was = 0;
    if (atomic_compare_exchange_strong_explicit(&k->inside, &was, me,
                                                memory_order_acquire,
                                                memory_order_relaxed))
        return 1;
    if (was == me)
        return 2; /* a nested use by the same thread */
    mki_error_ctx_inside(fn, c->name, me, was);
    return 0;
}

/* ---- fork -------------------------------------------------------------------- */

void mki_ctx_fork(int phase)
{
    if (phase == 0) {
        pthread_mutex_lock(&records_lock);
        return;
    }
    if (phase == 2)
        self = 0; /* the child's thread has an id of its own */
    pthread_mutex_unlock(&records_lock);
}

/* ---- the live contexts at exit (checking build) ------------------------------- */

/* MEMKIT_REPORT_CONTEXTS: a line for each context never deleted, made
 * with MK_CTX_REPORT_LEAKS (flagged, the checking build's default) or any
 * (all), memkit's own thread heaps aside.  Its figures are read, not
 * collected: the checking build counts a chunk as freed when it is freed,
 * whichever thread freed it.  Written without allocating; skipped if a
 * thread holds the lists (a process that exits while another thread makes
 * or deletes a context). */
#if MK_CONFIG_CHECK /* (no destructor in the release build: a page at
                        * every program's exit) */
__attribute__((destructor)) static void report_at_exit(void)
{
    long mode = mki_option(MKI_OPT_REPORT_CONTEXTS);
    if (!MK_CONFIG_CHECK || !mode || mki_os_trylock(&records_lock) != 0)
        return;
    for (mk_ctx *c = live_head; c; c = mki_ctx_check_of(c)->live_next) {
        if ((c->flags & MKI_CTX_OWN) ||
            (mode == 1 && !(c->flags & MK_CTX_REPORT_LEAKS)))
            continue;
        mk_stats st;
        memset(&st, 0, sizeof st);
        c->ops->stats(c, &st);
        mki_report_alive(c->name, mki_kinds[c->kind]->name, st.chunks,
                         st.bytes_used);
    }
    mki_os_unlock(&records_lock);
}
#endif
