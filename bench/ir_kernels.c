/* SPDX-License-Identifier: MIT */
/*
 * ir_kernels.c - memkit-bench-ir: the loops whose instruction counts the
 * fast-path budgets are stated in (bench/ir.sh runs them under callgrind).
 * Not a benchmark of time: callgrind counts instructions, the same for the
 * same binary and input whatever else the machine does.
 *
 *   memkit-bench-ir KERNEL N
 *
 * KERNEL: pool24 (N x mk_pool_alloc, three stores, mk_pool_free on a pool
 * of 24-byte objects), pool24-inline (the same through MK_POOL_DECLARE's
 * inline functions), pool24-ts (pool24-inline on a MK_POOL_THREADSAFE
 * pool: no front, so each get and put is a call), ctx24 (mk_alloc /
 * mk_free on a GENERAL context), malloc24 (malloc / free: run it with the
 * drop-in preloaded, or glibc).  Everything is set up before the loop,
 * so that the difference of two runs with different N is the loop alone.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memkit.h>

typedef struct {
    uint64_t a, b, c;
} obj24;
MK_POOL_DECLARE(obj24, irb_obj24)

static void *volatile sink;

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: memkit-bench-ir pool24|pool24-inline|pool24-ts|ctx24|malloc24 N\n");
        return 2;
    }
    const char *k = argv[1];
    long n = atol(argv[2]);
    if (strcmp(k, "pool24") == 0) {
        mk_pool *p = mk_pool_new("ir", 24, 0, 0);
        for (long i = 0; i < n; i++) {
            obj24 *o = mk_pool_alloc(p);
            o->a = (uint64_t)i, o->b = 2, o->c = 3;
            sink = o;
            mk_pool_free(p, o);
        }
        mk_pool_delete(p);
    } else if (strcmp(k, "pool24-inline") == 0 || strcmp(k, "pool24-ts") == 0) {
        irb_obj24_pool *p = irb_obj24_pool_new(
            "ir", strcmp(k, "pool24-ts") == 0 ? MK_POOL_THREADSAFE : 0);
        for (long i = 0; i < n; i++) {
            obj24 *o = irb_obj24_alloc(p);
            o->a = (uint64_t)i, o->b = 2, o->c = 3;
            sink = o;
            irb_obj24_free(p, o);
        }
        irb_obj24_pool_delete(p);
    } else if (strcmp(k, "ctx24") == 0) {
        mk_ctx *c = mk_ctx_new(NULL, "ir", MK_GENERAL, NULL);
        for (long i = 0; i < n; i++) {
            obj24 *o = mk_alloc(c, 24);
            o->a = (uint64_t)i, o->b = 2, o->c = 3;
            sink = o;
            mk_free(o);
        }
        mk_ctx_delete(c);
    } else if (strcmp(k, "malloc24") == 0) {
        for (long i = 0; i < n; i++) {
            obj24 *o = malloc(24);
            o->a = (uint64_t)i, o->b = 2, o->c = 3;
            sink = o;
            free(o);
        }
    } else {
        fprintf(stderr, "memkit-bench-ir: unknown kernel %s\n", k);
        return 2;
    }
    return 0;
}
