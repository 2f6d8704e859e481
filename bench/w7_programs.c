/* SPDX-License-Identifier: MIT */
/*
 * w7_programs.c - W7, real programs on each malloc drop-in: the wall time
 * and peak RSS of a program doing allocation-heavy work, run with the
 * drop-in preloaded through `memkit-bench-malloc run` (malloc/run.c: fork,
 * exec, wait4 for ru_maxrss - a trampoline, so that the program's peak RSS
 * is its own and not that of the bench it would otherwise be forked from;
 * wait4 counts the program's own children too: gcc's cc1).
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
 *  ruby     string/array churn under Ruby's GC: 6 rounds of an array of
 *           200,000 strings, joined in slices, a third of them hashed, all
 *           dropped (CRuby's object slots are its own heap pages, strings
 *           beyond their embedded size and arrays are malloc'ed).
 *  sqlite3  `sqlite3 :memory:` running a generated script: a table of
 *           400,000 rows (--quick: 200,000, to keep each run near 1.5 s on
 *           a 2-core machine; the memory ratio is the same), two indexes,
 *           a GROUP BY, an UPDATE of a third of the rows, a DELETE of a
 *           fifth, and three queries.  The rows come from a recursive CTE in
 *           the script, so the work is SQLite's, not its parser's.  Its page
 *           cache holds every page of the in-memory database in a block of
 *           4 KiB plus a header, and the UPDATE's journal is a list of 1 KiB
 *           chunks: the size classes just above 1 and 4 KiB decide its peak.
 *  gcc, clang  `-O2 -S` of one generated C file of 400 functions (--quick:
 *           200, about 2 s a run) with loops, switches and calls, written
 *           to a temporary directory once per bench run, output to
 *           /dev/null.  gcc's own GC heap is mmap'ed, not malloc'ed, so
 *           its figures move less with the allocator than clang's.
 *
 * Each program prints a line of results; the whole output (its hash, as
 * the trampoline's checksum) must be the same under every allocator (a
 * wrong result is a CHECKSUM MISMATCH).  A
 * program is found on PATH, skipping anything that is not an ELF binary:
 * a wrapper script (pyenv's shims) would run a shell under the drop-in
 * too.  A missing program is a note, not an error ("skipped: no ruby
 * ..."); so is a C file that cannot be written.  python3 runs with -S (no
 * site module) so that per-user site packages do not change the work;
 * sqlite3 with -init /dev/null (no ~/.sqliterc) and -bail.
 */
#include <errno.h>
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

static const char ruby_script[] =
    "total = 0\n"
    "6.times do |r|\n"
    "  a = Array.new(200_000) { |i| ('x' * (1 + (i * 7919 + r) % 48)) << i.to_s }\n"
    "  b = a.each_slice(7).map { |s| s.join(',') }\n"
    "  h = {}\n"
    "  a.each_with_index { |s, i| h[s] = i if i % 3 == 0 }\n"
    "  total += b.sum(&:length) + h.size\n"
    "end\n"
    "puts total\n";

/* The SQL script, for @rows rows (x * 7919 mod rows is a permutation:
 * 7919 is a prime that divides neither 200,000 nor 400,000). */
static void sqlite_script(char *out, size_t len, int rows)
{
    snprintf(out, len,
             "CREATE TABLE t(id INTEGER PRIMARY KEY, grp INTEGER, name TEXT, val REAL,\n"
             "  note TEXT);\n"
             "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < %d)\n"
             "  INSERT INTO t SELECT x, x %% 1000, 'name-' || (x * 7919 %% %d), x * 0.5,\n"
             "    printf('%%.*c', 40 + x %% 120, 'a') FROM c;\n"
             "CREATE INDEX t_grp ON t(grp, val);\n"
             "CREATE INDEX t_name ON t(name);\n"
             "SELECT count(*), sum(n), max(s) FROM\n"
             "  (SELECT grp, count(*) AS n, sum(val) AS s FROM t GROUP BY grp);\n"
             "UPDATE t SET val = val * 2, name = name || '-u' WHERE id %% 3 = 0;\n"
             "DELETE FROM t WHERE id %% 5 = 0;\n"
             "SELECT count(*), sum(val), count(DISTINCT grp), sum(length(note)) FROM t;\n"
             "SELECT grp, count(*), avg(length(name)) FROM t GROUP BY grp\n"
             "  ORDER BY 2 DESC, 1 LIMIT 3;\n",
             rows, rows);
}

/* The large C file for gcc and clang: @n functions over a struct, each
 * with a loop, a branch, a switch and a call to an earlier function (so
 * that the inliner has work), all extern so that none is dropped.
 * Deterministic.  (-O2 costs about 10 ms a function on the 2-core VM:
 * hence a few hundred, not thousands.) */
static int write_c_file(const char *path, int n)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "/* generated by memkit-bench (W7) */\n"
               "struct node { int k[8]; double w; struct node *next; };\n"
               "int f0(int x, struct node *p) { return p ? x + p->k[x & 7] : x; }\n");
    for (int i = 1; i < n; i++) {
        unsigned h = (unsigned)i * 2654435761u;
        int a = (int)(h % (unsigned)i), m = 3 + (int)(h >> 28);
        fprintf(f,
                "int f%d(int x, struct node *p)\n{\n"
                "    int acc = %u;\n"
                "    double w = p ? p->w : %d.5;\n"
                "    for (int i = 0; i < %d; i++)\n"
                "        acc += p ? p->k[(x + i) & 7] * %d : i;\n"
                "    if (acc & %d)\n"
                "        acc ^= f%d(acc & 15, p ? p->next : 0);\n"
                "    else if (x > %d)\n"
                "        w += acc * 0.25;\n"
                "    switch (x & 3) {\n"
                "    case 0: acc = acc * %d + (int)w; break;\n"
                "    case 1: acc -= x << %d; break;\n"
                "    default: acc |= (int)(w * %d.0);\n"
                "    }\n"
                "    return acc;\n}\n",
                i, h & 0xffff, i, m, i % 97 + 1, 1 << (i % 9), a, i % 50,
                (int)(h % 31) + 3, i % 7, m);
    }
    return fclose(f) == 0 ? 0 : -1;
}

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
    static char perl[PATH_MAX], python[PATH_MAX], ruby[PATH_MAX], sqlite[PATH_MAX],
        gcc[PATH_MAX], clang[PATH_MAX], cfile[PATH_MAX], sql[2048], cnote[PATH_MAX + 64];
    const char *why = "";
    const char *tramp = bench_dropin_program(&why);
    static const char *const python_env[] = {"PYTHONMALLOC=malloc", "PYTHONHASHSEED=0",
                                             "PYTHONDONTWRITEBYTECODE=1", NULL};
    const int rows = o->full ? 400000 : 200000;
    const int nfunc = o->full ? 400 : 200;
    sqlite_script(sql, sizeof sql, rows);

    /* the C file, in a directory of its own, removed at the end */
    char dir[PATH_MAX] = "";
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/memkit-bench-w7-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    const char *csrc = NULL;
    if (!mkdtemp(dir)) {
        snprintf(cnote, sizeof cnote, "skipped: cannot make a directory for the C file: %s",
                 strerror(errno));
        dir[0] = '\0';
    } else {
        snprintf(cfile, sizeof cfile, "%s/w7-big.c", dir);
        if (write_c_file(cfile, nfunc) == 0)
            csrc = cfile;
        else
            snprintf(cnote, sizeof cnote, "skipped: cannot write %s", cfile);
    }

    char rows_cell[64], c_cell[2][64];
    snprintf(rows_cell, sizeof rows_cell, "sqlite3: %d rows in :memory:", rows);
    snprintf(c_cell[0], sizeof c_cell[0], "gcc -O2: %d functions", nfunc);
    snprintf(c_cell[1], sizeof c_cell[1], "clang -O2: %d functions", nfunc);
    const struct prog {
        const char *cell, *name, *path;
        const char *const *argv;
        const char *const *env;
        const char *input; /* NULL: none; else the input file, whose lack is skipped */
    } progs[] = {
        {"perl: hash of 1M strings", "perl", find_program("perl", perl, sizeof perl),
         (const char *const[]){tramp, "run", perl, "-e", perl_script, NULL}, NULL, NULL},
        {"python3: dict/list/json", "python3", find_program("python3", python, sizeof python),
         (const char *const[]){tramp, "run", python, "-S", "-c", python_script, NULL},
         python_env, NULL},
        {"ruby: string/array churn", "ruby", find_program("ruby", ruby, sizeof ruby),
         (const char *const[]){tramp, "run", ruby, "--disable-gems", "-e", ruby_script, NULL},
         NULL, NULL},
        {rows_cell, "sqlite3", find_program("sqlite3", sqlite, sizeof sqlite),
         (const char *const[]){tramp, "run", sqlite, "-batch", "-bail", "-init", "/dev/null",
                               ":memory:", sql, NULL},
         NULL, NULL},
        {c_cell[0], "gcc", find_program("gcc", gcc, sizeof gcc),
         (const char *const[]){tramp, "run", gcc, "-O2", "-S", "-o", "/dev/null", cfile, NULL},
         NULL, csrc ? csrc : ""},
        {c_cell[1], "clang", find_program("clang", clang, sizeof clang),
         (const char *const[]){tramp, "run", clang, "-O2", "-S", "-o", "/dev/null", cfile, NULL},
         NULL, csrc ? csrc : ""},
    };
    const int total = (int)(sizeof progs / sizeof progs[0]);
    char missing[80] = "";
    for (int k = 0; k < total; k++)
        if (!progs[k].path)
            snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%s",
                     missing[0] ? ", " : "; missing: ", progs[k].name);
    char about[600];
    snprintf(about, sizeof about,
             "wall time of the whole program (fork to exit), the drop-in preloaded: perl builds "
             "and frees a hash of 1,000,000 strings; python3 (PYTHONMALLOC=malloc) churns dicts, "
             "lists and strings and does a JSON round trip; ruby churns strings and arrays; "
             "sqlite3 builds, indexes, groups, updates and deletes %d rows in memory; gcc and "
             "clang compile one generated C file of %d functions at -O2%s",
             rows, nfunc, missing);
    int sec = report_section_vs("W7", "time", "s", BD_COL(BD_glibc), REPORT_LOWER_BETTER,
                                REPORT_DROPIN | REPORT_SPEED, about);
    int rsec = report_section_vs("W7", "peak-rss", "MiB", BD_COL(BD_glibc),
                                 REPORT_LOWER_BETTER, REPORT_DROPIN | REPORT_MEMORY,
                                 "peak RSS of the program (its ru_maxrss; gcc: its cc1 counted), "
                                 "from the same runs");
    for (int k = 0; k < total; k++) {
        const struct prog *p = &progs[k];
        bench_row *row = report_row(sec, p->cell, 0, 0, 1);
        bench_row *rrow = report_row(rsec, p->cell, 0, 0, 1);
        if (!p->path || !tramp || (p->input && !*p->input)) {
            if (!tramp) {
                report_note(row, "%s", why);
                report_note(rrow, "%s", why);
            } else if (!p->path) {
                report_note(row, "skipped: no %s (an ELF executable) on PATH", p->name);
                report_note(rrow, "skipped: no %s (an ELF executable) on PATH", p->name);
            } else {
                report_note(row, "%s", cnote);
                report_note(rrow, "%s", cnote);
            }
            continue;
        }
        report_progress("W7 %s: cell %d of %d", p->cell, k + 1, total);
        bench_dropin_job job = {.argv = p->argv, .env_extra = p->env, .speed = BS_S_PER_OP};
        bench_dropin_measure(row, rrow, &job, o->runs);
    }
    report_progress_end();
    if (csrc)
        unlink(csrc);
    if (dir[0])
        rmdir(dir);
}
