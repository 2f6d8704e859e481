/* SPDX-License-Identifier: MIT */
/*
 * value_pool.c - Godot-style typed pools for small value types.
 *
 * A scripting engine creates and drops millions of small values.  A typed
 * pool per value type gives allocation and free in a few instructions, no
 * per-object header, and a leak report if a value outlives its pool.
 * MK_POOL_DECLARE makes the pool typed: freeing a vec3 into the string pool
 * does not compile.
 */
#include <memkit.h>
#include <stdio.h>

typedef struct variant24 { /* 24 bytes: a type tag and two words */
    long type;
    long a, b;
} variant24;

typedef struct vec3 { /* 48 bytes with its tag */
    long type;
    double x, y, z;
    double pad[2];
} vec3;

MK_POOL_DECLARE(variant24, variant)
MK_POOL_DECLARE(vec3, vec3)

int main(void)
{
    variant_pool *vp = variant_pool_new("variant24", 0);
    vec3_pool *v3 = vec3_pool_new("vec3", MK_POOL_THREADSAFE);
    if (!vp || !v3)
        return 1;

    /* a ring of 1,000 live values, 1,000,000 created and dropped */
    enum { LIVE = 1000 };
    variant24 *ring[LIVE] = {0};
    double total = 0;
    for (long i = 0; i < 1000000; i++) {
        variant24 *v = variant_alloc(vp);
        vec3 *p = vec3_alloc(v3);
        if (!v || !p)
            return 1;
        v->type = 1, v->a = i, v->b = -i;
        p->type = 2, p->x = (double)i, p->y = 1, p->z = 2;
        total += p->x + (double)(v->a + v->b);
        vec3_free(v3, p);
        int slot = (int)(i % LIVE);
        variant_free(vp, ring[slot]); /* NULL the first time round */
        ring[slot] = v;
    }
    for (int i = 0; i < LIVE; i++)
        variant_free(vp, ring[i]);

    mk_stats st;
    mk_pool_stats((mk_pool *)vp, &st);
    printf("variant pool: %zu live objects, %zu blocks; sum %.0f\n", st.chunks,
           st.blocks, total);
    int ok = st.chunks == 0;
    variant_pool_delete(vp); /* nothing leaked: silent */
    vec3_pool_delete(v3);
    return ok ? 0 : 1;
}
