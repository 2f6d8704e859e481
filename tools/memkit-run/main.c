/* SPDX-License-Identifier: MIT */
/*
 * main.c - memkit-run: run a program on memkit (or the system allocator)
 * and show how its resident memory went.
 *
 *   memkit-run [--interval MS] [--csv FILE] [--svg FILE] [--system]
 *              [--profile [--rate BYTES] [--out PREFIX]] [--] PROGRAM ARGS...
 *
 * The flow: options; the files are opened before the program starts (a
 * typo in a path should not cost a long run); the library is found
 * (locate.c); the program starts (launch.c) and is sampled on a fixed
 * schedule, every --interval ms from its exec, until it ends; then the
 * report goes to stderr, so the program's stdout stays its own: the
 * figures, a chart (chart.c), memkit's own view (view.c), the files
 * (plot.c).  The exit status is the program's, 128+N for a death by
 * signal N, 126/127 when it cannot be run, 125 for the tool's own errors.
 *
 * Sampling costs the program next to nothing (no preload of ours, no
 * ptrace: the tool reads /proc; smaps_rollup holds the program's mmap
 * lock for a moment) and the machine one tree walk per sample.
 * The schedule is absolute (start + k * interval): a slow sample delays
 * the next one but the series does not drift, and slots missed on a
 * loaded machine are skipped, not made up in a burst.  A sample taken as
 * the program ends (a zombie) is dropped: it would show memory already
 * gone.  The kernel's own high-water mark (wait4's ru_maxrss) is reported
 * beside the sampled peak, and is the peak when it is higher: a peak
 * shorter than the interval, or a program shorter than one sample, is not
 * missed (the sampled peak, a sum over processes, wins for process trees).
 *
 * memkit's figures: every process on memkit appends one record to
 * MEMKIT_STATS_FILE at its exit, in one write.  The tool makes that file a
 * FIFO it reads while the program runs, so that the records of a wrapper
 * script and of the program it starts are all read, and the view shows
 * the process that held the most (view.c).  The tool holds a write end of
 * its own, so the FIFO never reads as hung up between writers; when the
 * program has ended it removes the FIFO before the last read, so a
 * process still running writes a plain file at its exit instead (the note
 * says where).  Where a FIFO cannot be made, a plain file, read whole at
 * the end: it holds every record too.
 *
 * The series grows by doubling and is kept whole, so the chart and files
 * see every sample: 32 bytes a sample, 55 MB a day at the default
 * interval (a run of days wants a longer --interval).
 */
#include "run.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHART_WIDTH 60
#define CHART_HEIGHT 8

static void usage(FILE *f)
{
    fprintf(f,
"usage: memkit-run [--interval MS] [--csv FILE] [--svg FILE] [--system]\n"
"                  [--profile [--rate BYTES] [--out PREFIX]] [--] PROGRAM ARGS...\n"
"Run PROGRAM on memkit's malloc (LD_PRELOAD of libmemkit-malloc.so), sample\n"
"the resident memory of it and every process it starts, and report on stderr:\n"
"wall time, peak and final RSS, a chart, and memkit's own figures at exit.\n"
"  --interval MS  time between samples (default 50, 1 to 3600000)\n"
"  --csv FILE     write the samples: time_s,rss_kib,private_dirty_kib,processes\n"
"  --svg FILE     write a plot (gnuplot when installed, else a plain SVG)\n"
"  --system       run on the system allocator (no preload) instead\n"
"  --profile      sample a heap profile (MEMKIT_PROFILE): report the top stacks\n"
"                 at the peak and still live at exit, the bytes by context, and\n"
"                 write flame graphs PREFIX.peak.svg and PREFIX.exit.svg, their\n"
"                 stacks named in PREFIX.peak.folded and PREFIX.exit.folded, and\n"
"                 each process's raw files as PREFIX.PID.*\n"
"  --rate BYTES   mean bytes between samples (default 524288; 1: every\n"
"                 allocation, an exact list of what is never freed)\n"
"  --out PREFIX   where the profile goes (default ./memkit-profile)\n"
"The library: $MEMKIT_RUN_LIB, else the build tree's or the installed one.\n"
"Exit status: PROGRAM's; 128+N if it died of signal N; 127 not found,\n"
"126 not executable, 125 memkit-run's own error.\n");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int series_add(mr_series *s, const mr_sample *x)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        mr_sample *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = *x;
    return 0;
}

/* The command line, space-separated, at most @cap - 1 bytes ("..."). */
static void command_line(char *out, size_t cap, char *const argv[])
{
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; argv[i]; i++) {
        int n = snprintf(out + len, cap - len, "%s%s", i ? " " : "", argv[i]);
        if (n < 0 || (size_t)n >= cap - len) {
            if (cap > 4)
                strcpy(out + cap - 4, "...");
            return;
        }
        len += (size_t)n;
    }
}

/* The state of one run, for the report. */
typedef struct run {
    mr_series series;
    const char *lib; /* NULL: the system allocator */
    int status;      /* the program's wait status */
    long maxrss_kib; /* its high-water mark (wait4) */
    double user_s, sys_s, wall_s;
    long interval_ms;
    int most_procs;
    size_t seen_procs;
    int still_running; /* descendants alive when the program ended */
} run;

static void report(FILE *out, const run *r, const char *cmd)
{
    fprintf(out, "memkit-run: %s\n", cmd);
    if (r->lib)
        fprintf(out, "  allocator   memkit (%s)\n", r->lib);
    else
        fprintf(out, "  allocator   system (no preload)\n");
    if (WIFSIGNALED(r->status))
        fprintf(out, "  exit        killed by signal %d (%s): status %d\n",
                WTERMSIG(r->status), strsignal(WTERMSIG(r->status)),
                128 + WTERMSIG(r->status));
    else
        fprintf(out, "  exit        status %d\n", WEXITSTATUS(r->status));
    fprintf(out, "  wall time   %.3f s (user %.3f s, system %.3f s)\n",
            r->wall_s, r->user_s, r->sys_s);

    /* the peak: the largest sample (all processes), unless the kernel's
     * high-water mark of the program alone is higher (a peak between two
     * samples, or a program shorter than one) */
    const mr_series *s = &r->series;
    const mr_sample *peak = NULL;
    for (size_t i = 0; i < s->n; i++)
        if (!peak || s->v[i].rss_kib > peak->rss_kib)
            peak = &s->v[i];
    if (peak && peak->rss_kib >= r->maxrss_kib)
        fprintf(out, "  peak RSS    %.1f MiB at %.3f s (sampled, all "
                     "processes; the program's high-water mark %.1f MiB)\n",
                peak->rss_kib / 1024.0, peak->t, r->maxrss_kib / 1024.0);
    else if (peak)
        fprintf(out, "  peak RSS    %.1f MiB (the program's high-water mark; "
                     "sampled at most %.1f MiB at %.3f s)\n",
                r->maxrss_kib / 1024.0, peak->rss_kib / 1024.0, peak->t);
    else
        fprintf(out, "  peak RSS    %.1f MiB (the program's high-water mark; "
                     "it ended before the first sample)\n",
                r->maxrss_kib / 1024.0);
    if (s->n > 0) {
        const mr_sample *last = &s->v[s->n - 1];
        fprintf(out, "  final RSS   %.1f MiB at %.3f s (the last sample)",
                last->rss_kib / 1024.0, last->t);
        if (last->dirty_kib >= 0)
            fprintf(out, ", private dirty %.1f MiB", last->dirty_kib / 1024.0);
        fputc('\n', out);
    }
    fprintf(out, "  samples     %zu, every %ld ms\n", s->n, r->interval_ms);
    fprintf(out, "  processes   %d at most at once, %zu in all\n",
            r->most_procs, r->seen_procs);
    if (r->still_running > 0)
        fprintf(out, "  note        %d process%s it started still running "
                     "(not waited for)\n", r->still_running,
                r->still_running == 1 ? "" : "es");
    if (s->n > 1) {
        fputc('\n', out);
        mr_chart_print(out, s, CHART_WIDTH, CHART_HEIGHT);
    }
}

/* memkit's records, read from the FIFO (see the opening comment). */
typedef struct stats_pipe {
    char path[PATH_MAX]; /* the FIFO, or a plain file; "" if none */
    char dir[PATH_MAX];  /* the FIFO's private directory; "" for a file */
    int rd, wr;          /* the FIFO's ends, -1 if a plain file */
    char *buf;
    size_t len, cap;
} stats_pipe;

#define STATS_MAX (4u << 20) /* records beyond this many bytes are dropped */

static void stats_drain(stats_pipe *sp)
{
    if (sp->rd < 0)
        return;
    for (;;) {
        if (sp->cap - sp->len < 4096 && sp->cap < STATS_MAX) {
            size_t cap = sp->cap ? sp->cap * 2 : 65536;
            char *b = realloc(sp->buf, cap);
            if (b) {
                sp->buf = b;
                sp->cap = cap;
            }
        }
        char sink[4096];
        int keep = sp->cap - sp->len >= 1;
        ssize_t n = keep ? read(sp->rd, sp->buf + sp->len, sp->cap - sp->len)
                         : read(sp->rd, sink, sizeof sink);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        if (keep)
            sp->len += (size_t)n;
    }
}

/* Make the FIFO (or, failing that, a plain file); 0, or -1 with none. */
static int stats_open(stats_pipe *sp)
{
    const char *tmp = getenv("TMPDIR");
    tmp = tmp && *tmp ? tmp : "/tmp";
    sp->rd = sp->wr = -1;
    snprintf(sp->dir, sizeof sp->dir, "%s/memkit-run.XXXXXX", tmp);
    if (mkdtemp(sp->dir) &&
        snprintf(sp->path, sizeof sp->path, "%.*s/stats", PATH_MAX - 8, sp->dir) > 0) {
        if (mkfifo(sp->path, 0600) == 0 &&
            (sp->rd = open(sp->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) >= 0 &&
            (sp->wr = open(sp->path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)) >= 0)
            return 0;
        if (sp->rd >= 0)
            close(sp->rd);
        sp->rd = -1;
        unlink(sp->path);
        rmdir(sp->dir);
    }
    sp->dir[0] = '\0';
    snprintf(sp->path, sizeof sp->path, "%s/memkit-run.XXXXXX", tmp);
    int fd = mkstemp(sp->path);
    if (fd < 0) {
        fprintf(stderr, "memkit-run: no temporary file for memkit's "
                        "figures (%s): %s\n", sp->path, strerror(errno));
        sp->path[0] = '\0';
        return -1;
    }
    close(fd);
    return 0;
}

/* The program has ended: remove the FIFO, read what is left, close it.
 * A plain file is read whole. */
static void stats_close(stats_pipe *sp)
{
    if (sp->rd >= 0) {
        unlink(sp->path);
        rmdir(sp->dir);
        stats_drain(sp);
        close(sp->wr);
        close(sp->rd);
        sp->rd = sp->wr = -1;
        return;
    }
    int fd = open(sp->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    sp->rd = fd;
    stats_drain(sp);
    close(fd);
    sp->rd = -1;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"interval", required_argument, NULL, 'i'},
        {"csv", required_argument, NULL, 'c'},
        {"svg", required_argument, NULL, 's'},
        {"system", no_argument, NULL, 'S'},
        {"profile", no_argument, NULL, 'P'},
        {"rate", required_argument, NULL, 'R'},
        {"out", required_argument, NULL, 'O'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    run r;
    memset(&r, 0, sizeof r);
    r.interval_ms = 50;
    const char *csv = NULL, *svg = NULL;
    int system_alloc = 0, profile = 0, c;
    long rate = 512 << 10;
    const char *out_prefix = "memkit-profile";
    while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
        switch (c) {
        case 'i': {
            char *end;
            errno = 0;
            long v = strtol(optarg, &end, 10);
            if (errno || end == optarg || *end || v < 1 || v > 3600000) {
                fprintf(stderr, "memkit-run: --interval %s: a number of "
                                "milliseconds from 1 to 3600000\n", optarg);
                return MR_EXIT_USAGE;
            }
            r.interval_ms = v;
            break;
        }
        case 'c': csv = optarg; break;
        case 's': svg = optarg; break;
        case 'S': system_alloc = 1; break;
        case 'P': profile = 1; break;
        case 'R': {
            char *end;
            errno = 0;
            long v = strtol(optarg, &end, 10);
            if (errno || end == optarg || *end || v < 1 || v > (1L << 40)) {
                fprintf(stderr, "memkit-run: --rate %s: a number of bytes from "
                                "1 (every allocation) to 2^40\n", optarg);
                return MR_EXIT_USAGE;
            }
            rate = v;
            profile = 1;
            break;
        }
        case 'O': out_prefix = optarg; profile = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return MR_EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "memkit-run: no PROGRAM to run\n");
        usage(stderr);
        return MR_EXIT_USAGE;
    }
    char *const *prog = argv + optind;

    /* the files first: a bad path fails before the run, not after it */
    FILE *csv_f = NULL;
    if (csv && !(csv_f = fopen(csv, "w"))) {
        fprintf(stderr, "memkit-run: cannot write %s: %s\n", csv,
                strerror(errno));
        return MR_EXIT_USAGE;
    }
    if (svg) {
        FILE *f = fopen(svg, "w");
        if (!f) {
            fprintf(stderr, "memkit-run: cannot write %s: %s\n", svg,
                    strerror(errno));
            return MR_EXIT_USAGE;
        }
        fclose(f);
    }

    if (profile && system_alloc) {
        fprintf(stderr, "memkit-run: --profile needs memkit (not --system)\n");
        return MR_EXIT_USAGE;
    }
    /* the profile: every process on memkit writes its files at exit into
     * a directory made for this run, beside PREFIX (an absolute prefix:
     * the program may change directory), so that only this run's files
     * are read; profile.c moves them to PREFIX.PID.* */
    char prefix[PATH_MAX], prof_dir[PATH_MAX];
    if (profile) {
        char cwd[PATH_MAX / 2];
        if (out_prefix[0] != '/' && getcwd(cwd, sizeof cwd))
            snprintf(prefix, sizeof prefix, "%s/%.*s", cwd, PATH_MAX / 2 - 16, out_prefix);
        else
            snprintf(prefix, sizeof prefix, "%s", out_prefix);
    }

    char lib[PATH_MAX], why[PATH_MAX + 256];
    if (!system_alloc) {
        if (mr_locate_lib(lib, sizeof lib, why, sizeof why) != 0) {
            fprintf(stderr, "memkit-run: cannot find libmemkit-malloc: %s\n",
                    why);
            return MR_EXIT_USAGE;
        }
        r.lib = lib;
        /* a profile runs on the library built for it, when it is beside
         * the drop-in (its countdown inline: docs/PROFILE.md) */
        char *so = strstr(lib, "libmemkit-malloc.so");
        if (profile && so) {
            char alt[PATH_MAX];
            snprintf(alt, sizeof alt, "%.*slibmemkit-malloc-prof%s", (int)(so - lib), lib,
                     so + strlen("libmemkit-malloc"));
            if (access(alt, R_OK) == 0)
                snprintf(lib, sizeof lib, "%s", alt);
        }
    }
    if (profile) {
        snprintf(prof_dir, sizeof prof_dir, "%.*s.XXXXXX", PATH_MAX - 8, prefix);
        if (!mkdtemp(prof_dir)) {
            fprintf(stderr, "memkit-run: cannot make a directory for the profile (%s): %s\n",
                    prof_dir, strerror(errno));
            return MR_EXIT_USAGE;
        }
        char env[PATH_MAX + 8], rs[32];
        snprintf(env, sizeof env, "%s/%%p", prof_dir);
        snprintf(rs, sizeof rs, "%ld", rate);
        setenv("MEMKIT_PROFILE", "1", 1);
        setenv("MEMKIT_PROFILE_RATE", rs, 1);
        setenv("MEMKIT_PROFILE_PREFIX", env, 1);
    }
    int wake_fd, fail;
    mr_sampler *sampler = mr_sample_new();
    if (!sampler || mr_launch_init(&wake_fd) != 0) {
        fprintf(stderr, "memkit-run: cannot start: %s\n", strerror(errno));
        mr_sample_delete(sampler);
        if (profile)
            rmdir(prof_dir);
        return MR_EXIT_USAGE;
    }
    /* memkit's view: its exit handler writes into a file of ours, unless
     * the user asked for MEMKIT_STATS their own way */
    stats_pipe sp = {.rd = -1, .wr = -1};
    int user_stats = getenv("MEMKIT_STATS") != NULL;
    if (r.lib && !user_stats)
        stats_open(&sp);
    const char *stats = sp.path;

    double t0 = now_s();
    pid_t pid = mr_launch_start(prog, r.lib, stats[0] ? stats : NULL, &fail);
    if (pid < 0) {
        if (sp.rd >= 0)
            stats_close(&sp);
        else if (stats[0])
            unlink(stats);
        free(sp.buf);
        if (csv_f)
            fclose(csv_f);
        mr_sample_delete(sampler);
        if (profile)
            rmdir(prof_dir);
        return fail;
    }

    /* sample on a fixed schedule until the program has ended */
    double iv = r.interval_ms / 1000.0, next = 0, t_end;
    for (;;) {
        if (mr_launch_reap(pid, &r.status, &r.maxrss_kib, &r.user_s,
                           &r.sys_s)) {
            t_end = now_s() - t0;
            break;
        }
        double t = now_s() - t0;
        if (t >= next) {
            mr_sample x;
            if (mr_sample_take(sampler, pid, &x)) {
                x.t = t;
                if (series_add(&r.series, &x) != 0) {
                    fprintf(stderr, "memkit-run: out of memory: sampling "
                                    "stops\n");
                    iv = 3600; /* keep waiting, stop sampling */
                }
                if (x.procs > r.most_procs)
                    r.most_procs = x.procs;
            }
            while (next <= t)
                next += iv;
        }
        double wait = next - (now_s() - t0);
        if (wait < 0)
            wait = 0;
        struct timespec ts = {(time_t)wait,
                              (long)((wait - (double)(time_t)wait) * 1e9)};
        struct pollfd pfd[2] = {{wake_fd, POLLIN, 0}, {sp.rd, POLLIN, 0}};
        if (ppoll(pfd, sp.rd >= 0 ? 2 : 1, &ts, NULL) > 0) {
            if (pfd[0].revents)
                mr_launch_drain(wake_fd);
            if (sp.rd >= 0 && pfd[1].revents)
                stats_drain(&sp);
        }
    }
    mr_launch_done();
    r.wall_s = t_end;
    mr_sample rest;
    mr_sample_take(sampler, pid, &rest);
    r.still_running = rest.procs;
    r.seen_procs = mr_sample_seen(sampler);
    mr_sample_delete(sampler);

    int fifo = sp.rd >= 0;
    if (stats[0])
        stats_close(&sp);
    char cmd[512];
    command_line(cmd, sizeof cmd, prog);
    report(stderr, &r, cmd);
    if (r.lib) {
        fputc('\n', stderr);
        if (user_stats)
            fprintf(stderr, "memkit's view: not collected (MEMKIT_STATS is "
                            "set: memkit reports where it was told)\n");
        else if (stats[0])
            mr_view_print_text(stderr, sp.buf ? sp.buf : "", sp.len, pid);
    }
    free(sp.buf);
    /* processes still running may write the file when they exit (memkit
     * creates it, a plain file, if it is gone): then it stays, and the
     * note says where; else it goes */
    if (stats[0] && r.still_running > 0) {
        if (fifo)
            mkdir(sp.dir, 0700);
        fprintf(stderr, "  note        memkit's figures of those still "
                        "running go to %s at their exit\n", stats);
    } else if (stats[0] && !fifo) {
        unlink(stats);
    }

    if (profile)
        mr_profile_report(stderr, prefix, prof_dir, rate, r.still_running > 0);

    if (csv_f || svg)
        fputc('\n', stderr);
    if (csv_f) {
        int ok = mr_plot_csv(csv_f, &r.series) == 0;
        if (fclose(csv_f) != 0)
            ok = 0;
        if (ok)
            fprintf(stderr, "  csv         %s (%zu samples)\n", csv,
                    r.series.n);
        else
            fprintf(stderr, "memkit-run: cannot write %s: %s\n", csv,
                    strerror(errno));
    }
    if (svg) {
        char title[600];
        snprintf(title, sizeof title, "memkit-run: %s (%s)", cmd,
                 r.lib ? "memkit" : "system allocator");
        mr_plot_svg(svg, &r.series, title, r.maxrss_kib / 1024.0, stderr);
    }
    free(r.series.v);
    if (WIFSIGNALED(r.status))
        return 128 + WTERMSIG(r.status);
    return WEXITSTATUS(r.status);
}
