/* SPDX-License-Identifier: MIT */
/*
 * fuzz/record.h - the fuzz targets' flight recorder: what a target notes
 * while it runs, so that a failure says what was going on and can be run
 * again in order (fuzz/record.c prints and saves it; fuzz/README.md,
 * "When a target fails").
 *
 * A target notes, cheaply and without allocating:
 *  - each input, at its start (fz_begin): it goes into a ring of the last
 *    inputs of the process, and picks the run's modes (page moves of huge
 *    chunks, the purge delay) from the input's hash, so that the input
 *    alone decides them and a replay takes the same ones;
 *  - each operation, with its arguments in the model's terms (FZ_OP);
 *  - each call into memkit, with its arguments and, once it returns, its
 *    result (fz_call, fz_ret: fuzz/calls.h makes every call note itself);
 *  - before a realloc, what the public API says of the old chunk
 *    (fz_old_chunk): its size, context, size range and first bytes.
 * On a failure (memkit's error handler, a broken rule: FZ_CHECK, an
 * AddressSanitizer report) record.c prints all that with write(2) from
 * fixed buffers, writes the ring next to libFuzzer's crash file, and
 * aborts (libFuzzer saves the input).
 *
 * Notes are plain stores into static memory: the fuzzer's speed is its
 * coverage.  The worker threads of the targets run only while the first
 * thread waits for them, so one set of notes serves both.
 */
#ifndef MK_FUZZ_RECORD_H
#define MK_FUZZ_RECORD_H

#include <stddef.h>
#include <stdint.h>

/* (not coverage-instrumented: the recorder is not memkit's code) */
#if defined(__clang__)
#define FZ_NOCOV __attribute__((no_sanitize("coverage")))
#else
#define FZ_NOCOV
#endif

/* The operation being run, counted from 0 in each input. */
extern long fz_op;
/* Set on the targets' second thread (reports say which thread failed). */
extern _Thread_local int fz_worker;

/* A note: a format (a string literal: %s %c %d %ld %u %lu %zu %x %zx %p,
 * with a zero-padded width) and up to four arguments, each passed as a
 * uint64_t (FZ_U for a pointer); formatted only when a report prints it. */
typedef struct fz_note {
    const char *fmt;
    uint64_t a[4];
} fz_note;

/* A call into memkit. */
typedef struct fz_call_rec {
    fz_note what;
    uint64_t ret;
    uint64_t input; /* the input's number in the process */
    long op;
    unsigned char worker, returned;
} fz_call_rec;

enum { FZ_CALLS = 16 }; /* the last calls kept (a power of two) */
extern fz_call_rec fz_calls[FZ_CALLS];
extern uint64_t fz_ncalls, fz_inputs;
extern fz_note fz_op_note;
extern long fz_op_noted;      /* the operation fz_op_note is about, */
extern uint64_t fz_op_input;  /* of this input; */
extern uint64_t fz_op_notes;  /* FZ_OPs so far (an operation's steps on the
                                 second thread note themselves too) */

#define FZ_U(x) ((uint64_t)(uintptr_t)(x))

FZ_NOCOV static inline void fz_call(const char *fmt, uint64_t a, uint64_t b,
                                    uint64_t c, uint64_t d)
{
    fz_call_rec *r = &fz_calls[fz_ncalls++ & (FZ_CALLS - 1)];
    r->what = (fz_note){fmt, {a, b, c, d}};
    r->input = fz_inputs;
    r->op = fz_op;
    r->worker = (unsigned char)fz_worker;
    r->returned = 0;
}

/* The result of the last call noted. */
FZ_NOCOV static inline void fz_ret(uint64_t v)
{
    fz_call_rec *r = &fz_calls[(fz_ncalls - 1) & (FZ_CALLS - 1)];
    r->ret = v;
    r->returned = 1;
}

/* FZ_OP(fmt, args...): the operation being run and its arguments, in the
 * model's terms (at most four arguments; a later note of the same
 * operation replaces an earlier one, as its arguments become known). */
#define FZ_OP(...) FZ_OP_(__VA_ARGS__, 0, 0, 0, 0, 0)
#define FZ_OP_(f, a, b, c, d, ...)                                          \
    (fz_op_note = (fz_note){f, {FZ_U(a), FZ_U(b), FZ_U(c), FZ_U(d)}},       \
     fz_op_noted = fz_op, fz_op_input = fz_inputs, fz_op_notes++)

/* The start of each input: into the ring; the modes picked and applied. */
void fz_begin(const uint8_t *data, size_t size);

/* Before a realloc of chunk @p (@size bytes in the model): what the public
 * API says of it (mk_usable_size, mk_ctx_of, mk_ctx_kind, mk_ctx_name,
 * mk_owns) and its first bytes, kept for a report until the next FZ_OP. */
void fz_old_chunk(const void *p, size_t size);

/* A broken rule: report (fmt: as printf, the conversions of fz_note),
 * write the ring, abort. */
__attribute__((noreturn, format(printf, 4, 5))) void
fz_fail(const char *file, int line, const char *cond, const char *fmt, ...);

#endif /* MK_FUZZ_RECORD_H */
