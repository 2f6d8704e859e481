/* SPDX-License-Identifier: MIT */
/*
 * malloc.c - the only file that defines malloc, free and the rest of the C
 * library's allocation functions.  Built into libmemkit-malloc (shared: use
 * it with LD_PRELOAD or link it; static: link it), never into libmemkit.
 *
 * malloc allocates from the calling thread's malloc context (heap/heap.c):
 * its current context when that is a GENERAL context, else its heap.  The
 * small-size path is the GENERAL fast path of mk_alloc (ctx/general.h),
 * reached through one initial-exec thread-local load and no test of the
 * context: a pointer to an empty context stands for "no usable context yet"
 * and sends the call to the slow path.  free is mk_free: any memkit chunk,
 * from any context and any thread.
 *
 * Semantics follow glibc where programs can tell the difference: every
 * result is 16-aligned (malloc's size classes skip mk_alloc's 8-aligned
 * 24-byte class, sizeclass.c); malloc(0) returns a unique pointer; realloc(p, 0) frees p and returns NULL;
 * memalign rounds a non-power-of-two alignment up; posix_memalign refuses
 * it (EINVAL), and aligned_alloc does as the running glibc does (rounds it
 * up before 2.38, EINVAL from 2.38 on); calloc and reallocarray detect
 * overflow; failures set errno to ENOMEM; mallopt accepts every
 * parameter with glibc's answer and malloc_info(options != 0) returns
 * EINVAL.  glibc's other names for the same functions (__libc_malloc & co.,
 * cfree) are memkit's too, so that no block crosses to glibc's allocator.  realloc of a chunk that another
 * thread's context owns moves it into the caller's context (a context is
 * allocated from by its owner only), unless it fits where it is.
 *
 * Compiled with -fno-builtin: the compiler must not turn the malloc + memset
 * inside calloc into a call to calloc.
 */
#include "override.h"
#include "../stats.h"

#include <errno.h>
#include <malloc.h>
#ifdef __GLIBC__
#include <gnu/libc-version.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* C23 names that glibc 2.36's headers do not declare yet, and glibc's
 * other names (at the end of the file), which they do not declare at all. */
EXPORT void free_sized(void *p, size_t size);
EXPORT void free_aligned_sized(void *p, size_t align, size_t size);
EXPORT void *__libc_malloc(size_t n);
EXPORT void __libc_free(void *p);
EXPORT void cfree(void *p);
EXPORT void *__libc_calloc(size_t n, size_t size);
EXPORT void *__libc_realloc(void *p, size_t n);
EXPORT void *__libc_memalign(size_t align, size_t n);
EXPORT void *__libc_valloc(size_t n);
EXPORT void *__libc_pvalloc(size_t n);
EXPORT int __libc_mallopt(int param, int value);
EXPORT struct mallinfo __libc_mallinfo(void);

/* ---- the paths every entry point shares ------------------------------------- */

void *mki_override_alloc_aligned(size_t align, size_t n)
{
    /* malloc's own alignment: 16 for every size (sizeclass.c) */
    if (align <= 16)
        return mki_override_alloc(n);
    mk_ctx *c = mki_heap_malloc_ctx();
    if (!c) {
        errno = ENOMEM;
        return NULL;
    }
    return mk_alloc_aligned(c, n, align);
}

/* ---- the C library's functions ------------------------------------------------ */

EXPORT void *malloc(size_t n) { return mki_override_alloc(n); }

EXPORT void free(void *p) { mki_override_free(p, "free"); }

EXPORT void free_sized(void *p, size_t size)
{
    (void)size;
    mki_override_free(p, "free_sized");
}

EXPORT void free_aligned_sized(void *p, size_t align, size_t size)
{
    (void)align, (void)size;
    mki_override_free(p, "free_aligned_sized");
}

/* Each function below that another exported name also stands for has its
 * body in a static core, which every name calls: a call between exported
 * names would go through the GOT (-fno-plt), to whichever library the
 * loader bound the name to.  A preloaded wrapper that defines calloc and
 * forwards to __libc_calloc (libc_malloc_debug.so, leak tracers) would then
 * be called back by memkit's __libc_calloc, and call it again, until the
 * stack overflows. */
static void *calloc_core(size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    int huge = total > MKI_LARGE_MAX;
    if (huge)
        mki_huge_calloc(1); /* fresh zeroes: no huge pages (huge.c) */
    void *p = mki_override_alloc(total);
    if (huge)
        mki_huge_calloc(0);
    if (p && !mki_chunk_is_zero(p, total))
        memset(p, 0, total);
    return p;
}

/* realloc into a new chunk of @n bytes, 16-aligned, of the owner's context
 * @c (instrumented: it records @n; mk_free reports nothing it has not). */
static void *realloc_moved(mk_ctx *c, void *p, size_t n)
{
    void *q = mk_alloc_aligned(c, n, 16);
    if (!q)
        return NULL;
    size_t old = mk_usable_size(p);
    memcpy(q, p, n < old ? n : old);
    mk_free(p);
    return q;
}

/* realloc into a new chunk of @n bytes of the thread's malloc context:
 * @p's @old usable bytes (at most @n) copied, @p freed. */
static void *realloc_to_heap(void *p, size_t n, size_t old)
{
    void *q = mki_override_alloc(n);
    if (!q)
        return NULL;
    memcpy(q, p, n < old ? n : old);
    mki_override_free(p, "realloc");
    return q;
}

static void *realloc_core(void *p, size_t n)
{
    if (!p)
        return mki_override_alloc(n);
    if (n == 0) { /* glibc: free and return NULL */
        mki_override_free(p, "realloc");
        return NULL;
    }
    /* the common case first: a live small chunk of a plain GENERAL
     * context (general.h), and of this thread's malloc context: kept by
     * mk_realloc's rule, 16-aligned, else moved, with no second lookup */
    mki_page *pg = MK_CONFIG_CHECK ? NULL : mki_general_live_small(p);
    if (pg && pg->ctx == &mki_tls_fast->base) {
        if (mki_general_keeps(pg, p, pg->chunk_size, mki_class_malloc_size(n), 16))
            return p;
        return realloc_to_heap(p, n, pg->chunk_size);
    }
    mk_ctx *owner = pg ? pg->ctx : mki_chunk_ctx(p, "realloc"); /* (validated) */
    if (!owner)
        return NULL; /* reported */
    /* the owner: mk_realloc (the chunk stays in its context), asking
     * 17..24 bytes as 32 in the default mode, which mk_realloc would
     * otherwise serve from the 8-aligned 24-byte class (sizeclass.c); a
     * secure context's classes are all 16-aligned; an instrumented one
     * records the size it is asked for and checks the bytes past it, so
     * it gets n itself, 16-aligned, in a new chunk */
    if (mki_ctx_owner(owner) == mki_tid() || mk_ctx_kind(owner) == MK_BUMP) {
        if (n - 17 < 8 && owner->fast_kind == MKI_KIND_SLOW &&
            mk_ctx_kind(owner) != MK_BUMP)
            return realloc_moved(owner, p, n);
        return mk_realloc(p, owner->fast_kind == MKI_KIND_SECURE
                                 ? n
                                 : mki_class_malloc_size(n)); /* (bump: ENOTSUP) */
    }
    /* another thread's context: keep the chunk if it fits and is
     * 16-aligned, else move it into ours */
    size_t old = mk_usable_size(p);
    if (n <= old && n >= old / 2 && ((uintptr_t)p & 15) == 0)
        return p;
    return realloc_to_heap(p, n, old);
}

EXPORT void *reallocarray(void *p, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc_core(p, total);
}

EXPORT void *calloc(size_t n, size_t size) { return calloc_core(n, size); }
EXPORT void *realloc(void *p, size_t n) { return realloc_core(p, n); }

EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    if (align < sizeof(void *) || (align & (align - 1)) != 0)
        return EINVAL;
    int saved = errno;
    void *p = mki_override_alloc_aligned(align, n);
    if (!p)
        return ENOMEM;
    errno = saved; /* POSIX: the result is the return value */
    *out = p;
    return 0;
}

/* Does aligned_alloc refuse an alignment that is not a power of two, as
 * the C library the program runs on does?  glibc did not before 2.38 (its
 * aligned_alloc was memalign, which rounds it up); 2.38 made it EINVAL, as
 * C17 allows and musl does.  Asked only on that rare path. */
static int aligned_alloc_strict(void)
{
#ifdef __GLIBC__
    static int strict = -1; /* (two threads that race write the same) */
    if (strict < 0) {
        unsigned major = 0, minor = 0;
        const char *v = gnu_get_libc_version();
        for (; *v >= '0' && *v <= '9'; v++)
            major = major * 10 + (unsigned)(*v - '0');
        if (*v == '.')
            for (v++; *v >= '0' && *v <= '9'; v++)
                minor = minor * 10 + (unsigned)(*v - '0');
        strict = major > 2 || (major == 2 && minor >= 38);
    }
    return strict;
#else
    return 1;
#endif
}

static void *memalign_core(size_t align, size_t n);

EXPORT void *aligned_alloc(size_t align, size_t n)
{
    if (align == 0 || (align & (align - 1)) != 0) {
        if (!aligned_alloc_strict())
            return memalign_core(align, n); /* glibc < 2.38: memalign */
        errno = EINVAL;
        return NULL;
    }
    return mki_override_alloc_aligned(align, n);
}

static void *memalign_core(size_t align, size_t n)
{
    if (align & (align - 1)) { /* glibc rounds up to a power of two */
        if (align > ((size_t)1 << 63)) {
            errno = EINVAL;
            return NULL;
        }
        size_t a = 1;
        while (a < align)
            a <<= 1;
        align = a;
    }
    return mki_override_alloc_aligned(align ? align : 1, n);
}

static void *valloc_core(size_t n)
{
    return mki_override_alloc_aligned((size_t)sysconf(_SC_PAGESIZE), n);
}

static void *pvalloc_core(size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t rounded = (n + page - 1) & ~(page - 1);
    if (rounded < n) {
        errno = ENOMEM;
        return NULL;
    }
    return mki_override_alloc_aligned(page, rounded ? rounded : page);
}

EXPORT void *memalign(size_t align, size_t n) { return memalign_core(align, n); }
EXPORT void *valloc(size_t n) { return valloc_core(n); }
EXPORT void *pvalloc(size_t n) { return pvalloc_core(n); }

EXPORT size_t malloc_usable_size(void *p)
{
    return mki_chunk_usable_size(p, "malloc_usable_size");
}

EXPORT int malloc_trim(size_t pad)
{
    (void)pad;
    return mk_trim() > 0;
}

/* mallopt's parameters tune glibc's arenas, which memkit does not have:
 * each is accepted and ignored, with glibc 2.36's answer (1, "done", for
 * every parameter and value, known or not, but M_MXFAST above its
 * maximum of 160 bytes: 0), since programs read 0 as failure. */
static int mallopt_core(int param, int value)
{
    if (param == M_MXFAST)
        return (size_t)value <= 160;
    return 1;
}

/* glibc's meanings: `arena` is the memory of the heap proper (memkit's
 * normal segments, committed), split into `uordblks` (handed to contexts:
 * pages) and `fordblks` (not), so arena = uordblks + fordblks; the chunks
 * with a mapping of their own are `hblks` and `hblkhd`, and are in none of
 * the three (a program's usual total, uordblks + hblkhd, counts each byte
 * once). */
static struct mallinfo2 mallinfo2_core(void)
{
    mki_malloc_figures f;
    mki_segment_figures(&f);
    struct mallinfo2 mi;
    memset(&mi, 0, sizeof mi);
    mi.arena = f.segment_bytes;  /* committed in memkit's segments */
    mi.ordblks = 0;              /* free chunks are not counted */
    mi.hblks = f.huge_count;     /* chunks with a mapping of their own */
    mi.hblkhd = f.huge_bytes;
    /* pages count their whole address range, of which a large page may
     * have committed only part (it grows in place): capped at what the
     * segments hold committed, so that used + free = arena */
    size_t pages = f.page_bytes < f.segment_bytes ? f.page_bytes
                                                  : f.segment_bytes;
    mi.uordblks = pages;                   /* handed to contexts */
    mi.fordblks = f.segment_bytes - pages; /* committed, not handed */
    mi.keepcost = 0;
    return mi;
}

EXPORT int mallopt(int param, int value) { return mallopt_core(param, value); }
EXPORT struct mallinfo2 mallinfo2(void) { return mallinfo2_core(); }

static int clamp(size_t v) { return v > 0x7fffffff ? 0x7fffffff : (int)v; }

/* mallinfo's figures, clamped to int (glibc deprecates the name, not the
 * function: this is what mallinfo and __libc_mallinfo return) */
static struct mallinfo mallinfo_int(void)
{
    struct mallinfo2 m2 = mallinfo2_core();
    struct mallinfo mi;
    memset(&mi, 0, sizeof mi);
    mi.arena = clamp(m2.arena);
    mi.hblks = clamp(m2.hblks);
    mi.hblkhd = clamp(m2.hblkhd);
    mi.uordblks = clamp(m2.uordblks);
    mi.fordblks = clamp(m2.fordblks);
    return mi;
}

EXPORT struct mallinfo mallinfo(void) { return mallinfo_int(); }

EXPORT void malloc_stats(void) { mki_stats_print_process(STDERR_FILENO); }

EXPORT int malloc_info(int options, FILE *fp)
{
    if (options != 0)
        return EINVAL; /* as glibc: the error is the return value */
    if (!fp) {
        errno = EINVAL;
        return -1;
    }
    struct mallinfo2 mi = mallinfo2_core();
    fprintf(fp, "<malloc version=\"memkit-%s\">\n"
                "<system type=\"current\" size=\"%zu\"/>\n"
                "<total type=\"mmap\" count=\"%zu\" size=\"%zu\"/>\n"
                "<total type=\"inuse\" size=\"%zu\"/>\n"
                "</malloc>\n",
            MK_VERSION_STRING, mi.arena + mi.hblkhd, mi.hblks, mi.hblkhd,
            mi.uordblks);
    return 0;
}

/* ---- glibc's other names ------------------------------------------------------
 * glibc exports its allocator under a second set of names, which some
 * programs and libraries call directly (and binaries built against glibc
 * before 2.26 bind cfree@GLIBC_2.2.5).  Left to glibc, a block from one
 * of them would reach memkit's free (or the other way round) and abort:
 * every one is memkit's too, as in mimalloc, jemalloc and tcmalloc. */
EXPORT void *__libc_malloc(size_t n) { return mki_override_alloc(n); }
EXPORT void __libc_free(void *p) { mki_override_free(p, "free"); }
EXPORT void cfree(void *p) { mki_override_free(p, "cfree"); }
EXPORT void *__libc_calloc(size_t n, size_t size) { return calloc_core(n, size); }
EXPORT void *__libc_realloc(void *p, size_t n) { return realloc_core(p, n); }
EXPORT void *__libc_memalign(size_t align, size_t n) { return memalign_core(align, n); }
EXPORT void *__libc_valloc(size_t n) { return valloc_core(n); }
EXPORT void *__libc_pvalloc(size_t n) { return pvalloc_core(n); }
EXPORT int __libc_mallopt(int param, int value) { return mallopt_core(param, value); }
EXPORT struct mallinfo __libc_mallinfo(void) { return mallinfo_int(); }
