/*
 * install/strdup_only.c - a consumer linked with libmemkit-malloc that
 * never names an allocation function itself: it only calls strdup(), and
 * the C library allocates for it.  Under the linker's --as-needed (Debian
 * and Ubuntu turn it on by default) a library that no symbol of the
 * program needs is dropped from the link, silently: this program is the
 * case where that would happen, so it checks that memkit's drop-in is
 * still loaded and serves the C library's own allocations.
 *
 * It must not reference any memkit or malloc-family symbol (that would
 * make the library "needed" and hide the bug): memkit is reached through
 * dlsym() and function pointers only, and the string is never freed.
 * With the shared library, malloc must be libmemkit-malloc's and the
 * string must lie in a memkit context; with the static one (-static
 * target, memkit linked into the program), malloc must be the program's
 * own, exported for the C library (the program defines none itself).
 * Exit status 0 if so; 1 with a message otherwise.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef void *(*ctx_of_fn)(const void *);
typedef void *(*ctx_current_fn)(void);

static const char in_program = 1; /* an address inside the program itself */

int main(void)
{
    char *s = strdup("memkit");
    if (!s) {
        fprintf(stderr, "strdup failed\n");
        return 1;
    }
    void *m = dlsym(RTLD_DEFAULT, "malloc");
    Dl_info info;
    if (!m || !dladdr(m, &info) || !info.dli_fname) {
        fprintf(stderr, "malloc cannot be placed in a loaded object\n");
        return 1;
    }
    Dl_info self;
    if (dladdr(&in_program, &self) && self.dli_fbase == info.dli_fbase) {
        printf("strdup served by the program's own malloc (memkit, linked in)\n");
        return 0;
    }
    if (!strstr(info.dli_fname, "libmemkit-malloc")) {
        fprintf(stderr, "malloc is %s's, not memkit's: the link dropped "
                        "libmemkit-malloc (--as-needed)\n", info.dli_fname);
        return 1;
    }
    /* the C library's strdup went to memkit's malloc: its chunk lies in
     * the calling thread's context */
    ctx_of_fn ctx_of;
    ctx_current_fn ctx_current;
    *(void **)&ctx_of = dlsym(RTLD_DEFAULT, "mk_ctx_of");
    *(void **)&ctx_current = dlsym(RTLD_DEFAULT, "mk_ctx_current");
    if (!ctx_of || !ctx_current || ctx_of(s) != ctx_current()) {
        fprintf(stderr, "strdup's string is not in this thread's memkit context\n");
        return 1;
    }
    printf("strdup served by %s\n", info.dli_fname);
    return 0;
}
