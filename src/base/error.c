/* SPDX-License-Identifier: MIT */
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

int mk_version(void) { return MK_VERSION; }

/* The first report of a release build says what the checking build adds. */
static _Atomic int hinted;

static void hint(void)
{
    if (MK_CONFIG_CHECK || atomic_exchange(&hinted, 1))
        return;
    mki_line l = {.len = 0};
    mki_line_str(&l, "memkit: (the release build reports what it meets on "
                     "its way; link libmemkit-check, or run under Valgrind, "
                     "to find misuse where it happens)");
    mki_line_write(&l, STDERR_FILENO);
}

/* "memkit: FN(): " */
static void start(mki_line *l, const char *fn)
{
    mki_line_str(l, "memkit: ");
    if (fn) {
        mki_line_str(l, fn);
        mki_line_str(l, "(): ");
    }
}

static void quoted(mki_line *l, const char *s)
{
    mki_line_str(l, "\"");
    mki_line_str(l, s ? s : "?");
    mki_line_str(l, "\"");
}

/* Hand a finished report to the handler, or print it (then, with @hint,
 * the release build's hint); abort if @fatal and no handler took it. */
static void emit(mki_line *l, int fatal, int with_hint)
{
    l->buf[l->len] = '\0';
    mk_error_fn fn = atomic_load(&handler);
    if (fn) {
        fn(l->buf, atomic_load(&handler_arg));
        return;
    }
    mki_line_write(l, STDERR_FILENO);
    if (with_hint)
        hint();
    if (fatal)
        abort();
}

void mki_error_report(const char *fn, const char *what, const void *p,
                      const char *detail, const char *name)
{
    if (atomic_load(&silenced))
        return;
    mki_line l = {.len = 0};
    start(&l, fn);
    mki_line_str(&l, what);
    if (p) {
        mki_line_str(&l, " ");
        mki_line_ptr(&l, p);
    }
    if (detail || name) {
        mki_line_str(&l, " (");
        mki_line_str(&l, detail);
        if (name) {
            mki_line_str(&l, detail ? ", context " : "context ");
            quoted(&l, name);
        }
        mki_line_str(&l, ")");
    }
    emit(&l, 1, 1);
}

void mki_error_fatal(const char *fn, const char *text)
{
    if (atomic_load(&silenced))
        return;
    mki_line l = {.len = 0};
    start(&l, fn);
    mki_line_str(&l, text);
    emit(&l, 1, 0); /* (no misuse the checking build finds sooner: no hint) */
}

void mki_error_leak(const char *fn, const char *noun, const char *name,
                    const char *thing, size_t n, size_t bytes)
{
    if (atomic_load(&silenced))
        return;
    mki_line l = {.len = 0};
    start(&l, fn);
    mki_line_str(&l, noun);
    mki_line_str(&l, " ");
    quoted(&l, name);
    mki_line_str(&l, ": ");
    mki_line_num(&l, (long long)n);
    mki_line_str(&l, " ");
    mki_line_str(&l, thing);
    mki_line_str(&l, n == 1 ? "" : "s");
    mki_line_str(&l, " (");
    mki_line_num(&l, (long long)bytes);
    mki_line_str(&l, bytes == 1 ? " byte) leaked" : " bytes) leaked");
    /* (fatal in the checking build; in the release build no misuse the
     * checking build finds sooner: no hint) */
    emit(&l, MK_CONFIG_CHECK, 0);
}

void mki_error_wrong_pool(const char *fn, const void *p, const char *owner_noun,
                          const char *owner, const char *named)
{
    if (atomic_load(&silenced))
        return;
    mki_line l = {.len = 0};
    start(&l, fn);
    mki_line_str(&l, "object ");
    mki_line_ptr(&l, p);
    mki_line_str(&l, " of ");
    mki_line_str(&l, owner_noun);
    mki_line_str(&l, " ");
    quoted(&l, owner);
    mki_line_str(&l, " freed into pool ");
    quoted(&l, named);
    emit(&l, 1, 1);
}

void mki_error_ctx_inside(const char *fn, const char *name, long user,
                          long inside)
{
    if (atomic_load(&silenced))
        return;
    mki_line l = {.len = 0};
    start(&l, fn);
    mki_line_str(&l, "context ");
    quoted(&l, name);
    mki_line_str(&l, " used by thread ");
    mki_line_num(&l, user);
    mki_line_str(&l, " while thread ");
    mki_line_num(&l, inside);
    mki_line_str(&l, " is inside it (one thread at a time, or a lock)");
    emit(&l, 1, 1);
}

void mki_error_ctx_owner(const char *fn, const char *name, long user)
{
    if (atomic_load(&silenced))
        return;
    mki_line l = {.len = 0};
    start(&l, fn);
    mki_line_str(&l, "context ");
    quoted(&l, name);
    mki_line_str(&l, " is owned by another thread, not by thread ");
    mki_line_num(&l, user);
    mki_line_str(&l, " (mk_ctx_set_owner hands a context over)");
    emit(&l, 1, 1);
}

void mki_report_alive(const char *name, const char *kind, size_t chunks,
                      size_t bytes)
{
    if (atomic_load(&silenced))
        return;
    mki_line l = {.len = 0};
    mki_line_str(&l, "memkit: at exit: context ");
    quoted(&l, name);
    mki_line_str(&l, " (");
    mki_line_str(&l, kind);
    mki_line_str(&l, ") never deleted: ");
    mki_line_num(&l, (long long)chunks);
    mki_line_str(&l, chunks == 1 ? " chunk (" : " chunks (");
    mki_line_num(&l, (long long)bytes);
    mki_line_str(&l, bytes == 1 ? " byte)" : " bytes)");
    mki_line_write(&l, STDERR_FILENO);
}

void mki_note_einval(const char *fn, const char *name, const char *why)
{
    if (!mki_option(MKI_OPT_VERBOSE) || atomic_load(&silenced))
        return;
    mki_line l = {.len = 0};
    start(&l, fn);
    mki_line_str(&l, "fails with EINVAL: ");
    mki_line_str(&l, why);
    if (name) {
        mki_line_str(&l, " (context ");
        quoted(&l, name);
        mki_line_str(&l, ")");
    }
    mki_line_write(&l, STDERR_FILENO);
}
