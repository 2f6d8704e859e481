/* SPDX-License-Identifier: MIT */
/*
 * base.h - the lowest layer, which every other file may use and which uses
 * none of them: build variants and compiler macros, the options
 * (options.c), a line written without allocating (print.c) and error
 * reports (error.c).  Error reports take a context's *name*, not the
 * context: this layer knows no context.
 */
#ifndef MKI_BASE_H
#define MKI_BASE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "memkit.h"

/* Build variants: MK_CONFIG_CHECK is a compile-time constant (0 in
 * libmemkit, 1 in libmemkit-check).  Code tests it with a plain `if`, so
 * both variants are always compiled and the release build pays nothing. */
#ifndef MK_CONFIG_CHECK
#define MK_CONFIG_CHECK 0
#endif

#define MKI_LIKELY(x) __builtin_expect(!!(x), 1)
#define MKI_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define MKI_NOINLINE __attribute__((noinline))
#define MKI_INLINE static inline __attribute__((always_inline))
#define MKI_COLD __attribute__((cold, noinline))

/* Raise the peak *@a to @v if @v is above it (relaxed: a figure, not a
 * lock); returns the peak, @v included. */
MKI_INLINE size_t mki_atomic_max(_Atomic size_t *a, size_t v)
{
    size_t cur = atomic_load_explicit(a, memory_order_relaxed);
    while (v > cur &&
           !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_relaxed,
                                                  memory_order_relaxed))
        ;
    return v > cur ? v : cur;
}

/* A ThreadSanitizer build (gcc says __SANITIZE_THREAD__, clang
 * __has_feature): 1 or 0.  (annotate.h has MKI_ASAN.) */
#if defined(__SANITIZE_THREAD__)
#define MKI_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MKI_TSAN 1
#endif
#endif
#ifndef MKI_TSAN
#define MKI_TSAN 0
#endif

#pragma GCC visibility push(hidden)

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
    MKI_OPT_PROFILE,            /* the heap profile (prof/) */
    MKI_OPT_PROFILE_RATE,       /* its mean sampling interval, bytes */
    MKI_OPT_PROFILE_SIGNAL,     /* a signal that dumps it (0: none) */
    MKI_OPT_THP,                /* transparent huge pages: 1 huge chunks,
                                   2 segments too */
    MKI_OPT_CTX_QUARANTINE,     /* deleted contexts of each kind whose
                                   records are not reused yet (ctx/record.c) */
    MKI_OPT_REPORT_CONTEXTS,    /* the checking build's report of live
                                   contexts at exit: 1 flagged, 2 all */
    MKI_OPT_COUNT
};
/* The values of MKI_OPT_PURGE (page/purge.c gives them their meaning). */
enum mki_purge_mode {
    MKI_PURGE_OFF = 0,
    MKI_PURGE_DONTNEED = 1,
    MKI_PURGE_FREE = 2,
    MKI_PURGE_UNMAP = 3
};
extern _Atomic long mki_options[MKI_OPT_COUNT];
void mki_options_init(void); /* reads MEMKIT_* once; idempotent */
MKI_INLINE long mki_option(enum mki_option o)
{
    return atomic_load_explicit(&mki_options[o], memory_order_relaxed);
}
/* What the base asks of the layers above it, bound once at the top
 * (bind.c) by a constant initialiser, so that it holds before any
 * constructor runs: options_changed is called after mk_option_set changed
 * an option (the purge policy rereads its own). */
struct mki_base_up {
    void (*options_changed)(void);
};
extern const struct mki_base_up mki_base_up;
/* Secure mode (MEMKIT_SECURE: 0, 1, 2), fixed when the library loads (a
 * byte: one compare on a free path), and the secrets drawn at start from
 * AT_RANDOM: of encoded free-list links (page.h) and of GENERATION's
 * header states (ctx/generation.h); never 0. */
extern unsigned char mki_secure;
extern uintptr_t mki_link_key;
extern uintptr_t mki_free_key;

/* ---- print.c: a line written without allocating ------------------------- */
#define MKI_LINE_MAX 256
typedef struct mki_line {
    char buf[MKI_LINE_MAX];
    size_t len;
    int stream; /* 0: one line, cut when full; fd + 1: written out to fd
                   whenever full (longer texts, e.g. JSON) */
    /* With a sink, whatever would be written goes on its end instead (cut
     * at sink_cap): a record assembled on the caller's stack, then
     * written with one write(2) (mki_line_sink_write), so that records of
     * processes appending to one file or pipe do not interleave. */
    char *sink;
    size_t sink_len, sink_cap;
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
/* Write the sink's record to @fd in one write(2) (retried for the rest). */
void mki_line_sink_write(mki_line *l, int fd);

/* ---- error.c: reporting ------------------------------------------- */
/*
 * Every report is one line in one shape, in every build:
 *
 *   memkit: FN(): WHAT P (DETAIL, context "NAME")
 *
 * FN is the function the program called (mk_free, free, operator delete,
 * mk_realloc...; NULL where memkit found the damage on its own, and the
 * line starts at WHAT); WHAT says the misuse ("double free of", "invalid
 * pointer", "write past the end of chunk"...); P is the pointer; the
 * parenthesis holds DETAIL and the context, either of which may be NULL
 * ("(context "req")", "(memkit never returned it)").  Never allocates.
 * Aborts unless a handler returns or errors are silenced.  The first
 * report of a release build adds a line on what the checking build finds.
 */
void mki_error_report(const char *fn, const char *what, const void *p,
                      const char *detail, const char *name);
/* Shorthands of the common cases. */
MKI_INLINE void mki_error_double_free(const char *fn, const void *p,
                                      const char *name) /* NULL: free memory */
{
    mki_error_report(fn, "double free of", p,
                     name ? NULL : "memory memkit holds free", name);
}
/* A pointer in none of memkit's segments, or in no chunk. */
MKI_INLINE void mki_error_invalid(const char *fn, const void *p)
{
    mki_error_report(fn, "invalid pointer", p, "memkit never returned it", NULL);
}
/* An address in memkit's memory that is no live chunk's start: with
 * @freed a chunk freed already (realloc of a freed chunk), else an interior
 * pointer. */
MKI_INLINE void mki_error_invalid_in(const char *fn, const void *p,
                                     const char *name, int freed)
{
    mki_error_report(fn, "invalid pointer", p,
                     freed ? "a freed chunk" : "not the start of a chunk", name);
}
/* A fatal error that is no misuse of memory (a program built against
 * another memkit.h): "memkit: FN(): TEXT", then abort as any report, but
 * without the release build's line on the checking build. */
void mki_error_fatal(const char *fn, const char *text);
/* Chunks left at delete: "memkit: FN(): NOUN "NAME": N THING(S) (B
 * bytes) leaked" (@thing singular).  Aborts only in the checking build. */
void mki_error_leak(const char *fn, const char *noun, const char *name,
                    const char *thing, size_t n, size_t bytes);
/* An object freed into the wrong pool: "memkit: FN(): object P of
 * OWNER_NOUN "OWNER" freed into pool "NAMED"". */
void mki_error_wrong_pool(const char *fn, const void *p, const char *owner_noun,
                          const char *owner, const char *named);

/* One context used by two threads at once: "memkit: FN(): context "NAME"
 * used by thread USER while thread INSIDE is inside it (...)" (kernel
 * thread ids).  Aborts as every report. */
void mki_error_ctx_inside(const char *fn, const char *name, long user,
                          long inside);
/* mk_ctx_switch to a context another thread owns: "memkit: FN(): context
 * "NAME" is owned by another thread, not by thread USER (...)". */
void mki_error_ctx_owner(const char *fn, const char *name, long user);
/* Why a call fails with EINVAL, where errno alone does not say it (a
 * MK_SLAB context without its chunk size): "memkit: FN(): fails with
 * EINVAL: WHY (context "NAME")" on stderr, only with MEMKIT_VERBOSE=1
 * (a failure the program handles is not an error; it is the program's to
 * report).  @name may be NULL. */
void mki_note_einval(const char *fn, const char *name, const char *why);
/* The checking build's report of a context alive at exit, on stderr
 * (never the error handler: not an error, and the process is ending):
 * "memkit: at exit: context "NAME" (KIND) never deleted: N chunks (B
 * bytes)".  Nothing while errors are silenced. */
void mki_report_alive(const char *name, const char *kind, size_t chunks,
                      size_t bytes);

#pragma GCC visibility pop

#endif /* MKI_BASE_H */
