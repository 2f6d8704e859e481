/*
 * annotate.h - telling AddressSanitizer and Valgrind's Memcheck about
 * memkit's chunks, and the accessors for free-list links that keep them
 * quiet about memkit's own reads of freed chunks.
 *
 * AddressSanitizer is a compile-time fact (the library is built with it);
 * Valgrind is a run-time fact (RUNNING_ON_VALGRIND, read once), available
 * only when <valgrind/memcheck.h> was found at build time.  Either one makes
 * every context *instrumented* (types.h), so none of this is on a release
 * fast path: those use raw loads and stores of the link word.
 *
 * Rule while instrumented: a chunk is addressable exactly from its
 * allocation to its free, for its requested size; free chunks, the slack of
 * a chunk and never-used page memory are poisoned (ASan) / no-access
 * (Memcheck).  memkit reads and writes the link word of a free chunk only
 * through mki_link_get/mki_link_set, which open and close that one word.
 */
#ifndef MKI_ANNOTATE_H
#define MKI_ANNOTATE_H

#include "../types.h"

#if defined(__SANITIZE_ADDRESS__)
#define MKI_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MKI_ASAN 1
#endif
#endif
#ifndef MKI_ASAN
#define MKI_ASAN 0
#endif
#if MKI_ASAN
#include <sanitizer/asan_interface.h>
#endif

#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define MKI_VALGRIND 1
#endif
#endif
#ifndef MKI_VALGRIND
#define MKI_VALGRIND 0
#endif

#pragma GCC visibility push(hidden)

/* Non-zero when the process runs under Valgrind (set once, at start-up). */
extern int mki_valgrind_on;
/* Read RUNNING_ON_VALGRIND; idempotent. */
void mki_annotate_init(void);

MKI_INLINE void mki_mem_noaccess(const void *p, size_t n)
{
#if MKI_ASAN
    ASAN_POISON_MEMORY_REGION(p, n);
#endif
#if MKI_VALGRIND
    if (mki_valgrind_on)
        VALGRIND_MAKE_MEM_NOACCESS(p, n);
#endif
    (void)p, (void)n;
}

MKI_INLINE void mki_mem_undefined(const void *p, size_t n)
{
#if MKI_ASAN
    ASAN_UNPOISON_MEMORY_REGION(p, n);
#endif
#if MKI_VALGRIND
    if (mki_valgrind_on)
        VALGRIND_MAKE_MEM_UNDEFINED(p, n);
#endif
    (void)p, (void)n;
}

MKI_INLINE void mki_mem_defined(const void *p, size_t n)
{
#if MKI_ASAN
    ASAN_UNPOISON_MEMORY_REGION(p, n);
#endif
#if MKI_VALGRIND
    if (mki_valgrind_on)
        VALGRIND_MAKE_MEM_DEFINED(p, n);
#endif
    (void)p, (void)n;
}

/* Memory about to go back to the OS: AddressSanitizer keeps its shadow
 * across munmap, so a later mapping at the same address would start out
 * poisoned; Memcheck forgets by itself. */
MKI_INLINE void mki_mem_forget(const void *p, size_t n)
{
#if MKI_ASAN
    ASAN_UNPOISON_MEMORY_REGION(p, n);
#endif
    (void)p, (void)n;
}

/* Secure mode (MEMKIT_SECURE, read once at start, options.c): the link
 * word of a free chunk is stored encoded, as glibc's safe-linking and
 * mimalloc's secure mode do: XORed with the chunk's own address shifted by
 * 12 (the random bits of the address) and with a secret drawn at start, so
 * that an overflow or a use-after-free write cannot plant an address of
 * its choosing, and a link that was overwritten decodes to garbage that
 * the reader's check (page.h) reports.  Only slow paths read and write
 * links in secure mode: its contexts never take the inline fast paths
 * (nor do the checking build's, which encodes its links the same way). */
extern unsigned char mki_secure;
extern uintptr_t mki_link_key;
/* The secret of GENERATION's header states (ctx/generation.h), drawn at
 * start with mki_link_key; never 0. */
extern uintptr_t mki_free_key;
MKI_INLINE uintptr_t mki_link_mask(const void *p)
{
    /* the checking build encodes too: a link overwritten with zeros (the
     * commonest write to a freed object, `obj->next = NULL`) then decodes
     * to no chunk and is reported, where NULL would pass as the list's end */
    return MK_CONFIG_CHECK || mki_secure ? ((uintptr_t)p >> 12) ^ mki_link_key
                                         : 0;
}

/* The link word of a free chunk of an uninstrumented secure context (its
 * own paths, ctx/general.c and general.h): encoded, with no test of the
 * mode and, like the inline paths, no annotation (such a context's memory
 * is never poisoned). */
MKI_INLINE void *mki_link_get_enc(void *p)
{
    return (void *)(*(uintptr_t *)p ^ ((uintptr_t)p >> 12) ^ mki_link_key);
}
MKI_INLINE void mki_link_set_enc(void *p, void *v)
{
    *(uintptr_t *)p = (uintptr_t)v ^ ((uintptr_t)p >> 12) ^ mki_link_key;
}

/* The link word of a free chunk (slow paths only). */
MKI_INLINE void *mki_link_get(void *p)
{
    mki_mem_defined(p, sizeof(void *));
    void *v = (void *)(*(uintptr_t *)p ^ mki_link_mask(p));
    mki_mem_noaccess(p, sizeof(void *));
    return v;
}

MKI_INLINE void mki_link_set(void *p, void *v)
{
    mki_mem_undefined(p, sizeof(void *));
    *(uintptr_t *)p = (uintptr_t)v ^ mki_link_mask(p);
    mki_mem_noaccess(p, sizeof(void *));
}

#pragma GCC visibility pop

#endif /* MKI_ANNOTATE_H */
