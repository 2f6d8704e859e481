/* SPDX-License-Identifier: MIT */
/*
 * memkit.h - the whole public API of memkit, a C11 memory-management library.
 *
 * memkit hands out memory from *contexts*: hierarchical regions in the style
 * of PostgreSQL's memory contexts and talloc.  Allocate into a context, free
 * one chunk from its pointer alone, or reset/delete the context and with it
 * every chunk and every descendant context, whatever was leaked inside.
 *
 *     mk_ctx *query = mk_ctx_new(NULL, "query", MK_GENERAL, NULL);
 *     char *row = mk_alloc(query, 200);       // one chunk
 *     mk_free(row);                           // owner found from the pointer
 *     mk_ctx_reset(query);                    // everything else, at once
 *     mk_ctx_delete(query);
 *
 * Thread rules (they hold for every function below unless it says otherwise):
 *  - A context is allocated from, reset and deleted by one thread at a time.
 *    The thread that creates a context owns it; mk_ctx_set_owner() hands it
 *    to another thread.  Sharing a context between threads without handing it
 *    over needs the caller's lock around every call that names the context,
 *    including mk_free() of its chunks by the owner thread.
 *  - A chunk may be freed (mk_free) by any thread.  A free from a thread that
 *    does not own the chunk's context is queued on an atomic list that the
 *    owner collects; it never blocks the owner.
 *  - The checking build (libmemkit-check) reports a second thread that
 *    enters a context while another is inside it, "memkit: mk_alloc():
 *    context "NAME" used by thread A while thread B is inside it (...)"
 *    (kernel thread ids), and an mk_ctx_switch() to a context another
 *    thread owns.  The release build does not look: such a race corrupts
 *    the context.
 *
 * Errors: a call that cannot do what it is asked returns NULL (or -1, or
 * 0) with errno set, and leaves everything usable: out of memory, a bad
 * argument (EINVAL; with MEMKIT_VERBOSE=1 memkit also prints why on
 * stderr, e.g. "memkit: mk_ctx_new(): fails with EINVAL: MK_SLAB needs
 * mk_ctx_opts.chunk_size ...").  A *misuse* that memkit detects is
 * different: it is reported as one line and the program aborts, in every
 * build, the release library included, through a replaceable handler
 * (mk_set_error_handler; with a handler that returns, the faulty call is
 * abandoned and returns as on failure):
 *  - a pointer that is not the start of a live chunk, handed to mk_free,
 *    mk_realloc, mk_usable_size, mk_ctx_of or mk_pool_free (a double free,
 *    an interior pointer, a pointer memkit never returned);
 *  - a context used after mk_ctx_delete (its handle is stale), as long as
 *    no new context has taken its record (see mk_ctx_delete);
 *  - in MEMKIT_SECURE modes, a write past a chunk found at free.
 * The checking build also reports, and aborts on, writes past the
 * requested size, writes to freed memory, frees into the wrong pool, frees
 * and reallocs of BUMP chunks, two threads in one context, and chunks left
 * at the delete of a MK_CTX_REPORT_LEAKS context or a pool (which the
 * release build reports without aborting).  What never aborts: mk_owns()
 * answers whether a pointer is a live chunk of memkit's, for any pointer;
 * mk_option_get and mk_option_set answer -1 for what they refuse; every
 * call given a NULL context answers as below.
 *
 * NULL contexts: a NULL context is no context, with one rule for every
 * function that takes one.  A call that would put something in it fails:
 * mk_alloc, mk_alloc_zero, mk_alloc_aligned, mk_alloc_array, mk_strdup
 * return NULL and mk_ctx_on_reset, mk_ctx_set_parent and mk_ctx_set_limit
 * -1, with errno EINVAL.  A call that
 * ends, empties or hands over a context does nothing, as free(NULL) does:
 * mk_ctx_delete, mk_ctx_reset, mk_ctx_trim (0), mk_ctx_set_owner.  A query
 * answers for nothing: mk_ctx_stats and mk_ctx_stats_json return -1
 * (EINVAL), mk_ctx_stats_print prints nothing, mk_ctx_name and
 * mk_ctx_parent return NULL, mk_ctx_kind returns (mk_kind)-1, mk_ctx_limit
 * 0.  Three
 * functions give NULL a meaning of its own: the parent of mk_ctx_new and
 * of mk_ctx_set_parent (a top-level context) and mk_ctx_switch (the
 * thread's heap).
 *
 * Alignment: a chunk of mk_alloc() is aligned to 16 bytes, except that a
 * request of 8 bytes or less may be aligned to 8 only, and a request of
 * 17..24 bytes is aligned to 8 (an object whose size is not a multiple of
 * 16 cannot need 16-byte alignment; this is what lets a 24-byte object cost
 * 24 bytes).  mk_alloc_aligned() gives any power of two.  MK_SLAB is the
 * exception: every chunk of a slab has the slab's one alignment
 * (mk_ctx_opts.chunk_align), whatever the size asked for.  The malloc
 * drop-in (libmemkit-malloc) aligns as glibc does: every result of malloc,
 * calloc, realloc and operator new is 16-aligned, in every context malloc
 * allocates from (its 17..24-byte requests take 32 bytes).
 */
#ifndef MEMKIT_H
#define MEMKIT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header; MK_VERSION is the same as one number, and
 * mk_version() gives the library's.  MK_ABI_VERSION is the number of the
 * libraries' soname (libmemkit.so.MK_ABI_VERSION): it changes whenever a
 * struct this header exposes (mk_pool_front, mk_stats, mk_ctx_opts,
 * mk_process_figures), an inline function or a function's signature
 * changes.  Pool creation checks that the header a program was compiled
 * with matches the library (mk_pool_new_abi).  CHANGELOG.md states the
 * policy. */
#define MK_VERSION_MAJOR 0
#define MK_VERSION_MINOR 2
#define MK_VERSION_PATCH 0
#define MK_VERSION_STRING "0.2.0"
#define MK_VERSION                                                            \
    (MK_VERSION_MAJOR * 10000 + MK_VERSION_MINOR * 100 + MK_VERSION_PATCH)
#define MK_ABI_VERSION 0

/* MK_MALLOC_LIKE: the result is a new chunk that aliases nothing.  It
 * does not warn when the result is ignored: a chunk belongs to its context
 * and goes with its reset, so dropping one is not always a bug, and a
 * deliberate `(void)mk_strdup(...)` must compile quietly.  MK_MUST_USE
 * marks the calls whose result it is always a bug to ignore (mk_realloc:
 * the chunk may have moved). */
#if defined(__GNUC__) || defined(__clang__)
#define MK_API __attribute__((visibility("default")))
#define MK_MALLOC_LIKE __attribute__((malloc))
#define MK_MUST_USE __attribute__((warn_unused_result))
#else
#define MK_API
#define MK_MALLOC_LIKE
#define MK_MUST_USE
#endif
/* MK_UNUSED_: a function MK_POOL_DECLARE generates, which a program may
 * leave unused without a warning (GNU C and clang warn about an unused
 * static inline function defined in the file being compiled). */
#if defined(__GNUC__) || defined(__clang__)
#define MK_UNUSED_ __attribute__((unused))
#else
#define MK_UNUSED_
#endif

/* ------------------------------------------------------------------------ */
/* Contexts                                                                  */
/* ------------------------------------------------------------------------ */

/** An opaque memory context. */
typedef struct mk_ctx mk_ctx;

/** The four kinds of context; every kind has the same interface. */
typedef enum mk_kind {
    MK_GENERAL = 0,    /**< any size, individual free and realloc */
    MK_SLAB = 1,       /**< one fixed chunk size, no per-chunk header
                            (chunks below 16 bytes take 16) */
    MK_GENERATION = 2, /**< any size, blocks return when all their chunks die */
    MK_BUMP = 3        /**< any size, no individual free, fastest */
} mk_kind;

/** Flags for mk_ctx_opts.flags. */
/**
 * Report chunks still live when the context is deleted, as one line
 * "memkit: mk_ctx_delete(): context "NAME": N chunks (B bytes) leaked"
 * (mk_ctx_reset() when a reset deletes it; stderr or the error handler;
 * the checking build then aborts as for any detected error).
 * Ignored for MK_BUMP, whose chunks are never freed one by one.  In the
 * checking build a context with this flag that is never deleted is
 * reported at exit, on stderr: "memkit: at exit: context "NAME" (general)
 * never deleted: N chunks (B bytes)" (MEMKIT_REPORT_CONTEXTS: off,
 * flagged, the default, or all for every context; docs/OPTIONS.md).
 */
#define MK_CTX_REPORT_LEAKS 0x1u
/**
 * The context's memory goes back to the OS as soon as it is free: every
 * block it gives up (at reset, which then keeps none, at delete, and when a
 * block empties) is decommitted at once, whatever the purge policy (FORM's
 * per-module "On sortreallocate").  Costs system calls and page faults
 * when the context grows again; for contexts whose peaks are rare.
 */
#define MK_CTX_RELEASE_ON_RESET 0x2u

/**
 * Optional settings for mk_ctx_new().  Zero-initialise and set what you need;
 * a zero field means "the default".
 */
typedef struct mk_ctx_opts {
    unsigned flags;       /**< MK_CTX_* flags */
    size_t chunk_size;    /**< MK_SLAB: the one chunk size (required) */
    size_t chunk_align;   /**< MK_SLAB: the alignment of every chunk, a
                               power of two up to 64 KiB (0: the alignment
                               mk_alloc gives chunk_size; at least 8).  A
                               slab's slot is chunk_size (plus an 8-byte
                               guard word with MEMKIT_SECURE=1) rounded up
                               to it, and at least 16 bytes (a free chunk
                               holds its link and its double-free key) */
    size_t block_size;    /**< MK_GENERATION / MK_BUMP: preferred block size.
                               MK_GENERAL: the size of every new page of
                               chunks up to 1 KiB (one size class each)
                               once the context holds half of it in small
                               pages, rounded up to a power of two (below
                               1 KiB or above 64 KiB: EINVAL).  A page is
                               address space held for its class, resident
                               only as far as chunks have been handed out.
                               0: pages start at eight chunks and double as
                               their class grows (the thread heaps take
                               64 KiB) */
} mk_ctx_opts;

/**
 * Create a context.
 *
 * @param parent  the parent context, or NULL for a top-level context.  The
 *                new context is deleted when its parent is reset or deleted.
 *                Creating a child counts as a use of the parent (thread rule).
 * @param name    a name shown in statistics and error reports.  memkit keeps
 *                the pointer: pass a string that outlives the context (a
 *                literal).  NULL is shown as "?".
 * @param kind    one of the mk_kind values.
 * @param opts    kind-specific settings, or NULL for the defaults.
 * @return the context, owned by the calling thread; NULL if memory is
 *         exhausted (errno ENOMEM), or with errno EINVAL if @p kind is not
 *         an mk_kind, @p parent is a deleted context (reported), or @p opts
 *         are invalid for the kind: MK_SLAB needs opts with a chunk_size
 *         (1 byte to 1 MiB; NULL opts or 0 are refused) and a chunk_align
 *         that is 0 or a power of two up to 64 KiB; a block_size outside
 *         the kind's range.  MEMKIT_VERBOSE=1 prints which, as one line.
 */
MK_API mk_ctx *mk_ctx_new(mk_ctx *parent, const char *name, mk_kind kind,
                          const mk_ctx_opts *opts);

/**
 * Free every chunk of @p ctx and delete all its descendants; the context
 * itself stays usable.  Registered callbacks run first (newest first), after
 * the descendants' own; callbacks are dropped once they have run.  Memory
 * is kept for the refill that usually follows: a GENERAL context keeps up
 * to 1 MiB of its pages, the other kinds one block (BUMP its largest, up to
 * 1 MiB); the rest goes back to the shared page pool.  A plain GENERAL
 * context (not checked, secure or profiled) also keeps the other pages
 * this round used, resting: the next round takes them before new pages,
 * its reset gives back those it did not take, and meanwhile the purge
 * policy may decommit them as it does free memory (mk_stats.bytes_resting
 * counts them).  mk_ctx_trim() gives the kept and resting memory back; a
 * context made with MK_CTX_RELEASE_ON_RESET keeps none.  A NULL @p ctx is
 * ignored.
 */
MK_API void mk_ctx_reset(mk_ctx *ctx);

/**
 * Delete @p ctx: its descendants first (depth first), then its callbacks
 * (newest first), then every page it holds.  @p ctx must not be used again.
 * A NULL @p ctx is ignored.
 *
 * Stale handles: a deleted context's record is kept poisoned, so that a
 * later use of the handle (mk_alloc, a second mk_ctx_delete, mk_ctx_reset,
 * mk_ctx_switch, any call that takes the context) is reported, "memkit:
 * mk_alloc(): use of deleted context P (context "NAME")", and not carried
 * out.  Records are reused by new contexts of the same kind, the oldest
 * first, once more than MEMKIT_CTX_QUARANTINE of them wait (checking
 * build: 65536; release build: 0, so a record waits only until the next
 * mk_ctx_new of its kind): after that the old handle is the new context,
 * and no build can tell.
 */
MK_API void mk_ctx_delete(mk_ctx *ctx);

/**
 * Register @p fn(@p arg) to run when @p ctx is next reset or deleted; the
 * way to tie files, locks or foreign memory to a context's lifetime.
 * Callbacks run newest first and once.
 * @return 0, or -1 (errno ENOMEM) if the record could not be allocated,
 *         (errno EINVAL) for a NULL @p ctx or @p fn.
 */
MK_API int mk_ctx_on_reset(mk_ctx *ctx, void (*fn)(void *arg), void *arg);

/**
 * Move @p ctx, with its whole subtree (chunks, callbacks, figures), under
 * @p new_parent, or make it a top-level context (NULL): PostgreSQL's
 * MemoryContextSetParent, talloc's talloc_steal of a context.  A context
 * built for one task can so be kept for a longer-lived owner: deleting the
 * old parent no longer deletes it, deleting the new one does.  O(depth of
 * @p new_parent).  Thread rule: the caller uses both trees (the old and
 * the new parent's) as their owner would.
 * @return 0 (also when @p new_parent is already the parent); -1 with errno
 *         EINVAL for a NULL @p ctx, or a move under @p ctx itself or one of
 *         its descendants (a cycle), and nothing changed.
 */
MK_API int mk_ctx_set_parent(mk_ctx *ctx, mk_ctx *new_parent);

/**
 * Limit the memory of @p ctx's subtree to @p bytes (0: no limit), as
 * talloc_set_memlimit does.  An allocation in the subtree that needs a new
 * page or block which would take the subtree's page bytes (the
 * bytes_reserved of mk_ctx_stats with recurse) past the limit fails: NULL
 * with errno ENOMEM, counted as a refusal (mk_ctx_limit); the contexts stay
 * usable, and the subtree deletes as any other.  Granularity: the check
 * runs only where a context takes a page (1..64 KiB in a GENERAL context,
 * a block in the other kinds) or a large or huge chunk, never on the chunk
 * fast paths, so a chunk that fits in a page already held always succeeds,
 * and the subtree never holds more page bytes than the limit (a huge chunk
 * grown in place by mk_realloc may pass it by less than a 4 KiB page).
 * Limits nest: every limited ancestor is checked.  A limit below what the
 * subtree holds already refuses every new page until enough goes back.
 * mk_ctx_set_parent moves the charges (and fails if the new ancestors lack
 * the room).  Thread rule: @p ctx's owner's, while the subtree's other
 * threads (if any) are quiet; the charges themselves are atomic.
 * @return 0, or -1 with errno EINVAL for a NULL @p ctx.
 */
MK_API int mk_ctx_set_limit(mk_ctx *ctx, size_t bytes);

/**
 * @p ctx's limit (0: none); with non-NULL @p charged, the page bytes its
 * subtree holds now (0 without a limit), and with @p refused, how many
 * pages its limit has refused since the context was made.  A NULL @p ctx
 * gives 0s.
 */
MK_API size_t mk_ctx_limit(const mk_ctx *ctx, size_t *charged,
                           size_t *refused);

/** The context's name as given to mk_ctx_new() ("?" if it was given NULL);
 *  NULL for a NULL @p ctx. */
MK_API const char *mk_ctx_name(const mk_ctx *ctx);

/** The context's parent, or NULL for a top-level context (and a NULL
 *  @p ctx). */
MK_API mk_ctx *mk_ctx_parent(const mk_ctx *ctx);

/** The context's kind; (mk_kind)-1 for a NULL @p ctx. */
MK_API mk_kind mk_ctx_kind(const mk_ctx *ctx);

/**
 * Make the calling thread the owner of @p ctx (see the thread rules above).
 * Call it after the previous owner has stopped using the context (the
 * hand-over must be ordered by the caller, e.g. through a queue or a lock).
 * Cost: one pass over the context's pages.  A NULL @p ctx is ignored.
 */
MK_API void mk_ctx_set_owner(mk_ctx *ctx);

/**
 * The calling thread's current context, like PostgreSQL's
 * CurrentMemoryContext.  A thread starts with its own *heap*: a top-level
 * GENERAL context named "thread", created on first use (no malloc is
 * involved).  NULL only if even that could not be created.
 *
 * The heap belongs to memkit.  When its thread exits, the heap takes in the
 * chunks other threads freed into it; if it then holds nothing it is
 * deleted, otherwise its chunks stay valid for whoever holds them and the
 * heap is adopted, pages and all, by the next thread that needs one (so
 * starting and ending threads neither leaks nor grows memory).  A program
 * may delete its thread's heap from that thread (the next use makes a new
 * one); to delete a heap wholesale from another thread, make the heap a
 * context of your own (see mk_ctx_switch).
 */
MK_API mk_ctx *mk_ctx_current(void);

/**
 * Make @p ctx the calling thread's current context; NULL selects the
 * thread's heap again.
 *
 * With libmemkit-malloc, malloc() and the rest of the C library's family
 * (and C++'s operator new) allocate from the current context when it is an
 * MK_GENERAL context, and from the thread's heap otherwise.  So a program
 * can give a library a heap of its own, as Perl gives each interpreter one:
 *
 *     mk_ctx *h = mk_ctx_new(NULL, "plugin", MK_GENERAL, NULL);
 *     mk_ctx *prev = mk_ctx_switch(h);
 *     plugin_run();              // everything it mallocs lands in h
 *     mk_ctx_switch(prev);
 *     mk_ctx_delete(h);          // and goes, leaks included
 *
 * The contract for such a context: it must be owned by the thread that
 * switches to it (the creator, or a thread that called mk_ctx_set_owner);
 * chunks malloc'ed there may be freed (free, realloc) by any thread, but
 * must not be used after the context is reset or deleted, which frees them
 * whoever holds them; a library that keeps a pointer in a global, or in a
 * thread of its own, across the switch back breaks that contract.  Another
 * thread may delete the context once it is done with it and has taken it
 * over with mk_ctx_set_owner (the threads that used it must have switched
 * away or exited).  A switch to a deleted context is reported in every
 * build ("memkit: mk_ctx_switch(): use of deleted context P ..."), and the
 * checking build reports a switch to a context another thread owns
 * ("memkit: mk_ctx_switch(): context "NAME" is owned by another thread,
 * not by thread T ..."); with a handler that returns, nothing is switched
 * (the current context is returned).
 * @return the previous current context (to switch back to).
 */
MK_API mk_ctx *mk_ctx_switch(mk_ctx *ctx);

/* ------------------------------------------------------------------------ */
/* Chunks                                                                    */
/* ------------------------------------------------------------------------ */

/**
 * Allocate @p size bytes in @p ctx.
 * Size 0 returns a unique pointer that can be freed.  The chunk is owned by
 * the context: mk_free() it, or let reset/delete take it.
 * @return the chunk, or NULL (errno ENOMEM) if memory is exhausted or @p size
 *         is too large; the context stays usable.  An MK_SLAB context
 *         refuses a size above its chunk size (NULL, errno EINVAL).  NULL
 *         (errno EINVAL) for a NULL @p ctx, as for every allocation call.
 */
MK_API void *mk_alloc(mk_ctx *ctx, size_t size) MK_MALLOC_LIKE;

/** As mk_alloc(), and the first @p size bytes are zero. */
MK_API void *mk_alloc_zero(mk_ctx *ctx, size_t size) MK_MALLOC_LIKE;

/**
 * As mk_alloc(), aligned to @p align, which must be a power of two.  Size 0
 * gives a unique, freeable chunk with a usable size of at least 8 at every
 * alignment (MK_BUMP: 0, as for every bump chunk).
 * @return NULL with errno EINVAL if @p align is not a power of two, or if
 *         it is larger than an MK_SLAB context's chunk alignment (a slab
 *         gives its one alignment or less, never more); ENOMEM if memory
 *         is exhausted.
 */
MK_API void *mk_alloc_aligned(mk_ctx *ctx, size_t size,
                              size_t align) MK_MALLOC_LIKE;

/**
 * Allocate @p n * @p size zeroed bytes in @p ctx; NULL (errno ENOMEM) if the
 * product overflows.
 */
MK_API void *mk_alloc_array(mk_ctx *ctx, size_t n, size_t size) MK_MALLOC_LIKE;

/**
 * Copy @p s (a NUL-terminated string) into @p ctx.
 * @return the copy, or NULL (errno ENOMEM).
 */
MK_API char *mk_strdup(mk_ctx *ctx, const char *s) MK_MALLOC_LIKE;

/**
 * Resize chunk @p p to @p size bytes, in the context that owns it.  The
 * content up to the smaller of the two sizes is kept.
 *  - @p p NULL: allocates in the calling thread's current context.
 *  - @p size 0: shrinks to a minimal chunk (never frees; the result is a
 *    valid, freeable pointer).
 * @return the chunk (perhaps moved), or NULL (errno ENOMEM) when it cannot
 *         grow; @p p is then untouched and still owned by its context.
 *         Chunks of MK_BUMP contexts cannot be resized: NULL (errno ENOTSUP;
 *         the checking build reports it as an error).
 *         MK_SLAB chunks cannot grow past the slab's size: NULL (EINVAL).
 *         A @p that is not the start of a live chunk (freed, inside a
 *         chunk, not memkit's) is reported as mk_free reports it, NULL.
 *         The compiler warns when the result is ignored (always a bug:
 *         the chunk may have moved).
 */
MK_API void *mk_realloc(void *p, size_t size) MK_MUST_USE;

/**
 * Free chunk @p p; any thread may call it.  NULL is ignored.  On an MK_BUMP
 * chunk it does nothing (bump memory returns on reset/delete); the checking
 * build reports it as an error.
 * Freeing what is not the start of a live chunk is a bug that every build
 * reports, the release library included, and never follows (one line on
 * stderr, then abort; with a handler set by mk_set_error_handler, the
 * handler gets the line instead, and if it returns the free is abandoned).  Every report has one shape, in
 * every build: "memkit: FN(): WHAT P (DETAIL, context "NAME")", FN being
 * the function the program called (mk_free, free, operator delete,
 * mk_pool_free...); a release build's first report is followed by one line
 * on what the checking build finds.
 *  - a chunk freed twice, wherever the first free left it (its page's free
 *    list, another thread's list, a pool's front) and whichever thread made
 *    it: "memkit: mk_free(): double free of P (context "NAME")", or
 *    "(memory memkit holds free)" when the first free gave the chunk's
 *    memory back;
 *  - an address inside a chunk, or of a chunk from before its context's
 *    reset: "memkit: mk_free(): invalid pointer P (not the start of a
 *    chunk, context "NAME")";
 *  - an address in no memory of memkit's (the stack, a global, another
 *    allocator's block), or inside a huge chunk past its first 4 MiB:
 *    "memkit: mk_free(): invalid pointer P (memkit never returned it)".
 * Nothing is then handed out twice.  Only a double free made by two threads
 * at the same moment, or one whose chunk the program overwrote after the
 * first free, can pass unseen; the checking build (libmemkit-check) also
 * catches those.  MEMKIT_SECURE=1 also reports a write past the end of a
 * chunk into its neighbour when either is freed ("memkit: mk_free(): write
 * past the end of chunk P (into its neighbour, context "NAME")"; in an
 * MK_GENERATION context the neighbour's header is what the write breaks,
 * and a free of the neighbour reports it as not the start of a chunk).
 */
MK_API void mk_free(void *p);

/**
 * The number of bytes usable in chunk @p p (>= the size requested), or 0 for
 * NULL and for kinds that do not keep sizes (MK_BUMP).  For a pointer that
 * may not be memkit's, ask mk_owns() first.  In instrumented
 * builds (checking, ASan, under Valgrind) it is exactly the size requested,
 * for every kind: the bytes past it are checked.  With MEMKIT_SECURE=1 it
 * stops 8 bytes before the end of a small or large chunk's slot (a guard
 * word; huge chunks have none).  A pointer
 * that is not the start of a live chunk is reported as mk_free reports it
 * ("memkit: mk_usable_size(): invalid pointer P ..."), 0.
 */
MK_API size_t mk_usable_size(const void *p);

/** The context that owns chunk @p p, found in O(1); NULL for NULL (and,
 * reported as mk_free reports it, for what is not a live chunk; inside an
 * MK_BUMP block, which keeps no chunk boundaries, any address passes).
 * For a pointer that may not be memkit's, ask mk_owns() first. */
MK_API mk_ctx *mk_ctx_of(const void *p);

/**
 * Is @p p the start of a live chunk that memkit handed out (any context,
 * any kind, malloc's included)?  1 or 0, never a report: the question to
 * ask before mk_ctx_of() or mk_usable_size() about a pointer that may come
 * from elsewhere (the stack, a global, another allocator).  It reads only
 * memkit's own maps and, for an address inside memkit's pages, the chunk's
 * own words: never memory that is not memkit's.  0 for NULL, for an
 * address inside a chunk, for a freed chunk and for memory memkit holds
 * free.  MK_BUMP keeps no chunk boundaries: every address inside a bump
 * block answers 1 (as mk_ctx_of accepts it).  Thread rule: any thread;
 * about a chunk another thread allocates or frees at that moment, or an
 * address in memory memkit gives back to the OS at that moment, the
 * answer may be either.
 */
MK_API int mk_owns(const void *p);

/* ------------------------------------------------------------------------ */
/* Statistics                                                                */
/* ------------------------------------------------------------------------ */

/** Figures for one context (or a subtree), filled by mk_ctx_stats(). */
typedef struct mk_stats {
    size_t contexts;       /**< contexts counted (1 without recursion) */
    size_t blocks;         /**< pages/blocks held */
    size_t bytes_reserved; /**< bytes of those blocks */
    size_t bytes_used;     /**< bytes handed out in live chunks (usable size;
                                MK_GENERATION: a block's bytes up to its
                                fill point, until the block goes back) */
    size_t bytes_free;     /**< bytes_reserved - bytes_used */
    size_t chunks;         /**< live chunks (MK_BUMP: 0, it does not count
                                them, except in instrumented builds) */
    size_t bytes_resting;  /**< of bytes_free, those of the pages a reset
                                left resting (MK_GENERAL: mk_ctx_reset),
                                which the purge may have decommitted */
    size_t bytes_resident; /**< of bytes_reserved, those chunks have
                                reached: each page or block up to the end
                                of the last chunk it handed out, in whole
                                OS pages (large and huge chunks: their
                                size, rounded up; resting pages: their
                                size; the checking build's small pages:
                                their size, which it fills).  An estimate
                                of the memory that is resident for the
                                context: the rest of bytes_reserved is
                                address space that costs nothing until a
                                chunk reaches it, so bytes_resident -
                                bytes_used is the free memory that costs
                                memory (mk_ctx_stats_print's "free") */
} mk_stats;

/**
 * Fill @p out with @p ctx's figures; with @p recurse non-zero, add those of
 * every descendant.  A chunk counts as freed as soon as mk_free() returns,
 * whichever thread freed it, for every kind and size and in every build:
 * the call first takes in the chunks other threads freed into the contexts
 * it reports, so it is a use of those contexts (thread rules).
 * Instrumented builds (checking, ASan, under Valgrind) count the requested
 * bytes of each chunk as its used bytes.
 * @return 0, or -1 (errno EINVAL) for a NULL argument.
 */
MK_API int mk_ctx_stats(const mk_ctx *ctx, mk_stats *out, int recurse);

/**
 * Print @p ctx and its descendants to @p out as an indented tree, one line
 * per context, then a line of totals.  Uses stdio (may allocate).
 */
MK_API void mk_ctx_stats_print(const mk_ctx *ctx, FILE *out);

/**
 * Write @p ctx and its descendants to @p out as one JSON object (and a
 * newline): {"schema": "memkit-context-stats", "version": 1, "context":
 * {"name", "kind", "blocks", "bytes_reserved", "bytes_used", "bytes_free",
 * "chunks", "children": [ ... ]}, "totals": {"contexts", ...}}.  The
 * figures are mk_ctx_stats()'s (docs/STATS.md has the schema).  Uses stdio
 * (may allocate); a use of every context it reports (thread rules).
 * @return 0, or -1 (errno EINVAL for a NULL argument; a write error).
 */
MK_API int mk_ctx_stats_json(const mk_ctx *ctx, FILE *out);

/** Process-wide figures, filled by mk_process_stats(). */
typedef struct mk_process_figures {
    size_t os_reserved;   /**< address space reserved from the OS */
    size_t os_committed;  /**< bytes that may be resident: memkit's estimate
                               of its resident memory (pages given back with
                               MADV_FREE leave it at once, the process's RSS
                               only when the kernel takes them) */
    size_t os_calls;      /**< system calls made (map, purge, unmap) */
    size_t segments;      /**< segments held (normal and huge) */
    size_t meta_bytes;    /**< bytes of memkit's own bookkeeping */
    size_t purged_bytes;  /**< bytes given back by the purge policy and
                               mk_trim, since the start */
    size_t purge_passes;  /**< purge passes run (each a batch of calls) */
} mk_process_figures;

/** Fill @p out with process-wide figures; thread-safe. */
MK_API void mk_process_stats(mk_process_figures *out);

/* ------------------------------------------------------------------------ */
/* Typed pools                                                               */
/* ------------------------------------------------------------------------ */

/** A pool of fixed-size objects: a thin layer over an MK_SLAB context. */
typedef struct mk_pool mk_pool;

/** mk_pool_new() flag: alloc and free are safe from any thread. */
#define MK_POOL_THREADSAFE 0x1u

/**
 * Create a pool of objects of @p size bytes aligned to @p align (0: as
 * mk_alloc would align @p size).
 *
 * Without MK_POOL_THREADSAFE the pool follows the context thread rules
 * (one thread at a time).  With it, any thread may allocate and free: each
 * thread allocates from its own slab (no lock, no atomic operation), a free
 * from another thread is queued atomically for the slab's thread.  A slab
 * of a thread that has exited keeps its objects valid until the pool is
 * deleted.
 *
 * @param name  shown in leak reports and statistics; memkit keeps the
 *              pointer (pass a literal).
 * @return the pool, or NULL (errno EINVAL for a zero size or a bad
 *         alignment, ENOMEM when memory is exhausted).
 * This header makes the call a macro that first checks that the program
 * was compiled with a memkit.h of the library's ABI (mk_pool_new_abi).
 */
MK_API mk_pool *mk_pool_new(const char *name, size_t size, size_t align,
                            unsigned flags);

/**
 * As mk_pool_new(), with the pool in context @p parent's tree: its memory
 * shows in the statistics of @p parent (mk_ctx_stats with recurse,
 * mk_ctx_stats_print and mk_ctx_stats_json, where it reads as kind
 * "pool"), and a delete or reset of @p parent deletes the pool, as it
 * deletes any child, without a leak report (mk_pool_delete still reports).
 * The pool must then not be used again.  NULL @p parent: mk_pool_new().
 * Thread rule: @p parent's (the call links a child into its tree).
 */
MK_API mk_pool *mk_pool_new_in(mk_ctx *parent, const char *name, size_t size,
                               size_t align, unsigned flags);

/** An object from @p pool, or NULL (errno ENOMEM). */
MK_API void *mk_pool_alloc(mk_pool *pool) MK_MALLOC_LIKE;

/**
 * Return @p obj to @p pool.  NULL is ignored.  @p obj must come from
 * @p pool: the checking build reports "memkit: mk_pool_free(): object P of
 * pool "A" freed into pool "B"" (mk_free(obj) is also correct and finds
 * the pool itself).
 */
MK_API void mk_pool_free(mk_pool *pool, void *obj);

/**
 * Delete @p pool and every object in it.  Objects still allocated are
 * reported as one line "memkit: mk_pool_delete(): pool "NAME": N objects
 * (B bytes) leaked"
 * (stderr, or the error handler) unless reports are silenced; the checking
 * build then aborts as for any detected error.  No thread may use the pool
 * during or after the call.  NULL is ignored.
 */
MK_API void mk_pool_delete(mk_pool *pool);

/**
 * The pool's figures (as mk_ctx_stats over all its slabs; objects waiting
 * in the pool's front, see mk_pool_get, count as free).  On a thread-safe
 * pool, any thread may call it at any time: the calling thread's own slab
 * counts as mk_ctx_stats would count it, but other threads' slabs are read
 * as they are (an object freed into another thread's slab by a third thread
 * counts as live until that slab's thread takes it in), so the figures are
 * exact only while the other threads leave the pool alone.
 */
MK_API int mk_pool_stats(const mk_pool *pool, mk_stats *out);

/**
 * The front of every pool: a stack of objects freed into the pool, from
 * which the next allocations are served first.  It only takes objects of
 * the page the pool allocates from ([lo, lo + span); span 0: no front, as
 * in thread-safe pools and checking and sanitizer builds, which send every
 * call out of line), so it never keeps another page from emptying and
 * going back, and holds at most that page's objects.  mk_pool_get() and
 * mk_pool_put() below (and the typed functions of MK_POOL_DECLARE) pop and
 * push it inline, without a call; mk_pool_alloc() and mk_pool_free() do the
 * rest.  Read it only through those functions: its layout belongs to this
 * version of memkit's ABI (MK_ABI_VERSION), and a program built against
 * this header must run with a library of the same ABI, which pool creation
 * checks (mk_pool_new_abi below).
 */
typedef struct mk_pool_front {
    void *head;     /* freed objects, linked through their first word */
    uintptr_t lo;   /* address range of the objects the front may take */
    uintptr_t span;
    uintptr_t key;  /* a freed object's second word (its page's) */
    uint32_t magic, limit; /* (uint32)((obj - lo) * magic) < limit: obj
                              starts an object the pool has handed out */
} mk_pool_front;

/**
 * What mk_pool_new() and mk_pool_new_in() expand to: this header defines
 * both as macros that pass @p abi = MK_POOL_ABI_, the layout of the pool
 * front the program is compiled with (MK_ABI_VERSION and
 * sizeof(mk_pool_front)), and the library creates the pool only when it
 * matches its own.  A program built against another memkit.h would read
 * and write its pools' fronts at the wrong places in the inline
 * mk_pool_get and mk_pool_put; it gets one line instead ("memkit:
 * mk_pool_new(): the program was compiled with another memkit.h (ABI A, a
 * pool front of F bytes; this library: ABI B, G bytes): rebuild it against
 * this memkit"), reported as a detected error (stderr, then abort; or the
 * handler of mk_set_error_handler).  With a handler that returns, or
 * reports silenced: NULL, errno EINVAL.  Otherwise as mk_pool_new_in
 * (@p parent NULL: mk_pool_new).  The functions mk_pool_new and
 * mk_pool_new_in stay exported (for programs that take their address, or
 * reach them without this header) and do not check.
 */
MK_API mk_pool *mk_pool_new_abi(mk_ctx *parent, const char *name, size_t size,
                                size_t align, unsigned flags, size_t abi);
/* (no cast: the header is clean under C++'s -Wold-style-cast) */
#define MK_POOL_ABI_ (MK_ABI_VERSION * 65536u + sizeof(mk_pool_front))
#define mk_pool_new(name, size, align, flags)                                 \
    mk_pool_new_abi(NULL, (name), (size), (align), (flags), MK_POOL_ABI_)
#define mk_pool_new_in(parent, name, size, align, flags)                      \
    mk_pool_new_abi((parent), (name), (size), (align), (flags), MK_POOL_ABI_)

/* The pools' inline functions read and write a freed object's first two
 * words with memcpy: the object's own type is the program's, and these
 * accesses must not be reordered across its (with GNU C, the builtin, so
 * that -fno-builtin leaves them a move). */
#if defined(__GNUC__) || defined(__clang__)
#define MK_POOL_COPY_(d, s, n) __builtin_memcpy(d, s, n)
#else
#define MK_POOL_COPY_(d, s, n) memcpy(d, s, n)
#endif

/* The header is C11 and C++11 (and later) alike: MK_POOL_DECLARE expands in
 * the program's own code, so it uses alignof and the named casts in C++
 * (clean under -Wold-style-cast) and _Alignof and plain casts in C. */
#ifdef __cplusplus
#define MK_ALIGNOF_(T) alignof(T)
#define MK_REINTERPRET_CAST_(T, p) reinterpret_cast<T>(p)
#define MK_STATIC_CAST_(T, v) static_cast<T>(v)
#else
#define MK_ALIGNOF_(T) _Alignof(T)
#define MK_REINTERPRET_CAST_(T, p) ((T)(void *)(p))
#define MK_STATIC_CAST_(T, v) ((T)(v))
#endif

/* The second word of an object. */
static inline uintptr_t mk_pool_word1_(const void *obj)
{
    uintptr_t w;
    MK_POOL_COPY_(&w, MK_STATIC_CAST_(const char *, obj) + sizeof(void *),
                  sizeof w);
    return w;
}

/** As mk_pool_alloc(), inline for the common case. */
static inline void *mk_pool_get(mk_pool *pool)
{
    mk_pool_front *f = MK_REINTERPRET_CAST_(mk_pool_front *, pool);
    void *obj = f->head;
    if (obj) {
        uintptr_t live = 0;
        MK_POOL_COPY_(&f->head, obj, sizeof(void *));
        MK_POOL_COPY_(MK_STATIC_CAST_(char *, obj) + sizeof(void *), &live,
                      sizeof live);
        return obj;
    }
    return mk_pool_alloc(pool);
}

/** As mk_pool_free(), inline for the common case.  An object that is not
 * one the pool handed out, or that was freed already, is left to
 * mk_pool_free, which reports it. */
static inline void mk_pool_put(mk_pool *pool, void *obj)
{
    mk_pool_front *f = MK_REINTERPRET_CAST_(mk_pool_front *, pool);
    uintptr_t off = MK_REINTERPRET_CAST_(uintptr_t, obj) - f->lo, key = f->key;
    if (off < f->span && MK_STATIC_CAST_(uint32_t, off * f->magic) < f->limit &&
        mk_pool_word1_(obj) != key) {
        /* (two stores apart: the next get reads the first word alone, and
         * a 16-byte store of both words would not forward to it) */
        void *next = f->head;
        MK_POOL_COPY_(MK_STATIC_CAST_(char *, obj) + sizeof(void *), &key,
                      sizeof key);
        f->head = obj;
        MK_POOL_COPY_(obj, &next, sizeof(void *));
        return;
    }
    mk_pool_free(pool, obj);
}

/**
 * Declare a typed pool for C type @p T: a distinct handle type
 * NAME_pool and the functions NAME_pool_new(label, flags),
 * NAME_pool_new_in(parent, label, flags), NAME_alloc(pool) -> T *,
 * NAME_free(pool, T *), NAME_pool_delete(pool) and NAME_stats(pool,
 * mk_stats *) (as mk_pool_stats).
 * The compiler then refuses to free a T into a pool of another type.
 * Functions the program does not call cost nothing and draw no warning.
 *
 *     typedef struct { double x, y, z; } vec3;
 *     MK_POOL_DECLARE(vec3, vec3)
 *     vec3_pool *vp = vec3_pool_new("vec3", 0);
 *     vec3 *v = vec3_alloc(vp);
 *     vec3_free(vp, v);
 *     vec3_pool_delete(vp);
 */
#define MK_POOL_DECLARE(T, NAME)                                              \
    typedef struct NAME##_pool NAME##_pool;                                   \
    MK_UNUSED_ static inline NAME##_pool *NAME##_pool_new(const char *label,  \
                                                          unsigned flags)     \
    {                                                                         \
        return MK_REINTERPRET_CAST_(                                          \
            NAME##_pool *,                                                    \
            mk_pool_new(label, sizeof(T), MK_ALIGNOF_(T), flags));            \
    }                                                                         \
    MK_UNUSED_ static inline NAME##_pool *NAME##_pool_new_in(                 \
        mk_ctx *parent, const char *label, unsigned flags)                    \
    {                                                                         \
        return MK_REINTERPRET_CAST_(                                          \
            NAME##_pool *, mk_pool_new_in(parent, label, sizeof(T),           \
                                          MK_ALIGNOF_(T), flags));            \
    }                                                                         \
    MK_UNUSED_ static inline T *NAME##_alloc(NAME##_pool *pool)               \
    {                                                                         \
        return MK_STATIC_CAST_(                                               \
            T *, mk_pool_get(MK_REINTERPRET_CAST_(mk_pool *, pool)));         \
    }                                                                         \
    MK_UNUSED_ static inline void NAME##_free(NAME##_pool *pool, T *obj)      \
    {                                                                         \
        mk_pool_put(MK_REINTERPRET_CAST_(mk_pool *, pool), obj);              \
    }                                                                         \
    MK_UNUSED_ static inline void NAME##_pool_delete(NAME##_pool *pool)       \
    {                                                                         \
        mk_pool_delete(MK_REINTERPRET_CAST_(mk_pool *, pool));                \
    }                                                                         \
    MK_UNUSED_ static inline int                                              \
        NAME##_stats(const NAME##_pool *pool, mk_stats *out)                  \
    {                                                                         \
        return mk_pool_stats(MK_REINTERPRET_CAST_(const mk_pool *, pool),     \
                             out);                                            \
    }

/* ------------------------------------------------------------------------ */
/* Giving memory back                                                        */
/* ------------------------------------------------------------------------ */

/**
 * Give back to the OS at once every page memkit holds empty and every
 * mapping of a freed huge chunk it keeps for reuse, whatever the purge
 * policy and delay, and the memory of the pages contexts' resets left
 * resting (the pages stay the contexts': mk_ctx_reset); first take in the
 * chunks other threads freed into the heaps of exited threads.  Thread-safe.  Returns the number of bytes
 * given back.  (malloc_trim(0) calls it and returns whether it gave any.)
 */
MK_API size_t mk_trim(void);

/**
 * Give back to the OS at once what the context tree of @p ctx holds free:
 * the chunks other threads freed are taken in, then every block with no
 * live chunk (the empty pages a context keeps for reuse, an empty current
 * page or block) is released and its memory decommitted.  Blocks with live
 * chunks stay (an MK_BUMP context's blocks stay until reset).  A use of
 * every context of the tree (thread rules).
 * @return the bytes decommitted.
 */
MK_API size_t mk_ctx_trim(mk_ctx *ctx);

/* ------------------------------------------------------------------------ */
/* Options                                                                   */
/* ------------------------------------------------------------------------ */

/**
 * Read option @p name (e.g. "purge_delay_ms") into *@p value.  Every
 * option has a MEMKIT_<NAME> environment variable read at start-up; see
 * docs/OPTIONS.md.  Options that take words give their number
 * (purge "dontneed" is 1).  Thread-safe.
 *
 *     long delay;
 *     if (mk_option_get("purge_delay_ms", &delay) == 0) ...
 *
 * @return 0, or -1 with errno EINVAL for an unknown or NULL name or a NULL
 *         @p value (*@p value is then untouched).  The value itself may be
 *         any number in the option's range, -1 included (purge_delay_ms's
 *         "never"): the return value alone says whether it was read.
 */
MK_API int mk_option_get(const char *name, long *value);

/**
 * Set option @p name to @p value at run time.  Thread-safe.
 * @return 0, or -1 (errno EINVAL) for an unknown name or a value out of range.
 */
MK_API int mk_option_set(const char *name, long value);

/* ------------------------------------------------------------------------ */
/* The heap profile                                                          */
/* ------------------------------------------------------------------------ */

/**
 * Write the sampled heap profile of what is live now (docs/PROFILE.md) to
 * PREFIX.heap (the text heap-profile format pprof and jeprof read, with
 * the process's mappings) and PREFIX.folded (folded stacks, first frame
 * the context's path, for flame graphs).  @p prefix NULL: the
 * MEMKIT_PROFILE_PREFIX (default "memkit-profile.%p", %p the process id)
 * followed by ".N", N counting the dumps.  The profile is on with
 * MEMKIT_PROFILE=1 (or mk_option_set("profile", 1)); it is also written
 * at exit (PREFIX.exit.* and, at the high-water mark of the live
 * estimate, PREFIX.peak.*) and on the signal MEMKIT_PROFILE_SIGNAL names.
 * Never allocates.  Thread-safe.
 * @return 0, or -1 with errno: ENOTSUP when the profile has never been on
 *         in this process, or the error of creating or writing a file.
 */
MK_API int mk_profile_dump(const char *prefix);

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

/**
 * A handler for detected errors.  @p msg is one line without a newline, in
 * a buffer that is only valid during the call.  If the handler returns, the
 * operation that detected the error is abandoned (the chunk is not freed).
 */
typedef void (*mk_error_fn)(const char *msg, void *arg);

/**
 * Replace the default error action (print the line to stderr, then abort)
 * with @p fn; NULL restores the default.  Thread-safe, but set it before
 * other threads may report: the handler and @p arg are stored one after the
 * other, so a report racing with the change may pair one with the other.
 */
MK_API void mk_set_error_handler(mk_error_fn fn, void *arg);

/**
 * With @p on non-zero, detected errors are neither printed nor passed to a
 * handler, and do not abort (needed e.g. in a child after fork()).  Returns
 * the previous setting.
 */
MK_API int mk_silence_errors(int on);

/** Non-zero when this library was built with the checks (libmemkit-check). */
MK_API int mk_checking(void);

/**
 * The version of the library the program runs with, as one number:
 * major * 10000 + minor * 100 + patch (0.2.0: 200).  Compare it with
 * MK_VERSION, the version of the header the program was compiled with:
 * a library runs a program built against any header of its MK_ABI_VERSION
 * that is not newer than itself.
 */
MK_API int mk_version(void);

#ifdef __cplusplus
}
#endif

#endif /* MEMKIT_H */
