/* SPDX-License-Identifier: MIT */
/*
 * ctx.h - the context layer: the part every kind of context shares (the
 * tree, the owner, the method table every kind implements), the dispatcher
 * (chunk.c) and the tree's own code (context.c).  Each kind's struct lives
 * in its own header (general.h, slab.h, generation.h, bump.h).  This layer
 * uses the page layer below it; what it needs from above (the thread's
 * current context, forgetting a deleted one, the instrumented wrapper)
 * comes through hooks bound at the top (bind.c).
 */
#ifndef MKI_CTX_H
#define MKI_CTX_H

#include "../page/page.h"
#include "../page/sizeclass.h"

#pragma GCC visibility push(hidden)

/* ---- contexts ----------------------------------------------------------- */
typedef struct mki_callback {
    struct mki_callback *next;
    void (*fn)(void *);
    void *arg;
} mki_callback;

/*
 * The part every kind shares.  The kind-specific struct embeds it first;
 * `fast_kind` and the owner sit next to the fields the fast path reads.
 *
 * An *instrumented* context (checking build, AddressSanitizer build, or a
 * process running under Valgrind) has fast_kind = MKI_KIND_SLOW and
 * fast_tid = 0, so no call on it ever takes a fast path, and its `ops` is
 * the decorator's wrapper table (check/instrument.c), through which every
 * allocation and free goes.  The release fast paths are unchanged by the
 * existence of the instrumented mode.
 */
#define MKI_KIND_SLOW 0xffu
/* A context of secure mode (MEMKIT_SECURE): not instrumented, but no call
 * on it takes an inline fast path (its pages' fast_tid is tagged), so that
 * every free-list link goes through the encoded accessors (page/page.h)
 * and every free through the checked path. */
#define MKI_KIND_SECURE 0xfeu
/* ... and its fast_tid is its owner's identity with this bit: never a
 * thread's identity (a counter, os.h), so no inline path takes it, while
 * secure mode's own free tells its owner's pages with one comparison. */
#define MKI_TID_SECURE ((uintptr_t)1 << 63)
/* A context of a profiled process (MEMKIT_PROFILE, prof/): as its kind in
 * everything but the inline allocation paths, which it never takes, so
 * that every allocation passes the sampler's countdown (chunk.c,
 * heap.c).  Frees keep their fast path: only a page holding a sampled
 * chunk sends its frees to the slow path (MKI_TID_SAMPLED, page.h).  The
 * fast paths of contexts that are not profiled are unchanged. */
#define MKI_KIND_PROF 0xfdu
/* A deleted context's record (ctx/record.c): no fast path takes it, and
 * its `ops` is a table whose every entry reports the use, so that a stale
 * handle is reported where it is used, in every build, while the record
 * waits to be reused. */
#define MKI_KIND_DEAD 0xfcu

/* The checking build's fields of a context (ctx/record.c): the thread
 * inside it now (its kernel thread id, 0: none), and the list of live
 * contexts (for the report at exit).  Absent from the release build. */
typedef struct mki_ctx_check {
    _Atomic long inside;
    mk_ctx *live_next, *live_prev;
} mki_ctx_check;
/* mk_ctx.flags beside the public MK_CTX_* flags: a context memkit made for
 * itself (a thread heap), left out of the report of live contexts. */
#define MKI_CTX_OWN 0x8000u

struct mk_ctx {
    uint8_t kind;         /* mk_kind */
    uint8_t fast_kind;    /* kind, or MKI_KIND_SLOW, _SECURE, _PROF, _DEAD */
    uint16_t flags;       /* MK_CTX_* */
    _Atomic uintptr_t owner_tid; /* owning thread (any thread reads it when
                                    it frees: relaxed atomic) */
    uintptr_t fast_tid;   /* what pages copy into their fast_tid: the owner,
                             or 0 when instrumented */
    const char *name;
    mk_ctx *parent, *first_child, *next_sibling, *prev_sibling;
    mki_callback *callbacks;
    _Atomic(void *) remote; /* chunks freed by other threads, to collect */
    /* What the dispatcher calls: the kind's table (mki_kinds[kind]), or
     * the checking layer's wrapper around it (instrumented contexts). */
    const struct mki_kind_ops *ops;
    /* limit.c: the bytes of the pages this context holds; its limit (0:
     * none, mk_ctx_set_limit), and while it has one, the page bytes of its
     * whole subtree and the pages refused (atomic: other threads' contexts
     * in the subtree charge it too). */
    _Atomic size_t held;
    size_t limit;
    _Atomic size_t charged, refused;
    /* A context no thread owns (owner 0: a heap whose thread exited): how
     * many more frees into it before the layer above looks at it again
     * (mki_ctx_up.orphan_freed; heap.c sets it). */
    _Atomic long orphan_left;
#if MK_CONFIG_CHECK
    mki_ctx_check check;
#endif
};

/* @c's checking fields; NULL in the release build (so that code using
 * them compiles in both, behind `if (MK_CONFIG_CHECK)`). */
MKI_INLINE mki_ctx_check *mki_ctx_check_of(mk_ctx *c)
{
#if MK_CONFIG_CHECK
    return &c->check;
#else
    (void)c;
    return NULL;
#endif
}

/* A context's name for a report (base/error.c takes names, not contexts;
 * NULL: no context). */
MKI_INLINE const char *mki_ctx_name(const mk_ctx *c) { return c ? c->name : NULL; }

/* ---- the method table: one entry per kind ------------------------------- */
typedef struct mki_kind_ops {
    const char *name;
    size_t ctx_size;
    int no_free;      /* mk_free is a no-op for this kind (BUMP) */
    int (*init)(mk_ctx *ctx, const mk_ctx_opts *opts); /* 0 or -1 (errno) */
    void (*destroy)(mk_ctx *ctx);                       /* give all back */
    void *(*alloc)(mk_ctx *ctx, size_t size);
    void *(*alloc_aligned)(mk_ctx *ctx, size_t size, size_t align);
    void (*free)(mki_page *pg, void *p); /* owner thread, off the fast path */
    void (*collect)(mk_ctx *ctx);        /* take in chunks of `remote` */
    void *(*realloc)(mki_page *pg, void *p, size_t size);
    size_t (*usable_size)(const mki_page *pg, const void *p);
    void (*reset)(mk_ctx *ctx, int keep_one);
    void (*stats)(const mk_ctx *ctx, mk_stats *out);
    void (*set_owner)(mk_ctx *ctx, uintptr_t tid);
    /* mk_ctx_trim: release (and decommit) every block holding no live
     * chunk; returns the bytes decommitted.  NULL: nothing to give. */
    size_t (*trim)(mk_ctx *ctx);
    /* Instrumented contexts: is chunk @p live (1), freed (0) or not a chunk
     * (-1); NULL: the instrument layer's bitmap knows.  And call @fn on
     * every live chunk. */
    int (*is_live)(const mki_page *pg, const void *p);
    void (*each_live)(mk_ctx *ctx, void (*fn)(mki_page *, void *, void *),
                      void *arg);
    /* A decorator's free: the whole of mk_free for a chunk of this
     * context, from any thread, validation included (misuse reported as
     * one of function @fn).  NULL for the kinds:
     * the dispatcher validates, queues other threads' frees, and calls
     * `free` on the owner's. */
    void (*free_any)(mki_page *pg, void *p, const char *fn);
} mki_kind_ops;

/* The bytes the decorator adds to each request of an instrumented context
 * (a sentinel and the requested size; check/instrument.c): SLAB sizes its
 * slots for them. */
#define MKI_INSTR_TAIL 9u

/* ---- what the context layer asks of the layers above ------------------------
 * Bound once at the top (bind.c) by a constant initialiser. */
typedef struct mki_live_walk { /* a page walker's argument (walk_page) */
    void (*fn)(mki_page *, void *, void *);
    void *arg;
} mki_live_walk;
struct mki_ctx_up {
    /* The calling thread's current context (heap/: mk_ctx_current). */
    mk_ctx *(*current)(void);
    /* @ctx is being deleted: forget it as a thread's current or heap. */
    void (*deleted)(mk_ctx *ctx);
    /* The decorator (check/): should a new context be instrumented; the
     * wrapper table such a context calls through; and the per-page hooks
     * the kinds call on an instrumented context's pages: a page was made
     * (0, or -1 on OOM), a reset kept a page, call w->fn on each of a
     * page's live chunks. */
    int (*instrumented)(void);
    const mki_kind_ops *wrapper;
    int (*page_new)(mki_page *pg);
    void (*page_reset)(mki_page *pg);
    void (*walk_page)(mki_page *pg, void *walk);
    /* The heap profile (prof/): should a new context be profiled; chunk @p
     * of @size bytes just allocated in @ctx is a sample (the countdown
     * below crossed zero: it draws the next interval, and records @p);
     * sampled chunk @p of @pg is freed or replaced (any thread; a chunk
     * that is not a sample is ignored); and the sampled chunks of @pg die
     * without a free (a reset keeps the page). */
    int (*profiled)(void);
    void (*sample)(mk_ctx *ctx, void *p, size_t size);
    void (*unsample)(mki_page *pg, const void *p);
    void (*unsample_page)(mki_page *pg);
    /* A free into @ctx, which no thread owns, brought its orphan_left
     * countdown to zero (any thread, no lock held): the heap layer looks
     * whether the heap emptied (heap/heap.c). */
    void (*orphan_freed)(mk_ctx *ctx);
};
extern const struct mki_ctx_up mki_ctx_up;

/* ---- the sampler's countdown -------------------------------------------------
 * The bytes the calling thread may still allocate in profiled contexts
 * before the next sample (prof/sample.c draws each interval, geometric
 * with the mean MEMKIT_PROFILE_RATE).  Only profiled paths read it. */
extern _Thread_local int64_t mki_prof_left __attribute__((tls_model("initial-exec")));
/* Whether the calling thread's frees prefetch ahead (general.h, slab.h: the
 * chunk four on; generation.h: the header sixteen on): 1 while the context
 * that last took a page on this thread holds MKI_PREFETCH_FROM bytes or
 * more (mki_ctx_claim_page sets it, where the page is charged and the
 * size known).  A program that frees in the order it allocated waits for
 * each chunk's double-free key, and over a live set larger than the caches
 * the prefetch hides that wait; over a smaller one the line is near anyway
 * and the prefetch only costs (bench/ab.sh, 7 runs: W1M's cells up to
 * 4 MiB live 8 - 15% faster without it, where its 256 - 512 B x 64 MiB
 * cells ran up to 50% slower; producer/consumer with one thread 11 - 15%
 * faster; docs/DESIGN.md, "The fast paths").  Each free tests it itself,
 * before it computes the address: tested inside mki_page_prefetch (page.h)
 * the flag would be one test instead of three, but the compiler then loads
 * the chunk size ahead of the test, on every free (bench/ir.sh: 69
 * instructions a malloc/free pair against 68). */
#define MKI_PREFETCH_FROM ((size_t)16 << 20)
extern _Thread_local unsigned char mki_prefetch_frees __attribute__((tls_model("initial-exec")));
/* Count an allocation of @size bytes (0 counts 1): 1 when it is a sample. */
MKI_INLINE int mki_prof_tick(size_t size)
{
    int64_t left = mki_prof_left - (int64_t)(size ? size : 1);
    mki_prof_left = left;
    return MKI_UNLIKELY(left < 0);
}
/* A chunk @p just allocated in profiled context @ctx: counted, and
 * recorded when it is a sample.  Returns @p. */
MKI_INLINE void *mki_prof_count(mk_ctx *ctx, void *p, size_t size)
{
    if (p && mki_prof_tick(size))
        mki_ctx_up.sample(ctx, p, size);
    return p;
}
/* Chunk @p of @pg is freed or replaced: forget its sample, if it is one. */
MKI_INLINE void mki_prof_forget(mki_page *pg, const void *p)
{
    if (MKI_UNLIKELY(atomic_load_explicit(&pg->samples, memory_order_relaxed) != NULL))
        mki_ctx_up.unsample(pg, p);
}

/* ---- ctx/general.c, slab.c, generation.c, bump.c: the kinds -------------- */
extern const mki_kind_ops mki_general_ops;
extern const mki_kind_ops mki_slab_ops;
extern const mki_kind_ops mki_generation_ops;
extern const mki_kind_ops mki_bump_ops;
/* ---- ctx/context.c: the tree and dispatch -------------------------------- */
/* A page (or a large/huge chunk's page) now belongs to @ctx: record the
 * owner, and what the page layer must know of it (MKI_PF_RELEASE); on an
 * instrumented context, the decorator's page hook.  0, or -1 on OOM (the
 * caller gives the page back). */
int mki_ctx_charge_page(mk_ctx *ctx, mki_page *pg);
MKI_INLINE int mki_ctx_claim_page(mk_ctx *ctx, mki_page *pg)
{
    pg->ctx = ctx;
    if (ctx->flags & MK_CTX_RELEASE_ON_RESET)
        pg->flags |= MKI_PF_RELEASE;
    if (mki_ctx_charge_page(ctx, pg) != 0) /* a limit refused it */
        return -1;
    mki_prefetch_frees = atomic_load_explicit(&ctx->held, memory_order_relaxed) >=
                         MKI_PREFETCH_FROM;
    if (ctx->fast_kind == MKI_KIND_SLOW)
        return mki_ctx_up.page_new(pg);
    return 0;
}
/* A page kept by a reset: the decorator and the profile forget its
 * chunks. */
MKI_INLINE void mki_ctx_page_reset(mk_ctx *ctx, mki_page *pg)
{
    if (MKI_UNLIKELY(atomic_load_explicit(&pg->samples, memory_order_relaxed) != NULL))
        mki_ctx_up.unsample_page(pg); /* its chunks die */
    if (ctx->fast_kind == MKI_KIND_SLOW)
        mki_ctx_up.page_reset(pg);
}
/* A page or huge mapping holding one chunk (mki_segment_chunk_alloc),
 * claimed by @ctx; NULL with ENOMEM (out of memory, or a limit). */
mki_page *mki_ctx_chunk_page(mk_ctx *ctx, size_t size, size_t align);

/* ---- ctx/limit.c: what pages cost the tree --------------------------------- */
/* (mki_ctx_charge_page above: charge a new page, or refuse it.) */
/* May a page of @ctx grow in place by @bytes?  1, or 0 (ENOMEM; a refusal
 * counted if @count: the caller gives up rather than trying a new page)
 * when a limit would be passed. */
int mki_ctx_may_grow(mk_ctx *ctx, size_t bytes, int count);
/* Has @ctx or one of its ancestors a limit? */
int mki_ctx_limited(const mk_ctx *ctx);
/* @pg's size changed in place (a resize): charge the difference. */
void mki_ctx_recharge(mki_page *pg);
/* The page layer gives @pg back (mki_page_up.released): uncharge it. */
void mki_ctx_page_released(mki_page *pg);
/* Move the charges of @ctx's subtree for mk_ctx_set_parent: 0, or -1 with
 * ENOMEM when an ancestor it would gain has no room (nothing changed). */
int mki_ctx_move_charges(mk_ctx *ctx, mk_ctx *new_parent);
extern const mki_kind_ops *const mki_kinds[4];
/* opts->block_size (or @def when 0) rounded up to a power of two >= 1 KiB;
 * 0 with errno EINVAL when outside [1 KiB, @max]. */
size_t mki_ctx_block_size(const mk_ctx_opts *opts, size_t def, size_t max);

/* The profile was switched on (1) or off (0) at run time: context @ctx,
 * if the calling thread owns it and its kind may be profiled, starts or
 * stops taking the profiled paths (MKI_KIND_PROF). */
void mki_ctx_set_profiled(mk_ctx *ctx, int on);
/* Make thread @tid (0: none, an orphan) the owner of @ctx and its pages. */
void mki_ctx_set_owner_tid(mk_ctx *ctx, uintptr_t tid);

/* The thread that owns @ctx (read by any thread that frees). */
MKI_INLINE uintptr_t mki_ctx_owner(const mk_ctx *ctx)
{
    return atomic_load_explicit(&((mk_ctx *)ctx)->owner_tid,
                                memory_order_relaxed);
}

/* The pre-order successor of @c within the subtree rooted at @root (NULL
 * after the last): `for (c = root; c; c = mki_ctx_next_in(c, root))`
 * visits the whole subtree, without recursion. */
MKI_INLINE mk_ctx *mki_ctx_next_in(const mk_ctx *c, const mk_ctx *root)
{
    if (c->first_child)
        return c->first_child;
    for (; c != root; c = c->parent)
        if (c->next_sibling)
            return c->next_sibling;
    return NULL;
}

/* Is @a @c itself or one of @c's ancestors? */
MKI_INLINE int mki_ctx_above(const mk_ctx *a, const mk_ctx *c)
{
    for (; c; c = c->parent)
        if (c == a)
            return 1;
    return 0;
}

/* Take in the chunks other threads freed into @ctx, if there are any (the
 * owner calls it on the slow paths that take new memory). */
MKI_INLINE void mki_ctx_collect(mk_ctx *ctx)
{
    if (atomic_load_explicit(&ctx->remote, memory_order_relaxed))
        mki_kinds[ctx->kind]->collect(ctx);
}

/* ---- ctx/record.c: context records, their death and their use ---------------- */
/* A zeroed record for a context of @kind (a deleted one of the same kind
 * when one may be reused, else new bookkeeping); NULL with ENOMEM. */
mk_ctx *mki_ctx_record_new(mk_kind kind);
/* Give back the record of @c, whose kind has destroyed it: it is poisoned
 * (MKI_KIND_DEAD, its name copied into it) and waits to be reused. */
void mki_ctx_record_free(mk_ctx *c);
/* A record that mk_ctx_new could not initialise: back at once, unpoisoned. */
void mki_ctx_record_abandon(mk_ctx *c);
/* Report a use of deleted context @c by function @fn. */
MKI_COLD void mki_ctx_report_dead(const mk_ctx *c, const char *fn);
/* The checking build's half of mki_ctx_enter (below). */
int mki_ctx_enter_checked(mk_ctx *c, const char *fn);
/* The calling thread's kernel thread id (checking build; cached). */
long mki_ctx_self(void);
/* The record lists' part of the fork handlers (as mki_meta_fork). */
void mki_ctx_fork(int phase);

/* Is @c a deleted context's record?  Reported as a use by @fn if so. */
MKI_INLINE int mki_ctx_dead(const mk_ctx *c, const char *fn)
{
    if (MKI_LIKELY(c->fast_kind != MKI_KIND_DEAD))
        return 0;
    mki_ctx_report_dead(c, fn);
    return 1;
}

/*
 * A public operation @fn on @c begins (the calling thread enters @c).
 * Every build: a deleted context is reported, and 0 returned (the caller
 * abandons the operation).  The checking build also marks @c as used by
 * the calling thread until mki_ctx_leave, and reports a second thread that
 * enters meanwhile ("context "X" used by thread A while thread B is inside
 * it"), 0.  Otherwise non-zero: pass it to mki_ctx_leave.
 */
MKI_INLINE int mki_ctx_enter(mk_ctx *c, const char *fn)
{
    if (mki_ctx_dead(c, fn))
        return 0;
    return MK_CONFIG_CHECK ? mki_ctx_enter_checked(c, fn) : 2;
}
/* The operation that entered @c (@how, from mki_ctx_enter) is done: the
 * outermost one clears the mark. */
MKI_INLINE void mki_ctx_leave(mk_ctx *c, int how)
{
    mki_ctx_check *k = mki_ctx_check_of(c);
    if (MK_CONFIG_CHECK && how == 1 && c->fast_kind != MKI_KIND_DEAD)
        atomic_store_explicit(&k->inside, 0, memory_order_release);
}

/* mk_stats.bytes_resident of a page or block of @size bytes whose first
 * @n bytes chunks have reached: whole OS pages, at most @size.  A small
 * page of the checking build is filled whole when it is made (a fill
 * that tells writes to freed memory): all of it, there (@filled). */
MKI_INLINE size_t mki_ctx_reached(size_t n, size_t size, int filled)
{
    size_t r = (n + MKI_OS_PAGE - 1) & ~(size_t)(MKI_OS_PAGE - 1);
    return filled || r > size ? size : r;
}

/* ---- ctx/tree_stats.c: the figures of contexts ------------------------------ */
/* mk_ctx_stats, except that with @owned_only the chunks other threads freed
 * are taken in only for the contexts the calling thread owns (typed pools:
 * other threads' slabs are read as they are, never collected under their
 * owner's feet). */
int mki_ctx_stats_tree(const mk_ctx *ctx, mk_stats *out, int recurse,
                       int owned_only);
/* The figures of @ctx alone, after taking in other threads' frees. */
void mki_ctx_stats_one(const mk_ctx *ctx, mk_stats *out);
void mki_ctx_stats_add(mk_stats *to, const mk_stats *from);

/* ---- ctx/chunk.c: the chunk API ------------------------------------------- */
/* Are the first @n bytes of chunk @p known to be zero (memory fresh from
 * the OS, which calloc and mk_alloc_zero need not clear)? */
int mki_chunk_is_zero(const void *p, size_t n);
/* The context of live chunk @p, validated as mk_ctx_of validates it but
 * reported under the name of function @fn (realloc); NULL if reported. */
mk_ctx *mki_chunk_ctx(const void *p, const char *fn);
/* Secure mode: are the guard words around chunk @p of @pg intact (page.h;
 * GENERATION: the next chunk's header)?  Reports the chunk written past
 * its end and returns 0 if not. */
int mki_chunk_guard_ok(mki_page *pg, const void *p, const char *fn);
/* The checking build's mk_free, for function @fn (free, operator delete):
 * validate @p first (page/validate.c), then free it. */
void mki_chunk_free_named(void *p, const char *fn);
/* mk_usable_size, a misuse reported for function @fn. */
size_t mki_chunk_usable_size(const void *p, const char *fn);
/* Queue chunk @p, freed by a thread that does not own @ctx, for the owner. */
void mki_chunk_remote_push(mk_ctx *ctx, void *p);

#pragma GCC visibility pop

#endif /* MKI_CTX_H */
