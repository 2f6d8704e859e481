/* SPDX-License-Identifier: MIT */
/*
 * dump.c - the heap profile's files: pprof's text heap format and folded
 * stacks, written at exit, on demand (mk_profile_dump) and on a signal.
 *
 * PREFIX.heap is the legacy text format of gperftools' heap profiler,
 * which pprof (Go's and google-pprof) and jeprof read:
 *
 *   heap profile: LIVE_N: LIVE_BYTES [ TOTAL_N: TOTAL_BYTES] @ heap_v2/RATE
 *   N: BYTES [ N: BYTES] @ 0xADDR 0xADDR ...      (one line per stack)
 *
 *   MAPPED_LIBRARIES:
 *   (the process's /proc/self/maps, for symbolisation)
 *
 * with the samples' raw counts (heap_v2: the reader scales them by the
 * rate); addresses are return addresses, innermost first.  PREFIX.folded
 * has one line per stack and context, the estimate of its bytes scaled
 * already, root first, for flame graphs:
 *
 *   CONTEXT/PATH;0xOUTER;...;0xINNER BYTES
 *
 * Everything is written with write(2) from memkit's own line buffers:
 * nothing here allocates, so a dump can run inside a signal handler (it
 * then only tries the profile's lock: a handler that finds it taken asks
 * the next sample to write instead) and at exit after other destructors.
 * Trade-off: symbols are not resolved here (memkit-run does it, with the
 * maps), so a dump costs no more than its writes.
 */

#include "prof.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Atomic int mki_prof_dump_asked;
static _Atomic int dumps_made;
static _Atomic int profile_used; /* the profile has been on in this process */

/* ---- file names ---------------------------------------------------------------- */

/* MEMKIT_PROFILE_PREFIX with %p as the process id, then @suffix. */
static int file_name(char *out, size_t cap, const char *prefix, const char *suffix)
{
    const char *pre = prefix;
    if (!pre) {
        pre = getenv("MEMKIT_PROFILE_PREFIX");
        if (!pre || !*pre)
            pre = "memkit-profile.%p";
    }
    mki_line l = {.len = 0};
    for (const char *c = pre; *c; c++) {
        if (c[0] == '%' && c[1] == 'p') {
            mki_line_num(&l, (long long)getpid());
            c++;
        } else {
            char one[2] = {*c, 0};
            mki_line_str(&l, one);
        }
    }
    mki_line_str(&l, suffix);
    if (l.len + 1 > cap || l.len >= MKI_LINE_MAX - 1) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(out, l.buf, l.len);
    out[l.len] = '\0';
    return 0;
}

/* ---- the formats -------------------------------------------------------------------- */

typedef struct out {
    mki_line l;
    int peak;
} out;

static const mki_prof_fig *fig_of(const mki_prof_stack *s, int peak)
{
    return peak ? &s->peak : &s->live;
}

static void heap_line(const mki_prof_stack *s, void *arg)
{
    out *o = arg;
    const mki_prof_fig *f = fig_of(s, o->peak);
    if (!f->count && !s->total.count)
        return;
    mki_line_num(&o->l, (long long)f->count);
    mki_line_str(&o->l, ": ");
    mki_line_num(&o->l, (long long)f->bytes);
    mki_line_str(&o->l, " [");
    mki_line_num(&o->l, (long long)s->total.count);
    mki_line_str(&o->l, ": ");
    mki_line_num(&o->l, (long long)s->total.bytes);
    mki_line_str(&o->l, "] @");
    for (uint32_t i = 0; i < s->depth; i++) {
        mki_line_str(&o->l, " ");
        mki_line_ptr(&o->l, (const void *)s->frames[i]);
    }
    mki_line_str(&o->l, "\n");
}

static void folded_line(const mki_prof_stack *s, void *arg)
{
    out *o = arg;
    long long bytes = (long long)(fig_of(s, o->peak)->est_bytes + 0.5);
    if (bytes <= 0)
        return;
    mki_line_str(&o->l, s->ctx_path);
    for (uint32_t i = s->depth; i-- > 0;) {
        mki_line_str(&o->l, ";");
        mki_line_ptr(&o->l, (const void *)s->frames[i]);
    }
    mki_line_str(&o->l, " ");
    mki_line_num(&o->l, bytes);
    mki_line_str(&o->l, "\n");
}

/* The profile's lock is taken by mki_prof_walk; the header needs the
 * totals before the lines, so the lines are written first to the file
 * after a header of fixed width, which is then rewritten in place. */
enum { HEADER_WIDTH = 120 };

static void header(mki_line *l, const mki_prof_totals *t, int peak)
{
    const mki_prof_fig *f = peak ? &t->peak : &t->live;
    mki_line_str(l, "heap profile: ");
    mki_line_num(l, (long long)f->count);
    mki_line_str(l, ": ");
    mki_line_num(l, (long long)f->bytes);
    mki_line_str(l, " [");
    mki_line_num(l, (long long)t->total.count);
    mki_line_str(l, ": ");
    mki_line_num(l, (long long)t->total.bytes);
    mki_line_str(l, "] @ heap_v2/");
    mki_line_num(l, t->rate);
}

static void copy_maps(int fd)
{
    int in = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return;
    char buf[4096];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0) {
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(fd, buf + off, (size_t)(n - off));
            if (w <= 0)
                break;
            off += w;
        }
    }
    close(in);
}

static int write_heap(const char *name, int peak)
{
    int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    out o = {.l = {.len = 0, .stream = fd + 1}, .peak = peak};
    for (int i = 0; i < HEADER_WIDTH - 1; i++)
        mki_line_str(&o.l, " ");
    mki_line_str(&o.l, "\n");
    mki_prof_totals t;
    mki_prof_walk(heap_line, &o, &t);
    mki_line_str(&o.l, "\nMAPPED_LIBRARIES:\n");
    mki_line_flush(&o.l);
    copy_maps(fd);
    mki_line h = {.len = 0};
    header(&h, &t, peak);
    while (h.len < HEADER_WIDTH - 1)
        mki_line_str(&h, " ");
    h.buf[HEADER_WIDTH - 1] = '\n';
    int r = pwrite(fd, h.buf, HEADER_WIDTH, 0) == HEADER_WIDTH ? 0 : -1;
    close(fd);
    return r;
}

static int write_folded(const char *name, int peak)
{
    int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    out o = {.l = {.len = 0, .stream = fd + 1}, .peak = peak};
    mki_prof_walk(folded_line, &o, NULL);
    mki_line_flush(&o.l);
    close(fd);
    return 0;
}

int mki_prof_write(const char *prefix, int peak)
{
    char heap[MKI_LINE_MAX], folded[MKI_LINE_MAX];
    if (file_name(heap, sizeof heap, prefix, ".heap") != 0 ||
        file_name(folded, sizeof folded, prefix, ".folded") != 0)
        return -1;
    if (write_heap(heap, peak) != 0 || write_folded(folded, peak) != 0)
        return -1;
    return 0;
}

/* ---- when ----------------------------------------------------------------------------------- */

/* The default prefix, with @what after it ("exit", "peak", a number). */
static int write_named(const char *what, int peak)
{
    char pre[MKI_LINE_MAX];
    if (file_name(pre, sizeof pre, NULL, "") != 0)
        return -1;
    mki_line l = {.len = 0};
    mki_line_str(&l, pre);
    mki_line_str(&l, ".");
    mki_line_str(&l, what);
    if (l.len >= MKI_LINE_MAX - 1)
        return -1;
    l.buf[l.len] = '\0';
    return mki_prof_write(l.buf, peak);
}

static int write_numbered(void)
{
    mki_line n = {.len = 0};
    mki_line_num(&n, atomic_fetch_add(&dumps_made, 1) + 1);
    n.buf[n.len] = '\0';
    return write_named(n.buf, 0);
}

void mki_prof_dump_due(void)
{
    if (atomic_exchange(&mki_prof_dump_asked, 0))
        write_numbered();
}

static void on_signal(int sig)
{
    (void)sig;
    int e = errno;
    atomic_store(&mki_prof_dump_asked, 1); /* the next sample writes it */
    errno = e;
}

void mki_prof_started(void)
{
    atomic_store(&profile_used, 1);
    long sig = mki_option(MKI_OPT_PROFILE_SIGNAL);
    if (sig > 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction((int)sig, &sa, NULL);
    }
}

int mk_profile_dump(const char *prefix)
{
    if (!atomic_load(&profile_used)) {
        errno = ENOTSUP;
        return -1;
    }
    if (!prefix)
        return write_numbered();
    return mki_prof_write(prefix, 0);
}

/* At exit: what is still live (a leak list at rate 1) and the peak; not
 * for a process that took no sample (a short-lived child of a profiled
 * program: no files). */
__attribute__((destructor)) static void prof_at_exit(void)
{
    if (!atomic_load(&profile_used))
        return;
    mki_prof_totals t;
    mki_prof_walk(NULL, NULL, &t);
    if (!t.total.count)
        return;
    write_named("exit", 0);
    write_named("peak", 1);
}
