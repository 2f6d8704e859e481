/* SPDX-License-Identifier: MIT */
/*
 * dropin.c - the drop-in allocators (which exist, where) and the run loop
 * of the drop-in workloads (see dropin.h).
 *
 * Finding them: libmemkit-malloc's path comes from the build
 * (MEMKIT_MALLOC_PATH, set by bench/CMakeLists.txt from
 * $<TARGET_FILE:memkit-malloc>), or from the environment variable
 * MEMKIT_BENCH_MALLOC_LIB (another build of the library, measured without
 * rebuilding the bench); the peers are looked for by file name in
 * the usual library directories (the multiarch one first), so installing
 * or removing a Debian package changes the columns without a rebuild.
 *
 * The loop mirrors measure.c: run r of every drop-in before run r + 1 of
 * any, every figure the median of the runs.  It differs in what a sample
 * is - a whole child process - and so in how failure looks: a child that
 * dies, exits non-zero or hangs is reported in the cell's note with the
 * run, the reason and the first line the child wrote on stderr (say,
 * memkit's own error report), and that drop-in skips the rest of the cell;
 * the bench goes on.  The time limit of a run is generous (30 s, or 20
 * times what glibc took for the same cell, whichever is more: glibc runs
 * first), so that only a hang - not a slow allocator - is cut short.
 *
 * Every child is memkit-bench-malloc, which prints one line: time,
 * operations, checksum, peak RSS (its own VmHWM; for `run`, W7's
 * trampoline, the program's), and for some workloads more figures (W3:
 * RSS at given moments), which a job names by key.  The checksum must be
 * glibc's under every drop-in, or the cell is noted CHECKSUM MISMATCH
 * (wrong data read back without the program noticing; for W7, other
 * output).
 *
 * memkit's purge modes (W3's extra columns) are memkit's library run with
 * MEMKIT_PURGE=<mode> in the child's environment; the plain `memkit`
 * column runs with the library's defaults (and whatever MEMKIT_* the
 * bench's own environment holds).  A job may ask for memkit's own account
 * of each run (MEMKIT_STATS=json, written at the child's exit into a
 * temporary file that is read back and removed): bytes purged, passes.
 */
#include "dropin.h"

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "measure.h"
#include "report.h"
#include "spawn.h"
#include "timing.h"

#ifndef MEMKIT_MALLOC_PATH
#define MEMKIT_MALLOC_PATH ""
#endif
#ifndef MEMKIT_BENCH_MALLOC_PATH
#define MEMKIT_BENCH_MALLOC_PATH ""
#endif
#ifndef BENCH_LIBDIR_ARCH
#define BENCH_LIBDIR_ARCH ""
#endif

static const struct dropin {
    const char *name;
    const char *file;    /* the library's file name (NULL: glibc, no preload) */
    const char *package; /* Debian package that installs it */
    const char *what;
    const char *env;     /* a purge mode: memkit's library with this set */
} dropins[BD_COUNT] = {
    [BD_glibc] = {"glibc", NULL, NULL, "glibc's malloc, no LD_PRELOAD: the baseline"},
    [BD_memkit] = {"memkit", NULL, NULL, "libmemkit-malloc"},
    [BD_jemalloc] = {"jemalloc", "libjemalloc.so.2", "libjemalloc2", "jemalloc"},
    [BD_mimalloc] = {"mimalloc", "libmimalloc.so.2", "libmimalloc2.0", "mimalloc"},
    [BD_tcmalloc] = {"tcmalloc", "libtcmalloc_minimal.so.4", "libtcmalloc-minimal4",
                     "gperftools' tcmalloc (minimal)"},
    [BD_memkit_off] = {"memkit:off", NULL, NULL, "libmemkit-malloc", "MEMKIT_PURGE=off"},
    [BD_memkit_dontneed] = {"memkit:dontneed", NULL, NULL, "libmemkit-malloc",
                            "MEMKIT_PURGE=dontneed"},
    [BD_memkit_free] = {"memkit:free", NULL, NULL, "libmemkit-malloc", "MEMKIT_PURGE=free"},
    [BD_memkit_unmap] = {"memkit:unmap", NULL, NULL, "libmemkit-malloc", "MEMKIT_PURGE=unmap"},
    [BD_memkit_profile] = {"memkit:profile", NULL, NULL, "libmemkit-malloc-prof",
                           "MEMKIT_PROFILE=1"},
};

/* Is drop-in @d memkit's library (its own column or a purge mode)? */
static int is_memkit(int d)
{
    return d == BD_memkit || d >= BD_FIRST_MODE;
}

static signed char state[BD_COUNT]; /* 0 unknown, 1 ready, -1 not */
static const char *reason[BD_COUNT];
static char path[BD_COUNT][PATH_MAX];

const char *bench_col_name(int col)
{
    return col < BA_COUNT ? bench_alloc_get(col)->name : dropins[col - BA_COUNT].name;
}

void bench_dropin_leave_out(int d, const char *why)
{
    state[d] = -1;
    reason[d] = why;
}

/* Look for @file in the library directories; 0 and its path in @out. */
static int find_library(const char *file, char *out, size_t len)
{
    static const char *const dirs[] = {"/usr/lib/" BENCH_LIBDIR_ARCH, "/usr/lib64", "/usr/lib",
                                       "/usr/local/lib", "/lib/" BENCH_LIBDIR_ARCH};
    for (size_t k = 0; k < sizeof dirs / sizeof dirs[0]; k++) {
        snprintf(out, len, "%s/%s", dirs[k], file);
        if (access(out, R_OK) == 0)
            return 0;
    }
    return -1;
}

int bench_dropin_ready(int d, const char **why)
{
    if (!state[d]) {
        state[d] = 1;
        reason[d] = "";
        if (is_memkit(d)) {
            const char *env = getenv("MEMKIT_BENCH_MALLOC_LIB");
            snprintf(path[d], sizeof path[d], "%s", env && *env ? env : MEMKIT_MALLOC_PATH);
            /* the heap profile's column: the library built for it, beside
             * the drop-in (libmemkit-malloc-prof.so; docs/PROFILE.md) */
            char *so = strstr(path[d], "libmemkit-malloc.so");
            if (d == BD_memkit_profile && so && strlen(path[d]) + 6 < sizeof path[d]) {
                char rest[64];
                snprintf(rest, sizeof rest, "%s", so + strlen("libmemkit-malloc"));
                snprintf(so, sizeof path[d] - (size_t)(so - path[d]), "libmemkit-malloc-prof%s",
                         rest);
            }
            if (!path[d][0] || access(path[d], R_OK) != 0) {
                state[d] = -1;
                reason[d] = "libmemkit-malloc.so not found (build the memkit-malloc target, "
                            "or check MEMKIT_BENCH_MALLOC_LIB)";
            }
        } else if (dropins[d].file && find_library(dropins[d].file, path[d], sizeof path[d]) != 0) {
            static char msg[BD_COUNT][96];
            snprintf(msg[d], sizeof msg[d], "%s not installed (Debian: apt-get install %s)",
                     dropins[d].file, dropins[d].package);
            state[d] = -1;
            reason[d] = msg[d];
        }
    }
    if (why)
        *why = reason[d];
    return state[d] > 0;
}

/* The LD_PRELOAD value of drop-in @d (NULL: glibc). */
static const char *preload(int d)
{
    return d == BD_glibc ? NULL : path[d];
}

void bench_dropin_describe(FILE *out)
{
    for (int d = 0; d < BD_COUNT; d++) {
        const char *why;
        fprintf(out, "%-11s %-15s ", d == 0 ? "drop-ins:" : "", dropins[d].name);
        if (!bench_dropin_ready(d, &why))
            fprintf(out, "LEFT OUT of this run: %s\n", why);
        else if (d == BD_glibc)
            fprintf(out, "%s\n", dropins[d].what);
        else if (dropins[d].env)
            fprintf(out, "%s with %s (%s only)\n", dropins[d].what, dropins[d].env,
                    d == BD_memkit_profile ? "W2M, W6" : "W3");
        else
            fprintf(out, "%s: LD_PRELOAD=%s\n", dropins[d].what, path[d]);
    }
}

const char *bench_dropin_program(const char **why)
{
    static char prog[PATH_MAX];
    static int found = -1;
    if (found < 0) {
        found = 0;
        ssize_t n = readlink("/proc/self/exe", prog, sizeof prog - 32);
        if (n > 0) { /* next to memkit-bench */
            prog[n] = '\0';
            char *slash = strrchr(prog, '/');
            if (slash) {
                strcpy(slash + 1, "memkit-bench-malloc");
                found = access(prog, X_OK) == 0;
            }
        }
        if (!found) {
            snprintf(prog, sizeof prog, "%s", MEMKIT_BENCH_MALLOC_PATH);
            found = prog[0] && access(prog, X_OK) == 0;
        }
    }
    if (!found && why)
        *why = "memkit-bench-malloc not found (build the memkit-bench-malloc target)";
    return found ? prog : NULL;
}

/* The same note on both rows of a cell (either may be NULL). */
static void __attribute__((format(printf, 3, 4)))
note_both(bench_row *a, bench_row *b, const char *fmt, ...)
{
    char buf[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (a)
        report_note(a, "%s", buf);
    if (b)
        report_note(b, "%s", buf);
}

/* Parse the child's line into a speed sample, its peak RSS in MiB and
 * its checksum; 0 on success. */
static int parse_line(const bench_proc *p, enum bench_speed speed, double *v, double *rss_mib,
                      unsigned long long *check)
{
    unsigned long long ns, ops, bad, hwm;
    const char *s = strstr(p->out, "ns=");
    if (!s ||
        sscanf(s, "ns=%llu ops=%llu check=%llu bad=%llu hwm_kib=%llu", &ns, &ops, check, &bad,
               &hwm) != 5 ||
        !ns || !ops)
        return -1;
    switch (speed) {
    case BS_NS_PER_OP: *v = (double)ns / (double)ops; break;
    case BS_US_PER_OP: *v = (double)ns / (double)ops / 1e3; break;
    case BS_S_PER_OP: *v = (double)ns / (double)ops / 1e9; break;
    case BS_MOPS: *v = (double)ops / (double)ns * 1e3; break;
    case BS_MS: *v = (double)ns / 1e6; break;
    }
    *rss_mib = (double)hwm / 1024.0;
    return 0;
}

/* The number after "\"@key\":" in @json; 0 on success. */
static int json_number(const char *json, const char *key, double *v)
{
    char pat[48];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *s = strstr(json, pat);
    return s && sscanf(s + strlen(pat), " %lf", v) == 1 ? 0 : -1;
}

/* Read memkit's exit figures (MEMKIT_STATS=json) from @file, then remove
 * it; 0 on success. */
static int read_mkstats(const char *file, double *purged_mib, double *passes)
{
    char buf[4096];
    FILE *f = fopen(file, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    unlink(file);
    buf[n] = '\0';
    const char *purge = strstr(buf, "\"purge\":"); /* {"mode", "purged_bytes", "passes"} */
    double bytes;
    if (!purge || json_number(purge, "purged_bytes", &bytes) != 0 ||
        json_number(purge, "passes", passes) != 0)
        return -1;
    *purged_mib = bytes / (1024.0 * 1024.0);
    return 0;
}

int bench_dropin_measure(bench_row *speed, bench_row *rss, const bench_dropin_job *job,
                         int runs)
{
    static double sp[BD_COUNT][BENCH_MAX_RUNS], mem[BD_COUNT][BENCH_MAX_RUNS];
    static double fig[BD_MAX_FIGURES][BD_COUNT][BENCH_MAX_RUNS];
    static double purged[BD_COUNT][BENCH_MAX_RUNS], passes[BD_COUNT][BENCH_MAX_RUNS];
    int failed[BD_COUNT] = {0}, mismatch[BD_COUNT] = {0}, check_from = -1, rc = 0;
    int nostats[BD_COUNT] = {0};
    unsigned long long check = 0;
    double base_wall = 0;
    const int nfig = job->nfigures < BD_MAX_FIGURES ? job->nfigures : BD_MAX_FIGURES;
    if (runs > BENCH_MAX_RUNS)
        runs = BENCH_MAX_RUNS;
    for (int k = 0; k < nfig; k++)
        memset(job->figures[k].median, 0, sizeof job->figures[k].median);
    const int ndropin = BD_COUNT;
    /* the profiled runs write their dumps to a file of ours, removed after */
    static char prof_var[160];
    {
        const char *tmp = getenv("TMPDIR");
        snprintf(prof_var, sizeof prof_var, "MEMKIT_PROFILE_PREFIX=%s/memkit-bench-%d-prof",
                 tmp && *tmp ? tmp : "/tmp", (int)getpid());
    }

    /* memkit's exit figures go to a file of our own, read after each run */
    static char stats_file[128], stats_var[160];
    if (job->mkstats) {
        const char *tmp = getenv("TMPDIR");
        snprintf(stats_file, sizeof stats_file, "%s/memkit-bench-%d-stats.json",
                 tmp && *tmp ? tmp : "/tmp", (int)getpid());
        snprintf(stats_var, sizeof stats_var, "MEMKIT_STATS_FILE=%s", stats_file);
        memset(job->mkstats, 0, sizeof *job->mkstats);
    }

    for (int r = 0; r < runs; r++) {
        for (int d = 0; d < ndropin; d++) {
            if (failed[d] || !bench_dropin_ready(d, NULL))
                continue;
            if ((d >= BD_FIRST_MODE && d <= BD_LAST_PURGE && !job->purge_modes) ||
                (d == BD_memkit_profile && !job->profile_mode))
                continue;
            /* the environment: the job's, then the mode's, then the stats' */
            const char *env[24];
            int ne = 0;
            for (const char *const *x = job->env_extra; x && *x && ne < 20; x++)
                env[ne++] = *x;
            if (dropins[d].env)
                env[ne++] = dropins[d].env;
            if (d == BD_memkit_profile)
                env[ne++] = prof_var;
            int want_stats = job->mkstats && is_memkit(d);
            if (want_stats) {
                env[ne++] = "MEMKIT_STATS=json";
                env[ne++] = stats_var;
                unlink(stats_file);
            }
            env[ne] = NULL;
            double limit = 20 * base_wall > 30 ? 20 * base_wall : 30;
            bench_proc p = {.argv = job->argv, .preload = preload(d), .env_extra = env,
                            .unpin = job->unpin, .timeout_s = limit};
            unsigned long long c = 0;
            const char *what = NULL;
            if (bench_proc_run(&p) != 0)
                what = p.why;
            else if (parse_line(&p, job->speed, &sp[d][r], &mem[d][r], &c) != 0)
                what = "no measurement in its output";
            for (int k = 0; k < nfig && !what; k++) {
                if (bench_proc_figure(p.out, job->figures[k].key, &fig[k][d][r]) != 0)
                    what = "a figure is missing from its output";
                else
                    fig[k][d][r] *= job->figures[k].scale;
            }
            if (what) {
                failed[d] = 1;
                rc = -1;
                note_both(speed, rss, "%s FAILED (run %d of %d): %s", dropins[d].name, r + 1,
                          runs, what);
                for (int k = 0; k < nfig; k++)
                    if (job->figures[k].row)
                        report_note(job->figures[k].row, "%s FAILED (run %d of %d): %s",
                                    dropins[d].name, r + 1, runs, what);
                continue;
            }
            if (want_stats && read_mkstats(stats_file, &purged[d][r], &passes[d][r]) != 0)
                nostats[d] = 1;
            if (d == BD_BASELINE && p.wall_s > base_wall)
                base_wall = p.wall_s;
            if (check_from < 0) {
                check = c;
                check_from = d;
            } else if (c != check) {
                mismatch[d] = 1;
            }
        }
    }

    static const char *const prof_ends[] = {".exit.heap", ".exit.folded", ".peak.heap",
                                             ".peak.folded"};
    for (int k = 0; job->profile_mode && k < 4; k++) {
        char f[200];
        snprintf(f, sizeof f, "%s%s", prof_var + strlen("MEMKIT_PROFILE_PREFIX="), prof_ends[k]);
        unlink(f);
    }
    for (int d = 0; d < ndropin; d++) {
        if (!bench_dropin_ready(d, NULL) || failed[d])
            continue;
        if ((d >= BD_FIRST_MODE && d <= BD_LAST_PURGE && !job->purge_modes) ||
            (d == BD_memkit_profile && !job->profile_mode))
            continue;
        if (speed)
            report_set(speed, BD_COL(d), sp[d], runs);
        if (rss)
            report_set(rss, BD_COL(d), mem[d], runs);
        for (int k = 0; k < nfig; k++) {
            if (job->figures[k].row)
                report_set(job->figures[k].row, BD_COL(d), fig[k][d], runs);
            job->figures[k].median[d] = bench_median(fig[k][d], runs);
        }
        if (job->mkstats && is_memkit(d) && !nostats[d]) {
            job->mkstats->have[d] = 1;
            job->mkstats->purged_mib[d] = bench_median(purged[d], runs);
            job->mkstats->passes[d] = bench_median(passes[d], runs);
        }
        if (mismatch[d]) {
            rc = -1;
            note_both(speed, rss, "CHECKSUM MISMATCH: %s's differs from %s's",
                      dropins[d].name, dropins[check_from].name);
        }
    }
    return rc;
}
