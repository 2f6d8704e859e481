/* SPDX-License-Identifier: MIT */
/*
 * fuzz/calls.h - every call the fuzz targets make into memkit notes itself
 * in the flight recorder (fuzz/record.h): its arguments before, its result
 * after.  A report then lists the last calls, the one that failed last
 * (with "did not return" when memkit stopped inside it).
 *
 * How: each function gets a wrapper fz_<name> that notes and calls it, and
 * a macro renames the targets' calls to the wrappers.  Included after
 * memkit.h (whose inline functions keep calling memkit directly) and
 * before the targets' code; arguments are evaluated once, as in a plain
 * call.  Queries that cannot fail and are made on every operation
 * (mk_ctx_current, mk_ctx_kind, mk_ctx_name, mk_ctx_parent) are left out:
 * they would push the calls that matter out of the record.
 *
 * With FZ_DROPIN defined (malloc_fuzz), the drop-in's renamed malloc
 * family (mkf_*, fuzz/CMakeLists.txt) is declared and wrapped too.
 */
#ifndef MK_FUZZ_CALLS_H
#define MK_FUZZ_CALLS_H

#include <memkit.h>

#include "record.h"

/* FZ_WRAP(type, name, (params), (args), "format -> result", a, b, c, d):
 * the wrapper of a function that returns a value; FZ_WRAP_VOID: of one
 * that returns nothing (its format has no result). */
#define FZ_WRAP(T, name, params, args, fmt, a, b, c, d)                     \
    FZ_NOCOV static inline T fz_##name params                                 \
    {                                                                         \
        fz_call(fmt, FZ_U(a), FZ_U(b), FZ_U(c), FZ_U(d));                     \
        T r_ = name args;                                                     \
        fz_ret(FZ_U(r_));                                                     \
        return r_;                                                            \
    }
#define FZ_WRAP_VOID(name, params, args, fmt, a, b, c, d)                   \
    FZ_NOCOV static inline void fz_##name params                              \
    {                                                                         \
        fz_call(fmt, FZ_U(a), FZ_U(b), FZ_U(c), FZ_U(d));                     \
        name args;                                                            \
        fz_ret(0);                                                            \
    }

/* ---- chunks ------------------------------------------------------------- */
FZ_WRAP(void *, mk_alloc, (mk_ctx *c, size_t n), (c, n),
        "mk_alloc(%p, %zu) -> %p", c, n, 0, 0)
FZ_WRAP(void *, mk_alloc_zero, (mk_ctx *c, size_t n), (c, n),
        "mk_alloc_zero(%p, %zu) -> %p", c, n, 0, 0)
FZ_WRAP(void *, mk_alloc_aligned, (mk_ctx *c, size_t n, size_t a),
        (c, n, a), "mk_alloc_aligned(%p, %zu, %zu) -> %p", c, n, a, 0)
FZ_WRAP(void *, mk_alloc_array, (mk_ctx *c, size_t n, size_t size),
        (c, n, size), "mk_alloc_array(%p, %zu, %zu) -> %p", c, n, size, 0)
FZ_WRAP(char *, mk_strdup, (mk_ctx *c, const char *s), (c, s),
        "mk_strdup(%p, %p) -> %p", c, s, 0, 0)
FZ_WRAP_VOID(mk_free, (void *p), (p), "mk_free(%p)", p, 0, 0, 0)
FZ_WRAP(void *, mk_realloc, (void *p, size_t n), (p, n),
        "mk_realloc(%p, %zu) -> %p", p, n, 0, 0)
FZ_WRAP(size_t, mk_usable_size, (const void *p), (p),
        "mk_usable_size(%p) -> %zu", p, 0, 0, 0)
FZ_WRAP(mk_ctx *, mk_ctx_of, (const void *p), (p), "mk_ctx_of(%p) -> %p", p,
        0, 0, 0)
#define mk_alloc fz_mk_alloc
#define mk_alloc_zero fz_mk_alloc_zero
#define mk_alloc_aligned fz_mk_alloc_aligned
#define mk_alloc_array fz_mk_alloc_array
#define mk_strdup fz_mk_strdup
#define mk_free fz_mk_free
#define mk_realloc fz_mk_realloc
#define mk_usable_size fz_mk_usable_size
#define mk_ctx_of fz_mk_ctx_of

/* ---- contexts ------------------------------------------------------------- */
FZ_WRAP(mk_ctx *, mk_ctx_new,
        (mk_ctx *parent, const char *name, mk_kind kind, const mk_ctx_opts *o),
        (parent, name, kind, o), "mk_ctx_new(%p, %s, kind %d, %p) -> %p",
        parent, name, (int)kind, o)
FZ_WRAP_VOID(mk_ctx_delete, (mk_ctx *c), (c), "mk_ctx_delete(%p)", c, 0, 0, 0)
FZ_WRAP_VOID(mk_ctx_reset, (mk_ctx *c), (c), "mk_ctx_reset(%p)", c, 0, 0, 0)
FZ_WRAP(size_t, mk_ctx_trim, (mk_ctx *c), (c), "mk_ctx_trim(%p) -> %zu", c, 0,
        0, 0)
FZ_WRAP(size_t, mk_trim, (void), (), "mk_trim() -> %zu", 0, 0, 0, 0)
FZ_WRAP(mk_ctx *, mk_ctx_switch, (mk_ctx *c), (c), "mk_ctx_switch(%p) -> %p",
        c, 0, 0, 0)
FZ_WRAP_VOID(mk_ctx_set_owner, (mk_ctx *c), (c), "mk_ctx_set_owner(%p)", c, 0,
             0, 0)
FZ_WRAP(int, mk_ctx_stats, (const mk_ctx *c, mk_stats *out, int recurse),
        (c, out, recurse), "mk_ctx_stats(%p, recurse %d) -> %d", c, recurse,
        0, 0)
FZ_WRAP(int, mk_ctx_on_reset, (mk_ctx *c, void (*fn)(void *), void *arg),
        (c, fn, arg), "mk_ctx_on_reset(%p) -> %d", c, 0, 0, 0)
#define mk_ctx_new fz_mk_ctx_new
#define mk_ctx_delete fz_mk_ctx_delete
#define mk_ctx_reset fz_mk_ctx_reset
#define mk_ctx_trim fz_mk_ctx_trim
#define mk_trim fz_mk_trim
#define mk_ctx_switch fz_mk_ctx_switch
#define mk_ctx_set_owner fz_mk_ctx_set_owner
#define mk_ctx_stats fz_mk_ctx_stats
#define mk_ctx_on_reset fz_mk_ctx_on_reset

/* ---- pools (mk_pool_new is a macro over mk_pool_new_abi) ------------------ */
FZ_WRAP(mk_pool *, mk_pool_new_abi,
        (mk_ctx *parent, const char *name, size_t size, size_t align,
         unsigned flags, size_t abi),
        (parent, name, size, align, flags, abi),
        "mk_pool_new(size %zu, align %zu, flags %u, parent %p) -> %p", size,
        align, flags, parent)
FZ_WRAP_VOID(mk_pool_delete, (mk_pool *p), (p), "mk_pool_delete(%p)", p, 0, 0,
             0)
FZ_WRAP(void *, mk_pool_alloc, (mk_pool *p), (p), "mk_pool_alloc(%p) -> %p", p,
        0, 0, 0)
FZ_WRAP(void *, mk_pool_get, (mk_pool *p), (p), "mk_pool_get(%p) -> %p", p, 0,
        0, 0)
FZ_WRAP_VOID(mk_pool_free, (mk_pool *p, void *o), (p, o),
             "mk_pool_free(%p, %p)", p, o, 0, 0)
FZ_WRAP_VOID(mk_pool_put, (mk_pool *p, void *o), (p, o), "mk_pool_put(%p, %p)",
             p, o, 0, 0)
FZ_WRAP(int, mk_pool_stats, (const mk_pool *p, mk_stats *out), (p, out),
        "mk_pool_stats(%p) -> %d", p, 0, 0, 0)
#define mk_pool_new_abi fz_mk_pool_new_abi
#define mk_pool_delete fz_mk_pool_delete
#define mk_pool_alloc fz_mk_pool_alloc
#define mk_pool_get fz_mk_pool_get
#define mk_pool_free fz_mk_pool_free
#define mk_pool_put fz_mk_pool_put
#define mk_pool_stats fz_mk_pool_stats

/* ---- the drop-in's malloc family, renamed --------------------------------- */
#ifdef FZ_DROPIN
void *mkf_malloc(size_t n);
void mkf_free(void *p);
void mkf_free_sized(void *p, size_t n);
void *mkf_calloc(size_t n, size_t size);
void *mkf_realloc(void *p, size_t n);
void *mkf_reallocarray(void *p, size_t n, size_t size);
int mkf_posix_memalign(void **out, size_t align, size_t n);
void *mkf_aligned_alloc(size_t align, size_t n);
void *mkf_memalign(size_t align, size_t n);
void *mkf_valloc(size_t n);
void *mkf_pvalloc(size_t n);
size_t mkf_malloc_usable_size(void *p);
int mkf_malloc_trim(size_t pad);

FZ_WRAP(void *, mkf_malloc, (size_t n), (n), "malloc(%zu) -> %p", n, 0, 0, 0)
FZ_WRAP_VOID(mkf_free, (void *p), (p), "free(%p)", p, 0, 0, 0)
FZ_WRAP_VOID(mkf_free_sized, (void *p, size_t n), (p, n),
             "free_sized(%p, %zu)", p, n, 0, 0)
FZ_WRAP(void *, mkf_calloc, (size_t n, size_t size), (n, size),
        "calloc(%zu, %zu) -> %p", n, size, 0, 0)
FZ_WRAP(void *, mkf_realloc, (void *p, size_t n), (p, n),
        "realloc(%p, %zu) -> %p", p, n, 0, 0)
FZ_WRAP(void *, mkf_reallocarray, (void *p, size_t n, size_t size),
        (p, n, size), "reallocarray(%p, %zu, %zu) -> %p", p, n, size, 0)
FZ_WRAP(int, mkf_posix_memalign, (void **out, size_t align, size_t n),
        (out, align, n), "posix_memalign(%p, %zu, %zu) -> %d", out, align, n,
        0)
FZ_WRAP(void *, mkf_aligned_alloc, (size_t align, size_t n), (align, n),
        "aligned_alloc(%zu, %zu) -> %p", align, n, 0, 0)
FZ_WRAP(void *, mkf_memalign, (size_t align, size_t n), (align, n),
        "memalign(%zu, %zu) -> %p", align, n, 0, 0)
FZ_WRAP(void *, mkf_valloc, (size_t n), (n), "valloc(%zu) -> %p", n, 0, 0, 0)
FZ_WRAP(void *, mkf_pvalloc, (size_t n), (n), "pvalloc(%zu) -> %p", n, 0, 0, 0)
FZ_WRAP(size_t, mkf_malloc_usable_size, (void *p), (p),
        "malloc_usable_size(%p) -> %zu", p, 0, 0, 0)
FZ_WRAP(int, mkf_malloc_trim, (size_t pad), (pad), "malloc_trim(%zu) -> %d",
        pad, 0, 0, 0)
#define mkf_malloc fz_mkf_malloc
#define mkf_free fz_mkf_free
#define mkf_free_sized fz_mkf_free_sized
#define mkf_calloc fz_mkf_calloc
#define mkf_realloc fz_mkf_realloc
#define mkf_reallocarray fz_mkf_reallocarray
#define mkf_posix_memalign fz_mkf_posix_memalign
#define mkf_aligned_alloc fz_mkf_aligned_alloc
#define mkf_memalign fz_mkf_memalign
#define mkf_valloc fz_mkf_valloc
#define mkf_pvalloc fz_mkf_pvalloc
#define mkf_malloc_usable_size fz_mkf_malloc_usable_size
#define mkf_malloc_trim fz_mkf_malloc_trim
#endif /* FZ_DROPIN */

#endif /* MK_FUZZ_CALLS_H */
