/* SPDX-License-Identifier: MIT */
/*
 * quickstart.c - the README's example: a context tree, chunks freed one by
 * one or all at once, a callback tied to a context's lifetime.
 */
#include <memkit.h>
#include <stdio.h>

static void close_file(void *f) { fclose(f); }

int main(void)
{
    mk_ctx *top = mk_ctx_new(NULL, "top", MK_GENERAL, NULL);
    if (!top)
        return 1;
    for (int q = 0; q < 3; q++) {
        mk_ctx *query = mk_ctx_new(top, "query", MK_GENERAL, NULL);
        char *row = mk_alloc(query, 200);                    /* one chunk */
        int *ids = mk_alloc_array(query, 100, sizeof *ids);  /* zeroed */
        if (!query || !row || !ids)
            return 1;
        snprintf(row, 200, "query %d", q);
        int *more = mk_realloc(ids, 1000 * sizeof *ids);     /* same context */
        if (!more)
            return 1;
        mk_free(row);                 /* the owner is found from the pointer */
        FILE *log = tmpfile();
        if (log)
            mk_ctx_on_reset(query, close_file, log); /* dies with the context */
        if (q == 2)
            mk_ctx_stats_print(top, stdout);         /* the tree, with totals */
        mk_ctx_delete(query);                        /* everything left, at once */
    }
    mk_ctx_delete(top);
    return 0;
}
