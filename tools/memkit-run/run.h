/* SPDX-License-Identifier: MIT */
/*
 * run.h - memkit-run's internal interface: the sample series and one
 * section per file, in the order the tool uses them.
 *
 *   main.c    options, the sampling loop, the summary, the exit status
 *   locate.c  which libmemkit-malloc to preload, and the child's environment
 *   launch.c  start the program, forward signals, reap it (and orphans)
 *   sample.c  the program's process tree in /proc and its resident memory
 *   chart.c   the RSS-over-time chart in the terminal
 *   plot.c    the samples as CSV and as an SVG (gnuplot, or written here)
 *   json.c    a small JSON reader (objects, arrays, strings, integers)
 *   view.c    memkit's own figures at exit (MEMKIT_STATS=json), in words
 *   profile.c --profile: the heap profile's report
 *   symbols.c return addresses named (addr2line, or the ELF symbols)
 *   flame.c   flame graphs as SVG
 *
 * The tool is Linux-only (/proc, prctl); it is plain C11 + POSIX otherwise
 * and does not link memkit: it observes the allocator, it does not use it.
 * Names: mr_<file-noun>_<verb>, as mki_ in the library.
 */
#ifndef MEMKIT_RUN_H
#define MEMKIT_RUN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* Exit statuses of the tool's own failures (as env(1) and timeout(1)). */
enum {
    MR_EXIT_USAGE = 125,    /* bad option, no library, a file not writable */
    MR_EXIT_NOEXEC = 126,   /* PROGRAM found but cannot be executed */
    MR_EXIT_NOTFOUND = 127, /* PROGRAM not found */
};

/* ---- the sample series (main.c) ------------------------------------------- */

/* One sample: the program and all its descendants at one moment. */
typedef struct mr_sample {
    double t;       /* seconds since the program was started */
    long rss_kib;   /* sum of VmRSS */
    long dirty_kib; /* sum of Private_Dirty (smaps_rollup); -1: unknown */
    int procs;      /* processes summed */
} mr_sample;

typedef struct mr_series {
    mr_sample *v;
    size_t n, cap;
} mr_series;

/* ---- locate.c ---------------------------------------------------------------- */

/* The libmemkit-malloc to preload, as an absolute path in @out (@cap
 * bytes): MEMKIT_RUN_LIB if set; else the build tree's when this is the
 * build tree's tool; else the installed one beside this tool
 * (BINDIR/../LIBDIR); else the build tree's if it still exists.  Returns 0,
 * or -1 with a message in @why (what was looked at). */
int mr_locate_lib(char *out, size_t cap, char *why, size_t why_cap);

/* The path of an executable @name on PATH into @out (@cap bytes): 1, or
 * 0 when there is none (gnuplot, addr2line). */
int mr_locate_program(const char *name, char *out, size_t cap);

/* Is @path (an LD_PRELOAD entry) a libmemkit-malloc? */
int mr_locate_is_memkit(const char *path);

/* In the child, before exec: the environment for the run.  @lib NULL: the
 * system allocator (libmemkit-malloc entries removed from LD_PRELOAD);
 * else @lib first in LD_PRELOAD.  @stats_file non-NULL: MEMKIT_STATS=json
 * and MEMKIT_STATS_FILE=@stats_file.  Returns 0 or -1 (errno). */
int mr_locate_env(const char *lib, const char *stats_file);

/* ---- launch.c ---------------------------------------------------------------- */

/* Become the reaper of the program's orphans, catch SIGCHLD into a pipe
 * (its read end, for poll, is returned in @wake_fd).  Returns 0 or -1. */
int mr_launch_init(int *wake_fd);

/* Fork and exec @argv (PATH search) with the environment mr_locate_env
 * makes from @lib and @stats_file.  Returns the pid once the exec has
 * succeeded, or -1 with the exit status to use in @fail (126/127, the
 * message printed already, or 125 if fork failed). */
pid_t mr_launch_start(char *const argv[], const char *lib,
                      const char *stats_file, int *fail);

/* Reap every child that has ended, without blocking.  Returns 1 when the
 * program has ended (its wait status in @status, its own peak RSS in KiB
 * in @maxrss_kib, CPU seconds in @user_s and @sys_s), else 0. */
int mr_launch_reap(pid_t program, int *status, long *maxrss_kib,
                   double *user_s, double *sys_s);

/* Empty the wake pipe (after poll said it is readable). */
void mr_launch_drain(int wake_fd);

/* Stop forwarding signals, ignore SIGPIPE (for the writes that follow). */
void mr_launch_done(void);

/* ---- sample.c ---------------------------------------------------------------- */

typedef struct mr_sampler mr_sampler;

/* A sampler of the descendants of this process (the tool is the reaper of
 * the program's orphans, so they stay in the tree).  NULL if out of
 * memory. */
mr_sampler *mr_sample_new(void);
void mr_sample_delete(mr_sampler *s);

/* Take one sample.  Returns 1 if @program was alive (not a zombie) in it,
 * 0 if not (the sample does not describe the program: drop it). */
int mr_sample_take(mr_sampler *s, pid_t program, mr_sample *out);

/* How many distinct processes samples have counted. */
size_t mr_sample_seen(const mr_sampler *s);

/* ---- chart.c ------------------------------------------------------------------ */

/* The RSS chart, @height lines of plot and at most @width columns of plot
 * (plus the axis labels), printed to @out.  Nothing if there is no
 * sample. */
void mr_chart_print(FILE *out, const mr_series *s, int width, int height);

/* A round upper bound for an axis: the smallest 1, 1.2, 1.5, 2, 2.5, 3, 4,
 * 5, 6 or 8 times a power of ten that is >= @v (1 if @v <= 0). */
double mr_chart_nice(double v);

/* How many tick intervals an axis from 0 to @top (a value of
 * mr_chart_nice) gets: 3 to 6, each a 1, 2, 2.5 or 5 times a power of
 * ten. */
int mr_chart_ticks(double top);

/* ---- plot.c ------------------------------------------------------------------- */

/* Write the samples as CSV (time_s,rss_kib,private_dirty_kib,processes).
 * Returns 0 or -1 (errno). */
int mr_plot_csv(FILE *f, const mr_series *s);

/* Write an SVG of the samples to @path: with gnuplot when it is on PATH,
 * else (or if gnuplot fails) written here.  @title is plain text.
 * @hwm_mib is the program's high-water mark in MiB (0: unknown): when it
 * is above every sample, the y axis reaches it and a line marks it.  Says
 * on @log which one wrote it.  Returns 0 or -1 (message printed). */
int mr_plot_svg(const char *path, const mr_series *s, const char *title,
                double hwm_mib, FILE *log);

/* The SVG written here (no gnuplot); returns 0 or -1 (errno). */
int mr_plot_svg_builtin(FILE *f, const mr_series *s, const char *title,
                        double hwm_mib);

/* ---- json.c -------------------------------------------------------------------- */

typedef enum mr_json_type {
    MR_JSON_OBJECT,
    MR_JSON_ARRAY,
    MR_JSON_STRING,
    MR_JSON_INT,
} mr_json_type;

typedef struct mr_json mr_json;
struct mr_json {
    mr_json_type type;
    char *key;       /* member name, when in an object */
    char *str;       /* MR_JSON_STRING */
    long long num;   /* MR_JSON_INT */
    mr_json *first;  /* OBJECT, ARRAY: the first member or element */
    mr_json *next;   /* the next member or element of the parent */
};

/* Parse @text (@len bytes): one value, surrounded only by white space.
 * Returns the tree (mr_json_free it), or NULL with a reason and the byte
 * offset in @err (@err_cap bytes). */
mr_json *mr_json_parse(const char *text, size_t len, char *err,
                       size_t err_cap);
void mr_json_free(mr_json *j);

/* The member @key of object @obj, or NULL (also when @obj is not an
 * object). */
const mr_json *mr_json_get(const mr_json *obj, const char *key);

/* The integer at @obj.@key into @out: 0, or -1 if absent or not one. */
int mr_json_int(const mr_json *obj, const char *key, long long *out);

/* ---- view.c -------------------------------------------------------------------- */

/* Print memkit's view from the statistics file @path (written by memkit
 * at the program's exit) on @out; @program is the program's pid.  When
 * the file is empty, missing or not the schema, one line says so.
 * Returns 0 if the figures were shown, -1 if not. */
int mr_view_print(FILE *out, const char *path, pid_t program);

/* The same from text in memory (tests). */
int mr_view_print_text(FILE *out, const char *text, size_t len,
                       pid_t program);

/* Bytes in words: "512 B", "3.5 KiB", "64.0 MiB", "1.2 GiB". */
void mr_view_bytes(char *buf, size_t cap, double bytes);

/* ---- symbols.c --------------------------------------------------------------------- */

typedef struct mr_symbols mr_symbols;

/* A namer of the return addresses of a process whose mappings are
 * @maps_text (the text of its /proc/PID/maps).  NULL if out of memory. */
mr_symbols *mr_symbols_new(const char *maps_text);
void mr_symbols_free(mr_symbols *s);
/* Name the @n addresses (duplicates allowed), all at once. */
void mr_symbols_resolve(mr_symbols *s, const uintptr_t *addrs, size_t n);
/* The name of an address resolved before ("function (file:line)",
 * "function+0xOFF (library)", "0xADDR (library)"), or NULL. */
const char *mr_symbols_name(const mr_symbols *s, uintptr_t addr);
/* Does return address @addr lie in a libmemkit* object? */
int mr_symbols_is_memkit(const mr_symbols *s, uintptr_t addr);

/* ---- flame.c ----------------------------------------------------------------------- */

typedef struct mr_flame mr_flame;
mr_flame *mr_flame_new(void);
void mr_flame_free(mr_flame *f);
/* Add a stack of @n frame names, root first, holding @bytes. */
void mr_flame_add(mr_flame *f, const char *const *frames, int n, double bytes);
/* Write the SVG to @path; when the graph holds no bytes, it says
 * @empty instead (plain text).  0, or -1 with errno. */
int mr_flame_write(const mr_flame *f, const char *path, const char *title,
                   const char *empty);

/* ---- profile.c ---------------------------------------------------------------------- */

/* The report of the heap profile this run's processes left in @dir (as
 * PID.*, MEMKIT_PROFILE_PREFIX=@dir/%p; rate @rate): the files move to
 * @prefix.PID.*, then the flame graphs @prefix.peak.svg and
 * @prefix.exit.svg and their named stacks @prefix.peak.folded and
 * @prefix.exit.folded are written.  @dir is removed unless
 * @still_running (processes that will write there later).  Returns 0, or
 * -1 when there was no profile (said on @out; the flame graphs say so). */
int mr_profile_report(FILE *out, const char *prefix, const char *dir, long rate,
                      int still_running);

#endif /* MEMKIT_RUN_H */
