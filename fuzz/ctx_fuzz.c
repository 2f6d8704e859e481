/* SPDX-License-Identifier: MIT */
/*
 * fuzz/ctx_fuzz.c - libFuzzer target: the context API driven by the fuzz
 * input, against a shadow model of every context, pool and chunk.
 *
 * The input is a program: each operation is a byte (which operation) and
 * the bytes it needs (which context, size, alignment...).  Operations:
 * make a context of any kind (GENERAL, SLAB with a chunk size and
 * alignment, GENERATION, BUMP; top-level or a child; RELEASE_ON_RESET or
 * not); alloc, alloc_zero, alloc_aligned (up to 2 MiB), alloc_array (with
 * products that overflow), strdup; free; realloc (grow, shrink, 0); reset
 * and delete (descendants go too, callbacks run); mk_ctx_switch and
 * mk_realloc(NULL, n) in the current context; the thread's heap
 * (mk_ctx_current); pools, plain and thread-safe, through mk_pool_alloc /
 * mk_pool_get / mk_pool_free / mk_pool_put / mk_free; a hand-over: a
 * second thread takes a context with mk_ctx_set_owner, allocates and frees
 * in it, frees chunks of other contexts (cross-thread frees), then the
 * first thread takes it back; mk_ctx_trim and mk_trim; statistics; bulk
 * runs of thousands of chunks that fill and empty pages.
 *
 * The model checks, at every step: a chunk is handed out with the size,
 * alignment (memkit.h's rules: 8 for 8-byte and 17..24-byte requests, 16
 * otherwise; BUMP 16; a SLAB's one alignment; at least the alignment
 * asked) and zeroing promised, mk_ctx_of is its context, mk_usable_size at
 * least its size (0 for BUMP); its bytes hold its pattern until it is
 * freed, reallocated (the kept prefix too), reset or deleted; errors are
 * the documented ones (NULL with EINVAL for a SLAB size or alignment it
 * cannot give and for a bad alignment, ENOTSUP for realloc of a BUMP
 * chunk, ENOMEM for sizes past memkit's limit and overflowing arrays), and
 * leave the chunk as it was; mk_ctx_stats agrees with the model (chunks
 * exact, bytes used = the sum of usable sizes; GENERATION counts a block
 * to its fill point, so at least that; BUMP counts no chunks and at least
 * the live bytes; bytes_free = reserved - used; recursion counts the
 * subtree); reset callbacks run once each, descendants' included;
 * mk_pool_stats counts the live objects.
 *
 * Each input starts from nothing and leaves nothing (every context and
 * pool deleted, the heap's chunks freed), so inputs are independent.  Build
 * and run: `make fuzz` (fuzz/README.md).
 */
#include "fuzz.h"

#include <memkit.h>
#include <pthread.h>

#include "calls.h" /* (after memkit.h: every call into memkit is noted) */

/* FZ_INSTRUMENTED: memkit is built with AddressSanitizer (ctx_fuzz_asan),
 * so its contexts take the instrumented paths: usable sizes are the sizes
 * requested, statistics count requested bytes, BUMP chunks are counted. */
#ifndef FZ_INSTRUMENTED
#define FZ_INSTRUMENTED 0
#endif

enum { NCTX = 12, NPOOL = 3, NSLOT = 384, MAXOPS = 3000 };
#define LIVE_CAP ((size_t)96 << 20) /* model memory cap: keeps runs fast */

typedef struct fctx {
    mk_ctx *c;    /* NULL: free slot */
    int parent;   /* index, -1 for top-level */
    mk_kind kind;
    size_t slab_size, slab_align;
    long callbacks; /* registered, not yet run */
    int heap;     /* the thread's heap: never reset or deleted here */
    size_t ghosts, ghost_bytes; /* BUMP chunks "freed": still in memkit */
} fctx;

typedef struct fpool {
    mk_pool *p;
    size_t size, align;
    int threadsafe;
} fpool;

typedef struct slot {
    char *p;      /* NULL: free slot */
    size_t size;
    uint64_t id;
    int ctx;      /* index in ctxs, or -1 */
    int pool;     /* index in pools, or -1 */
} slot;

static fctx ctxs[NCTX];
static fpool pools[NPOOL];
static slot slots[NSLOT];
static uint64_t next_id;
static size_t live_bytes;
static long callbacks_run;
static fz_reader rd;

/* ---- the model ---------------------------------------------------------------- */

static int ctx_alive(int i) { return i >= 0 && i < NCTX && ctxs[i].c; }

static int in_subtree(int i, int root)
{
    for (; i >= 0; i = ctxs[i].parent)
        if (i == root)
            return 1;
    return 0;
}

static size_t required_align(const fctx *f, size_t size)
{
    switch (f->kind) {
    case MK_SLAB:
        return f->slab_align;
    case MK_BUMP:
        return 16;
    default:
        return fz_rule_align(size);
    }
}

static void verify(const slot *s, const char *when)
{
    size_t bad = fz_bad(s->p, s->size, s->size, s->id);
    FZ_CHECK(bad == (size_t)-1, "%s: chunk %p of %zu bytes (context %d, pool "
             "%d) lost its pattern at offset %zu", when, (void *)s->p, s->size,
             s->ctx, s->pool, bad);
}

/* The live chunk of the model that [p, p + size) overlaps, but @self;
 * NULL if none.  (A chunk of size 0 counts as 1 byte: it must be unique.) */
FZ_NOCOV __attribute__((noinline)) static const slot *
overlapping(const void *p, size_t size, const slot *self)
{
    uintptr_t a = (uintptr_t)p, e = a + (size ? size : 1);
    for (int i = 0; i < NSLOT; i++) {
        const slot *o = &slots[i];
        if (!o->p || o == self)
            continue;
        uintptr_t oa = (uintptr_t)o->p, oe = oa + (o->size ? o->size : 1);
        if (a < oe && oa < e)
            return o;
    }
    return NULL;
}

/* A new chunk in context @ci (or pool @pi): check what memkit.h promises,
 * fill it, record it in slot @s. */
static void adopt(slot *s, char *p, size_t size, int ci, int pi, size_t align,
                  int zeroed)
{
    if (ci >= 0) {
        const fctx *f = &ctxs[ci];
        FZ_CHECK(mk_ctx_of(p) == f->c, "mk_ctx_of(%p) is not context %d", (void *)p,
                 ci);
        size_t want = required_align(f, size);
        if (align > want)
            want = align;
        FZ_CHECK((uintptr_t)p % want == 0, "chunk %p of %zu bytes in a %s "
                 "context is not %zu-aligned", (void *)p, size,
                 f->kind == MK_SLAB ? "SLAB" : "non-SLAB", want);
        size_t u = mk_usable_size(p);
        if (FZ_INSTRUMENTED)
            FZ_CHECK(u == size, "instrumented: usable size %zu, asked %zu", u,
                     size);
        else if (f->kind == MK_BUMP)
            FZ_CHECK(u == 0, "BUMP chunk: usable size %zu", u);
        else
            FZ_CHECK(u >= size, "usable size %zu < %zu", u, size);
        if (!FZ_INSTRUMENTED && f->kind != MK_BUMP && align > 8 && size == 0)
            FZ_CHECK(u >= 8, "aligned chunk of 0 bytes: usable size %zu", u);
    } else {
        const fpool *f = &pools[pi];
        FZ_CHECK((uintptr_t)p % f->align == 0, "pool object %p not %zu-aligned",
                 (void *)p, f->align);
        FZ_CHECK(FZ_INSTRUMENTED ? mk_usable_size(p) == f->size
                                 : mk_usable_size(p) >= f->size,
                 "pool object: usable size %zu", mk_usable_size(p));
    }
    if (zeroed)
        FZ_CHECK(fz_zero(p, size), "zeroed chunk of %zu bytes is not zero", size);
    /* no live chunk overlaps it (a chunk handed out twice, a size-0 chunk
     * that is not unique) */
    const slot *o = overlapping(p, size, s);
    FZ_CHECK(!o, "new chunk [%p, +%zu) overlaps live chunk [%p, +%zu) "
             "(context %d, pool %d)", (void *)p, size, (void *)o->p, o->size,
             o->ctx, o->pool);
    *s = (slot){p, size, ++next_id, ci, pi};
    fz_fill(p, size, s->id);
    live_bytes += size;
}

static void forget(slot *s)
{
    live_bytes -= s->size;
    s->p = NULL;
}

/* A BUMP chunk the program is done with: memkit keeps it to the reset. */
static void ghost(slot *s)
{
    ctxs[s->ctx].ghosts++;
    ctxs[s->ctx].ghost_bytes += s->size;
    forget(s);
}

/* The chunks of context @root's subtree go (reset or delete): verify them
 * first.  Returns the callbacks registered in the subtree, which must run
 * now (the root's at its reset too: they run once). */
static long drop_subtree(int root)
{
    for (int i = 0; i < NSLOT; i++) {
        slot *s = &slots[i];
        if (s->p && s->ctx >= 0 && in_subtree(s->ctx, root)) {
            verify(s, "before reset or delete");
            forget(s);
        }
    }
    long n = 0;
    for (int i = 0; i < NCTX; i++)
        if (ctxs[i].c && in_subtree(i, root)) {
            n += ctxs[i].callbacks;
            ctxs[i].callbacks = 0;
            ctxs[i].ghosts = ctxs[i].ghost_bytes = 0;
        }
    return n;
}

static void mark_deleted(int root, int including_root)
{
    for (int i = 0; i < NCTX; i++)
        if (ctxs[i].c && in_subtree(i, root) && (i != root || including_root))
            ctxs[i].c = NULL;
    /* (a slot is reused only once its subtree is gone: parents stay valid) */
}

static slot *pick_slot(int live)
{
    unsigned start = fz_u16(&rd) % NSLOT;
    for (unsigned k = 0; k < NSLOT; k++) {
        slot *s = &slots[(start + k) % NSLOT];
        if ((s->p != NULL) == live)
            return s;
    }
    return NULL;
}

static int pick_ctx(void)
{
    unsigned start = fz_u8(&rd) % NCTX;
    for (unsigned k = 0; k < NCTX; k++)
        if (ctxs[(start + k) % NCTX].c)
            return (int)((start + k) % NCTX);
    return -1;
}

/* ---- statistics ------------------------------------------------------------------ */

/* @recurse: also the subtree (not on the worker: the descendants are the
 * first thread's, and recursive statistics are a use of them). */
static void check_stats(int ci, int recurse)
{
    const fctx *f = &ctxs[ci];
    size_t chunks = 0, usable = 0, bytes = 0;
    for (int i = 0; i < NSLOT; i++)
        if (slots[i].p && slots[i].ctx == ci) {
            chunks++;
            usable += mk_usable_size(slots[i].p);
            bytes += slots[i].size;
        }
    mk_stats st;
    FZ_CHECK(mk_ctx_stats(f->c, &st, 0) == 0, "mk_ctx_stats failed");
    FZ_CHECK(st.bytes_free == st.bytes_reserved - st.bytes_used,
             "bytes_free %zu, reserved %zu, used %zu", st.bytes_free,
             st.bytes_reserved, st.bytes_used);
    FZ_CHECK(st.contexts == 1, "contexts %zu without recursion", st.contexts);
    if (FZ_INSTRUMENTED) { /* requested bytes, every kind */
        chunks += f->ghosts;
        bytes += f->ghost_bytes;
        FZ_CHECK(st.chunks == chunks && st.bytes_used == bytes,
                 "instrumented context %d (kind %d): %zu chunks, %zu bytes "
                 "used; the model %zu, %zu", ci, f->kind, st.chunks,
                 st.bytes_used, chunks, bytes);
    } else switch (f->kind) {
    case MK_BUMP:
        FZ_CHECK(st.chunks == 0 && st.bytes_used >= bytes + f->ghost_bytes,
                 "BUMP context %d: %zu chunks, %zu bytes used; the model %zu "
                 "chunks of %zu bytes (+%zu done with)", ci, st.chunks,
                 st.bytes_used, chunks, bytes, f->ghost_bytes);
        break;
    case MK_GENERATION:
        FZ_CHECK(st.chunks == chunks && st.bytes_used >= usable,
                 "GENERATION context %d: %zu chunks, %zu bytes used; the "
                 "model %zu chunks, >= %zu bytes", ci, st.chunks, st.bytes_used,
                 chunks, usable);
        break;
    default:
        FZ_CHECK(st.chunks == chunks && st.bytes_used == usable,
                 "%s context %d: %zu chunks, %zu bytes used; the model %zu "
                 "chunks, %zu bytes", f->kind == MK_SLAB ? "SLAB" : "GENERAL",
                 ci, st.chunks, st.bytes_used, chunks, usable);
    }
    /* the subtree */
    size_t n = 0, sub_chunks = 0;
    for (int i = 0; i < NCTX; i++)
        if (ctxs[i].c && !ctxs[i].heap && in_subtree(i, ci)) {
            n++;
            if (ctxs[i].kind != MK_BUMP || FZ_INSTRUMENTED) {
                for (int j = 0; j < NSLOT; j++)
                    sub_chunks += slots[j].p && slots[j].ctx == i;
                sub_chunks += ctxs[i].ghosts;
            }
        }
    if (f->heap || !recurse)
        return;
    mk_stats all;
    FZ_CHECK(mk_ctx_stats(f->c, &all, 1) == 0, "recursive stats failed");
    FZ_CHECK(all.contexts == n && all.chunks == sub_chunks, "subtree of %d: "
             "%zu contexts, %zu chunks; the model %zu, %zu", ci, all.contexts,
             all.chunks, n, sub_chunks);
}

static void check_pool_stats(int pi)
{
    const fpool *f = &pools[pi];
    size_t live = 0;
    for (int i = 0; i < NSLOT; i++)
        live += slots[i].p && slots[i].pool == pi;
    mk_stats st;
    FZ_CHECK(mk_pool_stats(f->p, &st) == 0, "mk_pool_stats failed");
    FZ_CHECK(st.chunks == live, "pool %d: %zu objects live, the model %zu", pi,
             st.chunks, live);
}

/* ---- operations --------------------------------------------------------------------- */

static void on_reset(void *arg)
{
    (void)arg;
    callbacks_run++;
}

static void op_new_ctx(void)
{
    int i;
    for (i = 0; i < NCTX && ctxs[i].c; i++)
        ;
    if (i == NCTX)
        return;
    unsigned t = fz_u8(&rd);
    mk_kind kind = (mk_kind)(t % 4);
    int parent = (t & 4) ? pick_ctx() : -1;
    if (parent >= 0 && ctxs[parent].heap)
        parent = -1;
    mk_ctx_opts o = {0};
    if (t & 8)
        o.flags |= MK_CTX_RELEASE_ON_RESET;
    fctx f = {.parent = parent, .kind = kind};
    if (kind == MK_SLAB) {
        unsigned s = fz_u8(&rd);
        o.chunk_size = s < 200 ? 1 + (size_t)s * (1 + fz_u8(&rd) % 8)
                               : (size_t)fz_u16(&rd) * 17 % ((1 << 20) + 2);
        o.chunk_align = (fz_u8(&rd) & 1) ? fz_align(&rd, 16) : 0;
        if (fz_u8(&rd) == 255)
            o.chunk_align = 3 << 4; /* not a power of two */
    } else if (kind != MK_GENERAL && (t & 16)) {
        o.block_size = (size_t)fz_u16(&rd) * 64;
    }
    FZ_OP("new context %d: kind %d, parent %d, flags %u", i, kind, parent,
          o.flags);
    errno = 0;
    mk_ctx *c = mk_ctx_new(parent >= 0 ? ctxs[parent].c : NULL, "fz", kind, &o);
    if (kind == MK_SLAB) {
        int valid = o.chunk_size > 0 && o.chunk_size <= (1 << 20) &&
                    (o.chunk_align & (o.chunk_align - 1)) == 0 &&
                    o.chunk_align <= 65536;
        if (!valid) {
            FZ_CHECK(!c && errno == EINVAL, "SLAB of %zu bytes aligned to "
                     "%zu: %p (errno %d), expected NULL and EINVAL",
                     o.chunk_size, o.chunk_align, (void *)c, errno);
            return;
        }
        f.slab_size = o.chunk_size;
        f.slab_align = o.chunk_align ? o.chunk_align
                                     : fz_rule_align(o.chunk_size);
        if (f.slab_align < 8)
            f.slab_align = 8;
    }
    size_t block_max = kind == MK_GENERATION ? (size_t)960 << 10
                                             : (size_t)1 << 20;
    if (o.block_size && (o.block_size < 1024 || o.block_size > block_max)) {
        /* (memkit.h does not give the range: 1 KiB to the largest large
         * chunk, 960 KiB, for GENERATION, 1 MiB for BUMP: generation.c and
         * bump.c) */
        FZ_CHECK(!c && errno == EINVAL, "block size %zu accepted",
                 o.block_size);
        return;
    }
    FZ_CHECK(c != NULL, "mk_ctx_new(kind %d) failed: errno %d", kind, errno);
    FZ_CHECK(mk_ctx_kind(c) == kind && mk_ctx_parent(c) ==
             (parent >= 0 ? ctxs[parent].c : NULL), "kind or parent wrong");
    f.c = c;
    ctxs[i] = f;
}

static void op_alloc(int how)
{
    int ci = pick_ctx();
    slot *s = pick_slot(0);
    if (ci < 0 || !s)
        return;
    const fctx *f = &ctxs[ci];
    size_t size = fz_size(&rd), align = 0;
    if (f->kind == MK_SLAB && (fz_u8(&rd) & 3))
        size = f->slab_size ? size % (f->slab_size + 1) : 0;
    if (live_bytes + size > LIVE_CAP)
        return;
    FZ_OP("alloc (way %d) of %zu bytes in context %d (kind %d)", how, size,
          ci, f->kind);
    char *p;
    int zeroed = 0;
    errno = 0;
    switch (how) {
    case 0:
        p = mk_alloc(f->c, size);
        break;
    case 1:
        p = mk_alloc_zero(f->c, size);
        zeroed = 1;
        break;
    case 2: {
        align = fz_u8(&rd) == 0 ? 48 : fz_align(&rd, 21);
        errno = 0;
        p = mk_alloc_aligned(f->c, size, align);
        if (align & (align - 1)) {
            FZ_CHECK(!p && errno == EINVAL, "alignment %zu accepted", align);
            return;
        }
        if (f->kind == MK_SLAB && align > f->slab_align && size <= f->slab_size) {
            FZ_CHECK(!p && errno == EINVAL, "SLAB aligned to %zu gave %zu",
                     f->slab_align, align);
            return;
        }
        break;
    }
    default: { /* mk_alloc_array: n * elem, sometimes overflowing */
        size_t elem = 1 + fz_u8(&rd) % 64;
        size_t n = size / elem;
        if (fz_u8(&rd) == 7) {
            elem += elem == 1; /* (a product of 1 cannot overflow) */
            n = SIZE_MAX / elem + 1 + fz_u8(&rd);
            p = mk_alloc_array(f->c, n, elem);
            FZ_CHECK(!p && errno == ENOMEM, "overflowing array accepted");
            return;
        }
        size = n * elem;
        p = mk_alloc_array(f->c, n, elem);
        zeroed = 1;
    }
    }
    if (f->kind == MK_SLAB && size > f->slab_size) {
        FZ_CHECK(!p && errno == EINVAL, "SLAB of %zu gave a chunk of %zu",
                 f->slab_size, size);
        return;
    }
    FZ_CHECK(p != NULL, "allocation of %zu bytes (align %zu) in a kind %d "
             "context failed: errno %d", size, align, f->kind, errno);
    adopt(s, p, size, ci, -1, align, zeroed);
}

static void op_huge_request(void)
{
    int ci = pick_ctx();
    if (ci < 0)
        return;
    size_t n = ((size_t)1 << 47) + fz_u16(&rd);
    FZ_OP("a request of %zu bytes in context %d", n, ci);
    errno = 0;
    void *p = fz_u8(&rd) & 1 ? mk_alloc(ctxs[ci].c, n)
                             : mk_alloc_aligned(ctxs[ci].c, n, 64);
    FZ_CHECK(!p && errno == ENOMEM, "a request of %zu bytes: %p, errno %d", n,
             p, errno);
}

static void op_strdup(void)
{
    int ci = pick_ctx();
    slot *s = pick_slot(0);
    if (ci < 0 || !s || ctxs[ci].kind == MK_SLAB)
        return;
    char buf[300];
    size_t n = fz_u8(&rd);
    for (size_t i = 0; i < n; i++)
        buf[i] = (char)('a' + fz_u8(&rd) % 26);
    buf[n] = '\0';
    FZ_OP("strdup of %zu bytes in context %d", n, ci);
    char *d = mk_strdup(ctxs[ci].c, buf);
    FZ_CHECK(d && strcmp(d, buf) == 0, "mk_strdup");
    adopt(s, d, n + 1, ci, -1, 0, 0);
}

static void op_free(void)
{
    slot *s = pick_slot(1);
    if (!s)
        return;
    FZ_OP("free %p: %zu bytes, context %d, pool %d", s->p, s->size, s->ctx,
          s->pool);
    verify(s, "before free");
    if (s->pool >= 0) {
        unsigned how = fz_u8(&rd) % 3;
        if (how == 0)
            mk_pool_free(pools[s->pool].p, s->p);
        else if (how == 1)
            mk_pool_put(pools[s->pool].p, s->p);
        else
            mk_free(s->p);
    } else if (ctxs[s->ctx].kind != MK_BUMP) {
        mk_free(s->p);
    } else {
        ghost(s);
        return;
    }
    forget(s);
}

static void op_realloc(void)
{
    slot *s = pick_slot(1);
    if (!s || s->pool >= 0)
        return;
    verify(s, "before realloc");
    const fctx *f = &ctxs[s->ctx];
    size_t n = fz_u8(&rd) & 1 ? fz_size(&rd) : s->size + fz_u8(&rd) - 128;
    if (n > ((size_t)64 << 20))
        n = fz_u8(&rd);
    if (live_bytes + n > LIVE_CAP + s->size)
        return;
    FZ_OP("realloc %p: %zu bytes in context %d, to %zu", s->p, s->size,
          s->ctx, n);
    fz_old_chunk(s->p, s->size);
    errno = 0;
    char *q = mk_realloc(s->p, n);
    if (f->kind == MK_BUMP || (f->kind == MK_SLAB && n > f->slab_size)) {
        FZ_CHECK(!q && errno == (f->kind == MK_BUMP ? ENOTSUP : EINVAL),
                 "realloc in a kind %d context to %zu: %p, errno %d", f->kind,
                 n, (void *)q, errno);
        verify(s, "after a refused realloc");
        return;
    }
    FZ_CHECK(q != NULL, "realloc %zu -> %zu failed: errno %d", s->size, n,
             errno);
    size_t kept = s->size < n ? s->size : n;
    size_t bad = fz_bad(q, kept, s->size, s->id);
    FZ_CHECK(bad == (size_t)-1, "realloc %zu -> %zu lost byte %zu", s->size,
             n, bad);
    int ci = s->ctx;
    forget(s);
    adopt(s, q, n, ci, -1, 0, 0);
}

static void op_reset_or_delete(void)
{
    int ci = pick_ctx();
    if (ci < 0 || ctxs[ci].heap)
        return;
    int del = fz_u8(&rd) & 1;
    FZ_OP("%s context %d", del ? "delete" : "reset", ci);
    long before = callbacks_run, expect = drop_subtree(ci);
    if (del) {
        mk_ctx_delete(ctxs[ci].c);
        mark_deleted(ci, 1);
    } else {
        mk_ctx_reset(ctxs[ci].c);
        mark_deleted(ci, 0);
    }
    FZ_CHECK(callbacks_run - before == expect, "%s ran %ld callbacks, %ld "
             "registered", del ? "delete" : "reset", callbacks_run - before,
             expect);
    if (!del)
        check_stats(ci, 1);
}

static void op_callback(void)
{
    int ci = pick_ctx();
    if (ci < 0 || ctxs[ci].heap)
        return;
    FZ_OP("a reset callback on context %d", ci);
    FZ_CHECK(mk_ctx_on_reset(ctxs[ci].c, on_reset, NULL) == 0,
             "mk_ctx_on_reset failed");
    ctxs[ci].callbacks++;
}

/* mk_ctx_switch, then mk_realloc(NULL, n) allocates in the current
 * context; switch back. */
static void op_switch(void)
{
    int ci = pick_ctx();
    slot *s = pick_slot(0);
    if (ci < 0 || !s)
        return;
    size_t n = fz_u8(&rd) * (size_t)(1 + fz_u8(&rd) % 8);
    if (ctxs[ci].kind == MK_SLAB)
        n = n % (ctxs[ci].slab_size + 1);
    FZ_OP("switch to context %d, realloc(NULL, %zu) there", ci, n);
    mk_ctx *prev = mk_ctx_switch(ctxs[ci].c);
    FZ_CHECK(mk_ctx_current() == ctxs[ci].c, "mk_ctx_switch");
    char *p = mk_realloc(NULL, n);
    mk_ctx *back = mk_ctx_switch(prev);
    FZ_CHECK(back == ctxs[ci].c, "mk_ctx_switch returned another context");
    FZ_CHECK(p != NULL, "mk_realloc(NULL, %zu) in the current context", n);
    adopt(s, p, n, ci, -1, 0, 0);
}

static void op_pool(void)
{
    unsigned t = fz_u8(&rd);
    int pi = (int)(t % NPOOL);
    fpool *f = &pools[pi];
    if (!f->p) {
        size_t size = 1 + fz_u8(&rd) % 200;
        size_t align = (t & 8) ? fz_align(&rd, 7) : 0;
        int ts = (t >> 4) & 1;
        FZ_OP("new pool %d: %zu bytes, align %zu, thread-safe %d", pi, size,
              align, ts);
        mk_pool *p = mk_pool_new("fz-pool", size, align,
                                 ts ? MK_POOL_THREADSAFE : 0);
        FZ_CHECK(p != NULL, "mk_pool_new(%zu, %zu)", size, align);
        *f = (fpool){p, size, align ? align : fz_rule_align(size), ts};
        if (f->align < 8)
            f->align = 8;
        return;
    }
    if ((t & 0xe0) == 0xe0) { /* delete it, objects and all */
        FZ_OP("delete pool %d", pi);
        for (int i = 0; i < NSLOT; i++)
            if (slots[i].p && slots[i].pool == pi) {
                verify(&slots[i], "before the pool's delete");
                mk_pool_free(f->p, slots[i].p); /* (no leak report) */
                forget(&slots[i]);
            }
        check_pool_stats(pi);
        mk_pool_delete(f->p);
        f->p = NULL;
        return;
    }
    int k = 1 + fz_u8(&rd) % 16;
    FZ_OP("%d objects from pool %d (%s)", k, pi,
          (t & 0x20) ? "mk_pool_get" : "mk_pool_alloc");
    for (int j = 0; j < k; j++) {
        slot *s = pick_slot(0);
        if (!s)
            return;
        char *o = (t & 0x20) ? mk_pool_get(f->p) : mk_pool_alloc(f->p);
        FZ_CHECK(o != NULL, "pool allocation");
        adopt(s, o, f->size, -1, pi, 0, 0);
    }
    check_pool_stats(pi);
}

/* ---- the hand-over: a second thread takes a context ----------------------- */

static pthread_mutex_t job_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t job_cond = PTHREAD_COND_INITIALIZER;
static void (*job)(int);
static int job_arg, job_done, worker_started;

static void *worker(void *arg)
{
    (void)arg;
    fz_worker = 1;
    pthread_mutex_lock(&job_lock);
    for (;;) {
        while (!job)
            pthread_cond_wait(&job_cond, &job_lock);
        job(job_arg);
        job = NULL;
        job_done = 1;
        pthread_cond_broadcast(&job_cond);
    }
    return NULL;
}

/* Run fn(arg) on the worker thread and wait for it (the two threads never
 * run at once: the hand-over is ordered, as memkit.h asks). */
static void on_worker(void (*fn)(int), int arg)
{
    pthread_mutex_lock(&job_lock);
    if (!worker_started) {
        pthread_t t;
        FZ_CHECK(pthread_create(&t, NULL, worker, NULL) == 0, "thread");
        pthread_detach(t);
        worker_started = 1;
    }
    job = fn;
    job_arg = arg;
    job_done = 0;
    pthread_cond_broadcast(&job_cond);
    while (!job_done)
        pthread_cond_wait(&job_cond, &job_lock);
    pthread_mutex_unlock(&job_lock);
}

/* On the worker: own context @ci, allocate and free there, free chunks of
 * other contexts and pools (cross-thread frees). */
static void worker_ops(int ci)
{
    mk_ctx_set_owner(ctxs[ci].c);
    int k = 1 + fz_u8(&rd) % 24;
    for (int j = 0; j < k; j++) {
        unsigned t = fz_u8(&rd) % 6;
        if (t <= 1) {
            slot *s = pick_slot(0);
            if (!s)
                continue;
            size_t n = fz_size(&rd);
            if (ctxs[ci].kind == MK_SLAB)
                n = ctxs[ci].slab_size ? n % (ctxs[ci].slab_size + 1) : 0;
            if (live_bytes + n > LIVE_CAP)
                continue;
            FZ_OP("hand-over of context %d: alloc of %zu bytes there", ci, n);
            char *p = mk_alloc(ctxs[ci].c, n);
            FZ_CHECK(p != NULL, "worker: alloc of %zu", n);
            adopt(s, p, n, ci, -1, 0, 0);
        } else if (t == 2) { /* realloc a chunk of its own context */
            for (int i = 0; i < NSLOT; i++)
                if (slots[i].p && slots[i].ctx == ci &&
                    ctxs[ci].kind != MK_BUMP && ctxs[ci].kind != MK_SLAB) {
                    verify(&slots[i], "worker: before realloc");
                    size_t n = fz_size(&rd);
                    FZ_OP("hand-over of context %d: realloc %p (%zu bytes) "
                          "to %zu", ci, slots[i].p, slots[i].size, n);
                    fz_old_chunk(slots[i].p, slots[i].size);
                    char *q = mk_realloc(slots[i].p, n);
                    FZ_CHECK(q != NULL, "worker: realloc to %zu", n);
                    size_t kept = slots[i].size < n ? slots[i].size : n;
                    FZ_CHECK(fz_bad(q, kept, slots[i].size, slots[i].id) ==
                                 (size_t)-1, "worker: realloc lost bytes");
                    forget(&slots[i]);
                    adopt(&slots[i], q, n, ci, -1, 0, 0);
                    break;
                }
        } else if (t == 3) {
            FZ_OP("hand-over of context %d: its statistics", ci);
            check_stats(ci, 0);
        } else { /* free any chunk: its own context's, or another's */
            slot *s = pick_slot(1);
            if (!s)
                continue;
            FZ_OP("hand-over of context %d: free %p (%zu bytes, context %d)",
                  ci, s->p, s->size, s->ctx);
            verify(s, "worker: before free");
            if (s->pool >= 0 || ctxs[s->ctx].kind != MK_BUMP) {
                mk_free(s->p);
                forget(s);
            } else {
                ghost(s);
            }
        }
    }
}

static void op_handover(void)
{
    int ci = pick_ctx();
    if (ci < 0 || ctxs[ci].heap)
        return;
    FZ_OP("hand-over of context %d to the second thread", ci);
    on_worker(worker_ops, ci);
    FZ_OP("context %d taken back from the second thread", ci);
    mk_ctx_set_owner(ctxs[ci].c);
    check_stats(ci, 1);
}

static void op_trim(void)
{
    int ci = pick_ctx();
    FZ_OP("trim (context %d)", ci);
    if (fz_u8(&rd) & 1)
        mk_trim();
    else if (ci >= 0)
        mk_ctx_trim(ctxs[ci].c);
    for (int i = 0; i < NSLOT; i++) /* trims touch no live byte */
        if (slots[i].p)
            verify(&slots[i], "after a trim");
}

static void op_check(void)
{
    int ci = pick_ctx();
    FZ_OP("check context %d and a chunk", ci);
    if (ci >= 0)
        check_stats(ci, 1);
    slot *s = pick_slot(1);
    if (s)
        verify(s, "check");
}

/* ---- bulk: pages that fill and empty ---------------------------------------- */

/* Many chunks of one size at once in a GENERAL or SLAB context or a pool
 * (the model's slots are too few to fill pages: SLAB's buckets, GENERAL's
 * full pages and spare page need thousands), each tagged in its first
 * bytes; freed in an order the input picks; statistics checked with them
 * live; the rest freed at the end of the operation. */
enum { NBULK = 6000 };
static char *bulk[NBULK];
static uintptr_t bulk_tag[NBULK], next_tag; /* unique: a chunk handed out
                                               twice loses one tag */

FZ_NOCOV static void tag(char *p, size_t n, uintptr_t v)
{
    memcpy(p, &v, n < sizeof v ? n : sizeof v);
}

FZ_NOCOV static int tagged(const char *p, size_t n, uintptr_t v)
{
    return memcmp(p, &v, n < sizeof v ? n : sizeof v) == 0;
}

static void op_bulk(void)
{
    int pi = -1, ci = -1;
    unsigned t = fz_u8(&rd);
    if (t & 1) {
        pi = (int)(t >> 1) % NPOOL;
        if (!pools[pi].p)
            return;
    } else {
        ci = pick_ctx();
        if (ci < 0 || ctxs[ci].kind == MK_BUMP || ctxs[ci].kind == MK_GENERATION)
            return;
    }
    size_t size = pi >= 0 ? pools[pi].size
                  : ctxs[ci].kind == MK_SLAB ? ctxs[ci].slab_size
                                             : fz_u16(&rd) % 2049;
    unsigned n = 1 + fz_u16(&rd) % NBULK;
    if ((size_t)n * (size + 16) > ((size_t)48 << 20))
        return;
    FZ_OP("bulk: %u chunks of %zu bytes, context %d, pool %d", n, size, ci,
          pi);
    for (unsigned i = 0; i < n; i++) {
        bulk[i] = pi >= 0 ? mk_pool_alloc(pools[pi].p) : mk_alloc(ctxs[ci].c, size);
        FZ_CHECK(bulk[i] != NULL, "bulk allocation %u of %zu bytes", i, size);
        tag(bulk[i], size, bulk_tag[i] = ++next_tag * 0x9E3779B97F4A7C15ull);
    }
    /* free a part: every k-th from an offset, forwards or backwards */
    unsigned k = 1 + fz_u8(&rd) % 8, off = fz_u8(&rd) % k, back = fz_u8(&rd) & 1;
    unsigned freed = 0;
    for (unsigned j = 0; j < n; j++) {
        unsigned i = back ? n - 1 - j : j;
        if (i % k != off)
            continue;
        FZ_CHECK(tagged(bulk[i], size, bulk_tag[i]),
                 "bulk chunk %p of %zu bytes overwritten", (void *)bulk[i], size);
        if (pi >= 0)
            mk_pool_free(pools[pi].p, bulk[i]);
        else
            mk_free(bulk[i]);
        bulk[i] = NULL;
        freed++;
    }
    /* the statistics count the bulk chunks still live */
    size_t live = 0;
    for (int i = 0; i < NSLOT; i++)
        live += slots[i].p && (pi >= 0 ? slots[i].pool == pi : slots[i].ctx == ci);
    mk_stats st;
    if (pi >= 0)
        FZ_CHECK(mk_pool_stats(pools[pi].p, &st) == 0, "mk_pool_stats");
    else
        FZ_CHECK(mk_ctx_stats(ctxs[ci].c, &st, 0) == 0, "mk_ctx_stats");
    FZ_CHECK(st.chunks == live + n - freed, "bulk: %zu chunks, the model %zu "
             "+ %u", st.chunks, live, n - freed);
    /* new chunks now come from the holes (one that is a live chunk too
     * overwrites that one's tag) */
    unsigned again = fz_u8(&rd) % 64;
    for (unsigned j = 0; j < n && again; j++)
        if (!bulk[j]) {
            bulk[j] = pi >= 0 ? mk_pool_alloc(pools[pi].p) : mk_alloc(ctxs[ci].c, size);
            FZ_CHECK(bulk[j] != NULL, "bulk allocation");
            tag(bulk[j], size, bulk_tag[j] = ++next_tag * 0x9E3779B97F4A7C15ull);
            again--;
        }
    for (unsigned i = 0; i < n; i++)
        if (bulk[i]) {
            FZ_CHECK(tagged(bulk[i], size, bulk_tag[i]),
                     "bulk chunk %p of %zu bytes overwritten", (void *)bulk[i],
                     size);
            if (pi >= 0)
                mk_pool_free(pools[pi].p, bulk[i]);
            else
                mk_free(bulk[i]);
        }
    if (pi >= 0)
        check_pool_stats(pi);
    else
        check_stats(ci, 1);
}

/* ---- one input --------------------------------------------------------------------- */

static void cleanup(void)
{
    FZ_OP("the end of the input: everything freed, deleted");
    for (int i = 0; i < NSLOT; i++)
        if (slots[i].p) {
            verify(&slots[i], "at the end");
            if (slots[i].ctx >= 0 && ctxs[slots[i].ctx].heap)
                mk_free(slots[i].p); /* the heap stays: free its chunks */
            else if (slots[i].pool >= 0)
                mk_pool_free(pools[slots[i].pool].p, slots[i].p);
            forget(&slots[i]);
        }
    for (int i = 0; i < NPOOL; i++)
        if (pools[i].p) {
            check_pool_stats(i);
            mk_pool_delete(pools[i].p);
            pools[i].p = NULL;
        }
    for (int i = 1; i < NCTX; i++)
        if (ctxs[i].c && ctxs[i].parent < 0) {
            mk_ctx_delete(ctxs[i].c);
            mark_deleted(i, 1);
        }
    check_stats(0, 0);
    memset(ctxs, 0, sizeof ctxs);
    FZ_CHECK(live_bytes == 0, "model: %zu bytes left", live_bytes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_begin(data, size);
    rd = (fz_reader){data, size, 0};
    /* context 0: the thread's heap */
    ctxs[0] = (fctx){.c = mk_ctx_current(), .parent = -1, .kind = MK_GENERAL,
                     .heap = 1};
    FZ_CHECK(ctxs[0].c != NULL, "no heap");
    for (fz_op = 0; fz_more(&rd) && fz_op < MAXOPS; fz_op++) {
        switch (fz_u8(&rd) % 20) {
        case 0:
        case 1:
            op_new_ctx();
            break;
        case 2:
        case 3:
        case 4:
            op_alloc(0);
            break;
        case 5:
            op_alloc(1);
            break;
        case 6:
            op_alloc(2);
            break;
        case 7:
            op_alloc(3);
            break;
        case 8:
        case 9:
        case 10:
            op_free();
            break;
        case 11:
        case 12:
            op_realloc();
            break;
        case 13:
            op_reset_or_delete();
            break;
        case 14:
            op_pool();
            break;
        case 15:
            op_switch();
            break;
        case 16:
            op_handover();
            break;
        case 17:
            fz_u8(&rd) & 1 ? op_trim() : op_callback();
            break;
        case 18:
            switch (fz_u8(&rd) % 3) {
            case 0:
                op_strdup();
                break;
            case 1:
                op_huge_request();
                break;
            default:
                op_bulk();
            }
            break;
        default:
            op_check();
        }
    }
    cleanup();
    return 0;
}
