/* SPDX-License-Identifier: MIT */
/*
 * sample.c - the sampled heap profile: which allocations are samples, the
 * call stack and context of each, the table of live samples, the peak.
 *
 * Sampling is by bytes, unbiased by size: each thread counts down the
 * bytes it allocates in profiled contexts (ctx.h, mki_prof_left), and the
 * allocation that crosses zero is a sample; the next interval is drawn
 * from an exponential distribution of mean MEMKIT_PROFILE_RATE, as
 * tcmalloc and jemalloc draw theirs.  The sampling points are then a
 * Poisson process over the bytes allocated, so an allocation of n bytes is
 * a sample with probability 1 - exp(-n / rate), whatever came before it,
 * and a sample stands for n / (1 - exp(-n / rate)) bytes (its estimate).
 * Rate 1 makes every allocation a sample standing for itself: the profile
 * is then exact, and at exit it is the list of what was never freed.
 *
 * A sample records its size, its context's path of names and its call
 * stack (up to 64 frames), taken with the toolchain's unwinder (DWARF
 * unwind tables: right in binaries without frame pointers), through
 * glibc's backtrace().  The unwinder allocates the first time (glibc loads
 * it then); a thread inside the sampler takes no sample (tls_busy), so
 * that allocation is served and not counted.  Stacks are interned (one record per stack and context, in a
 * hash table mapped from the OS) and carry the figures the dumps print.
 *
 * The live table is per page: each page that holds samples lists them
 * (mki_page.samples), and its fast_tid carries MKI_TID_SAMPLED meanwhile
 * (page.h), so every free into it takes the slow path, which asks here
 * (mki_prof_unsample).  A free into a page without samples never comes
 * here.  The lists are guarded by 64 locks striped by page; the stacks,
 * the totals and the peak by one more, taken only when a sample comes or
 * goes.  Trade-off: while a page holds a sample its other frees are slow
 * frees (about 1 page in 8 at the default rate and 64 KiB pages), in
 * exchange for a free path that knows nothing of the profile.
 *
 * The peak is the high-water mark of the live estimate: when it passes the
 * last snapshot by 10%, every stack's live figures are copied as its peak
 * figures (dump.c writes them at exit and on demand).
 */

#include "prof.h"

#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <link.h>
#include <string.h>

#define TLS_IE __attribute__((tls_model("initial-exec")))

/* Stripe locks of the samples' pages: 64, a page's by the top 6 bits of
 * a hash.  ThreadSanitizer's deadlock detector follows at most 64 locks
 * held by one thread, and the fork handlers hold every stripe and the
 * other layers' locks at once (bind.c): a TSan build has 16. */
#define STRIPE_SHIFT (MKI_TSAN ? 60 : 58)
enum { MAX_FRAMES = 64, OWN_FRAMES = 12, STRIPES = 1 << (64 - STRIPE_SHIFT),
       PATH_MAX_LEN = 200, STACK_BUCKETS = 1 << 14 };

/* A live sample, on its page's list (the page's stripe lock). */
typedef struct sample {
    struct sample *next, *prev;
    const void *addr;
    size_t size;
    double est_bytes, est_count;
    mki_prof_stack *stack;
} sample;

static pthread_mutex_t stripes[STRIPES]; /* (all zero: unlocked, as
                                             PTHREAD_MUTEX_INITIALIZER) */
static pthread_mutex_t prof_lock = PTHREAD_MUTEX_INITIALIZER; /* the rest */
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static mki_prof_stack **buckets;  /* STACK_BUCKETS, mapped at init */
static mki_prof_stack *all_stacks;
static struct sample *spare;      /* records of samples gone, for reuse */
static mki_prof_totals totals;
static double peak_mark;          /* live est_bytes at the last snapshot */
static _Atomic long rate_now = 512 << 10;
static uintptr_t own_lo, own_hi;  /* memkit's own code, when it is a
                                     shared object of its own */

static _Thread_local int tls_busy TLS_IE;
static _Thread_local uint64_t tls_rng TLS_IE;

/* ---- numbers ------------------------------------------------------------------ */

/* ln(u) for u in (0, 1]: u = m * 2^e, ln u = e ln 2 + 2 atanh((m-1)/(m+1))
 * with m in [0.71, 1.42) (|s| < 0.172: the series to s^9 is good to 1e-9;
 * no libm in the library). */
static double ln(double u)
{
    union {
        double d;
        uint64_t b;
    } x = {u};
    int e = (int)((x.b >> 52) & 0x7ff) - 1023;
    x.b = (x.b & ((1ull << 52) - 1)) | (1023ull << 52);
    double m = x.d;
    if (m > 1.4142135623730951) {
        m *= 0.5;
        e++;
    }
    double s = (m - 1) / (m + 1), s2 = s * s;
    double lm = 2 * s * (1 + s2 * (1.0 / 3 + s2 * (1.0 / 5 + s2 * (1.0 / 7 + s2 / 9))));
    return e * 0.6931471805599453 + lm;
}

/* 1 - exp(-x) for x >= 0, without cancellation for small x. */
static double one_minus_exp_neg(double x)
{
    if (x < 1e-4)
        return x * (1 - x * (0.5 - x / 6));
    if (x > 40)
        return 1;
    /* exp(-x) = 2^-k exp(-r), r = x - k ln 2 in [0, ln 2) */
    int k = (int)(x / 0.6931471805599453);
    double r = x - k * 0.6931471805599453, t = 1, e = 1;
    for (int i = 1; i <= 14; i++) {
        t *= -r / i;
        e += t;
    }
    union {
        double d;
        uint64_t b;
    } p = {.b = (uint64_t)(1023 - k) << 52};
    return 1 - e * p.d;
}

static uint64_t rng_next(void)
{
    uint64_t x = tls_rng;
    if (!x) /* first use on this thread: its identity, a stack address */
        x = (mki_tid_now() * 0x9E3779B97F4A7C15ull) ^ (uintptr_t)&x ^
            mki_os_now_ns();
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    tls_rng = x ? x : 1;
    return x * 0x2545F4914F6CDD1Dull;
}

/* The bytes to the next sample: exponential, mean @rate (1: at once). */
static int64_t next_interval(long rate)
{
    if (rate <= 1)
        return 0;
    double u = ((rng_next() >> 11) + 1) * (1.0 / 9007199254740992.0); /* (0, 1] */
    double v = -ln(u) * (double)rate;
    return v > 4e18 ? INT64_MAX : (int64_t)v;
}

/* ---- set-up ----------------------------------------------------------------------- */

/* The address range of the object that holds this code, when it is not
 * the program itself (libmemkit.so, libmemkit-malloc.so): frames in it
 * are memkit's own and are cut from the top of each stack.  In a static
 * link they stay (the tools drop them by name, docs/PROFILE.md). */
static int find_own(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    uintptr_t base = (uintptr_t)arg;
    if (info->dlpi_addr != base || !info->dlpi_name || !info->dlpi_name[0])
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uintptr_t lo = base + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (!own_lo || lo < own_lo)
            own_lo = lo;
        if (hi > own_hi)
            own_hi = hi;
    }
    return 1;
}

static void init(void)
{
    size_t bytes = STACK_BUCKETS * sizeof *buckets;
    void *b = mki_os_reserve(bytes, MKI_OS_PAGE);
    if (b && mki_os_commit(b, bytes) == 0)
        buckets = b;
    Dl_info di;
    if (dladdr((void *)&init, &di) && di.dli_fbase)
        dl_iterate_phdr(find_own, di.dli_fbase);
    atomic_store(&rate_now, mki_option(MKI_OPT_PROFILE_RATE));
    totals.rate = atomic_load(&rate_now);
    if (buckets)
        mki_prof_started();
}

int mki_prof_active(void)
{
    mki_options_init();
    if (!mki_option(MKI_OPT_PROFILE))
        return 0;
    pthread_once(&init_once, init);
    return buckets != NULL;
}

void mki_prof_options_changed(void)
{
    long rate = mki_option(MKI_OPT_PROFILE_RATE);
    if (atomic_exchange(&rate_now, rate) != rate)
        mki_prof_left = 0; /* the calling thread draws at the new rate at
                              once; others when their interval ends */
}

/* ---- stacks -------------------------------------------------------------------------- */

/* The calling thread's stack, innermost first, memkit's frames cut where
 * it can tell them.  glibc's backtrace() is the toolchain's unwinder
 * (libgcc_s, loaded on its first call, which allocates: the caller holds
 * tls_busy), so the library does not link it: a program that never
 * profiles never loads it. */
static int take_stack(uintptr_t *ips)
{
    void *raw[MAX_FRAMES + OWN_FRAMES];
    int n = backtrace(raw, MAX_FRAMES + OWN_FRAMES), k = 0;
    while (k < n && own_hi && (uintptr_t)raw[k] >= own_lo && (uintptr_t)raw[k] < own_hi)
        k++;
    int m = 0;
    for (; k < n && m < MAX_FRAMES; k++)
        ips[m++] = (uintptr_t)raw[k];
    return m;
}

/* The path of names from @ctx's top-level ancestor down to it, in @buf. */
static void ctx_path(const mk_ctx *ctx, char *buf, size_t cap)
{
    const mk_ctx *chain[32];
    int n = 0;
    for (const mk_ctx *c = ctx; c && n < 32; c = c->parent)
        chain[n++] = c;
    size_t len = 0;
    for (int i = n - 1; i >= 0; i--) {
        const char *s = chain[i]->name ? chain[i]->name : "?";
        if (i != n - 1 && len + 1 < cap)
            buf[len++] = '/';
        while (*s && len + 1 < cap) {
            char c = *s++;
            buf[len++] = c == ';' || c == ' ' || c == '\n' ? '_' : c; /* (folded format) */
        }
    }
    buf[len] = '\0';
}

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Interned paths: a short list (programs have few distinct paths). */
typedef struct path {
    struct path *next;
    char s[];
} path;
static path *paths; /* prof_lock */

static const char *intern_path(const char *s)
{
    for (path *p = paths; p; p = p->next)
        if (strcmp(p->s, s) == 0)
            return p->s;
    size_t n = strlen(s) + 1;
    path *p = mki_meta_alloc(sizeof *p + n);
    if (!p)
        return "?";
    memcpy(p->s, s, n);
    p->next = paths;
    paths = p;
    return p->s;
}

/* The calling thread's last context and its interned path (a context's
 * name and parent are fixed but by mk_ctx_set_parent, which the key
 * covers; prof_lock held to fill it). */
static _Thread_local const mk_ctx *tls_path_ctx TLS_IE;
static _Thread_local const void *tls_path_key[2] TLS_IE;
static _Thread_local const char *tls_path TLS_IE;

static const char *path_of(const mk_ctx *ctx)
{
    if (ctx == tls_path_ctx && tls_path_key[0] == ctx->name &&
        tls_path_key[1] == ctx->parent)
        return tls_path;
    char cp[PATH_MAX_LEN];
    ctx_path(ctx, cp, sizeof cp);
    tls_path = intern_path(cp);
    tls_path_ctx = ctx;
    tls_path_key[0] = ctx->name;
    tls_path_key[1] = ctx->parent;
    return tls_path;
}

/* The stack record of @ips in context path @ip (interned; prof_lock
 * held). */
static mki_prof_stack *stack_of(const uintptr_t *ips, int n, const char *ip)
{
    uint64_t h = hash_bytes(0xcbf29ce484222325ull, ips, (size_t)n * sizeof *ips);
    h = hash_bytes(h, &ip, sizeof ip);
    mki_prof_stack **b = &buckets[h & (STACK_BUCKETS - 1)];
    for (mki_prof_stack *s = *b; s; s = s->next)
        if (s->hash == h && s->depth == (uint32_t)n && s->ctx_path == ip &&
            memcmp(s->frames, ips, (size_t)n * sizeof *ips) == 0)
            return s;
    mki_prof_stack *s = mki_meta_alloc(sizeof *s + (size_t)n * sizeof *ips);
    if (!s)
        return NULL;
    s->hash = h;
    s->ctx_path = ip;
    s->depth = (uint32_t)n;
    memcpy(s->frames, ips, (size_t)n * sizeof *ips);
    s->next = *b;
    *b = s;
    s->all = all_stacks;
    all_stacks = s;
    return s;
}

static void fig_add(mki_prof_fig *f, const sample *r, int sign)
{
    f->count += (uint64_t)(int64_t)sign;
    f->bytes += (uint64_t)((int64_t)sign * (int64_t)r->size);
    f->est_count += sign * r->est_count;
    f->est_bytes += sign * r->est_bytes;
}

/* Copy every stack's live figures as its peak (prof_lock held). */
static void snapshot_peak(void)
{
    for (mki_prof_stack *s = all_stacks; s; s = s->all)
        s->peak = s->live;
    totals.peak = totals.live;
    peak_mark = totals.live.est_bytes;
}

/* ---- the live table ---------------------------------------------------------------------- */

static pthread_mutex_t *stripe_of(const mki_page *pg)
{
    uintptr_t h = ((uintptr_t)pg >> 4) * 0x9E3779B97F4A7C15ull;
    return &stripes[h >> STRIPE_SHIFT];
}

void mki_prof_sample(mk_ctx *ctx, void *p, size_t size)
{
    long rate = atomic_load_explicit(&rate_now, memory_order_relaxed);
    size_t sz = size ? size : 1;
    int first = !tls_rng; /* (the generator is only this function's) */
    mki_prof_left = next_interval(rate);
    if (first && rate > 1) {
        /* the thread's first count: its countdown started at 0, not at a
         * drawn interval; this allocation is a sample only if the drawn
         * interval ends inside it */
        int64_t left = mki_prof_left - (int64_t)sz;
        if (left >= 0) {
            mki_prof_left = left;
            return;
        }
        mki_prof_left = next_interval(rate);
    }
    if (tls_busy || mki_os_forking)
        return; /* the unwinder's own allocation, or inside fork */
    tls_busy = 1;
    uintptr_t ips[MAX_FRAMES];
    int n = take_stack(ips);
    double prob = rate <= 1 ? 1 : one_minus_exp_neg((double)sz / (double)rate);
    mki_page *pg = mki_segment_find(p); /* (what the free will find) */
    mki_os_lock(&prof_lock);
    sample *r = spare;
    if (r)
        spare = r->next;
    else
        r = mki_meta_alloc(sizeof *r);
    mki_prof_stack *st = r && pg ? stack_of(ips, n, path_of(ctx)) : NULL;
    if (!st) {
        totals.samples_dropped++;
        if (r) {
            r->next = spare;
            spare = r;
        }
        mki_os_unlock(&prof_lock);
        tls_busy = 0;
        return;
    }
    r->addr = p;
    r->size = size;
    r->est_count = 1 / prob;
    r->est_bytes = (double)size / prob;
    r->stack = st;
    fig_add(&st->live, r, 1);
    fig_add(&st->total, r, 1);
    fig_add(&totals.live, r, 1);
    fig_add(&totals.total, r, 1);
    if (totals.live.est_bytes > peak_mark * 1.1)
        snapshot_peak();
    mki_os_unlock(&prof_lock);
    /* on its page's list; the first one tags the page (this thread owns
     * it: it just allocated there) */
    pthread_mutex_t *m = stripe_of(pg);
    mki_os_lock(m);
    sample *head = atomic_load_explicit(&pg->samples, memory_order_relaxed);
    r->prev = NULL;
    r->next = head;
    if (head)
        head->prev = r;
    atomic_store_explicit(&pg->samples, r, memory_order_relaxed);
    uintptr_t tid = mki_page_tid(pg);
    if (tid)
        atomic_store_explicit(&pg->fast_tid, tid | MKI_TID_SAMPLED, memory_order_relaxed);
    mki_os_unlock(m);
    tls_busy = 0;
    if (atomic_load_explicit(&mki_prof_dump_asked, memory_order_relaxed))
        mki_prof_dump_due();
}

/* Sample @r leaves the figures (its record is kept for the next one). */
static void drop(sample *r)
{
    mki_os_lock(&prof_lock);
    fig_add(&r->stack->live, r, -1);
    fig_add(&totals.live, r, -1);
    r->next = spare;
    spare = r;
    mki_os_unlock(&prof_lock);
}

/* An empty list: the page's frees may take the fast path again, if the
 * caller is the thread they would be fast for (only the owner writes its
 * pages' fast_tid; another thread leaves the tag for the owner's next
 * slow free into the page). */
static void untag(mki_page *pg)
{
    uintptr_t tid = mki_page_tid(pg);
    if ((tid & MKI_TID_SAMPLED) && (tid & ~MKI_TID_SAMPLED) == mki_tid_now())
        atomic_store_explicit(&pg->fast_tid, tid & ~MKI_TID_SAMPLED,
                              memory_order_relaxed);
}

void mki_prof_unsample(mki_page *pg, const void *p)
{
    pthread_mutex_t *m = stripe_of(pg);
    mki_os_lock(m);
    sample *r = atomic_load_explicit(&pg->samples, memory_order_relaxed);
    while (r && r->addr != p)
        r = r->next;
    if (r) {
        if (r->prev)
            r->prev->next = r->next;
        else
            atomic_store_explicit(&pg->samples, r->next, memory_order_relaxed);
        if (r->next)
            r->next->prev = r->prev;
    }
    if (!atomic_load_explicit(&pg->samples, memory_order_relaxed))
        untag(pg);
    mki_os_unlock(m);
    if (r)
        drop(r);
}

void mki_prof_unsample_page(mki_page *pg)
{
    pthread_mutex_t *m = stripe_of(pg);
    mki_os_lock(m);
    sample *r = atomic_exchange_explicit(&pg->samples, NULL, memory_order_relaxed);
    untag(pg);
    mki_os_unlock(m);
    while (r) {
        sample *next = r->next;
        drop(r);
        r = next;
    }
}

void mki_prof_walk(void (*fn)(const mki_prof_stack *s, void *arg), void *arg,
                   mki_prof_totals *tot)
{
    pthread_once(&init_once, init);
    mki_os_lock(&prof_lock);
    totals.rate = atomic_load(&rate_now);
    if (tot)
        *tot = totals;
    for (mki_prof_stack *s = all_stacks; fn && s; s = s->all)
        fn(s, arg);
    mki_os_unlock(&prof_lock);
}

void mki_prof_fork(int phase)
{
    if (phase == 0) {
        for (int i = 0; i < STRIPES; i++)
            mki_os_lock(&stripes[i]);
        mki_os_lock(&prof_lock);
        return;
    }
    /* parent and child alike: the forking thread holds them (a child that
     * initialised them afresh instead left ThreadSanitizer counting them
     * held, and reporting an order inversion with the heap list's lock) */
    mki_os_unlock(&prof_lock);
    for (int i = STRIPES - 1; i >= 0; i--)
        mki_os_unlock(&stripes[i]);
}
