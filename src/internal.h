/*
 * internal.h - prototypes shared between memkit's files, grouped by the file
 * that defines them (the name says which: mki_<file-noun>_<verb>).
 * Nothing here is installed; everything is hidden from the shared library's
 * symbol table.
 */
#ifndef MKI_INTERNAL_H
#define MKI_INTERNAL_H

#include "os/os.h"
#include "page/page.h" /* includes system and sanitizer headers: outside the
                          hidden region below */
#include "types.h"

/* Everything declared from here on is internal: hidden from the shared
 * library's symbol table, and known to be so at every call site, so that
 * calls and data loads go direct instead of through the GOT. */
#pragma GCC visibility push(hidden)

/* ---- page/meta.c: bookkeeping memory ------------------------------------ */
void *mki_meta_alloc(size_t size); /* zeroed; NULL on OOM */
void mki_meta_free(void *p, size_t size);
size_t mki_meta_bytes(void);
/* fork(): 0 before (take the lock), 1 in the parent and 2 in the child
 * after (release it).  The same for the page pool in segment.c. */
void mki_meta_fork(int phase);

/* ---- page/segment.c: segments, units, pages ------------------------------ */
/*
 * Take a page of @units units (a power of two <= 64, or a multiple of 64)
 * for @ctx, naturally aligned, with its first @commit_bytes committed.
 * The descriptor comes back with seg/unit/units/start/size set, kind 0,
 * and every unit of the run mapped to it.  NULL on OOM (nothing leaks).
 * Thread-safe.
 */
mki_page *mki_segment_page_alloc(uint32_t units, size_t commit_bytes);
/* Units of the run for a page of @bytes: a power of two up to 64 (64 KiB),
 * else whole 64-unit words. */
uint32_t mki_segment_units_for(size_t bytes);
/* A page (up to 1 MiB and 64 KiB alignment) or huge segment holding one
 * chunk of @size bytes aligned to @align, kind LARGE or HUGE, owned by
 * @ctx, `end` at the end of its usable bytes.  NULL on OOM. */
mki_page *mki_segment_chunk_alloc(mk_ctx *ctx, size_t size, size_t align);
/* Grow large page @pg in place to hold a chunk of @bytes (<= 1 MiB) from
 * its start, taking the free units that follow it; 0, or -1 if they are
 * not free (nothing changed).  Thread-safe. */
int mki_segment_page_grow(mki_page *pg, size_t bytes);
/* Give a page (and its descriptor) back.  Thread-safe.  The pages of a
 * context made with MK_CTX_RELEASE_ON_RESET go back to the OS at once. */
void mki_segment_page_release(mki_page *pg);
/* The same, and its memory goes back to the OS now (its OS pages are
 * decommitted); returns the bytes decommitted. */
size_t mki_segment_page_release_now(mki_page *pg);
/* Count a huge mapping at @base as a segment memkit holds (@add 1) or no
 * longer holds (0); the checking build records it in its registry.  0, or
 * -1 when the registry cannot record it.  Thread-safe. */
int mki_segment_register(void *base, int add);
/* One purge pass (purge.c decides when): decommit, with @how
 * (MKI_OS_DONTNEED / MKI_OS_FREE), the OS pages of free units that were
 * free at the previous pass too (@force: every free unit), and give back
 * segments empty for @delay_ns (@force: all): unmapped with @unmap_empty,
 * else decommitted and kept for reuse (a few).  Sets *@pending if free
 * memory remains for a later pass, and lowers *@next_due to when it will
 * be due.  Returns the bytes purged.  Thread-safe; one pass at a time
 * (purge.c). */
size_t mki_segment_purge(int force, int how, int unmap_empty,
                         unsigned long long delay_ns, int *pending,
                         unsigned long long *next_due);
size_t mki_segment_count(void);
/* Process figures in the terms of mallinfo2 (see mki_malloc_figures). */
typedef struct mki_malloc_figures {
    size_t segment_bytes; /* committed in normal segments (headers too) */
    size_t page_bytes;    /* of those, in pages held by contexts */
    size_t huge_count;    /* chunks in a mapping of their own */
    size_t huge_bytes;    /* committed in those mappings */
    size_t huge_cached;   /* committed in freed mappings kept for reuse */
    size_t used_bytes;    /* page_bytes + huge_bytes */
} mki_malloc_figures;
void mki_segment_figures(mki_malloc_figures *f);
void mki_segment_fork(int phase); /* as mki_meta_fork */
/* Checking build: is @p inside a segment memkit holds?  Thread-safe. */
int mki_segment_owns(const void *p);

/* ---- page/huge.c: chunks in a mapping of their own ----------------------- */
/* A chunk of @size bytes aligned to @align (a power of two) in a mapping of
 * its own (from the cache when one fits); descriptor kind MKI_PAGE_HUGE,
 * start = the chunk, MKI_PF_FRESH when the memory is fresh (zero).  NULL
 * with errno ENOMEM.  Thread-safe. */
mki_page *mki_huge_alloc(size_t size, size_t align);
/* Give a huge chunk's mapping back (to the cache, or to the OS). */
void mki_huge_release(mki_page *pg);
/* Resize huge chunk @pg to @size bytes (> MKI_LARGE_MAX) in place or by
 * moving its mapping (no copy).  Returns its descriptor (it moves with the
 * mapping: unlink it from lists first), or NULL (errno ENOMEM; untouched). */
mki_page *mki_huge_resize(mki_page *pg, size_t size);
/* One purge pass over the cache (purge.c decides when): mappings cached
 * for @delay_ns (@force: all) are unmapped (@unmap_due), or keep their
 * address space and give their pages back.  Sets *@pending if a cached
 * mapping will be due later.  Returns the bytes purged. */
size_t mki_huge_purge(int force, int unmap_due, unsigned long long delay_ns,
                      int *pending, unsigned long long *next_due);
void mki_huge_figures(size_t *count, size_t *live_bytes, size_t *cache_bytes);
void mki_huge_fork(int phase); /* as mki_meta_fork */

/* ---- page/page.h (inline): owner lookup and free-list ops ---------------- */
/* (included at the top) */

/* Give back any page or huge chunk descriptor. */
MKI_INLINE void mki_page_release(mki_page *pg)
{
    if (pg->kind == MKI_PAGE_HUGE)
        mki_huge_release(pg);
    else
        mki_segment_page_release(pg);
}

/* ---- ctx/context.c: the tree and dispatch -------------------------------- */
extern const mki_kind_ops *const mki_kinds[4];
/* opts->block_size (or @def when 0) rounded up to a power of two >= 1 KiB;
 * 0 with errno EINVAL when outside [1 KiB, @max]. */
size_t mki_ctx_block_size(const mk_ctx_opts *opts, size_t def, size_t max);

/* Make thread @tid (0: none, an orphan) the owner of @ctx and its pages. */
void mki_ctx_set_owner_tid(mk_ctx *ctx, uintptr_t tid);

/* The thread that owns @ctx (read by any thread that frees). */
MKI_INLINE uintptr_t mki_ctx_owner(const mk_ctx *ctx)
{
    return atomic_load_explicit(&((mk_ctx *)ctx)->owner_tid,
                                memory_order_relaxed);
}

/* Take in the chunks other threads freed into @ctx, if there are any (the
 * owner calls it on the slow paths that take new memory). */
MKI_INLINE void mki_ctx_collect(mk_ctx *ctx)
{
    if (atomic_load_explicit(&ctx->remote, memory_order_relaxed))
        mki_kinds[ctx->kind]->collect(ctx);
}

/* ---- heap/heap.c: thread heaps and the current context ------------------- */
/* What malloc's inline path allocates from: the calling thread's current
 * context when it is a GENERAL, owned, uninstrumented one, else
 * &mki_heap_boot, whose empty class tables send every request to the slow
 * path (mki_heap_refill, mki_heap_alloc), which sets things up. */
extern _Thread_local mki_general *mki_tls_fast
    __attribute__((tls_model("initial-exec")));
extern mki_general mki_heap_boot;
/* A chunk of @n bytes for malloc, off the inline path: the slow path of
 * the calling thread's malloc context (created on first use).  NULL with
 * errno ENOMEM. */
void *mki_heap_alloc(size_t n);
/* malloc's inline path found @pg (of context @g) without a free chunk. */
void *mki_heap_refill(mki_general *g, mki_page *pg, size_t n);
/* The context malloc allocates from (created on first use), or NULL. */
mk_ctx *mki_heap_malloc_ctx(void);
/* Take in the chunks other threads freed into the heaps of exited threads
 * (up to @max of them, -1: all) and delete those that hold nothing. */
void mki_heap_sweep_orphans(int max);
/* Context @c is being deleted: forget it if the calling thread has it as
 * its current context or heap. */
void mki_heap_ctx_deleted(mk_ctx *c);

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
int mki_chunk_guard_ok(mki_page *pg, const void *p);
/* Queue chunk @p, freed by a thread that does not own @ctx, for the owner. */
void mki_chunk_remote_push(mk_ctx *ctx, void *p);

/* ---- ctx/general.c, slab.c, generation.c, bump.c: the kinds -------------- */
extern const mki_kind_ops mki_general_ops;
extern const mki_kind_ops mki_slab_ops;
extern const mki_kind_ops mki_generation_ops;
extern const mki_kind_ops mki_bump_ops;
void *mki_general_alloc_slow(mki_general *g, size_t size);
void *mki_general_refill(mki_general *g, mki_page *pg, size_t size);
/* mk_free's fast path left a non-current page of a GENERAL context empty
 * (only GENERAL pages take that path). */
void mki_general_page_empty(mki_page *pg);
void mki_general_collect(mk_ctx *ctx);
/* Secure mode (annotate.h): malloc's allocation from GENERAL context @g,
 * which the calling thread owns, without the inline paths (which read raw
 * links): a chunk of @size bytes and a guard word, 16-aligned. */
void *mki_general_alloc_secure(mki_general *g, size_t size);
/* Bytes of small pages per size class, process-wide (relaxed). */
extern _Atomic size_t mki_general_class_bytes[MKI_NCLASS];
/* A chunk of a GENERAL small page freed by a thread that does not own the
 * context (any thread; no lock). */
void mki_general_free_remote(mki_page *pg, void *p);
/* SLAB, for pools: a chunk of the slab's size; free from the owner thread. */
void *mki_slab_alloc_chunk(mki_slab *s);
void mki_slab_free_chunk(mki_page *pg, void *p);

/* ---- print.c: a line written without allocating ------------------------- */
#define MKI_LINE_MAX 256
typedef struct mki_line {
    char buf[MKI_LINE_MAX];
    size_t len;
    int stream; /* 0: one line, cut when full; fd + 1: written out to fd
                   whenever full (longer texts, e.g. JSON) */
} mki_line;
void mki_line_str(mki_line *l, const char *s); /* NULL prints nothing */
void mki_line_ptr(mki_line *l, const void *p); /* 0x... */
void mki_line_num(mki_line *l, long long v);   /* decimal */
/* A JSON string literal: @s quoted, with ", \ and control characters
 * escaped (NULL: null). */
void mki_line_json_str(mki_line *l, const char *s);
/* Write the line and a newline to @fd (write(2), retried), then empty it. */
void mki_line_write(mki_line *l, int fd);
/* Stream mode: write out what is buffered (no newline). */
void mki_line_flush(mki_line *l);

/* ---- check/error.c: reporting ------------------------------------------- */
/* Report a detected error: "memkit: <what>: pointer <p> (context <name>)".
 * Never allocates.  Aborts unless a handler returns or errors are silenced. */
void mki_error_report(const char *what, const void *p, const mk_ctx *ctx);
/* Report chunks left at delete: "memkit: <noun> <name>: N <things> (B bytes)
 * leaked".  Aborts only in the checking build (same rules as above). */
void mki_error_leak(const char *noun, const char *name, const char *things,
                    size_t n, size_t bytes);
/* Release-build reports (glibc's words): "memkit: FN(): invalid pointer P"
 * for a pointer outside memkit's segments or in no chunk, and "memkit:
 * double free of P (context NAME)".  Abort as mki_error_report does. */
void mki_error_invalid(const char *fn, const void *p);
void mki_error_double_free(const void *p, const mk_ctx *ctx);
/* "memkit: FN(): invalid pointer P (not the start of a chunk of context
 * NAME)", or with @freed "(a freed chunk of context NAME)": an address in
 * memkit's memory that is no live chunk's start (realloc of a freed chunk,
 * free of an interior pointer). */
void mki_error_invalid_in(const char *fn, const void *p, const mk_ctx *ctx,
                          int freed);
/* Report a chunk freed into the wrong pool. */
void mki_error_wrong_pool(const void *p, const char *owner_noun,
                          const char *owner, const char *named);

/* ---- check/instrument.c: the instrumented path --------------------------- */
#define MKI_INSTR_TAIL 9u /* bytes an instrumented chunk adds to a request */
int mki_instr_active(void);          /* should new contexts be instrumented */
void mki_instr_ctx_new(mk_ctx *ctx);
void mki_instr_reset(mk_ctx *ctx, int deleting); /* before reset/delete */
void *mki_instr_alloc(mk_ctx *ctx, size_t size, size_t align);
void mki_instr_free(mki_page *pg, void *p);    /* any thread */
void *mki_instr_realloc(mki_page *pg, void *p, size_t size);
size_t mki_instr_usable(mki_page *pg, const void *p);
int mki_instr_page_new(mki_page *pg);    /* a kind made a page: 0 or -1 */
void mki_instr_page_reset(mki_page *pg); /* a reset keeps a page */
void mki_instr_page_release(mki_page *pg);
int mki_instr_stats(const mk_ctx *ctx, mk_stats *out);
void mki_instr_page_each_live(mki_page *pg,
                              void (*fn)(mki_page *, void *, void *), void *arg);
/* The same as a page walker's callback: @arg is a mki_live_walk. */
typedef struct mki_live_walk {
    void (*fn)(mki_page *, void *, void *);
    void *arg;
} mki_live_walk;
void mki_instr_walk_page(mki_page *pg, void *walk);

/* ---- check/check.c: the checking build's validation ---------------------- */
/* Returns the page of a pointer memkit returned, or reports and returns
 * NULL.  Only called when MK_CONFIG_CHECK. */
mki_page *mki_check_pointer(const void *p);

/* ---- purge.c: when memory goes back ---------------------------------------- */
enum mki_purge_mode {
    MKI_PURGE_OFF = 0,
    MKI_PURGE_DONTNEED = 1,
    MKI_PURGE_FREE = 2,
    MKI_PURGE_UNMAP = 3
};
/* Something became free (a page, a segment, a cached huge mapping):
 * schedule a pass, or (delay 0) purge at once.  Call it with no lock held. */
void mki_purge_note(void);
/* The background thread starts at a safe point (see purge.c): the
 * allocation slow paths call this first, before they touch anything. */
void mki_purge_safe_point_slow(void);
extern _Atomic int mki_purge_want;
MKI_INLINE void mki_purge_safe_point(void)
{
    if (MKI_UNLIKELY(atomic_load_explicit(&mki_purge_want, memory_order_relaxed)))
        mki_purge_safe_point_slow();
}
void mki_purge_fork(int phase); /* as mki_meta_fork */
/* Chunks were freed into a context that no thread owns (a heap whose
 * thread exited), or such a heap emptied: have the collect hook run soon,
 * on the background thread.  Returns 1 if it will; 0 if no thread runs
 * (the next thread exit or mk_trim will collect; one is wanted for the
 * next safe point).  Cheap when a run is already wanted. */
int mki_purge_collect(void);
/* The hook mki_purge_collect runs, with @force 0, and mk_trim, with @force
 * 1 (bound once at the top: heap.c).  It returns 1 when it should run
 * again later (a heap it waits for: a thread still exiting). */
void mki_purge_set_collect(int (*fn)(int force));
void mki_pool_fork(int phase);  /* as mki_meta_fork: the shard lock */
/* memkit took more address space from the OS (cheap: a flag). */
void mki_purge_grew(void);
/* mk_option_set changed the purge mode or delay: wake the thread. */
void mki_purge_options_changed(void);
void mki_purge_figures(size_t *bytes, size_t *passes);

/* ---- stats.c --------------------------------------------------------------- */
/* mk_ctx_stats, except that with @owned_only the chunks other threads freed
 * are taken in only for the contexts the calling thread owns (typed pools:
 * other threads' slabs are read as they are, never collected under their
 * owner's feet). */
int mki_stats_tree(const mk_ctx *ctx, mk_stats *out, int recurse,
                   int owned_only);
#define mki_stats_malloc_figures mki_segment_figures
/* Print the process figures (malloc_stats, MEMKIT_STATS) to @fd, without
 * allocating: as "memkit: name value" lines, or as one JSON object. */
void mki_stats_print_process(int fd);
void mki_stats_json_process(int fd);

/* ---- options.c ----------------------------------------------------------- */
enum mki_option {
    MKI_OPT_PURGE_DELAY_MS = 0, /* -1 never, 0 at once, else delay */
    MKI_OPT_PURGE,              /* enum mki_purge_mode */
    MKI_OPT_PURGE_THREAD,       /* passes on a background thread */
    MKI_OPT_VALGRIND,           /* annotate for Memcheck when under it */
    MKI_OPT_SECURE,             /* secure mode (fixed at start) */
    MKI_OPT_VERBOSE,            /* print the options at start */
    MKI_OPT_STATS,              /* print the process figures at exit */
    MKI_OPT_ARENA_MB,           /* the arena of normal segments (fixed at
                                   start) */
    MKI_OPT_COUNT
};
extern _Atomic long mki_options[MKI_OPT_COUNT];
void mki_options_init(void); /* reads MEMKIT_* once; idempotent */
MKI_INLINE long mki_option(enum mki_option o)
{
    return atomic_load_explicit(&mki_options[o], memory_order_relaxed);
}

#pragma GCC visibility pop

#endif /* MKI_INTERNAL_H */
