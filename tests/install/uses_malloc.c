/* SPDX-License-Identifier: MIT */
/*
 * install/uses_malloc.c - a consumer linked with libmemkit-malloc (through
 * pkg-config memkit-malloc or CMake's memkit::memkit-malloc) gets memkit's malloc
 * without LD_PRELOAD: a chunk from malloc() belongs to the calling
 * thread's memkit context.  Exit status 0 if so.
 */
#include <memkit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    char *p = malloc(100);
    if (!p)
        return 2;
    strcpy(p, "memkit");
    int ok = mk_ctx_of(p) == mk_ctx_current();
    free(p);
    if (!ok)
        fprintf(stderr, "malloc() is not memkit's\n");
    return ok ? 0 : 1;
}
