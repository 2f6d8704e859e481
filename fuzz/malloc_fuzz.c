/* SPDX-License-Identifier: MIT */
/*
 * fuzz/malloc_fuzz.c - libFuzzer target: memkit's malloc family (the
 * drop-in, src/override/malloc.c) driven by the fuzz input, against a
 * shadow model of every chunk.
 *
 * How the drop-in is reached: a fuzzer process already has two mallocs
 * (the C library's and AddressSanitizer's, which libFuzzer itself uses),
 * so memkit's cannot replace malloc here.  fuzz/CMakeLists.txt compiles
 * the drop-in's one source file again with every function renamed
 * (malloc -> mkf_malloc, free -> mkf_free, ...), and links it with memkit:
 * this target calls the drop-in's own code (glibc semantics, the heap
 * fast path, realloc across threads, the current-context rule), not a
 * stand-in for it; the only thing it cannot see is the symbol
 * interposition, which tests/override covers.
 *
 * Operations: malloc, calloc (and products that overflow), realloc
 * (grow, shrink, NULL, to 0), reallocarray, free, free_sized,
 * posix_memalign, aligned_alloc (a bad alignment refused, or rounded up,
 * as the running C library does) and memalign (good and bad alignments),
 * valloc, pvalloc, malloc_usable_size, malloc_trim; mk_ctx_switch to a
 * GENERAL context (malloc then allocates there: leak capture, then the
 * context is deleted with whatever it holds, or its chunks freed one by
 * one) or to another kind (malloc stays on the thread's heap); a second
 * thread that mallocs, frees chunks of the first thread (cross-thread
 * frees) and reallocs them (moved into its own heap unless they fit), and
 * now and then ends, leaving its heap with live chunks to be adopted by
 * the next thread (the first thread keeps freeing and reallocating them).
 *
 * Checks: alignment (malloc's rules in memkit.h; the alignment asked),
 * usable size >= size, the context a chunk lands in (the thread's current
 * context if it is GENERAL, else its heap), zeroing (calloc), no chunk
 * overlapping a live one, contents kept until free (and the kept prefix
 * across realloc), errno and return values of failures (ENOMEM for sizes
 * past memkit's limit and overflowing products, EINVAL for bad
 * alignments; a failed realloc leaves the chunk as it was), realloc(p, 0)
 * frees p and returns NULL (as glibc), and the heap's statistics: as many
 * chunks as the model holds there.
 */
#include "fuzz.h"

#include <memkit.h>
#include <pthread.h>
#include <stdint.h>
#ifdef __GLIBC__
#include <gnu/libc-version.h>
#endif

/* the drop-in, renamed (fuzz/CMakeLists.txt), declared by calls.h; every
 * call into memkit is noted (after memkit.h) */
#define FZ_DROPIN 1
#include "calls.h"

enum { NSLOT = 384, MAXOPS = 3000, NCAP = 4 };
#define LIVE_CAP ((size_t)96 << 20)
#define PAGE 4096u

typedef struct slot {
    char *p;
    size_t size;
    uint64_t id;
    mk_ctx *ctx; /* where it lives */
} slot;

static slot slots[NSLOT];
static uint64_t next_id;
static size_t live_bytes;
static fz_reader rd;
static mk_ctx *heap_main, *heap_worker;
static mk_ctx *captures[NCAP]; /* GENERAL contexts malloc may be switched to */
static mk_ctx *other;          /* a SLAB context: malloc ignores it */
static int on_worker_now;

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

static void verify(const slot *s, const char *when)
{
    size_t bad = fz_bad(s->p, s->size, s->size, s->id);
    FZ_CHECK(bad == (size_t)-1, "%s: chunk %p of %zu bytes lost its pattern "
             "at offset %zu", when, (void *)s->p, s->size, bad);
}

/* The context malloc must use on this thread now. */
static mk_ctx *malloc_ctx(void)
{
    mk_ctx *cur = mk_ctx_current();
    if (mk_ctx_kind(cur) == MK_GENERAL)
        return cur;
    return on_worker_now ? heap_worker : heap_main;
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

/* @align: the alignment asked (0: malloc's rule); (size_t)-1: 8 only
 * (see op_realloc). */
static void adopt(slot *s, char *p, size_t size, size_t align, mk_ctx *ctx,
                  int zeroed)
{
    size_t want = align > fz_rule_align(size) ? align : fz_rule_align(size);
    FZ_CHECK((uintptr_t)p % want == 0, "chunk %p of %zu bytes not %zu-aligned",
             (void *)p, size, want);
    size_t u = mkf_malloc_usable_size(p);
    FZ_CHECK(u >= size, "malloc_usable_size %zu < %zu", u, size);
    FZ_CHECK(mk_ctx_of(p) == ctx, "chunk %p in context %s, expected %s",
             (void *)p, mk_ctx_name(mk_ctx_of(p)), mk_ctx_name(ctx));
    if (zeroed)
        FZ_CHECK(fz_zero(p, size), "calloc'ed chunk of %zu bytes not zero",
                 size);
    const slot *o = overlapping(p, size, s);
    FZ_CHECK(!o, "new chunk [%p, +%zu) overlaps live chunk [%p, +%zu)",
             (void *)p, size, (void *)o->p, o->size);
    *s = (slot){p, size, ++next_id, ctx};
    fz_fill(p, size, s->id);
    live_bytes += size;
}

static void forget(slot *s)
{
    live_bytes -= s->size;
    s->p = NULL;
}

/* ---- operations ------------------------------------------------------------------ */

/* Does aligned_alloc refuse an alignment that is not a power of two?  The
 * drop-in does as the C library it runs on: glibc from 2.38 on (and musl)
 * refuse it with EINVAL, older glibc rounds it up, as memalign does. */
static int aligned_alloc_strict(void)
{
#ifdef __GLIBC__
    unsigned major = 0, minor = 0;
    const char *v = gnu_get_libc_version();
    for (; *v >= '0' && *v <= '9'; v++)
        major = major * 10 + (unsigned)(*v - '0');
    if (*v == '.')
        for (v++; *v >= '0' && *v <= '9'; v++)
            minor = minor * 10 + (unsigned)(*v - '0');
    return major > 2 || (major == 2 && minor >= 38);
#else
    return 1;
#endif
}

static void op_malloc(int how)
{
    slot *s = pick_slot(0);
    if (!s)
        return;
    size_t n = fz_size(&rd), align = 0;
    if (live_bytes + n > LIVE_CAP)
        return;
    mk_ctx *ctx = malloc_ctx();
    FZ_OP("allocation (way %d) of %zu bytes, into context %p", how, n, ctx);
    char *p = NULL;
    int zeroed = 0;
    errno = 0;
    switch (how) {
    case 0:
        p = mkf_malloc(n);
        break;
    case 1: { /* calloc, sometimes overflowing */
        size_t elem = 1 + fz_u8(&rd) % 64;
        if (fz_u8(&rd) == 3) {
            elem += elem == 1; /* (a product of 1 cannot overflow) */
            p = mkf_calloc(SIZE_MAX / elem + 1 + fz_u8(&rd), elem);
            FZ_CHECK(!p && errno == ENOMEM, "overflowing calloc: %p",
                     (void *)p);
            return;
        }
        n = n / elem * elem;
        p = mkf_calloc(n / elem, elem);
        zeroed = 1;
        break;
    }
    case 2: { /* posix_memalign */
        unsigned t = fz_u8(&rd);
        align = t == 0 ? 4 : t == 1 ? 24 : fz_align(&rd, 21);
        void *out = (void *)&op_malloc; /* must stay untouched on failure */
        int e = mkf_posix_memalign(&out, align, n);
        if ((align & (align - 1)) || align < sizeof(void *)) {
            FZ_CHECK(e == EINVAL && out == (void *)&op_malloc,
                     "posix_memalign(%zu): %d", align, e);
            return;
        }
        FZ_CHECK(e == 0, "posix_memalign(%zu, %zu): %d", align, n, e);
        p = out;
        break;
    }
    case 3: { /* aligned_alloc: as the running C library does */
        align = fz_u8(&rd) == 0 ? 48 : fz_align(&rd, 21);
        p = mkf_aligned_alloc(align, n);
        if (align & (align - 1)) {
            if (aligned_alloc_strict()) {
                FZ_CHECK(!p && errno == EINVAL, "aligned_alloc(%zu)", align);
                return;
            }
            align = 64; /* (48, rounded up as memalign does) */
        }
        break;
    }
    case 4: { /* memalign rounds a non-power-of-two alignment up */
        size_t asked = 1 + fz_u16(&rd) % 5000;
        align = 1;
        while (align < asked)
            align <<= 1;
        p = mkf_memalign(asked, n);
        break;
    }
    case 5:
        align = PAGE;
        p = mkf_valloc(n);
        break;
    case 6:
        align = PAGE;
        p = mkf_pvalloc(n);
        if (p) {
            size_t whole = n ? (n + PAGE - 1) / PAGE * PAGE : PAGE;
            FZ_CHECK(mkf_malloc_usable_size(p) >= whole, "pvalloc(%zu): "
                     "usable %zu", n, mkf_malloc_usable_size(p));
        }
        break;
    default: { /* a size past memkit's limit */
        size_t big = ((size_t)1 << 47) + fz_u16(&rd);
        p = mkf_malloc(big);
        FZ_CHECK(!p && errno == ENOMEM, "malloc(%zu): %p errno %d", big,
                 (void *)p, errno);
        return;
    }
    }
    FZ_CHECK(p != NULL, "allocation %d of %zu bytes (align %zu) failed: "
             "errno %d", how, n, align, errno);
    adopt(s, p, n, align, ctx, zeroed);
}

static void op_free(void)
{
    slot *s = pick_slot(1);
    if (!s)
        return;
    FZ_OP("free %p: %zu bytes, context %p", s->p, s->size, s->ctx);
    verify(s, "before free");
    if (fz_u8(&rd) & 1)
        mkf_free_sized(s->p, s->size);
    else
        mkf_free(s->p);
    forget(s);
}

/* realloc from the chunk's owner thread (it stays in its context) or from
 * the other thread (it stays if it fits, else moves into that thread's
 * malloc context). */
static void op_realloc(void)
{
    slot *s = pick_slot(fz_u8(&rd) % 8 != 0);
    if (!s)
        return;
    size_t n = fz_u8(&rd) & 1 ? fz_size(&rd) : s->size + fz_u8(&rd) - 128;
    if (n > ((size_t)64 << 20))
        n = fz_u8(&rd);
    if (live_bytes + n > LIVE_CAP + (s->p ? s->size : 0))
        return;
    if (!s->p) { /* realloc(NULL, n) is malloc */
        FZ_OP("realloc(NULL, %zu)", n);
        mk_ctx *ctx = malloc_ctx();
        char *p = mkf_realloc(NULL, n);
        FZ_CHECK(p != NULL, "realloc(NULL, %zu)", n);
        adopt(s, p, n, 0, ctx, 0);
        return;
    }
    FZ_OP("realloc %p: %zu bytes in context %p, to %zu", s->p, s->size,
          s->ctx, n);
    verify(s, "before realloc");
    fz_old_chunk(s->p, s->size);
    unsigned how = fz_u8(&rd) % 8;
    if (how == 0 || n == 0) { /* to 0: frees, NULL */
        errno = 0;
        FZ_CHECK(mkf_realloc(s->p, 0) == NULL, "realloc(p, 0) is not NULL");
        forget(s);
        return;
    }
    if (how == 1) { /* reallocarray overflowing: refused, untouched */
        errno = 0;
        void *q = mkf_reallocarray(s->p, SIZE_MAX / 3, 5);
        FZ_CHECK(!q && errno == ENOMEM, "overflowing reallocarray");
        verify(s, "after a refused reallocarray");
        return;
    }
    if (how == 2) { /* past memkit's limit: refused, untouched */
        errno = 0;
        void *q = mkf_realloc(s->p, (size_t)1 << 47);
        FZ_CHECK(!q && errno == ENOMEM, "realloc to 2^47");
        verify(s, "after a refused realloc");
        return;
    }
    mk_ctx *owner = s->ctx;
    size_t old_usable = mkf_malloc_usable_size(s->p);
    char *q = how == 3 ? mkf_reallocarray(s->p, n, 1) : mkf_realloc(s->p, n);
    FZ_CHECK(q != NULL, "realloc %zu -> %zu failed: errno %d", s->size, n,
             errno);
    size_t kept = s->size < n ? s->size : n;
    size_t bad = fz_bad(q, kept, s->size, s->id);
    FZ_CHECK(bad == (size_t)-1, "realloc %zu -> %zu lost byte %zu", s->size,
             n, bad);
    mk_ctx *now = mk_ctx_of(q);
    /* the first thread owns its heap and the contexts it switches to; the
     * worker, its heap (perhaps one an ended worker left and it adopted);
     * a heap left by an ended worker and not adopted is no one's */
    int mine = owner == heap_worker;
    if (!on_worker_now) {
        mine = owner == heap_main || owner == other;
        for (int i = 0; i < NCAP; i++)
            mine |= owner == captures[i];
    }
    if (mine)
        FZ_CHECK(now == owner, "realloc by the owner moved the chunk to %s",
                 mk_ctx_name(now));
    else if (q == s->p)
        FZ_CHECK(n <= old_usable, "realloc from another thread kept a chunk "
                 "of %zu usable bytes for %zu", old_usable, n);
    else
        FZ_CHECK(now == malloc_ctx(), "realloc from another thread moved the "
                 "chunk to %s, not to the caller's", mk_ctx_name(now));
    forget(s);
    adopt(s, q, n, 0, now, 0);
}

/* Switch to a context for a few operations: a GENERAL one captures
 * malloc; another kind does not. */
static void ops_in(mk_ctx *c);

static void op_switch(void)
{
    unsigned t = fz_u8(&rd);
    int i = (int)(t % NCAP);
    FZ_OP("switch to context %d (byte %u)", i, t);
    if ((t & 0x30) == 0x30) { /* another kind: malloc stays on the heap */
        if (!other) {
            mk_ctx_opts o = {.chunk_size = 64};
            other = mk_ctx_new(NULL, "fz-slab", MK_SLAB, &o);
            FZ_CHECK(other != NULL, "mk_ctx_new");
        }
        ops_in(other);
        return;
    }
    if (!captures[i]) {
        captures[i] = mk_ctx_new(NULL, "fz-capture", MK_GENERAL, NULL);
        FZ_CHECK(captures[i] != NULL, "mk_ctx_new");
    }
    if ((t & 0xc0) == 0xc0) { /* delete it, with whatever malloc left there */
        for (int k = 0; k < NSLOT; k++)
            if (slots[k].p && slots[k].ctx == captures[i]) {
                verify(&slots[k], "before the capture's delete");
                forget(&slots[k]);
            }
        mk_ctx_delete(captures[i]);
        captures[i] = NULL;
        return;
    }
    ops_in(captures[i]);
}

static void op_stats(void)
{
    mk_ctx *h = on_worker_now ? heap_worker : heap_main;
    FZ_OP("statistics of heap %p", h);
    size_t chunks = 0;
    for (int i = 0; i < NSLOT; i++)
        chunks += slots[i].p && slots[i].ctx == h;
    mk_stats st;
    FZ_CHECK(mk_ctx_stats(h, &st, 0) == 0, "mk_ctx_stats");
    FZ_CHECK(st.chunks == chunks, "the heap holds %zu chunks, the model %zu",
             st.chunks, chunks);
    if (fz_u8(&rd) == 0)
        mkf_malloc_trim(0);
}

static void one_op(unsigned op)
{
    switch (op % 16) {
    case 0:
    case 1:
    case 2:
        op_malloc(0);
        break;
    case 3:
        op_malloc(1);
        break;
    case 4:
        op_malloc(2 + (int)(fz_u8(&rd) % 6));
        break;
    case 5:
    case 6:
    case 7:
        op_free();
        break;
    case 8:
    case 9:
        op_realloc();
        break;
    case 10:
        op_stats();
        break;
    default:
        op_malloc(0);
    }
}

static void ops_in(mk_ctx *c)
{
    mk_ctx *prev = mk_ctx_switch(c);
    int k = 1 + fz_u8(&rd) % 12;
    for (int j = 0; j < k && fz_more(&rd); j++)
        one_op(fz_u8(&rd));
    mk_ctx *back = mk_ctx_switch(prev);
    FZ_CHECK(back == c, "mk_ctx_switch");
}

/* ---- the second thread ------------------------------------------------------------ */

static pthread_mutex_t job_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t job_cond = PTHREAD_COND_INITIALIZER;
static int job_pending, job_done, worker_started;

static void worker_ops(void)
{
    on_worker_now = 1;
    if (!heap_worker)
        heap_worker = mk_ctx_current();
    int k = 1 + fz_u8(&rd) % 24;
    for (int j = 0; j < k && fz_more(&rd); j++)
        one_op(fz_u8(&rd)); /* (switching is the first thread's) */
    on_worker_now = 0;
}

static int worker_exit; /* the worker ends after its current job */
static pthread_t worker_thread;

static void *worker(void *arg)
{
    (void)arg;
    fz_worker = 1;
    pthread_mutex_lock(&job_lock);
    for (;;) {
        while (!job_pending)
            pthread_cond_wait(&job_cond, &job_lock);
        worker_ops();
        job_pending = 0;
        job_done = 1;
        pthread_cond_broadcast(&job_cond);
        if (worker_exit)
            break;
    }
    pthread_mutex_unlock(&job_lock);
    return NULL;
}

/* Run a few operations on the second thread; now and then that thread
 * ends afterwards, its heap (holding chunks the model still has) is left
 * to be adopted, and the next call starts a new thread. */
static void op_worker(void)
{
    int end = fz_u8(&rd) % 8 == 0;
    FZ_OP("operations on the second thread%s",
          end ? ", which then ends" : "");
    pthread_mutex_lock(&job_lock);
    if (!worker_started) {
        FZ_CHECK(pthread_create(&worker_thread, NULL, worker, NULL) == 0,
                 "thread");
        worker_started = 1;
        heap_worker = NULL; /* its heap: set by its first job */
    }
    worker_exit = end;
    job_pending = 1;
    job_done = 0;
    pthread_cond_broadcast(&job_cond);
    while (!job_done)
        pthread_cond_wait(&job_cond, &job_lock);
    pthread_mutex_unlock(&job_lock);
    if (end) {
        pthread_join(worker_thread, NULL);
        worker_started = 0;
    }
}

/* ---- one input ----------------------------------------------------------------------- */

static void cleanup(void)
{
    FZ_OP("the end of the input: everything freed, deleted");
    for (int i = 0; i < NSLOT; i++)
        if (slots[i].p) {
            verify(&slots[i], "at the end");
            mkf_free(slots[i].p);
            forget(&slots[i]);
        }
    for (int i = 0; i < NCAP; i++)
        if (captures[i]) {
            mk_stats st;
            mk_ctx_stats(captures[i], &st, 0);
            FZ_CHECK(st.chunks == 0, "capture context: %zu chunks left",
                     st.chunks);
            mk_ctx_delete(captures[i]);
            captures[i] = NULL;
        }
    mk_ctx_delete(other);
    other = NULL;
    mk_stats st;
    mk_ctx_stats(heap_main, &st, 0);
    FZ_CHECK(st.chunks == 0, "the heap holds %zu chunks at the end",
             st.chunks);
    FZ_CHECK(live_bytes == 0, "model: %zu bytes left", live_bytes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_begin(data, size);
    rd = (fz_reader){data, size, 0};
    heap_main = mk_ctx_current();
    FZ_CHECK(heap_main && mk_ctx_kind(heap_main) == MK_GENERAL, "no heap");
    for (fz_op = 0; fz_more(&rd) && fz_op < MAXOPS; fz_op++) {
        unsigned op = fz_u8(&rd);
        if (op % 16 == 11)
            op_switch();
        else if (op % 16 == 12)
            op_worker();
        else
            one_op(op);
    }
    cleanup();
    return 0;
}
