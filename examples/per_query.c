/* SPDX-License-Identifier: MIT */
/*
 * per_query.c - a PostgreSQL-style per-query context tree.
 *
 * A long-lived "executor" context holds what lives across queries; each
 * query runs in a "query" context that is reset when the query ends, and
 * each row is built in a "tuple" context reset after every row.  Nothing is
 * freed one by one: whatever a query leaked goes with its reset, and a
 * callback ties a resource (here a temporary file) to the query's lifetime.
 * A GENERATION context buffers the rows a query emits, in order.
 */
#include <memkit.h>
#include <stdio.h>
#include <string.h>

typedef struct row {
    int id;
    char *name; /* allocated in the same context as the row */
} row;

static void close_spill(void *arg)
{
    FILE *f = arg;
    fclose(f);
}

/* Build one row in @tuple_ctx, keep a copy in @out if it qualifies. */
static row *make_row(mk_ctx *tuple_ctx, mk_ctx *out, int id)
{
    char *scratch = mk_alloc(tuple_ctx, 64); /* dies with the tuple reset */
    if (!scratch)
        return NULL;
    snprintf(scratch, 64, "row-%d", id);
    if (id % 3 != 0)
        return NULL; /* filtered out: nothing to free */
    row *r = mk_alloc(out, sizeof *r);
    if (!r)
        return NULL;
    r->id = id;
    r->name = mk_strdup(out, scratch);
    return r;
}

static int run_query(mk_ctx *query, int nrows, long *sum)
{
    mk_ctx *tuple = mk_ctx_new(query, "tuple", MK_GENERAL, NULL);
    mk_ctx *result = mk_ctx_new(query, "result", MK_GENERATION, NULL);
    if (!tuple || !result)
        return -1;
    FILE *spill = tmpfile();
    if (spill && mk_ctx_on_reset(query, close_spill, spill) != 0)
        fclose(spill);
    row **rows = mk_alloc_array(query, (size_t)nrows, sizeof *rows);
    if (!rows)
        return -1;
    int kept = 0;
    for (int i = 0; i < nrows; i++) {
        row *r = make_row(tuple, result, i);
        if (r)
            rows[kept++] = r;
        mk_ctx_reset(tuple); /* per-row memory gone */
    }
    for (int i = 0; i < kept; i++)
        *sum += rows[i]->id + (long)strlen(rows[i]->name);
    return kept;
}

int main(void)
{
    mk_ctx *executor = mk_ctx_new(NULL, "executor", MK_GENERAL, NULL);
    mk_ctx *query = mk_ctx_new(executor, "query", MK_GENERAL, NULL);
    if (!executor || !query)
        return 1;
    long sum = 0;
    for (int q = 0; q < 100; q++) {
        int kept = run_query(query, 1000 + q, &sum);
        if (kept < 0)
            return 1;
        if (q == 99)
            mk_ctx_stats_print(executor, stdout); /* the tree before the reset */
        mk_ctx_reset(query); /* the query's children, rows and file go */
    }
    mk_stats st;
    mk_ctx_stats(executor, &st, 1);
    printf("after 100 queries: %zu contexts, %zu live chunks, checksum %ld\n",
           st.contexts, st.chunks, sum);
    int ok = st.chunks == 0 && st.contexts == 2;
    mk_ctx_delete(executor);
    return ok ? 0 : 1;
}
