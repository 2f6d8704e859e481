/*
 * w7_programs.c - W7, real programs on each malloc drop-in: the wall time
 * and peak RSS of an interpreter doing allocation-heavy work, run with the
 * drop-in preloaded through `memkit-bench-malloc run` (malloc/run.c: fork,
 * exec, wait4 for ru_maxrss - a trampoline, so that the program's peak RSS
 * is its own and not that of the bench it would otherwise be forked from).
 * The figure is what a user of the drop-in would see: the whole process,
 * start-up and exit included, the same for every allocator but for the
 * allocator.
 *
 *  perl     builds a hash of 1,000,000 strings of 1..64 bytes, sums their
 *           lengths, frees it (undef), prints the count and the sum.
 *  python3  with PYTHONMALLOC=malloc (so that CPython's own small-object
 *           allocator steps aside and every object is a malloc): a dict of
 *           100,000 lists of strings and ints, a list of 100,000 strings
 *           sorted, half the dict deleted, then a JSON round trip of it.
 *
 * Each program prints a line of results; the whole output (its hash, as
 * the trampoline's checksum) must be the same under every allocator (a
 * wrong result is a CHECKSUM MISMATCH).  A
 * program is found on PATH, skipping anything that is not an ELF binary:
 * a wrapper script (pyenv's shims) would run a shell under the drop-in
 * too.  A missing program is a note, not an error.  python3 runs with -S
 * (no site module) so that per-user site packages do not change the work.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "dropin.h"
#include "report.h"

static const char perl_script[] =
    "my %h;"
    "for my $i (0 .. 999999) { $h{\"key$i\"} = chr(97 + $i % 26) x (1 + ($i * 7919) % 64) }"
    "my $n = scalar(keys %h); my $len = 0; $len += length($_) for values %h;"
    "undef %h; print \"$n $len\\n\";";

static const char python_script[] =
    "import json\n"
    "d = {}\n"
    "for i in range(100000):\n"
    "    d['k%d' % i] = ['v' * (i % 40), i, str(i * 7)]\n"
    "l = [s.upper() + 'x' for s in map(str, range(100000))]\n"
    "l.sort(key=len)\n"
    "for i in range(0, 100000, 2):\n"
    "    del d['k%d' % i]\n"
    "s = json.dumps(d)\n"
    "e = json.loads(s)\n"
    "print(len(e), len(l), len(s))\n";

/* Is @path an executable ELF file (not a script)? */
static int is_elf(const char *path)
{
    char magic[4];
    if (access(path, X_OK) != 0)
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, magic, sizeof magic);
    close(fd);
    return n == 4 && memcmp(magic, "\177ELF", 4) == 0;
}

/* The first ELF executable @name on PATH (or /usr/bin), or NULL. */
static const char *find_program(const char *name, char *out, size_t len)
{
    const char *path = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s:/usr/bin", path ? path : "");
    for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(out, len, "%s/%s", *d ? d : ".", name);
        if (is_elf(out))
            return out;
    }
    return NULL;
}

void bench_w7(const bench_opts *o)
{
    static char perl[PATH_MAX], python[PATH_MAX];
    const char *why = "";
    const char *tramp = bench_dropin_program(&why);
    static const char *const python_env[] = {"PYTHONMALLOC=malloc", "PYTHONHASHSEED=0",
                                             "PYTHONDONTWRITEBYTECODE=1", NULL};
    const struct prog {
        const char *cell, *name, *path;
        const char *const *argv;
        const char *const *env;
    } progs[] = {
        {"perl: hash of 1M strings", "perl", find_program("perl", perl, sizeof perl),
         (const char *const[]){tramp, "run", perl, "-e", perl_script, NULL}, NULL},
        {"python3: dict/list/json", "python3", find_program("python3", python, sizeof python),
         (const char *const[]){tramp, "run", python, "-S", "-c", python_script, NULL},
         python_env},
    };
    const int total = (int)(sizeof progs / sizeof progs[0]);
    char about[400];
    snprintf(about, sizeof about,
             "wall time of the whole program (fork to exit), the drop-in preloaded: perl (%s) "
             "builds and frees a hash of 1,000,000 strings; python3 (%s, PYTHONMALLOC=malloc) "
             "churns dicts, lists and strings and does a JSON round trip",
             progs[0].path ? progs[0].path : "missing", progs[1].path ? progs[1].path : "missing");
    int sec = report_section_vs("W7", "time", "s", BD_COL(BD_glibc), REPORT_LOWER_BETTER,
                                REPORT_DROPIN | REPORT_SPEED, about);
    int rsec = report_section_vs("W7", "peak-rss", "MiB", BD_COL(BD_glibc),
                                 REPORT_LOWER_BETTER, REPORT_DROPIN | REPORT_MEMORY,
                                 "peak RSS of the program (its ru_maxrss), from the same runs");
    for (int k = 0; k < total; k++) {
        const struct prog *p = &progs[k];
        bench_row *row = report_row(sec, p->cell, 0, 0, 1);
        bench_row *rrow = report_row(rsec, p->cell, 0, 0, 1);
        if (!p->path || !tramp) {
            if (!tramp) {
                report_note(row, "%s", why);
                report_note(rrow, "%s", why);
            } else {
                report_note(row, "skipped: no %s (an ELF executable) on PATH", p->name);
                report_note(rrow, "skipped: no %s (an ELF executable) on PATH", p->name);
            }
            continue;
        }
        report_progress("W7 %s: cell %d of %d", p->cell, k + 1, total);
        bench_dropin_job job = {.argv = p->argv, .env_extra = p->env, .speed = BS_S_PER_OP};
        bench_dropin_measure(row, rrow, &job, o->runs);
    }
    report_progress_end();
}
