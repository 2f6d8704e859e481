/* SPDX-License-Identifier: MIT */
/*
 * link_order.c - the program of the link-order test (link_order.sh): it
 * uses the memkit API and malloc together, as a program linking both
 * libmemkit and libmemkit-malloc does, and checks that they are one
 * engine: malloc in a switched context allocates there, mk_free frees a
 * malloc'ed block, free frees an mk_alloc'ed chunk.  With two engines the
 * first check fails (or an invalid-pointer report aborts the program).
 * Prints "one engine" and exits 0 when all holds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memkit.h>

int main(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "linked", MK_GENERAL, NULL);
    if (!c)
        return 1;
    mk_ctx *prev = mk_ctx_switch(c);
    char *p = malloc(100);
    mk_ctx_switch(prev);
    if (!p || mk_ctx_of(p) != c) {
        fprintf(stderr, "link_order: malloc in a switched context did not allocate there\n");
        return 1;
    }
    memset(p, 1, 100);
    mk_free(p);
    void *q = mk_alloc(c, 50);
    free(q);
    char *s = strdup("still one engine");
    mk_free(s);
    mk_ctx_delete(c);
    puts("one engine");
    return 0;
}
