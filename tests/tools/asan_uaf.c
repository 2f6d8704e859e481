/* SPDX-License-Identifier: MIT */
/*
 * tools/asan_uaf.c - a program with one memory error inside memkit chunks,
 * for the tools that must see it: AddressSanitizer (the ASan build) and
 * Valgrind's Memcheck (the plain build run under valgrind).  It is not a
 * harness test: the tool's report is the verdict (see tests/CMakeLists.txt
 * and tools/valgrind_expect.sh).  argv[1] picks the error:
 *   general         read a freed 64-byte GENERAL chunk
 *   general-large   read a freed 100,000-byte GENERAL chunk
 *   slab            read a freed SLAB chunk
 *   pool            read a freed pool object
 *   generation      read a freed GENERATION chunk
 *   bump            read a BUMP chunk after its context was reset
 *   overflow24      read one byte past a live 24-byte GENERAL chunk
 *   leak            lose the last pointer to a chunk of a context that is
 *                   never deleted (for valgrind --leak-check=full), while
 *                   one malloc()ed block stays live
 *   leak-no-malloc  the same with no malloc()ed block live at exit:
 *                   Memcheck's leak check then skips every mempool chunk
 *                   (it only looks for mempool chunks when some malloc
 *                   block exists), so this leak goes unreported
 *   none            correct use: no error at all (the control)
 * Reads go through a volatile pointer so the compiler keeps them.  The
 * program prints the byte it read and exits 0 when nothing stopped it.
 */
#include <memkit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int read_byte(const void *p, size_t off)
{
    return ((const volatile unsigned char *)p)[off];
}

/* Pointers kept live to the end (leak cases). */
static void *volatile hidden, *volatile live_malloc;

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "none";
    mk_ctx *ctx = mk_ctx_new(NULL, "tool", MK_GENERAL, NULL);
    if (!ctx)
        return 2;
    char *keep = mk_alloc(ctx, 64); /* keeps the page in use */
    if (!keep)
        return 2;
    memset(keep, 1, 64);
    int v = -1;

    if (strcmp(what, "general") == 0) {
        char *p = mk_alloc(ctx, 64);
        memset(p, 7, 64);
        mk_free(p);
        v = read_byte(p, 8);
    } else if (strcmp(what, "general-large") == 0) {
        char *p = mk_alloc(ctx, 100000);
        memset(p, 7, 100000);
        mk_free(p);
        v = read_byte(p, 5000);
    } else if (strcmp(what, "slab") == 0) {
        mk_ctx_opts o = {.chunk_size = 48};
        mk_ctx *s = mk_ctx_new(ctx, "tool-slab", MK_SLAB, &o);
        char *a = mk_alloc(s, 48), *p = mk_alloc(s, 48);
        memset(a, 6, 48);
        memset(p, 7, 48);
        mk_free(p);
        v = read_byte(p, 16);
    } else if (strcmp(what, "pool") == 0) {
        mk_pool *pool = mk_pool_new("tool-pool", 24, 0, 0);
        char *a = mk_pool_alloc(pool), *p = mk_pool_alloc(pool);
        memset(a, 6, 24);
        memset(p, 7, 24);
        mk_pool_free(pool, p);
        v = read_byte(p, 12);
    } else if (strcmp(what, "generation") == 0) {
        mk_ctx *g = mk_ctx_new(ctx, "tool-gen", MK_GENERATION, NULL);
        char *a = mk_alloc(g, 100), *p = mk_alloc(g, 100);
        memset(a, 6, 100);
        memset(p, 7, 100);
        mk_free(p);
        v = read_byte(p, 50);
    } else if (strcmp(what, "bump") == 0) {
        mk_ctx *b = mk_ctx_new(ctx, "tool-bump", MK_BUMP, NULL);
        char *p = mk_alloc(b, 100);
        memset(p, 7, 100);
        mk_ctx_reset(b);
        v = read_byte(p, 50);
    } else if (strcmp(what, "overflow24") == 0) {
        char *p = mk_alloc(ctx, 24);
        memset(p, 7, 24);
        v = read_byte(p, 24);
    } else if (strcmp(what, "leak") == 0 ||
               strcmp(what, "leak-no-malloc") == 0) {
        if (strcmp(what, "leak") == 0)
            live_malloc = malloc(32);
        mk_ctx *l = mk_ctx_new(NULL, "tool-leak", MK_GENERAL, NULL);
        char *first = mk_alloc(l, 200), *p = mk_alloc(l, 200);
        memset(first, 5, 200);
        memset(p, 7, 200);
        hidden = first;
        p = NULL;  /* the second chunk is lost; the context lives on */
        (void)p;
        printf("lost one 200-byte chunk\n");
        return 0;  /* no delete, no free */
    } else if (strcmp(what, "none") == 0) {
        char *p = mk_alloc(ctx, 64);
        memset(p, 7, 64);
        v = read_byte(p, 8);
        mk_free(p);
    } else {
        fprintf(stderr, "unknown case %s\n", what);
        return 2;
    }
    printf("read %d: no tool stopped the program\n", v);
    mk_free(keep);
    mk_ctx_delete(ctx);
    return 0;
}
