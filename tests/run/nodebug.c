/*
 * nodebug.c - a library as distributions ship them: no debug information,
 * and stripped to its exported symbols (tests/CMakeLists.txt builds it
 * with -g0 and links it with -s).  Its allocation happens in a static
 * function, which only the nearest export below it can name: memkit-run
 * must print that name with its offset ("export+0xOFF"), never bare, or
 * the frame would look like the export itself.  Loaded by the subject's
 * `nodebug` mode (tests/run/subject.c); not a test by itself.
 */
#include <stdlib.h>

/* an export placed before the static function, so that one is nearest
 * (-fno-toplevel-reorder keeps the order of this file) */
void mr_nodebug_first(void *p);
void *mr_nodebug_alloc(size_t n);

void mr_nodebug_first(void *p)
{
    __asm__ volatile("" : : "r"(p) : "memory");
}

/* (the asm after the call: the frame stays; noipa: not inlined) */
__attribute__((noinline, noipa)) static void *hidden_alloc(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}

void *mr_nodebug_alloc(size_t n)
{
    void *p = hidden_alloc(n);
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}
