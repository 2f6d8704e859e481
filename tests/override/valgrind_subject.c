/*
 * override/valgrind_subject.c - a plain program for valgrind_dropin.sh: it
 * allocates, frees and keeps one block to the end, on the drop-in under
 * Memcheck.
 */
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
    kept = malloc(200);
    puts("done");
    return kept ? 0 : 1;
}
