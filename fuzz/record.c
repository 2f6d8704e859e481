/* SPDX-License-Identifier: MIT */
/*
 * fuzz/record.c - the fuzz targets' flight recorder (fuzz/record.h): the
 * set-up of each process (LLVMFuzzerInitialize), the modes each input
 * runs in, the ring of the last inputs, and the report of a failure.
 *
 * Modes.  Two things memkit decides by the clock would make a run depend
 * on the machine's timing, not on its inputs: whether the huge chunks'
 * cache may move pages with mremap (the timed mki_os_moves_costly probe,
 * where the system makes transparent huge pages), and the purge delay
 * (segments, cached mappings and thread heaps "empty for the delay").
 * Each input picks both from its hash: page moves on or off (through
 * mki_os_moves_costly_set: the targets link memkit's internals), and a
 * delay of 0 (purge at once), -1 (never; mk_trim alone) or an hour (the
 * delayed paths: nothing falls due within the hour, and a dead thread's heap
 * is kept for the threads that come).  A replay of the same inputs then
 * takes the same paths; FUZZ_MOVES and MEMKIT_PURGE_DELAY_MS override the
 * choice (fuzz/README.md).  The purge thread stays off (memkit's default)
 * unless MEMKIT_PURGE_THREAD asks for it.
 *
 * The ring: the last RING_N inputs of the process, in static memory (their
 * bytes while they fit RING_BYTES, else their hash and size), written out
 * on a failure as one file per input in a directory next to libFuzzer's
 * crash file, named by the input's number in the process, and a list
 * (.txt) with the report and the command that runs them again in order.
 *
 * Reports run inside memkit's error path, or after memory went wrong:
 * they never allocate and never call memkit.  Lines are formatted into
 * fixed buffers by a small formatter of their own and written with
 * write(2); what a report says of memkit's state was saved before (the
 * old chunk of a realloc, the modes).
 */
#include "record.h"

#include <errno.h>
#include <fcntl.h>
#include <memkit.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "os/os.h"       /* mki_os_moves_costly{,_set}, mki_os_huge_pages_work */
#include "page/layout.h" /* the size ranges of chunks, the segment size */

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#include <sanitizer/asan_interface.h>
#define FZ_ASAN 1
#endif
#endif

extern char **environ;

long fz_op;
_Thread_local int fz_worker;
fz_call_rec fz_calls[FZ_CALLS];
uint64_t fz_ncalls, fz_inputs;
fz_note fz_op_note;
long fz_op_noted = -1;
uint64_t fz_op_input, fz_op_notes;

/* ---- formatting into fixed buffers -------------------------------------- */

typedef struct out {
    char *b;
    size_t n, cap; /* (one byte kept for a newline) */
} out;

static void put_c(out *o, char c)
{
    if (o->n + 1 < o->cap)
        o->b[o->n++] = c;
}

static void put_s(out *o, const char *s)
{
    for (s = s ? s : "(null)"; *s; s++)
        put_c(o, *s);
}

static void put_u(out *o, uint64_t v, unsigned base, unsigned width,
                           char pad)
{
    char t[64];
    unsigned k = 0;
    do
        t[k++] = "0123456789abcdef"[v % base];
    while ((v /= base) && k < sizeof t);
    while (k < width && k < sizeof t)
        t[k++] = pad;
    while (k)
        put_c(o, t[--k]);
}

/* printf's conversions %s %c %d %u %x %p and %%, with l or z and a width
 * (zero-padded with 0); arguments from @ap, or from @a (n of them, each a
 * uint64_t: a note's) when @a is not NULL. */
static void format(out *o, const char *f, va_list *ap,
                            const uint64_t *a, unsigned n)
{
    unsigned ai = 0;
    for (; *f; f++) {
        if (*f != '%') {
            put_c(o, *f);
            continue;
        }
        char pad = ' ';
        unsigned width = 0;
        int len = 0; /* 0 int, 1 long, 2 size_t */
        if (*++f == '0')
            pad = *f++;
        while (*f >= '0' && *f <= '9')
            width = width * 10 + (unsigned)(*f++ - '0');
        if (*f == 'l' || *f == 'z')
            len = *f++ == 'l' ? 1 : 2;
        char c = *f;
        if (!c)
            return;
        if (c == '%') {
            put_c(o, '%');
            continue;
        }
        uint64_t v = 0;
        if (a)
            v = ai < n ? a[ai++] : 0;
        else if (c == 's' || c == 'p')
            v = (uintptr_t)va_arg(*ap, const void *);
        else if (c == 'd' || c == 'c')
            v = len == 0 ? (uint64_t)(int64_t)va_arg(*ap, int)
                : len == 1 ? (uint64_t)(int64_t)va_arg(*ap, long)
                           : (uint64_t)va_arg(*ap, size_t);
        else
            v = len == 0 ? va_arg(*ap, unsigned)
                : len == 1 ? va_arg(*ap, unsigned long)
                           : va_arg(*ap, size_t);
        switch (c) {
        case 'd':
            if ((int64_t)v < 0) {
                put_c(o, '-');
                v = -v;
            }
            put_u(o, v, 10, width, pad);
            break;
        case 'u':
            put_u(o, v, 10, width, pad);
            break;
        case 'x':
            put_u(o, v, 16, width, pad);
            break;
        case 'p':
            put_s(o, "0x");
            put_u(o, v, 16, width, pad);
            break;
        case 's':
            put_s(o, (const char *)(uintptr_t)v);
            break;
        case 'c':
            put_c(o, (char)v);
            break;
        default:
            put_c(o, '%');
            put_c(o, c);
        }
    }
}

static void put_f(out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    format(o, fmt, &ap, NULL, 0);
    va_end(ap);
}

/* A note: its format up to " -> " with its arguments; then, when @ret is
 * given, the result with the format's rest. */
static void put_note(out *o, const fz_note *nt, const uint64_t *ret)
{
    char head[160];
    const char *arrow = strstr(nt->fmt, " -> ");
    size_t h = arrow ? (size_t)(arrow - nt->fmt) : strlen(nt->fmt);
    if (h >= sizeof head)
        h = sizeof head - 1;
    memcpy(head, nt->fmt, h);
    head[h] = '\0';
    format(o, head, NULL, nt->a, 4);
    if (arrow && ret)
        format(o, arrow, NULL, ret, 1);
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The report so far (it goes into the ring's list too). */
static char report_text[32768];
static size_t report_len;

/* A report line: to stderr, and kept for the list. */
static void emit(out *o)
{
    o->b[o->n++] = '\n'; /* (put_c kept room for it) */
    write_all(STDERR_FILENO, o->b, o->n);
    size_t k = o->n < sizeof report_text - report_len
                   ? o->n : sizeof report_text - report_len;
    memcpy(report_text + report_len, o->b, k);
    report_len += k;
}

#define LINE(o) char o##_buf[2048]; out o = {o##_buf, 0, sizeof o##_buf}

static void line(const char *fmt, ...)
{
    LINE(o);
    va_list ap;
    va_start(ap, fmt);
    format(&o, fmt, &ap, NULL, 0);
    va_end(ap);
    emit(&o);
}

/* ---- the process: its arguments, where the ring goes ---------------------- */

static const char *argv0 = "./fuzz-target";
static const char *artifact_prefix = ""; /* libFuzzer's -artifact_prefix */

/* ---- the ring of inputs ----------------------------------------------------- */

enum { RING_N = 256 };
#define RING_BYTES ((size_t)4 << 20)
#define RING_MAX (RING_BYTES / 16) /* larger inputs: hash and size only */

typedef struct ring_entry {
    uint64_t input, hash; /* input 0: none */
    size_t size, off;
    int kept; /* its bytes are at ring_data + off */
} ring_entry;

static ring_entry ring[RING_N];
static uint8_t ring_data[RING_BYTES];
static size_t ring_head;

/* The bytes are stored one after the other, from the start again when the
 * end is reached; an input overwrites the bytes of the oldest ones. */
static void ring_put(const uint8_t *d, size_t n, uint64_t hash)
{
    ring_entry *e = &ring[fz_inputs % RING_N];
    *e = (ring_entry){fz_inputs, hash, n, 0, 0};
    if (n > RING_MAX)
        return;
    if (ring_head + n > RING_BYTES)
        ring_head = 0;
    for (unsigned i = 0; i < RING_N; i++) {
        ring_entry *o = &ring[i];
        if (o != e && o->kept && o->off < ring_head + n && ring_head < o->off + o->size)
            o->kept = 0;
    }
    memcpy(ring_data + ring_head, d, n);
    e->off = ring_head;
    e->kept = 1;
    ring_head += n;
}

static uint64_t fnv1a(const uint8_t *d, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ d[i]) * 0x100000001b3ull;
    return h;
}

/* ---- modes -------------------------------------------------------------------- */

enum { MOVES_INPUT, MOVES_ON, MOVES_OFF, MOVES_PROBE };
static const char *const moves_words[] = {"input", "move", "nomove", "probe"};
static int moves_how;        /* FUZZ_MOVES */
static int delay_from_env;   /* MEMKIT_PURGE_DELAY_MS is set: it stays */
static const long delays[3] = {0, -1, 3600000};

/* The current input and the modes it runs in (saved for reports). */
static struct {
    uint64_t hash;
    size_t size;
    int costly, thp_system, moves;
    long thp, delay, purge, purge_thread, secure;
} now;

static long option(const char *name)
{
    long v = -2;
    mk_option_get(name, &v);
    return v;
}

void fz_begin(const uint8_t *data, size_t size)
{
    fz_inputs++;
    fz_op = 0;
    now.hash = fnv1a(data, size);
    now.size = size;
    ring_put(data, size, now.hash);
    unsigned pick = (unsigned)(now.hash >> 56);
    if (moves_how == MOVES_INPUT)
        mki_os_moves_costly_set(pick & 1);
    if (!delay_from_env) {
        long d = delays[(pick >> 1) % 3];
        if (d != option("purge_delay_ms")) /* (a change schedules a pass) */
            mk_option_set("purge_delay_ms", d);
    }
    now.costly = mki_os_moves_costly();
    now.thp = option("thp");
    now.thp_system = mki_os_huge_pages_work();
    /* (page/huge.c: moves unless fresh mappings get huge pages and a moved
     * page costs a fault) */
    now.moves = !(now.thp && now.thp_system) || !now.costly;
    now.delay = option("purge_delay_ms");
    now.purge = option("purge");
    now.purge_thread = option("purge_thread");
    now.secure = option("secure");
}

/* ---- the old chunk of a realloc ---------------------------------------------- */

static struct {
    uint64_t input; /* 0 while being saved */
    uint64_t note;  /* fz_op_notes then */
    long op;
    const void *p, *ctx;
    size_t size, usable, nhead;
    int kind, owns;
    char name[32];
    unsigned char head[16];
} old;

void fz_old_chunk(const void *p, size_t size)
{
    old.input = 0;
    old.p = p;
    old.size = size;
    old.owns = mk_owns(p); /* (never reports) */
    fz_call("mk_usable_size(%p) -> %zu [the chunk to be reallocated]", FZ_U(p),
            0, 0, 0);
    old.usable = mk_usable_size(p);
    fz_ret(old.usable);
    fz_call("mk_ctx_of(%p) -> %p [the chunk to be reallocated]", FZ_U(p), 0,
            0, 0);
    mk_ctx *c = mk_ctx_of(p);
    fz_ret(FZ_U(c));
    old.ctx = c;
    old.kind = c ? (int)mk_ctx_kind(c) : -1;
    const char *name = c ? mk_ctx_name(c) : NULL;
    size_t k = 0;
    for (; name && name[k] && k + 1 < sizeof old.name; k++)
        old.name[k] = name[k];
    old.name[k] = '\0';
    size_t n = old.usable ? old.usable : size;
    old.nhead = n < sizeof old.head ? n : sizeof old.head;
    memcpy(old.head, p, old.nhead);
    old.op = fz_op;
    old.note = fz_op_notes;
    old.input = fz_inputs;
}

/* ---- the report ----------------------------------------------------------------- */

static const char *kind_name(int k)
{
    static const char *const names[] = {"GENERAL", "SLAB", "GENERATION",
                                        "BUMP"};
    return k >= 0 && k < 4 ? names[k] : "no context";
}

/* What memkit's public API tells of a chunk's page from its usable size. */
static const char *size_range(size_t usable)
{
    if (!usable)
        return "none: BUMP keeps no size";
    if (usable <= MKI_SMALL_MAX)
        return "small, up to 32 KiB";
    if (usable <= MKI_LARGE_MAX)
        return "large, up to 960 KiB";
    return "huge, a mapping of its own";
}

/* The variables that change a run, as a shell prefix: "FUZZ_MOVES='x' ". */
static void put_env(out *o)
{
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "MEMKIT_", 7) != 0 && strncmp(*e, "FUZZ_", 5) != 0)
            continue;
        const char *eq = strchr(*e, '=');
        if (!eq)
            continue;
        for (const char *c = *e; c <= eq; c++)
            put_c(o, *c);
        put_f(o, "'%s' ", eq + 1);
    }
}

static void report_context(void)
{
    line("fuzz: input %lu of this process (%zu bytes, fnv-1a %016lx), "
         "operation %ld, on the %s thread", (unsigned long)fz_inputs, now.size,
         (unsigned long)now.hash, fz_op, fz_worker ? "second" : "first");
    if (fz_op_noted == fz_op && fz_op_input == fz_inputs) {
        LINE(o);
        put_s(&o, "fuzz: operation: ");
        put_note(&o, &fz_op_note, NULL);
        emit(&o);
    }
    line("fuzz: modes: huge chunks' page moves %s (%s%s; mki_os_moves_costly "
         "%d, option thp %ld, THP made by the system %d; calloc's always "
         "move), purge_delay_ms %ld (%s), purge_thread %ld, purge %ld, "
         "secure %ld", now.moves ? "on" : "off",
         moves_how == MOVES_INPUT ? "picked by the input" : "FUZZ_MOVES=",
         moves_how == MOVES_INPUT ? "" : moves_words[moves_how], now.costly,
         now.thp, now.thp_system, now.delay,
         delay_from_env ? "MEMKIT_PURGE_DELAY_MS" : "picked by the input",
         now.purge_thread, now.purge, now.secure);
    if (old.input == fz_inputs && old.op == fz_op && old.note == fz_op_notes) {
        line("fuzz: the chunk being reallocated, before the call: %p, %zu "
             "bytes in the model, usable %zu (size range: %s), %p into its "
             "4 MiB segment, mk_owns %d, context %p \"%s\" (%s)", old.p,
             old.size, old.usable, size_range(old.usable),
             (const void *)((uintptr_t)old.p & MKI_SEG_MASK), old.owns,
             old.ctx, old.name, kind_name(old.kind));
        LINE(o);
        put_f(&o, "fuzz: its first %zu bytes:", old.nhead);
        for (size_t i = 0; i < old.nhead; i++)
            put_f(&o, " %02x", (unsigned)old.head[i]);
        emit(&o);
    }
    uint64_t first = fz_ncalls > FZ_CALLS ? fz_ncalls - FZ_CALLS : 0;
    line("fuzz: the last %lu calls into memkit, oldest first:",
         (unsigned long)(fz_ncalls - first));
    for (uint64_t i = first; i < fz_ncalls; i++) {
        const fz_call_rec *r = &fz_calls[i & (FZ_CALLS - 1)];
        LINE(o);
        put_f(&o, "fuzz:   input %lu op %ld %s: ", (unsigned long)r->input,
              r->op, r->worker ? "second" : "first");
        put_note(&o, &r->what, r->returned ? &r->ret : NULL);
        if (!r->returned)
            put_s(&o, "   <- did not return");
        emit(&o);
    }
}

/* The ring's files: PREFIXring-PID/NNNNNNNNNN, and the list PREFIXring-PID.txt. */
static void report_ring(void)
{
    char dir[1024], path[1100];
    out d = {dir, 0, sizeof dir};
    put_f(&d, "%sring-%ld", artifact_prefix, (long)getpid());
    dir[d.n] = '\0';
    uint64_t lo = 0, hi = 0;
    unsigned kept = 0;
    for (unsigned i = 0; i < RING_N; i++)
        if (ring[i].input && ring[i].kept) {
            kept++;
            if (!lo || ring[i].input < lo)
                lo = ring[i].input;
            if (ring[i].input > hi)
                hi = ring[i].input;
        }
    char cmd_buf[4096];
    out cmd = {cmd_buf, 0, sizeof cmd_buf};
    put_env(&cmd);
    put_f(&cmd, "%s %s/*", argv0, dir);
    cmd_buf[cmd.n] = '\0';
    line("fuzz: the last %u inputs of this process (%lu to %lu) go to %s/, "
         "listed in %s.txt; to run them again in order, in one process, from "
         "this directory:", kept, (unsigned long)lo, (unsigned long)hi, dir,
         dir);
    line("fuzz:   %s", cmd_buf);

    int err = 0;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        err = errno;
    for (uint64_t in = lo; !err && kept && in <= hi; in++) {
        const ring_entry *e = &ring[in % RING_N];
        if (e->input != in || !e->kept)
            continue;
        out p = {path, 0, sizeof path};
        put_f(&p, "%s/%010lu", dir, (unsigned long)in);
        path[p.n] = '\0';
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || write_all(fd, ring_data + e->off, e->size) != 0)
            err = errno ? errno : EIO;
        if (fd >= 0)
            close(fd);
    }
    out p = {path, 0, sizeof path};
    put_f(&p, "%s.txt", dir);
    path[p.n] = '\0';
    int fd = err ? -1 : open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        line("fuzz: could not write the ring: errno %d", err ? err : errno);
        return;
    }
    char buf[512];
    out h = {buf, 0, sizeof buf};
    put_f(&h, "# The last inputs that process %ld (%s) ran, oldest first.\n"
              "# Run them again in order, in one process, from the directory "
              "it ran in:\n#   ", (long)getpid(), argv0);
    write_all(fd, buf, h.n);
    write_all(fd, cmd_buf, cmd.n);
    h.n = 0;
    put_f(&h, "\n# (the last one is the input that was running)\n"
              "# input      bytes    fnv-1a 64\n");
    write_all(fd, buf, h.n);
    uint64_t from = fz_inputs > RING_N ? fz_inputs - RING_N + 1 : 1;
    for (uint64_t in = from; in <= fz_inputs; in++) {
        const ring_entry *e = &ring[in % RING_N];
        if (e->input != in)
            continue;
        h.n = 0;
        put_f(&h, "%010lu %8zu %016lx%s\n", (unsigned long)in, e->size,
              (unsigned long)e->hash,
              e->kept ? "" : "  (not kept: its bytes were overwritten, or it "
                             "is over 256 KiB)");
        write_all(fd, buf, h.n);
    }
    static const char rep_head[] = "\n# The report:\n";
    write_all(fd, rep_head, sizeof rep_head - 1);
    write_all(fd, report_text, report_len);
    close(fd);
}

/* One report at a time: a second failure on another thread waits for the
 * first to end the process; one inside the report (this thread) ends it. */
static _Atomic int reporting;
static _Thread_local int in_report;

/* Returns 1 if this thread reports; 0 if it must not (only the first line
 * is printed: the caller aborts, or returns to AddressSanitizer). */
static int report_enter(void)
{
    if (in_report)
        return 0;
    in_report = 1;
    if (atomic_exchange(&reporting, 1)) {
        for (;;)
            pause(); /* the first report ends the process */
    }
    return 1;
}

/* memkit detected misuse or corruption (mk_set_error_handler): every report
 * stops the run, including a leak report, which the default handler only
 * prints: the targets free all they hold. */
static void on_memkit_error(const char *msg, void *arg)
{
    (void)arg;
    int first = report_enter();
    line("fuzz: memkit reported: %s", msg);
    if (first) {
        report_context();
        report_ring();
    }
    abort();
}

void fz_fail(const char *file, int ln, const char *cond, const char *fmt, ...)
{
    int first = report_enter();
    LINE(o);
    put_f(&o, "fuzz: operation %ld: %s:%d: CHECK(%s) failed: ", fz_op, file,
          ln, cond);
    va_list ap;
    va_start(ap, fmt);
    format(&o, fmt, &ap, NULL, 0);
    va_end(ap);
    emit(&o);
    if (first) {
        report_context();
        report_ring();
    }
    abort();
}

#ifdef FZ_ASAN
/* AddressSanitizer's report is printed: add the context and the ring, then
 * let it end the run (libFuzzer saves the input from its own callback). */
static void on_asan_report(const char *report)
{
    (void)report;
    if (!report_enter())
        return;
    line("fuzz: AddressSanitizer stopped the run (its report is above)");
    report_context();
    report_ring();
}
#endif

/* ---- the process's set-up ----------------------------------------------------- */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    if (*argc > 0)
        argv0 = (*argv)[0];
    for (int i = 1; i < *argc; i++)
        if (strncmp((*argv)[i], "-artifact_prefix=", 17) == 0)
            artifact_prefix = (*argv)[i] + 17;
    const char *m = getenv("FUZZ_MOVES");
    if (m) {
        for (moves_how = 0; moves_how < 4; moves_how++)
            if (strcmp(m, moves_words[moves_how]) == 0)
                break;
        if (moves_how == 4) {
            line("fuzz: FUZZ_MOVES=%s: one of input, move, nomove, probe", m);
            exit(2);
        }
    }
    if (moves_how == MOVES_ON || moves_how == MOVES_OFF)
        mki_os_moves_costly_set(moves_how == MOVES_OFF);
    delay_from_env = getenv("MEMKIT_PURGE_DELAY_MS") != NULL;
    if (!getenv("MEMKIT_PURGE_THREAD"))
        mk_option_set("purge_thread", 0);
    mk_set_error_handler(on_memkit_error, NULL);
#ifdef FZ_ASAN
    __asan_set_error_report_callback(on_asan_report);
#endif
    return 0;
}
