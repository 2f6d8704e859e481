/* SPDX-License-Identifier: MIT */
/*
 * big_buffers.c - FORM's sort buffers in miniature: does resident memory
 * come back down after a peak?
 *
 * A program (FORM, a computer-algebra system, in its sort phase) allocates
 * large buffers, fills them, frees them, and goes on with small work.  On
 * an allocator that keeps every page, its resident memory stays at the
 * peak for the rest of the run.  FORM added a switch for exactly this
 * ("On sortreallocate"); memkit has it built in, in three forms, each
 * shown here with the resident memory (RSS) printed at every phase:
 *
 *  1. the purge policy (default): free the buffers, do nothing, and the
 *     memory goes back by itself: beyond a margin (8 MiB, or a quarter of
 *     what is in use) at the frees themselves, the rest 100 ms later, in
 *     the next calls;
 *  2. the policy switched off at run time (mk_option_set("purge", 0)): the
 *     memory stays, ready for the next peak, until mk_trim() gives it back;
 *  3. a context created with MK_CTX_RELEASE_ON_RESET: its reset gives its
 *     blocks back at once, whatever the policy (FORM's per-module switch).
 *
 * Run it: ./build/examples/example_big_buffers (or under memkit-run to see
 * the curve).  It exits 0 when each phase behaved as described.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <memkit.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)
#define NBUF 256 /* 256 buffers of 512 KiB: a 128 MiB peak */
#define BUF (MiB / 2)

static double rss_mib(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return (double)resident * (double)sysconf(_SC_PAGESIZE) / (double)MiB;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Allocate and fill NBUF buffers of BUF bytes in @ctx ("the sort"). */
static int fill(mk_ctx *ctx, char **buf)
{
    for (int i = 0; i < NBUF; i++) {
        buf[i] = mk_alloc(ctx, BUF);
        if (!buf[i])
            return -1;
        memset(buf[i], i, BUF);
    }
    return 0;
}

static void release(char **buf)
{
    for (int i = 0; i < NBUF; i++)
        mk_free(buf[i]);
}

int main(void)
{
    static char *buf[NBUF];
    int ok = 1;
    mk_ctx *sort = mk_ctx_new(NULL, "sort buffers", MK_GENERAL, NULL);
    if (!sort)
        return 1;

    /* 1. the default policy: back by itself, one delay after the frees */
    double start = rss_mib();
    printf("start                          %7.1f MiB\n", start);
    if (fill(sort, buf))
        return 1;
    double peak = rss_mib();
    printf("1. peak (256 x 512 KiB filled) %7.1f MiB\n", peak);
    release(buf);
    printf("   freed                       %7.1f MiB\n", rss_mib());
    sleep_ms(500); /* the program does something else; no allocation */
    double quiet = rss_mib();
    printf("   0.5 s later (default)       %7.1f MiB\n", quiet);
    ok &= quiet < start + 16;

    /* 2. policy off: the pages stay for the next peak, until mk_trim */
    mk_option_set("purge", 0);
    if (fill(sort, buf))
        return 1;
    release(buf);
    sleep_ms(500);
    double kept = rss_mib();
    printf("2. purge off: freed, 0.5 s     %7.1f MiB (kept for reuse)\n",
           kept);
    ok &= kept > start + 100;
    size_t back = mk_trim();
    double trimmed = rss_mib();
    printf("   mk_trim() gave back         %7.1f MiB -> %.1f MiB\n",
           (double)back / (double)MiB, trimmed);
    ok &= trimmed < start + 16;
    mk_ctx_delete(sort);

    /* 3. a context that releases its memory on reset (policy still off) */
    mk_ctx_opts o = {.flags = MK_CTX_RELEASE_ON_RESET};
    mk_ctx *eager = mk_ctx_new(NULL, "sort, released on reset", MK_GENERAL,
                               &o);
    if (!eager || fill(eager, buf))
        return 1;
    printf("3. RELEASE_ON_RESET: peak      %7.1f MiB\n", rss_mib());
    mk_ctx_reset(eager);
    double after_reset = rss_mib();
    printf("   right after mk_ctx_reset    %7.1f MiB\n", after_reset);
    ok &= after_reset < start + 16;
    mk_ctx_delete(eager);

    printf("%s\n", ok ? "each phase as expected" : "UNEXPECTED figures");
    return ok ? 0 : 1;
}
