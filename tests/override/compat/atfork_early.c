/* SPDX-License-Identifier: MIT */
/*
 * compat/atfork_early.c - a library whose constructor registers fork
 * handlers before the program's first malloc (as libraries do), for
 * compat/atfork.c.  Its constructor runs before the drop-in's when the
 * drop-in is preloaded or linked after it; each handler then allocates a
 * size class nothing has used yet and a large block.  glibc lets any fork
 * handler allocate: memkit must too.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

int compat_early_calls[3]; /* prepare, parent, child */

static void use(size_t small, size_t large)
{
    char *a = malloc(small), *b = malloc(large);
    if (!a || !b)
        abort();
    memset(a, 1, small);
    memset(b, 2, 4096);
    free(b);
    free(a);
}

/* sizes of classes no other code of the test uses */
static void prepare(void) { compat_early_calls[0]++, use(9000, 3u << 20); }
static void parent(void) { compat_early_calls[1]++, use(11000, 5u << 20); }
static void child(void) { compat_early_calls[2]++, use(13000, 7u << 20); }

__attribute__((constructor)) static void early(void)
{
    pthread_atfork(prepare, parent, child);
}
