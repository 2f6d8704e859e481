/* SPDX-License-Identifier: MIT */
/*
 * override/valgrind_subject.c - a plain program for valgrind_dropin.sh: it
 * allocates, frees and keeps one block to the end, on the drop-in under
 * Memcheck.  Memcheck makes memkit instrument its contexts, whose chunks
 * are exactly the size asked for: realloc to 17..24 bytes must keep that
 * size (its bytes past it stay checked) and give a 16-aligned chunk.
 */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *volatile kept;

int main(void)
{
    for (int i = 1; i < 100; i++) {
        char *p = malloc((size_t)i * 37);
        if (!p)
            return 1;
        memset(p, i, (size_t)i * 37);
        free(p);
    }
    for (size_t n = 17; n <= 24; n++) {
        char *p = malloc(8), *q = p ? realloc(p, n) : NULL;
        if (!q)
            return 1;
        if ((uintptr_t)q % 16 != 0 || malloc_usable_size(q) != n) {
            printf("realloc to %zu: %p, %zu usable\n", n, (void *)q,
                   malloc_usable_size(q));
            return 2;
        }
        memset(q, 1, n);
        free(q);
    }
    kept = malloc(200);
    puts("done");
    return kept ? 0 : 1;
}
