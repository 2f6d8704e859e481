/*
 * options.c - every run-time option in one table: name, MEMKIT_<NAME>
 * environment variable, default, range and meaning.
 *
 * Values are atomics read with relaxed loads on slow paths only, so an
 * option can be changed at run time (mk_option_set) from any thread.  The
 * environment is read once, on first use of the page pool; docs/OPTIONS.md
 * lists the same table for users.
 */

#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct option_def {
    const char *name; /* as given to mk_option_get/set */
    const char *env;  /* environment variable */
    long min, max;    /* the default is in mki_options below */
} option_def;

static const option_def defs[MKI_OPT_COUNT] = {
    /* How long a segment stays empty before it goes back to the OS:
     * -1 never (only mk_trim), 0 at once. */
    [MKI_OPT_PURGE_DELAY_MS] = {"purge_delay_ms", "MEMKIT_PURGE_DELAY_MS",
                                -1, 3600000},
    /* Under Valgrind, annotate chunks for Memcheck (1) or run the release
     * paths unannotated (0: e.g. to count instructions with callgrind).
     * Read when the first context is created. */
    [MKI_OPT_VALGRIND] = {"valgrind", "MEMKIT_VALGRIND", 0, 1},
};

/* The defaults (docs/OPTIONS.md lists them too). */
_Atomic long mki_options[MKI_OPT_COUNT] = {
    [MKI_OPT_PURGE_DELAY_MS] = 100,
    [MKI_OPT_VALGRIND] = 1,
};

static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static void read_environment(void)
{
    for (int i = 0; i < MKI_OPT_COUNT; i++) {
        const char *v = getenv(defs[i].env);
        if (!v || !*v)
            continue;
        char *end;
        long x = strtol(v, &end, 10);
        if (*end == '\0' && x >= defs[i].min && x <= defs[i].max)
            atomic_store(&mki_options[i], x);
    }
}

void mki_options_init(void) { pthread_once(&env_once, read_environment); }

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
    atomic_store(&mki_options[i], value);
    return 0;
}
