/*
 * options.c - every run-time option in one table: name, MEMKIT_<NAME>
 * environment variable, default, range and meaning.
 *
 * Values are atomics read with relaxed loads on slow paths only, so an
 * option can be changed at run time (mk_option_set) from any thread.  The
 * environment is read once, on first use of the page pool; docs/OPTIONS.md
 * lists the same table for users.
 */

#include "base.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <string.h>
#include <unistd.h>

typedef struct option_def {
    const char *name; /* as given to mk_option_get/set */
    const char *env;  /* environment variable */
    long min, max;    /* the default is in mki_options below */
    /* Words the environment variable may give instead of a number: the
     * word at index i means i (NULL: numbers only). */
    const char *const *words;
} option_def;

static const char *const stats_words[] = {"off", "text", "json", NULL};
static const char *const purge_words[] = {"off", "dontneed", "free", "unmap",
                                          NULL};
static const char *const bool_words[] = {"off", "on", NULL};
static const char *const secure_words[] = {"off", "on", "guard", NULL};

#ifndef MEMKIT_SECURE_DEFAULT
#define MEMKIT_SECURE_DEFAULT 0
#endif

unsigned char mki_secure; /* MKI_OPT_SECURE, fixed at start (a byte: one compare on the free path) */
uintptr_t mki_link_key;  /* the secret of encoded links (page/page.h) */
uintptr_t mki_free_key;  /* the secret of GENERATION header states (generation.h) */

static const option_def defs[MKI_OPT_COUNT] = {
    /* How long a segment stays empty before it goes back to the OS:
     * -1 never (only mk_trim), 0 at once. */
    [MKI_OPT_PURGE_DELAY_MS] = {"purge_delay_ms", "MEMKIT_PURGE_DELAY_MS",
                                -1, 3600000},
    /* Under Valgrind, annotate chunks for Memcheck (1) or run the release
     * paths unannotated (0: e.g. to count instructions with callgrind).
     * Read when the first context is created. */
    /* How free memory goes back to the OS (purge.c): off, dontneed, free,
     * unmap (0..3). */
    [MKI_OPT_PURGE] = {"purge", "MEMKIT_PURGE", 0, 3, purge_words},
    /* Purge passes on a background thread (a quiet program's memory goes
     * back too); 0: on the slow paths only. */
    [MKI_OPT_PURGE_THREAD] = {"purge_thread", "MEMKIT_PURGE_THREAD", 0, 1,
                              bool_words},
    [MKI_OPT_VALGRIND] = {"valgrind", "MEMKIT_VALGRIND", 0, 1, bool_words},
    /* Secure mode: 1 the defences (free of a pointer memkit does not hold
     * and double frees reported, free lists encoded and checked), 2 also
     * guard pages and a random allocation order.  Read at start only. */
    [MKI_OPT_SECURE] = {"secure", "MEMKIT_SECURE", 0, 2, secure_words},
    /* Print the options in force on stderr when memkit starts. */
    [MKI_OPT_VERBOSE] = {"verbose", "MEMKIT_VERBOSE", 0, 1, bool_words},
    /* Print the process figures at exit: 1 "text", 2 "json"; on stderr, or
     * in the file MEMKIT_STATS_FILE names. */
    [MKI_OPT_STATS] = {"stats", "MEMKIT_STATS", 0, 2, stats_words},
    /* Address space reserved at start for the normal segments, in MiB
     * (segment.c; the system may grant less): their frees take the fast
     * path.  0: none, every segment a mapping of its own (frees take the
     * slow path).  Read at start only. */
    [MKI_OPT_ARENA_MB] = {"arena_mb", "MEMKIT_ARENA_MB", 0, 64 << 10},
};

/* The defaults (docs/OPTIONS.md lists them too). */
_Atomic long mki_options[MKI_OPT_COUNT] = {
    [MKI_OPT_PURGE_DELAY_MS] = 100,
    [MKI_OPT_PURGE] = MKI_PURGE_DONTNEED,
    [MKI_OPT_PURGE_THREAD] = 1,
    [MKI_OPT_VALGRIND] = 1,
    [MKI_OPT_SECURE] = MEMKIT_SECURE_DEFAULT,
    [MKI_OPT_VERBOSE] = 0,
    [MKI_OPT_STATS] = 0,
    [MKI_OPT_ARENA_MB] = 64 << 10,
};

static pthread_once_t env_once = PTHREAD_ONCE_INIT;

/* The value of environment variable text @v for option @i, or -2 if it is
 * not one (a number in range, or one of the option's words). */
static long parse(int i, const char *v)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (end != v && *end == '\0')
        return x >= defs[i].min && x <= defs[i].max ? x : -2;
    for (long w = 0; defs[i].words && defs[i].words[w]; w++)
        if (strcmp(v, defs[i].words[w]) == 0)
            return w;
    return -2;
}

/* MEMKIT_VERBOSE: one line per option, written without allocating. */
static void print_options(void)
{
    for (int i = 0; i < MKI_OPT_COUNT; i++) {
        mki_line l = {.len = 0};
        mki_line_str(&l, "memkit: option ");
        mki_line_str(&l, defs[i].name);
        mki_line_str(&l, " = ");
        mki_line_num(&l, atomic_load(&mki_options[i]));
        mki_line_str(&l, " (");
        mki_line_str(&l, defs[i].env);
        mki_line_str(&l, getenv(defs[i].env) ? " set)" : " not set)");
        mki_line_write(&l, STDERR_FILENO);
    }
}

static void read_environment(void)
{
    for (int i = 0; i < MKI_OPT_COUNT; i++) {
        const char *v = getenv(defs[i].env);
        if (!v || !*v)
            continue;
        long x = parse(i, v);
        if (x != -2) {
            atomic_store(&mki_options[i], x);
            continue;
        }
        mki_line l = {.len = 0};
        mki_line_str(&l, "memkit: ignoring ");
        mki_line_str(&l, defs[i].env);
        mki_line_str(&l, "=");
        mki_line_str(&l, v);
        mki_line_str(&l, " (not a value this option takes)");
        mki_line_write(&l, STDERR_FILENO);
    }
    /* secure mode is decided here, before any context exists, and never
     * changes: links written one way must be read the same way */
    mki_secure = (unsigned char)atomic_load(&mki_options[MKI_OPT_SECURE]);
    /* the secrets: the kernel's 16 random bytes of this process (AT_RANDOM),
     * mixed with ASLR bits (addresses of a global and a stack variable) */
    uintptr_t r[2] = {0, 0};
    const unsigned char *rnd = (const unsigned char *)getauxval(AT_RANDOM);
    if (rnd)
        memcpy(r, rnd, sizeof r);
    uintptr_t aslr = (uintptr_t)&mki_link_key * 0x9E3779B97F4A7C15ull ^
                     (uintptr_t)r * 0xBF58476D1CE4E5B9ull;
    mki_free_key = (r[1] ^ aslr ^ (aslr >> 29)) | 1; /* never 0 */
    if (mki_secure || MK_CONFIG_CHECK) /* (both encode links) */
        mki_link_key = (r[0] ^ (uintptr_t)&mki_link_key) | 1;
    if (atomic_load(&mki_options[MKI_OPT_VERBOSE]))
        print_options();
}

void mki_options_init(void) { pthread_once(&env_once, read_environment); }

/* The environment is read when the library is loaded, so that a program
 * that never allocates still gets MEMKIT_VERBOSE and MEMKIT_STATS (reading
 * it needs no allocation: getenv). */
__attribute__((constructor)) static void options_at_load(void)
{
    mki_options_init();
}

static int find(const char *name)
{
    for (int i = 0; name && i < MKI_OPT_COUNT; i++)
        if (strcmp(defs[i].name, name) == 0)
            return i;
    return -1;
}

long mk_option_get(const char *name)
{
    mki_options_init(); /* the environment first, then the program */
    int i = find(name);
    if (i < 0) {
        errno = EINVAL;
        return -1;
    }
    return atomic_load(&mki_options[i]);
}

int mk_option_set(const char *name, long value)
{
    mki_options_init(); /* so the environment cannot override it later */
    int i = find(name);
    if (i < 0 || value < defs[i].min || value > defs[i].max) {
        errno = EINVAL;
        return -1;
    }
    if ((i == MKI_OPT_SECURE || i == MKI_OPT_ARENA_MB) &&
        value != mki_options[i]) {
        errno = EPERM; /* decided at start (MEMKIT_SECURE, _ARENA_MB) */
        return -1;
    }
    atomic_store(&mki_options[i], value);
    mki_base_up.options_changed();
    return 0;
}
