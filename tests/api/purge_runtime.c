/* SPDX-License-Identifier: MIT */
/*
 * api/purge_runtime.c - the purge policy changed while the program runs
 * (mk_option_set), its cost in a program that frees and allocates in a
 * loop, and fork.
 *
 * Each case runs in a fresh process (respawn.h), makes a peak of 64 MiB
 * (its growth starts the purge thread), frees it, and then only sleeps,
 * polls and calls mk_option_set: no allocation or free moves the policy
 * on its behalf unless the case says so.  What is proved:
 *  - a delay lengthened before it ran out holds the memory; a long delay
 *    (60 s) shortened to 100 ms wakes the thread, which gives the memory
 *    back within a deadline counted from the change;
 *  - purge set to off at run time: nothing goes back (no pass), mk_trim
 *    still gives it all back;
 *  - dontneed switched to unmap: the next pass unmaps the empty segments
 *    dontneed had kept (reserved address space falls);
 *  - known bug (DISABLED): memory freed while a pass runs must go back
 *    too (test_free_during_pass);
 *  - the policy switched on (off -> dontneed, or delay -1 -> 100) while
 *    the program is quiet gives back what was freed while it was off;
 *  - a loop that allocates and frees (63 KiB, 960 KiB, 2 MiB huge, small
 *    chunks) with a 100 ms delay pays no purge per operation: passes stay
 *    within one per delay of the loop's time, system calls within a few
 *    per pass, and next to nothing is purged;
 *  - fork: a child forked after the purge thread started has no such
 *    thread, starts none while it allocates a little, starts its own once
 *    it grows, and gets its memory back after a peak; the parent's thread
 *    goes on working.
 */
#include "purge_util.h"

#define PEAK (64 * MiB)
#define CHUNK PU_LARGE          /* a large chunk in every build */
#define NPEAK (PEAK / CHUNK)    /* 68 chunks ... */
#define TOTAL (NPEAK * CHUNK)   /* ... 63.75 MiB */
#define SLACK (2 * MiB)

static double freed_at; /* when peak_and_free began to free */

/* Make the peak, free it; returns the snapshot before the peak. */
static pu_snap peak_and_free(mk_ctx *ctx, pu_snap *peak)
{
    pu_snap base = pu_now();
    size_t n = pu_peak(ctx, CHUNK, PEAK);
    *peak = pu_now();
    CHECK_EQ(n, NPEAK);
    CHECK_GE(peak->f.os_committed, base.f.os_committed + TOTAL);
    CHECK_EQ(pu_threads_named("memkit-purge"), 1);
    freed_at = rs_now();
    pu_free_peak(0);
    return base;
}

/* Wait up to @deadline_s from @t0 for committed (and RSS) to be back
 * near @base, and for the passes that gave the whole peak back to be over
 * (purged_bytes moves at the end of a pass); prints how long it took.
 * Then a few more milliseconds, so that a case's next step starts after
 * the pass (test_free_during_pass is the case of a free during one). */
static double expect_back(const pu_snap *base, double t0, double deadline_s,
                          const char *since)
{
    pu_limits lim = {base->f.os_committed + SLACK, base->rss + 2 * SLACK, 0,
                     base->f.purged_bytes + TOTAL};
    pu_snap after;
    double t = pu_wait(pu_below, &lim, t0, deadline_s, &after);
    pu_print("after", &after);
    printf("  back %.0f ms after %s (deadline %.0f ms)\n", t * 1000, since,
           deadline_s * 1000);
    CHECK(t >= 0);
    rs_sleep_ms(20);
    return t;
}

/* Sleep @ms, polling: committed must stay up and no byte be purged. */
static void expect_held(const pu_snap *peak, long ms)
{
    double t0 = rs_now();
    pu_snap s;
    do {
        rs_sleep_ms(20);
        s = pu_now();
        CHECK_GE(s.f.os_committed, peak->f.os_committed - MiB);
        CHECK_EQ(s.f.purged_bytes, peak->f.purged_bytes);
    } while (rs_now() - t0 < (double)ms / 1000.0);
    pu_print("held", &s);
}

/* ---- the delay ----------------------------------------------------------- */

static void c_delay_shortened(void)
{
    REQUIRE(mk_option_set("purge_delay_ms", 60000) == 0);
    mk_ctx *ctx = mk_ctx_new(NULL, "peak", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(ctx);
    pu_snap peak, base = peak_and_free(ctx, &peak);
    expect_held(&peak, 300);
    double t0 = rs_now();
    REQUIRE(mk_option_set("purge_delay_ms", 100) == 0);
    expect_back(&base, t0, 0.2 + 1.5, "the delay was set to 100 ms");
    mk_ctx_delete(ctx);
}

static void c_delay_lengthened(void)
{
    REQUIRE(mk_option_set("purge_delay_ms", 100) == 0);
    mk_ctx *ctx = mk_ctx_new(NULL, "peak", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(ctx);
    pu_snap peak, base = peak_and_free(ctx, &peak);
    REQUIRE(mk_option_set("purge_delay_ms", 60000) == 0);
    if (rs_now() - freed_at > 0.05) {
        th_note("the change came more than half the delay late: not checked");
        mk_ctx_delete(ctx);
        CHECK(mk_trim() > 0);
        return;
    }
    expect_held(&peak, 400);
    CHECK_GE(mk_trim(), TOTAL - MiB);
    pu_snap after = pu_now();
    CHECK_LE(after.f.os_committed, base.f.os_committed + SLACK);
    mk_ctx_delete(ctx);
}

/* ---- the mode ------------------------------------------------------------ */

static void c_off_at_runtime(void)
{
    REQUIRE(mk_option_set("purge_delay_ms", 100) == 0);
    mk_ctx *ctx = mk_ctx_new(NULL, "peak", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(ctx);
    pu_snap peak, base = peak_and_free(ctx, &peak);
    REQUIRE(mk_option_set("purge", 0) == 0);
    if (rs_now() - freed_at < 0.05)
        expect_held(&peak, 400);
    else
        th_note("the change came more than half the delay late: not checked");
    size_t got = mk_trim();
    CHECK_GE(got, TOTAL - MiB);
    pu_snap after = pu_now();
    pu_print("mk_trim", &after);
    CHECK_LE(after.f.os_committed, base.f.os_committed + SLACK);
    if (PU_RSS)
        CHECK_LE(after.rss, base.rss + 2 * SLACK);
    mk_ctx_delete(ctx);
}

static int reserved_at_most(const pu_snap *s, const void *arg)
{
    return s->f.os_reserved <= *(const size_t *)arg;
}

static void c_dontneed_then_unmap(void)
{
    REQUIRE(mk_option_set("purge_delay_ms", 100) == 0);
    mk_ctx *ctx = mk_ctx_new(NULL, "peak", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(ctx);
    pu_snap peak, base = peak_and_free(ctx, &peak);
    expect_back(&base, rs_now(), 0.2 + 1.5, "the free");
    pu_snap kept = pu_now();
    CHECK_GE(kept.f.segments, base.f.segments + 1); /* kept (its header) */
    REQUIRE(mk_option_set("purge", 3) == 0);
    /* one page taken and given back: the next pass runs in unmap mode */
    void *p = mk_alloc(ctx, CHUNK);
    CHECK_NOT_NULL(p);
    mk_free(p);
    size_t lim = base.f.os_reserved + MiB; /* (a segment the context keeps) */
    pu_snap after;
    double t = pu_wait(reserved_at_most, &lim, rs_now(), 0.2 + 1.5, &after);
    pu_print("unmap", &after);
    CHECK(t >= 0);
    CHECK_LE(after.f.os_reserved, lim);
    CHECK_LE(after.f.segments, base.f.segments + 1);
    mk_ctx_delete(ctx);
}

/* Memory freed while the policy is off (purge 0, or delay -1) goes back
 * once it is switched on, though the program stays quiet.  (Found by this
 * test: a free schedules no pass while the policy is off, and switching
 * it on only woke the thread, which found nothing scheduled and slept on
 * until the next free or mk_trim; fixed in 069c835.) */
static void switch_on_while_quiet(const char *opt, long off, long on)
{
    REQUIRE(mk_option_set("purge_delay_ms", 100) == 0);
    mk_ctx *ctx = mk_ctx_new(NULL, "peak", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(ctx);
    pu_snap peak, base = peak_and_free(ctx, &peak); /* starts the thread */
    expect_back(&base, rs_now(), 0.2 + 1.5, "the first free");
    base = pu_now();
    REQUIRE(mk_option_set(opt, off) == 0);
    for (size_t i = 0; i < NPEAK; i++) {
        pu_chunks[i] = mk_alloc(ctx, CHUNK);
        REQUIRE_NOT_NULL(pu_chunks[i]);
        pu_fill(pu_chunks[i], CHUNK, i);
    }
    peak = pu_now();
    pu_free_peak(0);
    expect_held(&peak, 300);
    double t0 = rs_now();
    REQUIRE(mk_option_set(opt, on) == 0);
    expect_back(&base, t0, 0.2 + 1.5, "the policy was switched on");
    mk_ctx_delete(ctx);
}

static void c_on_while_quiet_mode(void)
{
    switch_on_while_quiet("purge", 0, 1);
}
static void c_on_while_quiet_delay(void)
{
    switch_on_while_quiet("purge_delay_ms", -1, 100);
}

/* A free that happens while a pass runs is not lost (it was, until the
 * thread learned to count the frees noted during a pass: mki_purge_note
 * returns at once when a pass is scheduled and the thread runs, and the
 * thread cleared `scheduled` after a pass that left nothing pending but
 * had looked at the free memory before the free: the memory stayed, here a
 * 4 MiB huge mapping, cached and resident, until the next free or
 * mk_trim).  The window is made
 * wide and found: the pass that gives back a 64 MiB peak is started at a
 * known time (a 60 s delay shortened once the peak has been free for
 * longer than the new delay, so that it is the only pass), and the chunk
 * is freed as soon as committed memory starts to fall. */
static void c_free_during_pass(void)
{
    REQUIRE(mk_option_set("purge", 3) == 0);
    mk_ctx *ctx = mk_ctx_new(NULL, "peak", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(ctx);
    pu_snap base = pu_now();
    int caught = 0;
    for (int attempt = 0; attempt < 5 && !caught; attempt++) {
        REQUIRE(mk_option_set("purge_delay_ms", 60000) == 0);
        mk_trim(); /* a clean start for each attempt */
        char *x = mk_alloc(ctx, 4 * MiB);
        REQUIRE_NOT_NULL(x);
        memset(x, 1, 4 * MiB);
        REQUIRE(pu_peak(ctx, CHUNK, PEAK) == NPEAK);
        pu_snap peak = pu_now();
        pu_free_peak(0);
        rs_sleep_ms(150); /* every emptied segment is due at 100 ms */
        REQUIRE(mk_option_set("purge_delay_ms", 100) == 0); /* the pass */
        mk_process_figures f;
        double t0 = rs_now();
        do
            mk_process_stats(&f);
        while (f.os_committed + 8 * MiB > peak.f.os_committed &&
               rs_now() - t0 < 2);
        mk_free(x); /* during the pass, after it looked at huge mappings */
        pu_snap mid = pu_now();
        caught = mid.f.purge_passes == peak.f.purge_passes;
        printf("  attempt %d: freed %.1f ms after the pass started, %s it "
               "ended\n", attempt, (rs_now() - t0) * 1000,
               caught ? "before" : "after");
    }
    if (!caught)
        th_note("never freed during the pass: the bug was not exercised");
    pu_limits lim = {base.f.os_committed + SLACK, 0,
                     base.f.os_reserved + 4 * MiB, 0};
    pu_snap after;
    double t = pu_wait(pu_below, &lim, rs_now(), 0.5 + 1.0, &after);
    pu_print("after", &after);
    CHECK(t >= 0); /* the huge chunk went back too */
    mk_ctx_delete(ctx);
}

/* ---- a loop pays no purge ----------------------------------------------- */

static void c_loop(void)
{
    REQUIRE(mk_option_set("purge_delay_ms", 100) == 0);
    mk_ctx *ctx = mk_ctx_new(NULL, "loop", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(ctx);
    /* 24 MiB stay live, so that the process is large enough for a thread */
    REQUIRE(pu_peak(ctx, CHUNK, 24 * MiB) == 24 * MiB / CHUNK);
    CHECK_EQ(pu_threads_named("memkit-purge"), 1);
    pu_snap before = pu_now();
    double t0 = rs_now(), t;
    size_t iters = 0;
    void *small[64];
    do {
        for (int k = 0; k < 16; k++) {
            static const size_t sizes[] = {PU_PAGE, PU_LARGE, 2 * MiB};
            size_t sz = sizes[k % 3];
            char *p = mk_alloc(ctx, sz);
            REQUIRE_NOT_NULL(p);
            p[0] = 1, p[sz - 1] = 2;
            mk_free(p);
            for (int j = 0; j < 64; j++)
                small[j] = mk_alloc(ctx, 16 + 24 * (size_t)j);
            for (int j = 0; j < 64; j++)
                mk_free(small[j]);
            iters++;
        }
    } while ((t = rs_now() - t0) < 0.6);
    pu_snap after = pu_now();
    pu_print("before", &before);
    pu_print("after", &after);
    size_t passes = after.f.purge_passes - before.f.purge_passes;
    size_t calls = after.f.os_calls - before.f.os_calls;
    size_t purged = after.f.purged_bytes - before.f.purged_bytes;
    printf("  %zu iterations in %.0f ms: %zu passes, %zu system calls, "
           "%zu KiB purged\n", iters, t * 1000, passes, calls, purged >> 10);
    CHECK_GE(iters, (size_t)1000);
    CHECK_LE(passes, (size_t)(2 * t / 0.1) + 4); /* one per delay at most */
    CHECK_LE(passes * 100, iters);
    CHECK_LE(calls, 4 * passes + 16);
    CHECK_LE(purged, (passes + 4) * 2 * MiB); /* a chunk or so a pass */
    mk_ctx_delete(ctx);
}

/* ---- fork ---------------------------------------------------------------- */

static void forked_child(void *arg)
{
    (void)arg;
    th_current = "forked child";
    CHECK_EQ(pu_threads_named("memkit-purge"), 0); /* not inherited */
    mk_ctx *ctx = mk_ctx_new(NULL, "child peak", MK_GENERAL, NULL);
    if (ctx) {
        /* a child that allocates a little (what a child does before exec)
         * starts no thread */
        void *small[64];
        for (int i = 0; i < 64; i++)
            CHECK_NOT_NULL(small[i] = mk_alloc(ctx, 100));
        for (int i = 0; i < 64; i++)
            mk_free(small[i]);
        CHECK_EQ(pu_threads_named("memkit-purge"), 0);
        pu_snap base = pu_now();
        /* growth alone: the child's thread starts at its first slow path */
        CHECK_EQ(pu_peak(ctx, CHUNK, PEAK), NPEAK);
        CHECK_EQ(pu_threads_named("memkit-purge"), 1);
        pu_free_peak(0);
        expect_back(&base, rs_now(), 0.2 + 1.5, "the child's free");
        mk_ctx_delete(ctx);
    }
    CHECK_NOT_NULL(ctx);
    fflush(stdout);
    _exit(th_failures ? 1 : 0);
}

static void c_fork(void)
{
    REQUIRE(mk_option_set("purge_delay_ms", 100) == 0);
    mk_ctx *ctx = mk_ctx_new(NULL, "peak", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(ctx);
    pu_snap peak, base = peak_and_free(ctx, &peak);
    expect_back(&base, rs_now(), 0.2 + 1.5, "the parent's free");
    if (PU_TSAN) {
        th_note("ThreadSanitizer: no thread may start in a forked child "
                "of a threaded process; the child is not run");
    } else {
        char err[8192];
        int st = th_run_child(forked_child, NULL, err, sizeof err);
        rs_show(err);
        CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    /* the parent's thread still works */
    base = pu_now();
    for (size_t i = 0; i < NPEAK; i++) {
        pu_chunks[i] = mk_alloc(ctx, CHUNK);
        REQUIRE_NOT_NULL(pu_chunks[i]);
        pu_fill(pu_chunks[i], CHUNK, i);
    }
    pu_free_peak(0);
    expect_back(&base, rs_now(), 0.2 + 1.5, "the parent's second free");
    CHECK_EQ(pu_threads_named("memkit-purge"), 1);
    mk_ctx_delete(ctx);
}

/* ---- the cases ----------------------------------------------------------- */

static const rs_case cases[] = {
    {"delay_shortened", c_delay_shortened},
    {"delay_lengthened", c_delay_lengthened},
    {"off_at_runtime", c_off_at_runtime},
    {"dontneed_then_unmap", c_dontneed_then_unmap},
    {"on_while_quiet_mode", c_on_while_quiet_mode},
    {"on_while_quiet_delay", c_on_while_quiet_delay},
    {"free_during_pass", c_free_during_pass},
    {"loop", c_loop},
    {"fork", c_fork},
};

static char out[1 << 16];
/* The cases test the policy's timing, which the purge thread keeps (a case
 * makes no call after its frees): each runs with it (c_no_thread switches
 * it off, to test the default). */
static const char *with_thread[] = {"MEMKIT_PURGE_THREAD=1", NULL};

#define PARENT(name)                                                        \
    static void test_##name(void)                                           \
    {                                                                       \
        rs_expect_ok(#name, with_thread, out, sizeof out);                  \
    }
PARENT(delay_shortened)
PARENT(delay_lengthened)
PARENT(off_at_runtime)
PARENT(dontneed_then_unmap)
PARENT(on_while_quiet_mode)
PARENT(on_while_quiet_delay)
PARENT(free_during_pass)
PARENT(loop)
PARENT(fork)

int main(int argc, char **argv)
{
    if (argc > 1)
        return rs_run_case(cases, RS_NCASES(cases), argv[1]);
    RUN(test_delay_shortened);
    RUN(test_delay_lengthened);
    RUN(test_off_at_runtime);
    RUN(test_dontneed_then_unmap);
    RUN(test_on_while_quiet_mode);
    RUN(test_on_while_quiet_delay);
    RUN(test_free_during_pass);
    RUN(test_loop);
    RUN(test_fork);
    return th_done();
}
