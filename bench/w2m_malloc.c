/* SPDX-License-Identifier: MIT */
/*
 * w2m_malloc.c - W2M, W2 (Godot's Variant pool test) through malloc/free,
 * under each malloc drop-in: 10,000,000 x (malloc a 24- or 48-byte object,
 * write every word, read it back, free it), and the same with 1,000
 * objects live in a ring.  The kernel is malloc/main.c's `w2m`, the
 * in-process W2 kernel (w2_pool.c) with malloc and free in the place of
 * the context calls; it runs in a child process per figure (dropin.h), so
 * the figure is the timed loop only - not the process start.
 *
 * Set beside W2's mk-general column, it says what the drop-in's entry path
 * costs over a direct mk_alloc/mk_free on a context (a thread-local load
 * and the owner lookup of free); beside the peers' columns, how memkit's
 * malloc compares with the allocators a program would otherwise preload.
 */
#include <stdio.h>

#include "bench.h"
#include "dropin.h"
#include "report.h"

void bench_w2m(const bench_opts *o)
{
    static const struct {
        unsigned size, ring;
    } cells[] = {{24, 0}, {48, 0}, {24, 1000}, {48, 1000}};
    const int total = (int)(sizeof cells / sizeof cells[0]);
    const char *why = "";
    const char *prog = bench_dropin_program(&why);
    int sec = report_section_vs("W2M", "variant-pool", "ns/iter", BD_COL(BD_glibc),
                                REPORT_LOWER_BETTER, REPORT_DROPIN | REPORT_SPEED,
                                "ns per iteration through malloc/free (a child process per "
                                "figure, the drop-in preloaded): malloc an object, write every "
                                "word, read it, free it (ring: read and free the oldest of 1000 "
                                "live); 10,000,000 iterations");
    for (int k = 0; k < total; k++) {
        char name[40], size[32], ring[32];
        if (cells[k].ring)
            snprintf(name, sizeof name, "%uB ring of %u", cells[k].size, cells[k].ring);
        else
            snprintf(name, sizeof name, "%uB alloc/use/free", cells[k].size);
        bench_row *row = report_row(sec, name, cells[k].size, 0, 10000000u);
        if (!prog) {
            report_note(row, "%s", why);
            continue;
        }
        report_progress("W2M %s: cell %d of %d", name, k + 1, total);
        snprintf(size, sizeof size, "size=%u", cells[k].size);
        snprintf(ring, sizeof ring, "ring=%u", cells[k].ring);
        const char *argv[] = {prog, "w2m", size, ring, "ops=10000000", NULL};
        bench_dropin_job job = {.argv = argv, .speed = BS_NS_PER_OP, .profile_mode = 1};
        bench_dropin_measure(row, NULL, &job, o->runs);
    }
    report_progress_end();
}
