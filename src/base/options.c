/* SPDX-License-Identifier: MIT */
/*
 * options.c - every run-time option in one table: name, MEMKIT_<NAME>
 * environment variable, default, range and meaning, and the one parser of
 * the words a variable may give.
 *
 * Values are atomics read with relaxed loads on slow paths only, so an
 * option can be changed at run time (mk_option_set) from any thread.  The
 * environment is read once, on first use of the page pool; docs/OPTIONS.md
 * lists the same table for users.
 *
 * Words: a variable takes a number in the option's range, or one of the
 * option's words in any case.  Every option whose first word is "off"
 * takes the same boolean words: no, false (and 0) for off, and yes, true,
 * on for the value its table entry names as "on" (a boolean's 1, secure's
 * 1, stats' text...), so that MEMKIT_X=yes means the same for every
 * option that has an off.  Signals are named as the shell names them, with
 * or without SIG, in any case (USR2, SIGUSR2, sigusr2), or by number.  The
 * trade-off: one rule users can guess, against options whose words would
 * read better alone (a "yes" for purge means its default way, dontneed).
 */

#include "base.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/auxv.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

typedef struct option_def {
    const char *name; /* as given to mk_option_get/set */
    const char *env;  /* environment variable */
    long min, max;    /* the default is in mki_options below */
    /* Words the environment variable may give instead of a number: the
     * word at index i means i (NULL: numbers only). */
    const char *const *words;
    /* With words starting "off": the value yes/true/on mean (0: they
     * mean nothing for this option, which takes only no/false for off). */
    long on;
    int signal; /* the words are signal names: SIG may be left out */
} option_def;

static const char *const stats_words[] = {"off", "text", "json", NULL};
static const char *const purge_words[] = {"off", "dontneed", "free", "unmap",
                                          NULL};
static const char *const bool_words[] = {"off", "on", NULL};
static const char *const thp_words[] = {"off", "on", "all", NULL};
static const char *const secure_words[] = {"off", "on", "guard", NULL};
static const char *const report_words[] = {"off", "flagged", "all", NULL};
/* Linux's signal numbers, by name ("off": none) */
static const char *const signal_words[] = {
    "off", "SIGHUP", "SIGINT", "SIGQUIT", "SIGILL", "SIGTRAP", "SIGABRT",
    "SIGBUS", "SIGFPE", "SIGKILL", "SIGUSR1", "SIGSEGV", "SIGUSR2", "SIGPIPE",
    "SIGALRM", "SIGTERM", "SIGSTKFLT", "SIGCHLD", "SIGCONT", "SIGSTOP",
    "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGURG", "SIGXCPU", "SIGXFSZ",
    "SIGVTALRM", "SIGPROF", "SIGWINCH", "SIGIO", "SIGPWR", "SIGSYS", NULL};

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
    [MKI_OPT_PURGE] = {"purge", "MEMKIT_PURGE", 0, 3, purge_words, 1},
    /* Purge passes on a background thread (a quiet program's memory goes
     * back too); 0: on the slow paths only. */
    [MKI_OPT_PURGE_THREAD] = {"purge_thread", "MEMKIT_PURGE_THREAD", 0, 1,
                              bool_words, 1},
    [MKI_OPT_VALGRIND] = {"valgrind", "MEMKIT_VALGRIND", 0, 1, bool_words, 1},
    /* Secure mode: 1 the defences (free of a pointer memkit does not hold
     * and double frees reported, free lists encoded and checked), 2 also
     * guard pages and a random allocation order.  Read at start only. */
    [MKI_OPT_SECURE] = {"secure", "MEMKIT_SECURE", 0, 2, secure_words, 1},
    /* Print the options in force on stderr when memkit starts. */
    [MKI_OPT_VERBOSE] = {"verbose", "MEMKIT_VERBOSE", 0, 1, bool_words, 1},
    /* Print the process figures at exit: 1 "text", 2 "json"; on stderr, or
     * in the file MEMKIT_STATS_FILE names. */
    [MKI_OPT_STATS] = {"stats", "MEMKIT_STATS", 0, 2, stats_words, 1},
    /* Address space reserved at start for the normal segments, in MiB
     * (segment.c; the system may grant less): their frees take the fast
     * path.  0: none, every segment a mapping of its own (frees take the
     * slow path).  Read at start only. */
    [MKI_OPT_ARENA_MB] = {"arena_mb", "MEMKIT_ARENA_MB", 0, 64 << 10},
    /* The sampled heap profile (docs/PROFILE.md): on for contexts and
     * heaps made from then on (and the calling thread's own); its mean
     * interval between samples, in bytes allocated (1: every allocation);
     * a signal whose delivery dumps it. */
    [MKI_OPT_PROFILE] = {"profile", "MEMKIT_PROFILE", 0, 1, bool_words, 1},
    [MKI_OPT_PROFILE_RATE] = {"profile_rate", "MEMKIT_PROFILE_RATE", 1,
                              1L << 40},
    [MKI_OPT_PROFILE_SIGNAL] = {"profile_signal", "MEMKIT_PROFILE_SIGNAL", 0,
                                31, signal_words, 0, 1},
    /* Ask the kernel for transparent huge pages (2 MiB) under the fresh
     * mappings of huge chunks, malloc's (calloc's fresh zeroes excepted:
     * page/huge.c); 2 ("all") also under the segments made once memkit
     * holds four (page/segment.c); 0: 4 KiB pages as the system gives
     * them. */
    [MKI_OPT_THP] = {"thp", "MEMKIT_THP", 0, 2, thp_words, 1},
    /* The records of deleted contexts, of each kind, that stay poisoned
     * before one is reused: a use of a deleted context is reported as long
     * as its record is not reused (ctx/record.c). */
    [MKI_OPT_CTX_QUARANTINE] = {"ctx_quarantine", "MEMKIT_CTX_QUARANTINE", 0,
                                1L << 30},
    /* The checking build: at exit, report the contexts never deleted,
     * those made with MK_CTX_REPORT_LEAKS (1) or all (2; memkit's own
     * thread heaps aside).  Nothing in the release build. */
    [MKI_OPT_REPORT_CONTEXTS] = {"report_contexts", "MEMKIT_REPORT_CONTEXTS",
                                 0, 2, report_words, 1},
};

/* The defaults (docs/OPTIONS.md lists them too). */
_Atomic long mki_options[MKI_OPT_COUNT] = {
    [MKI_OPT_PURGE_DELAY_MS] = 100,
    [MKI_OPT_PURGE] = MKI_PURGE_DONTNEED,
    [MKI_OPT_PURGE_THREAD] = 0,
    [MKI_OPT_VALGRIND] = 1,
    [MKI_OPT_SECURE] = MEMKIT_SECURE_DEFAULT,
    [MKI_OPT_VERBOSE] = 0,
    [MKI_OPT_STATS] = 0,
    [MKI_OPT_ARENA_MB] = 64 << 10,
    [MKI_OPT_PROFILE] = 0,
    [MKI_OPT_PROFILE_RATE] = 512 << 10,
    [MKI_OPT_PROFILE_SIGNAL] = 0,
    [MKI_OPT_THP] = 1,
    [MKI_OPT_CTX_QUARANTINE] = MK_CONFIG_CHECK ? 65536 : 0,
    [MKI_OPT_REPORT_CONTEXTS] = MK_CONFIG_CHECK ? 1 : 0,
};

static pthread_once_t env_once = PTHREAD_ONCE_INIT;

/* Where each option's value came from, for MEMKIT_VERBOSE. */
enum { FROM_DEFAULT, FROM_ENV, ENV_IGNORED };
static unsigned char source[MKI_OPT_COUNT];

/* Does @v name signal word @w ("SIGUSR2"), with or without its SIG? */
static int is_signal(const char *v, const char *w)
{
    return strcasecmp(v, w) == 0 ||
           (strncmp(w, "SIG", 3) == 0 && strcasecmp(v, w + 3) == 0);
}

/* The value of environment variable text @v for option @i, or -2 if it is
 * not one: a number in range, one of the option's words in any case, a
 * boolean word (see the top of this file), a signal's name. */
static long parse(int i, const char *v)
{
    const option_def *d = &defs[i];
    char *end;
    long x = strtol(v, &end, 10);
    if (end != v && *end == '\0')
        return x >= d->min && x <= d->max ? x : -2;
    const char *const *w = d->words;
    for (long k = 0; w && w[k]; k++)
        if (d->signal ? is_signal(v, w[k]) : strcasecmp(v, w[k]) == 0)
            return k;
    if (!w || strcmp(w[0], "off") != 0)
        return -2;
    static const char *const no[] = {"no", "false", "off"};
    static const char *const yes[] = {"yes", "true", "on"};
    for (int k = 0; k < 3; k++) {
        if (strcasecmp(v, no[k]) == 0)
            return 0;
        if (d->on && strcasecmp(v, yes[k]) == 0)
            return d->on;
    }
    return -2;
}

/* Option @i's value @v as a user writes it: its word, else the number. */
static void put_value(mki_line *l, int i, long v)
{
    const char *const *w = defs[i].words;
    long n = 0;
    while (w && w[n])
        n++;
    if (v >= 0 && v < n)
        mki_line_str(l, w[v]);
    else
        mki_line_num(l, v);
}

/* The values option @i takes, for a message: "off, dontneed, free, unmap
 * (also no, false; yes, true: dontneed)", "a number from -1 to 3600000",
 * or for a signal the rule, not its 31 names (the line must fit). */
static void put_values(mki_line *l, int i)
{
    const option_def *d = &defs[i];
    const char *const *w = d->words;
    if (d->signal) {
        mki_line_str(l, "a signal's name (USR2 or SIGUSR2), its number "
                        "(1 to 31), or off");
        return;
    }
    if (w) {
        for (int k = 0; w[k]; k++) {
            mki_line_str(l, k ? ", " : "");
            mki_line_str(l, w[k]);
        }
        if (strcmp(w[0], "off") == 0) {
            mki_line_str(l, " (also no, false");
            if (d->on) {
                mki_line_str(l, "; yes, true: ");
                mki_line_str(l, w[d->on]);
            }
            mki_line_str(l, ")");
        }
        return;
    }
    mki_line_str(l, "a number from ");
    mki_line_num(l, d->min);
    mki_line_str(l, " to ");
    mki_line_num(l, d->max);
}

/* MEMKIT_VERBOSE: one line per option, written without allocating. */
static void print_options(void)
{
    for (int i = 0; i < MKI_OPT_COUNT; i++) {
        mki_line l = {.len = 0};
        mki_line_str(&l, "memkit: option ");
        mki_line_str(&l, defs[i].name);
        mki_line_str(&l, " = ");
        put_value(&l, i, atomic_load(&mki_options[i]));
        mki_line_str(&l, source[i] == FROM_ENV      ? " (from "
                         : source[i] == ENV_IGNORED ? " (default; ignored "
                                                    : " (default)");
        if (source[i] != FROM_DEFAULT) {
            mki_line_str(&l, defs[i].env);
            mki_line_str(&l, ")");
        }
        mki_line_write(&l, STDERR_FILENO);
    }
}

/* Variables of memkit's own tools and tests, and the library's text
 * variables (each read where it is used), not options of the table. */
static int tools_own(const char *var)
{
    static const char *const prefixes[] = {"MEMKIT_STATS_FILE=", "MEMKIT_FAIL_OS=",
                                           "MEMKIT_PROFILE_PREFIX=",
                                           "MEMKIT_RUN_", "MEMKIT_BENCH_",
                                           "MEMKIT_TEST_", "MEMKIT_SOAK_"};
    for (size_t k = 0; k < sizeof prefixes / sizeof *prefixes; k++)
        if (strncmp(var, prefixes[k], strlen(prefixes[k])) == 0)
            return 1;
    return 0;
}

/* The edit distance between the @na letters of @a and the name @b, when
 * their lengths are at most two apart; large otherwise. */
static size_t distance(const char *a, size_t na, const char *b)
{
    size_t nb = strlen(b);
    if (na > nb + 2 || nb > na + 2)
        return 99;
    /* edit distance of two short strings, one row at a time on the stack */
    size_t row[64], prev;
    if (nb >= 63)
        return 99;
    for (size_t j = 0; j <= nb; j++)
        row[j] = j;
    for (size_t k = 1; k <= na; k++) {
        prev = row[0];
        row[0] = k;
        for (size_t j = 1; j <= nb; j++) {
            size_t cur = row[j];
            size_t sub = prev + (a[k - 1] != b[j - 1]);
            size_t del = row[j] + 1, ins = row[j - 1] + 1;
            row[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
            prev = cur;
        }
    }
    return row[nb];
}

/* Warn once per variable about a MEMKIT_* name that is no option (a typo
 * such as MEMKIT_PURG=off is otherwise silent), naming the nearest. */
static void warn_unknown(void)
{
    for (char **e = environ; e && *e; e++) {
        const char *var = *e;
        if (strncmp(var, "MEMKIT_", 7) != 0 || tools_own(var))
            continue;
        const char *eq = strchr(var, '=');
        size_t n = eq ? (size_t)(eq - var) : strlen(var);
        int known = 0, near = -1;
        size_t best = 3; /* suggest within two edits */
        for (int i = 0; i < MKI_OPT_COUNT; i++) {
            const char *env = defs[i].env;
            if (strlen(env) == n && strncmp(var, env, n) == 0) {
                known = 1;
                break;
            }
            size_t d = distance(var, n, env);
            if (d < best) {
                best = d;
                near = i;
            }
        }
        if (known)
            continue;
        mki_line l = {.len = 0};
        mki_line_str(&l, "memkit: unknown variable ");
        for (size_t k = 0; k < n && k < 64; k++) {
            char c[2] = {var[k], 0};
            mki_line_str(&l, c);
        }
        mki_line_str(&l, " ignored");
        if (near >= 0) {
            mki_line_str(&l, " (did you mean ");
            mki_line_str(&l, defs[near].env);
            mki_line_str(&l, "?)");
        }
        mki_line_write(&l, STDERR_FILENO);
    }
}

/* At most @max bytes of @s, and "..." when there is more. */
static void put_text(mki_line *l, const char *s, size_t max)
{
    char buf[64];
    size_t n = strnlen(s, max + 1);
    if (max > sizeof buf - 4)
        max = sizeof buf - 4;
    if (n > max) {
        memcpy(buf, s, max);
        memcpy(buf + max, "...", 4);
    } else {
        memcpy(buf, s, n);
        buf[n] = '\0';
    }
    mki_line_str(l, buf);
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
            source[i] = FROM_ENV;
            continue;
        }
        source[i] = ENV_IGNORED;
        mki_line l = {.len = 0};
        mki_line_str(&l, "memkit: ignoring ");
        mki_line_str(&l, defs[i].env);
        mki_line_str(&l, "=");
        put_text(&l, v, 40); /* (a long value must not push the rest out) */
        mki_line_str(&l, ": ");
        mki_line_str(&l, defs[i].name);
        mki_line_str(&l, " takes ");
        put_values(&l, i);
        mki_line_str(&l, "; in force: ");
        put_value(&l, i, atomic_load(&mki_options[i]));
        mki_line_write(&l, STDERR_FILENO);
    }
    warn_unknown();
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

int mk_option_get(const char *name, long *value)
{
    mki_options_init(); /* the environment first, then the program */
    int i = find(name);
    if (i < 0 || !value) {
        errno = EINVAL;
        return -1;
    }
    *value = atomic_load(&mki_options[i]);
    return 0;
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
