/* SPDX-License-Identifier: MIT */
/*
 * cxx.c - C++ operator new and delete, every form (plain, array, nothrow,
 * sized, aligned), for libmemkit-malloc.
 *
 * Without them C++ programs would still run on memkit (libstdc++'s
 * operators call malloc and free), one call deeper.  They are written in C
 * under their Itanium C++ ABI names (the ABI of gcc and clang on Linux and
 * BSD) so that the library needs no C++ compiler to build and, above all,
 * does not depend on libstdc++: a C program preloading libmemkit-malloc
 * must not load it (a few hundred KiB of resident memory).  What an
 * operator new needs from the C++ runtime when memory is exhausted, the
 * new-handler and the std::bad_alloc exception, is reached through weak
 * references to libstdc++'s own functions, which a C++ program always has
 * loaded; when they were not there at load time (a C program that
 * dlopen()s a C++ plugin later), they are looked up with dlsym when
 * memory runs out.  The file is compiled with unwind tables so that the
 * exception can cross it.
 *
 * Known limit: a new-handler that throws inside a nothrow operator new
 * cannot be caught here (C cannot catch); the exception then ends the
 * program (nothrow new is noexcept).  With no handler, or one that frees
 * memory or calls abort, nothrow new behaves as the standard says.
 */
#include "override.h"

#include <dlfcn.h>
#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))
#define CXX(name) __asm__(name)

typedef void (*new_handler)(void);
/* std::get_new_handler() and std::__throw_bad_alloc(), from libstdc++. */
extern new_handler mki_get_new_handler(void) CXX("_ZSt15get_new_handlerv")
    __attribute__((weak));
extern void mki_throw_bad_alloc(void) CXX("_ZSt17__throw_bad_allocv")
    __attribute__((weak, noreturn));

/* libstdc++'s function @name (its mangled name) when the weak reference
 * @weak was not bound at load time: libstdc++ came later, with dlopen,
 * perhaps as a dependency of an RTLD_LOCAL plugin (then it is in no
 * global scope: RTLD_NOLOAD finds it among the loaded objects).  Only on
 * the path where memory ran out. */
static void *cxx_runtime(void *weak, const char *name)
{
    if (weak)
        return weak;
    void *f = NULL;
    void *lib = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_NOLOAD);
    if (lib) {
        f = dlsym(lib, name);
        dlclose(lib); /* (NOLOAD took a reference: give it back) */
    }
    return f ? f : dlsym(RTLD_DEFAULT, name);
}

/* Allocate as operator new must: call the new-handler until memory comes
 * or there is none; then throw (@nothrow: return NULL). */
static void *new_slow(size_t align, size_t n, int nothrow)
{
    for (;;) {
        void *p = align ? mki_override_alloc_aligned(align, n)
                        : mki_override_alloc(n);
        if (p)
            return p;
        new_handler (*get)(void) = (new_handler (*)(void))cxx_runtime(
            (void *)mki_get_new_handler, "_ZSt15get_new_handlerv");
        new_handler h = get ? get() : NULL;
        if (!h) {
            if (nothrow)
                return NULL;
            void (*throw_it)(void) = (void (*)(void))cxx_runtime(
                (void *)mki_throw_bad_alloc, "_ZSt17__throw_bad_allocv");
            if (throw_it)
                throw_it();
            abort(); /* no C++ runtime, yet operator new was called */
        }
        h();
    }
}

static inline void *new_plain(size_t n)
{
    void *p = mki_override_alloc(n);
    return __builtin_expect(p != NULL, 1) ? p : new_slow(0, n, 0);
}

static inline void *new_nothrow(size_t n)
{
    void *p = mki_override_alloc(n);
    return __builtin_expect(p != NULL, 1) ? p : new_slow(0, n, 1);
}

/* operator new(size_t) and new[] */
EXPORT void *mki_new(size_t n) CXX("_Znwm");
EXPORT void *mki_new_array(size_t n) CXX("_Znam");
void *mki_new(size_t n) { return new_plain(n); }
void *mki_new_array(size_t n) { return new_plain(n); }

/* (size_t, const std::nothrow_t &) */
EXPORT void *mki_new_nt(size_t n, const void *nt) CXX("_ZnwmRKSt9nothrow_t");
EXPORT void *mki_new_array_nt(size_t n, const void *nt)
    CXX("_ZnamRKSt9nothrow_t");
void *mki_new_nt(size_t n, const void *nt)
{
    (void)nt;
    return new_nothrow(n);
}
void *mki_new_array_nt(size_t n, const void *nt)
{
    (void)nt;
    return new_nothrow(n);
}

/* (size_t, std::align_val_t) */
EXPORT void *mki_new_al(size_t n, size_t al) CXX("_ZnwmSt11align_val_t");
EXPORT void *mki_new_array_al(size_t n, size_t al) CXX("_ZnamSt11align_val_t");
void *mki_new_al(size_t n, size_t al) { return new_slow(al, n, 0); }
void *mki_new_array_al(size_t n, size_t al) { return new_slow(al, n, 0); }

/* (size_t, std::align_val_t, const std::nothrow_t &) */
EXPORT void *mki_new_al_nt(size_t n, size_t al, const void *nt)
    CXX("_ZnwmSt11align_val_tRKSt9nothrow_t");
EXPORT void *mki_new_array_al_nt(size_t n, size_t al, const void *nt)
    CXX("_ZnamSt11align_val_tRKSt9nothrow_t");
void *mki_new_al_nt(size_t n, size_t al, const void *nt)
{
    (void)nt;
    return new_slow(al, n, 1);
}
void *mki_new_array_al_nt(size_t n, size_t al, const void *nt)
{
    (void)nt;
    return new_slow(al, n, 1);
}

/* operator delete: every form is free() (memkit finds a chunk's size and
 * alignment from its pointer) */
EXPORT void mki_delete(void *p) CXX("_ZdlPv");
EXPORT void mki_delete_array(void *p) CXX("_ZdaPv");
EXPORT void mki_delete_nt(void *p, const void *nt) CXX("_ZdlPvRKSt9nothrow_t");
EXPORT void mki_delete_array_nt(void *p, const void *nt)
    CXX("_ZdaPvRKSt9nothrow_t");
EXPORT void mki_delete_sz(void *p, size_t n) CXX("_ZdlPvm");
EXPORT void mki_delete_array_sz(void *p, size_t n) CXX("_ZdaPvm");
EXPORT void mki_delete_al(void *p, size_t al) CXX("_ZdlPvSt11align_val_t");
EXPORT void mki_delete_array_al(void *p, size_t al) CXX("_ZdaPvSt11align_val_t");
EXPORT void mki_delete_sz_al(void *p, size_t n, size_t al)
    CXX("_ZdlPvmSt11align_val_t");
EXPORT void mki_delete_array_sz_al(void *p, size_t n, size_t al)
    CXX("_ZdaPvmSt11align_val_t");
EXPORT void mki_delete_al_nt(void *p, size_t al, const void *nt)
    CXX("_ZdlPvSt11align_val_tRKSt9nothrow_t");
EXPORT void mki_delete_array_al_nt(void *p, size_t al, const void *nt)
    CXX("_ZdaPvSt11align_val_tRKSt9nothrow_t");

void mki_delete(void *p) { mki_override_free(p, "operator delete"); }
void mki_delete_array(void *p) { mki_override_free(p, "operator delete[]"); }
void mki_delete_nt(void *p, const void *nt)
{
    (void)nt;
    mki_override_free(p, "operator delete");
}
void mki_delete_array_nt(void *p, const void *nt)
{
    (void)nt;
    mki_override_free(p, "operator delete[]");
}
void mki_delete_sz(void *p, size_t n)
{
    (void)n;
    mki_override_free(p, "operator delete");
}
void mki_delete_array_sz(void *p, size_t n)
{
    (void)n;
    mki_override_free(p, "operator delete[]");
}
void mki_delete_al(void *p, size_t al)
{
    (void)al;
    mki_override_free(p, "operator delete");
}
void mki_delete_array_al(void *p, size_t al)
{
    (void)al;
    mki_override_free(p, "operator delete[]");
}
void mki_delete_sz_al(void *p, size_t n, size_t al)
{
    (void)n, (void)al;
    mki_override_free(p, "operator delete");
}
void mki_delete_array_sz_al(void *p, size_t n, size_t al)
{
    (void)n, (void)al;
    mki_override_free(p, "operator delete[]");
}
void mki_delete_al_nt(void *p, size_t al, const void *nt)
{
    (void)al, (void)nt;
    mki_override_free(p, "operator delete");
}
void mki_delete_array_al_nt(void *p, size_t al, const void *nt)
{
    (void)al, (void)nt;
    mki_override_free(p, "operator delete[]");
}
