/* SPDX-License-Identifier: MIT */
/*
 * one_engine.c - refuse, at load time, a process in which libmemkit-malloc
 * provides malloc while another copy of memkit provides the mk_* API.
 *
 * libmemkit-malloc holds the whole engine plus the malloc family, so a
 * program that links it and libmemkit (or libmemkit-check) gets two
 * engines.  With `-lmemkit-malloc -lmemkit` every mk_* call binds to
 * libmemkit-malloc's (the first definition in link order) and libmemkit is
 * loaded but never used: one engine runs, and that works.  With `-lmemkit
 * -lmemkit-malloc` the mk_* calls bind to libmemkit's engine and malloc to
 * libmemkit-malloc's: mk_ctx_switch steers an engine malloc never looks at,
 * and an mk_free of a malloc'ed block (or a free of an mk_alloc'ed chunk)
 * reaches the wrong engine, which reports an invalid pointer and aborts,
 * far from the cause.
 *
 * The trade-off chosen: fail at load, with a line saying what to do,
 * rather than make both orders work.  Making them work would mean one
 * engine shared by two libraries - libmemkit-malloc calling into
 * libmemkit's internals through exported symbols (a PLT call on malloc's
 * fast path, and internals in the ABI) - or malloc forwarding to the
 * other engine's public API (slower, and glibc's alignment rules lost).
 * A linker cannot refuse the pair either: two shared libraries may define
 * the same symbols.  So this constructor, run when libmemkit-malloc is
 * loaded, looks at where the dynamic loader bound two of its own
 * references: malloc and mk_ctx_switch.  If malloc is this library's (it
 * is the process's malloc) but mk_ctx_switch is a definition in another
 * object, it writes one line to stderr and exits with status 127, as the
 * loader does when a library is missing.  When malloc is not this
 * library's (libmemkit-malloc dlopen'ed RTLD_LOCAL into a program, whose
 * malloc stays glibc's), this library's engine serves nobody's malloc and
 * nothing is said.  An address that dladdr cannot match to a definition
 * (a non-PIE executable's canonical PLT entry) is given the benefit of
 * the doubt.  Nothing here allocates; it runs once per load.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* dladdr */
#endif
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memkit.h"

/* Where the loader bound @addr: the object's base, if @addr is the start
 * of a definition named @name in it; NULL when dladdr cannot tell. */
static const void *definition_base(const void *addr, const char *name, const char **file)
{
    Dl_info info;
    if (!dladdr(addr, &info) || !info.dli_sname || strcmp(info.dli_sname, name) != 0 ||
        info.dli_saddr != addr)
        return NULL;
    *file = info.dli_fname && info.dli_fname[0] ? info.dli_fname : "the program";
    return info.dli_fbase;
}

static void say(const char *s) { (void)!write(STDERR_FILENO, s, strlen(s)); }

__attribute__((constructor)) static void one_engine_check(void)
{
    /* Through volatile pointers: the loader's bindings (the GOT), never an
     * address the compiler or the static linker resolved locally. */
    void *(*volatile malloc_fn)(size_t) = malloc;
    mk_ctx *(*volatile switch_fn)(mk_ctx *) = mk_ctx_switch;
    Dl_info self;
    if (!dladdr((const void *)one_engine_check, &self))
        return;
    const char *malloc_file = NULL, *api_file = NULL;
    const void *malloc_base = definition_base((const void *)malloc_fn, "malloc", &malloc_file);
    const void *api_base = definition_base((const void *)switch_fn, "mk_ctx_switch", &api_file);
    if (malloc_base != self.dli_fbase || !api_base || api_base == self.dli_fbase)
        return;
    say("memkit: two copies of memkit in one process: the mk_* functions come from ");
    say(api_file);
    say(", malloc from ");
    say(self.dli_fname ? self.dli_fname : "libmemkit-malloc");
    say("; link libmemkit-malloc alone (-lmemkit-malloc, pkg-config memkit-malloc, "
        "CMake memkit::memkit-malloc): it has the whole memkit API\n");
    _exit(127);
}
