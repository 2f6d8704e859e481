/* SPDX-License-Identifier: MIT */
/*
 * compat/forward.c - a preloaded malloc wrapper of the commonest kind (a
 * leak tracer, glibc's own libc_malloc_debug.so): it defines the malloc
 * family and forwards each call to the allocator's __libc_* name.
 *
 * Loaded before the allocator (LD_PRELOAD=libcompat_forward.so:...), its
 * names are the process's malloc, calloc...; the allocator's __libc_calloc
 * must then do the work itself.  One that called calloc instead would call
 * this wrapper back, which would call __libc_calloc again, until the stack
 * overflowed.  Each wrapper counts how deep it is on this thread and stops
 * the program with a line saying which name came back, at the first
 * re-entry: a recursion is named, not a SIGSEGV.  compat/wrappers.c checks
 * that the wrapper ran (forward_calls).
 */
#include <malloc.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

extern void *__libc_malloc(size_t n);
extern void __libc_free(void *p);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);
extern void *__libc_valloc(size_t n);
extern void *__libc_pvalloc(size_t n);
extern int __libc_mallopt(int param, int value);

static __thread int depth;
static unsigned long calls;

/* How many calls the wrappers forwarded (the test's proof that they ran). */
unsigned long forward_calls(void) { return calls; }

static void enter(const char *name)
{
    if (depth++ > 0) {
        static const char a[] = "forward: ";
        static const char b[] = " was called again from inside the allocator\n";
        (void)!write(2, a, sizeof a - 1);
        size_t n = 0;
        while (name[n])
            n++;
        (void)!write(2, name, n);
        (void)!write(2, b, sizeof b - 1);
        _exit(3);
    }
    calls++;
}

static void leave(void) { depth--; }

#define FORWARD(type, name, params, args)                                     \
    type name params                                                          \
    {                                                                         \
        enter(#name);                                                         \
        type r = __libc_##name args;                                          \
        leave();                                                              \
        return r;                                                             \
    }

FORWARD(void *, malloc, (size_t n), (n))
FORWARD(void *, calloc, (size_t n, size_t size), (n, size))
FORWARD(void *, realloc, (void *p, size_t n), (p, n))
FORWARD(void *, memalign, (size_t align, size_t n), (align, n))
FORWARD(void *, valloc, (size_t n), (n))
FORWARD(void *, pvalloc, (size_t n), (n))
FORWARD(int, mallopt, (int param, int value), (param, value))

void free(void *p)
{
    enter("free");
    __libc_free(p);
    leave();
}
