/* SPDX-License-Identifier: MIT */
/*
 * annotate.h - telling AddressSanitizer and Valgrind's Memcheck about
 * memkit's chunks: a leaf of inline functions over their client requests
 * (annotate.c reads once whether the process runs under Valgrind).
 *
 * AddressSanitizer is a compile-time fact (the library is built with it);
 * Valgrind is a run-time fact (RUNNING_ON_VALGRIND, read once), available
 * only when <valgrind/memcheck.h> was found at build time.  Either one makes
 * every context *instrumented* (ctx/ctx.h), so none of this is on a release
 * fast path: those use raw loads and stores of the link word.
 *
 * Rule while instrumented: a chunk is addressable exactly from its
 * allocation to its free, for its requested size; free chunks, the slack of
 * a chunk and never-used page memory are poisoned (ASan) / no-access
 * (Memcheck).  memkit reads and writes the link word of a free chunk only
 * through mki_link_get/mki_link_set (page/page.h), which open and close
 * that one word.
 */
#ifndef MKI_ANNOTATE_H
#define MKI_ANNOTATE_H

#include "base.h"

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
/* Read RUNNING_ON_VALGRIND (and MEMKIT_VALGRIND); idempotent. */
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

#pragma GCC visibility pop

#endif /* MKI_ANNOTATE_H */
