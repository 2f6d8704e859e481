/*
 * error.c - reporting detected errors: one line, no allocation, then abort.
 *
 * The report must work while the process is tearing down or the heap is
 * corrupt, so it formats into a stack buffer (print.c) and writes with
 * write(2).  A program can replace the abort with a handler
 * (mk_set_error_handler) or silence reports (mk_silence_errors), e.g. in a
 * child after fork() that legitimately abandons state.
 */
#include "base.h"

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

/* Hand a finished line to the handler, or print it; abort if @fatal. */
static void emit(mki_line *l, int fatal)
{
    l->buf[l->len] = '\0';
    mk_error_fn fn = atomic_load(&handler);
    if (fn) {
        fn(l->buf, atomic_load(&handler_arg));
        return;
    }
    mki_line_write(l, STDERR_FILENO);
    if (fatal)
        abort();
}

void mki_error_leak(const char *noun, const char *name, const char *things,
                    size_t n, size_t bytes)
{
    if (atomic_load(&silenced))
        return;
    mki_line l = {.len = 0};
    mki_line_str(&l, "memkit: ");
    mki_line_str(&l, noun);
    mki_line_str(&l, " ");
    mki_line_str(&l, name ? name : "?");
    mki_line_str(&l, ": ");
    mki_line_num(&l, (long long)n);
    mki_line_str(&l, " ");
    mki_line_str(&l, things);
    mki_line_str(&l, " (");
    mki_line_num(&l, (long long)bytes);
    mki_line_str(&l, " bytes) leaked");
    emit(&l, MK_CONFIG_CHECK);
}

void mki_error_wrong_pool(const void *p, const char *owner_noun,
                          const char *owner, const char *named)
{
    if (atomic_load(&silenced))
        return;
    mki_line l = {.len = 0};
    mki_line_str(&l, "memkit: pointer ");
    mki_line_ptr(&l, p);
    mki_line_str(&l, " belongs to ");
    mki_line_str(&l, owner_noun);
    mki_line_str(&l, " ");
    mki_line_str(&l, owner ? owner : "?");
    mki_line_str(&l, ", freed into pool ");
    mki_line_str(&l, named ? named : "?");
    emit(&l, 1);
}

void mki_error_report(const char *what, const void *p, const char *name)
{
    if (atomic_load(&silenced))
        return;
    mki_line l = {.len = 0};
    mki_line_str(&l, "memkit: ");
    mki_line_str(&l, what);
    if (p) {
        mki_line_str(&l, ": pointer ");
        mki_line_ptr(&l, p);
    }
    if (name) {
        mki_line_str(&l, " (context \"");
        mki_line_str(&l, name);
        mki_line_str(&l, "\")");
    }
    emit(&l, 1);
}

void mki_error_invalid(const char *fn, const void *p)
{
    if (atomic_load(&silenced))
        return;
    mki_line l = {.len = 0};
    mki_line_str(&l, "memkit: ");
    mki_line_str(&l, fn);
    mki_line_str(&l, "(): invalid pointer ");
    mki_line_ptr(&l, p);
    emit(&l, 1);
}

void mki_error_invalid_in(const char *fn, const void *p, const char *name,
                          int freed)
{
    if (atomic_load(&silenced))
        return;
    mki_line l = {.len = 0};
    mki_line_str(&l, "memkit: ");
    mki_line_str(&l, fn);
    mki_line_str(&l, "(): invalid pointer ");
    mki_line_ptr(&l, p);
    mki_line_str(&l, freed ? " (a freed chunk of context "
                           : " (not the start of a chunk of context ");
    mki_line_str(&l, name ? name : "?");
    mki_line_str(&l, ")");
    emit(&l, 1);
}

void mki_error_double_free(const void *p, const char *name)
{
    if (atomic_load(&silenced))
        return;
    mki_line l = {.len = 0};
    mki_line_str(&l, "memkit: double free of ");
    mki_line_ptr(&l, p);
    if (name) {
        mki_line_str(&l, " (context ");
        mki_line_str(&l, name);
        mki_line_str(&l, ")");
    } else {
        mki_line_str(&l, " (memory memkit holds free)");
    }
    emit(&l, 1);
}
