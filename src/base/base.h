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

/* ---- error.c: reporting ------------------------------------------- */
/* Report a detected error: "memkit: <what>: pointer <p> (context "<name>")"
 * (@p NULL: no pointer; @name NULL: no context; a context's name is never
 * NULL).  Never allocates.  Aborts unless a handler returns or errors are
 * silenced. */
void mki_error_report(const char *what, const void *p, const char *name);
/* Report chunks left at delete: "memkit: <noun> <name>: N <things> (B bytes)
 * leaked".  Aborts only in the checking build (same rules as above). */
void mki_error_leak(const char *noun, const char *name, const char *things,
                    size_t n, size_t bytes);
/* Release-build reports (glibc's words): "memkit: FN(): invalid pointer P"
 * for a pointer outside memkit's segments or in no chunk, and "memkit:
 * double free of P (context NAME)".  Abort as mki_error_report does. */
void mki_error_invalid(const char *fn, const void *p);
void mki_error_double_free(const void *p, const char *name); /* NULL: "memory
                                                                memkit holds free" */
/* "memkit: FN(): invalid pointer P (not the start of a chunk of context
 * NAME)", or with @freed "(a freed chunk of context NAME)": an address in
 * memkit's memory that is no live chunk's start (realloc of a freed chunk,
 * free of an interior pointer). */
void mki_error_invalid_in(const char *fn, const void *p, const char *name,
                          int freed);
/* Report a chunk freed into the wrong pool. */
void mki_error_wrong_pool(const void *p, const char *owner_noun,
                          const char *owner, const char *named);

#pragma GCC visibility pop

#endif /* MKI_BASE_H */
