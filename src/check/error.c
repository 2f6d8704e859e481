/*
 * error.c - reporting detected errors: one line, no allocation, then abort.
 *
 * The report must work while the process is tearing down or the heap is
 * corrupt, so it formats into a stack buffer with its own tiny formatter
 * and writes with write(2).  A program can replace the abort with a handler
 * (mk_set_error_handler) or silence reports (mk_silence_errors), e.g. in a
 * child after fork() that legitimately abandons state.
 */
#include "../internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static _Atomic(mk_error_fn) handler;
static _Atomic(void *) handler_arg;
static _Atomic int silenced;

void mk_set_error_handler(mk_error_fn fn, void *arg)
{
    atomic_store(&handler_arg, arg);
    atomic_store(&handler, fn);
}

int mk_silence_errors(int on) { return atomic_exchange(&silenced, on != 0); }

int mk_checking(void) { return MK_CONFIG_CHECK; }

typedef struct line {
    char buf[256];
    size_t len;
} line;

static void put_str(line *l, const char *s)
{
    while (*s && l->len < sizeof l->buf - 2)
        l->buf[l->len++] = *s++;
}

static void put_ptr(line *l, const void *p)
{
    char tmp[2 + 16 + 1];
    uintptr_t v = (uintptr_t)p;
    int i = (int)sizeof tmp - 1;
    tmp[i] = '\0';
    do {
        tmp[--i] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v && i > 2);
    tmp[--i] = 'x';
    tmp[--i] = '0';
    put_str(l, tmp + i);
}

static void put_size(line *l, size_t v)
{
    char tmp[24];
    int i = (int)sizeof tmp - 1;
    tmp[i] = '\0';
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v && i > 0);
    put_str(l, tmp + i);
}

/* Hand a finished line to the handler, or print it; abort if @fatal. */
static void emit(line *l, int fatal)
{
    l->buf[l->len] = '\0';
    mk_error_fn fn = atomic_load(&handler);
    if (fn) {
        fn(l->buf, atomic_load(&handler_arg));
        return;
    }
    l->buf[l->len++] = '\n';
    ssize_t r = write(STDERR_FILENO, l->buf, l->len);
    (void)r;
    if (fatal)
        abort();
}

void mki_error_leak(const char *noun, const char *name, const char *things,
                    size_t n, size_t bytes)
{
    if (atomic_load(&silenced))
        return;
    line l = {.len = 0};
    put_str(&l, "memkit: ");
    put_str(&l, noun);
    put_str(&l, " ");
    put_str(&l, name ? name : "?");
    put_str(&l, ": ");
    put_size(&l, n);
    put_str(&l, " ");
    put_str(&l, things);
    put_str(&l, " (");
    put_size(&l, bytes);
    put_str(&l, " bytes) leaked");
    emit(&l, MK_CONFIG_CHECK);
}

void mki_error_wrong_pool(const void *p, const char *owner_noun,
                          const char *owner, const char *named)
{
    if (atomic_load(&silenced))
        return;
    line l = {.len = 0};
    put_str(&l, "memkit: pointer ");
    put_ptr(&l, p);
    put_str(&l, " belongs to ");
    put_str(&l, owner_noun);
    put_str(&l, " ");
    put_str(&l, owner ? owner : "?");
    put_str(&l, ", freed into pool ");
    put_str(&l, named ? named : "?");
    emit(&l, 1);
}

void mki_error_report(const char *what, const void *p, const mk_ctx *ctx)
{
    if (atomic_load(&silenced))
        return;
    line l = {.len = 0};
    put_str(&l, "memkit: ");
    put_str(&l, what);
    if (p) {
        put_str(&l, ": pointer ");
        put_ptr(&l, p);
    }
    if (ctx) {
        put_str(&l, " (context \"");
        put_str(&l, ctx->name ? ctx->name : "?");
        put_str(&l, "\")");
    }
    emit(&l, 1);
}
