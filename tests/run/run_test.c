/* SPDX-License-Identifier: MIT */
/*
 * run_test.c - memkit-run used as a user uses it: a command line, a
 * program (tests/run/subject.c) with a known memory profile, and checks on
 * what comes out: the exit status, the report on stderr, the program's
 * own stdout, the CSV and SVG files.
 *
 *   run_test MEMKIT_RUN SUBJECT LIB NODEBUG_LIB
 *
 * Each test runs the tool in a child with its stdout and stderr in files
 * of a scratch directory, and a controlled environment: no MEMKIT_RUN_LIB
 * (the tool must find the build tree's library on its own), no inherited
 * MEMKIT_STATS or LD_PRELOAD unless the test sets them, and
 * MEMKIT_PURGE_DELAY_MS=0 so that memory freed goes back to the OS at once
 * (a fixed drop to test against; test_peak_default_delay checks the
 * default, delayed purge).
 * gnuplot is chosen through PATH: an empty directory (the tool's own SVG),
 * a fake gnuplot that records its script, a failing one, and the real one
 * when installed.  SVG files are checked as XML by a small well-formedness
 * checker here (and by xmllint when installed).
 *
 * The figures are read from the report's fixed labels ("  peak RSS    66.1
 * MiB ..."), so a change of wording there is a change of this test too.
 * TH_ONLY selects tests: tests/CMakeLists.txt runs a few groups as
 * separate ctest tests so that they run in parallel.
 */
#include "harness.h"

#include <ctype.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

static const char *tool, *subject, *lib, *nodebug_lib;
static char scratch[256];

typedef struct result {
    int status; /* the tool's wait status */
    char *out;  /* its stdout (the program's) */
    char *err;  /* its stderr (the program's, then the report) */
} result;

/* ---- running the tool -------------------------------------------------- */

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (len + 1 >= cap)
            buf = realloc(buf, cap *= 2);
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        if (n == 0)
            break;
        len += n;
    }
    buf[len] = '\0';
    fclose(f);
    return buf;
}

static void scratch_path(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", scratch, name);
}

/* Run memkit-run with @args; @env: "NAME=value" sets, "NAME" unsets.
 * @during, if given, is called with the tool's pid while it runs. */
static void run_tool_with(const char *const *args, const char *const *env,
                          void (*during)(pid_t), result *r)
{
    char out[300], err[300];
    scratch_path(out, sizeof out, "stdout");
    scratch_path(err, sizeof err, "stderr");
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        unsetenv("MEMKIT_RUN_LIB");
        unsetenv("MEMKIT_STATS");
        unsetenv("MEMKIT_STATS_FILE");
        unsetenv("LD_PRELOAD");
        setenv("MEMKIT_PURGE_DELAY_MS", "0", 1);
        setenv("TMPDIR", scratch, 1); /* memkit-run's temporary files */
        for (int i = 0; env && env[i]; i++) {
            char name[256];
            const char *eq = strchr(env[i], '=');
            if (eq) {
                snprintf(name, sizeof name, "%.*s", (int)(eq - env[i]), env[i]);
                setenv(name, eq + 1, 1);
            } else {
                unsetenv(env[i]);
            }
        }
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0)
            _exit(99);
        dup2(o, STDOUT_FILENO);
        dup2(e, STDERR_FILENO);
        const char *argv[64] = {tool};
        int n = 1;
        for (int i = 0; args[i] && n < 63; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        execv(tool, (char *const *)argv);
        _exit(98);
    }
    if (during)
        during(pid);
    r->status = -1;
    while (waitpid(pid, &r->status, 0) < 0 && errno == EINTR) {
    }
    r->out = slurp(out);
    r->err = slurp(err);
    if (!r->out)
        r->out = strdup("");
    if (!r->err)
        r->err = strdup("");
}

static void run_tool(const char *const *args, const char *const *env,
                     result *r)
{
    run_tool_with(args, env, NULL, r);
}

static void result_free(result *r)
{
    free(r->out);
    free(r->err);
}

static int exit_code(const result *r)
{
    return WIFEXITED(r->status) ? WEXITSTATUS(r->status) : -1;
}

/* ---- reading the report -------------------------------------------------- */

/* The first line of @text that starts with @prefix, or NULL. */
static const char *line_of(const char *text, const char *prefix)
{
    size_t n = strlen(prefix);
    for (const char *l = text; l && *l;) {
        if (strncmp(l, prefix, n) == 0)
            return l;
        l = strchr(l, '\n');
        if (l)
            l++;
    }
    return NULL;
}

/* The first number on the line starting with @prefix (after it), or -1. */
static double number_after(const char *text, const char *prefix)
{
    const char *p = line_of(text, prefix);
    if (!p)
        return -1;
    for (p += strlen(prefix); *p && *p != '\n'; p++)
        if (isdigit((unsigned char)*p))
            return strtod(p, NULL);
    return -1;
}

/* The first size on the line ("64.5 MiB", "290.0 KiB", "0 B"), in MiB. */
static double mib_after(const char *text, const char *prefix)
{
    const char *p = line_of(text, prefix);
    if (!p)
        return -1;
    for (p += strlen(prefix); *p && *p != '\n'; p++) {
        if (!isdigit((unsigned char)*p))
            continue;
        char *unit;
        double v = strtod(p, &unit);
        while (*unit == ' ')
            unit++;
        if (strncmp(unit, "GiB", 3) == 0)
            return v * 1024;
        if (strncmp(unit, "MiB", 3) == 0)
            return v;
        if (strncmp(unit, "KiB", 3) == 0)
            return v / 1024;
        if (strncmp(unit, "B", 1) == 0)
            return v / (1024 * 1024);
        return -1;
    }
    return -1;
}

/* ---- checking the files -------------------------------------------------- */

typedef struct csv_figures {
    int rows;
    long max_rss_kib, last_rss_kib;
    int max_procs;
} csv_figures;

/* Check the CSV's form (header, four fields, times strictly increasing,
 * sizes positive) and return its figures. */
static void check_csv(const char *path, csv_figures *c)
{
    memset(c, 0, sizeof *c);
    char *text = slurp(path);
    REQUIRE_NOT_NULL(text);
    const char *header = "time_s,rss_kib,private_dirty_kib,processes\n";
    CHECK(strncmp(text, header, strlen(header)) == 0);
    double prev = -1;
    for (char *l = strchr(text, '\n'); l && l[1]; l = strchr(l + 1, '\n')) {
        double t;
        long rss, dirty = -1;
        int procs, n;
        if (sscanf(l + 1, "%lf,%ld,%ld,%d%n", &t, &rss, &dirty, &procs, &n) != 4 &&
            sscanf(l + 1, "%lf,%ld,,%d%n", &t, &rss, &procs, &n) != 3) {
            th_fail(__FILE__, __LINE__, "bad CSV line: %.60s", l + 1);
            break;
        }
        CHECK_EQ(l[1 + n], '\n');
        CHECK_GT(t, prev);
        CHECK_GT(rss, 0);
        CHECK_GE(procs, 1);
        CHECK(dirty == -1 || (dirty >= 0 && dirty <= rss));
        prev = t;
        c->rows++;
        c->last_rss_kib = rss;
        if (rss > c->max_rss_kib)
            c->max_rss_kib = rss;
        if (procs > c->max_procs)
            c->max_procs = procs;
    }
    free(text);
}

/* A small XML well-formedness check: one root element, tags nested and
 * matched, attributes quoted, no raw '<' or stray '&' in text; comments,
 * processing instructions, a DOCTYPE and CDATA skipped.  Returns NULL or
 * what is wrong; the root's name in @root. */
static const char *xml_check(const char *s, char *root, size_t root_cap)
{
    char stack[64][64];
    int depth = 0, roots = 0;
    root[0] = '\0';
    while (*s) {
        if (*s != '<') {
            if (*s == '&') {
                const char *semi = strchr(s, ';');
                if (!semi || semi - s > 10)
                    return "'&' that is not an entity";
            } else if (depth == 0 && !isspace((unsigned char)*s)) {
                return "text outside the root element";
            }
            s++;
            continue;
        }
        if (strncmp(s, "<!--", 4) == 0) {
            const char *e = strstr(s + 4, "-->");
            if (!e)
                return "unterminated comment";
            s = e + 3;
        } else if (strncmp(s, "<![CDATA[", 9) == 0) {
            const char *e = strstr(s, "]]>");
            if (!e)
                return "unterminated CDATA";
            s = e + 3;
        } else if (s[1] == '?' || s[1] == '!') {
            const char *e = strchr(s, '>');
            if (!e)
                return "unterminated declaration";
            s = e + 1;
        } else if (s[1] == '/') {
            s += 2;
            size_t n = strcspn(s, " \t\r\n>");
            if (depth == 0)
                return "closing tag without an open one";
            depth--;
            if (strlen(stack[depth]) != n || strncmp(stack[depth], s, n))
                return "mismatched closing tag";
            s += n;
            while (isspace((unsigned char)*s))
                s++;
            if (*s != '>')
                return "bad closing tag";
            s++;
        } else {
            s++;
            size_t n = strcspn(s, " \t\r\n/>");
            if (n == 0 || n >= 64 || !(isalpha((unsigned char)*s) || *s == '_'))
                return "bad element name";
            if (depth == 0 && roots++)
                return "more than one root element";
            if (depth == 0)
                snprintf(root, root_cap, "%.*s", (int)n, s);
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)n, s);
            s += n;
            for (;;) { /* attributes */
                while (isspace((unsigned char)*s))
                    s++;
                if (*s == '>' || (s[0] == '/' && s[1] == '>'))
                    break;
                size_t an = strcspn(s, " \t\r\n=/>");
                if (an == 0)
                    return "bad attribute";
                s += an;
                while (isspace((unsigned char)*s))
                    s++;
                if (*s++ != '=')
                    return "attribute without a value";
                while (isspace((unsigned char)*s))
                    s++;
                char q = *s++;
                if (q != '"' && q != '\'')
                    return "unquoted attribute value";
                const char *e = strchr(s, q);
                if (!e)
                    return "unterminated attribute value";
                if (memchr(s, '<', (size_t)(e - s)))
                    return "'<' in an attribute value";
                s = e + 1;
            }
            if (*s == '/') {
                s += 2; /* an empty element */
            } else {
                s++;
                if (depth >= 64)
                    return "nested too deep";
                strcpy(stack[depth++], name);
            }
        }
    }
    if (depth != 0)
        return "unclosed element";
    if (!roots)
        return "no root element";
    return NULL;
}

static int on_path(const char *name)
{
    const char *path = getenv("PATH");
    char buf[1024];
    for (const char *p = path ? path : ""; *p;) {
        size_t n = strcspn(p, ":");
        snprintf(buf, sizeof buf, "%.*s/%s", (int)n, p, name);
        if (n && access(buf, X_OK) == 0)
            return 1;
        p += n + (p[n] == ':');
    }
    return 0;
}

/* The SVG at @path is well-formed XML with an <svg> root. */
static void check_svg(const char *path)
{
    char *text = slurp(path);
    REQUIRE_NOT_NULL(text);
    char root[64];
    const char *bad = xml_check(text, root, sizeof root);
    if (bad)
        th_fail(__FILE__, __LINE__, "%s: not well-formed XML: %s", path, bad);
    CHECK_STR_EQ(root, "svg");
    if (on_path("xmllint")) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "xmllint --noout '%s'", path);
        CHECK_EQ(system(cmd), 0);
    }
    free(text);
}

/* The flame graph at @path: well-formed, and its boxes add up: the first
 * row (the contexts) spans the whole width, every box's width is its share
 * of the total bytes, and no row holds more than the total.  Returns the
 * total bytes. */
static double check_flame(const char *path)
{
    check_svg(path);
    char *text = slurp(path);
    if (!text)
        return 0;
    double w0 = 0, b0 = 0, w1 = 0, row[80] = {0};
    for (const char *r = text; (r = strstr(r, "<rect class=\"frame\""));) {
        double x, w, b;
        int y, h, depth;
        const char *wp = strstr(r, "width=\""), *dp = strstr(r, "data-depth=\"");
        if (sscanf(r, "<rect class=\"frame\" x=\"%lf\" y=\"%d\"", &x, &y) != 2 || !wp ||
            !dp || sscanf(wp, "width=\"%lf\" height=\"%d\"", &w, &h) != 2 ||
            sscanf(dp, "data-depth=\"%d\" data-bytes=\"%lf\"", &depth, &b) != 2 ||
            depth < 0 || depth >= 80) {
            th_fail(__FILE__, __LINE__, "%s: a box without its figures", path);
            break;
        }
        if (depth == 0) {
            w0 = w;
            b0 = b;
        } else if (b0 > 0 && (w / w0 - b / b0 > 0.001 || b / b0 - w / w0 > 0.001)) {
            th_fail(__FILE__, __LINE__, "%s: a box %.2f wide for %.0f of %.0f bytes",
                    path, w, b, b0);
        }
        if (depth == 1)
            w1 += w;
        row[depth] += b;
        r += 5;
    }
    CHECK(w0 > 1000);
    CHECK(w1 > w0 - 0.05 && w1 < w0 + 0.05); /* the first row: everything */
    for (int d = 1; d < 80; d++)
        CHECK(row[d] <= b0 + 0.5);
    free(text);
    return b0;
}

/* ---- the tests ------------------------------------------------------------ */

/* --profile --rate 1: the three blocks never freed are found by name, the
 * flame graphs add up, the profile files are where --out says. */
static void test_profile(void)
{
    char prefix[300], svg[320], folded[700];
    scratch_path(prefix, sizeof prefix, "prof");
    const char *args[] = {"--profile", "--rate", "1", "--out", prefix, "--",
                          subject, "leak", NULL};
    result r;
    run_tool(args, NULL, &r);
    CHECK_EQ(exit_code(&r), 0);
    CHECK_STR_HAS(r.err, "heap profile (process ");
    CHECK_STR_HAS(r.err, "every allocation");
    const char *never = strstr(r.err, "never freed (live at exit)");
    CHECK_NOT_NULL(never);
    if (never) {
        CHECK_STR_HAS(never, "leak_small");
        CHECK_STR_HAS(never, "leak_mid");
        CHECK_STR_HAS(never, "leak_big");
        CHECK(strstr(never, "churn_one") == NULL); /* what was freed is not there */
    }
    CHECK_STR_HAS(r.err, "bytes by context at the peak");
    CHECK_STR_HAS(r.err, "thread");
    snprintf(svg, sizeof svg, "%s.exit.svg", prefix);
    double exit_bytes = check_flame(svg);
    CHECK(exit_bytes >= 40 + 3000 + 200000);
    snprintf(svg, sizeof svg, "%s.peak.svg", prefix);
    check_flame(svg);
    char *t = slurp(svg);
    CHECK(t && strstr(t, "<title>leak_big"));
    free(t);
    /* the raw files stay for pprof and other tools */
    snprintf(folded, sizeof folded, "ls %s.*.exit.folded %s.*.exit.heap >/dev/null 2>&1",
             prefix, prefix);
    CHECK_EQ(system(folded), 0);
    /* pprof reads the .heap file (google-pprof, Debian's google-perftools) */
    if (on_path("google-pprof")) {
        char cmd[1200], out[320];
        scratch_path(out, sizeof out, "pprof.txt");
        snprintf(cmd, sizeof cmd, "google-pprof --text '%s' %s.*.exit.heap > '%s' 2>&1",
                 subject, prefix, out);
        CHECK_EQ(system(cmd), 0);
        char *txt = slurp(out);
        CHECK(txt && strstr(txt, "leak_big") && strstr(txt, "leak_small"));
        free(txt);
    } else {
        printf("  (google-pprof not installed: the .heap file is not read by pprof here)\n");
    }
    result_free(&r);
}

/* The number after @prefix in @text ("heap profile (process 1234"), or -1. */
static long long_after(const char *text, const char *prefix)
{
    const char *p = text ? strstr(text, prefix) : NULL;
    return p ? strtol(p + strlen(prefix), NULL, 10) : -1;
}

/* A profile left by an earlier run of another program under the same
 * prefix - a bigger one - is not read: the report, the flame graphs and
 * the named stacks are of this run's program (until the run's own
 * directory, the biggest profile in the directory won). */
static void test_profile_own_files(void)
{
    char prefix[300], svg[320], named[320];
    scratch_path(prefix, sizeof prefix, "own");
    const char *before[] = {"--profile", "--rate", "65536", "--out", prefix, "--",
                            subject, "keep", "8", NULL};
    result r;
    run_tool(before, NULL, &r);
    CHECK_EQ(exit_code(&r), 0);
    long first = long_after(r.err, "heap profile (process ");
    CHECK(first > 0);
    result_free(&r);

    const char *args[] = {"--profile", "--rate", "1", "--out", prefix, "--",
                          subject, "leak", NULL};
    run_tool(args, NULL, &r);
    CHECK_EQ(exit_code(&r), 0);
    long second = long_after(r.err, "heap profile (process ");
    CHECK(second > 0);
    CHECK(second != first);
    const char *never = strstr(r.err, "never freed (live at exit)");
    CHECK(never && strstr(never, "leak_big"));
    snprintf(svg, sizeof svg, "%s.exit.svg", prefix);
    double bytes = check_flame(svg);
    CHECK(bytes >= 40 + 3000 + 200000 && bytes < 1 << 20); /* not the 8 MiB */
    snprintf(named, sizeof named, "%s.exit.folded", prefix);
    char *t = slurp(named);
    CHECK(t && strstr(t, "leak_big"));
    free(t);
    /* both runs' raw files are kept, under their own pids, and no run
     * directory is left behind */
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "test -f %s.%ld.exit.heap && test -f %s.%ld.exit.heap && "
             "! ls -d %s.?????? >/dev/null 2>&1", prefix, first, prefix, second, prefix);
    CHECK_EQ(system(cmd), 0);
    result_free(&r);
}

/* A frame in a library without debug information or local symbols is
 * named by the nearest export with its offset, never by the bare export
 * (which reads as a different function); with addr2line and without. */
static void test_profile_nodebug(void)
{
    for (int with_a2l = 1; with_a2l >= 0; with_a2l--) {
        char prefix[300];
        scratch_path(prefix, sizeof prefix, with_a2l ? "nodebug" : "nodebug-elf");
        const char *args[] = {"--profile", "--rate", "1", "--out", prefix, "--",
                              subject, "nodebug", nodebug_lib, NULL};
        const char *env_no[] = {"MEMKIT_RUN_NO_ADDR2LINE=1", NULL};
        result r;
        run_tool(args, with_a2l ? NULL : env_no, &r);
        CHECK_EQ(exit_code(&r), 0);
        const char *never = strstr(r.err, "never freed (live at exit)");
        CHECK_NOT_NULL(never);
        int frames = 0;
        for (const char *l = never; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
            const char *lib_at = strstr(l, "(librun_nodebug.so)");
            const char *eol = strchr(l, '\n');
            if (!lib_at || (eol && lib_at > eol))
                continue;
            frames++;
            const char *plus = strstr(l, "+0x");
            if (!plus || plus > lib_at)
                th_fail(__FILE__, __LINE__, "a frame named without its offset: %.*s",
                        (int)(eol ? eol - l : 80), l);
        }
        CHECK_GE(frames, 1);
        CHECK(!strstr(never, "mr_nodebug_alloc (librun_nodebug.so)"));
        result_free(&r);
    }
}

/* Nothing live at exit, and no profile at all: the flame graphs say so in
 * words (valid SVG), not an empty box; a run without a profile also
 * leaves no graph or named stacks of an earlier run under its name. */
static void test_profile_empty(void)
{
    char prefix[300], svg[320], named[320];
    scratch_path(prefix, sizeof prefix, "empty-prof");
    const char *args[] = {"--profile", "--rate", "1", "--out", prefix, "--",
                          subject, "freed", NULL};
    result r;
    run_tool(args, NULL, &r);
    CHECK_EQ(exit_code(&r), 0);
    snprintf(svg, sizeof svg, "%s.exit.svg", prefix);
    check_svg(svg);
    char *t = slurp(svg);
    CHECK(t && strstr(t, "class=\"empty\"") && strstr(t, "nothing was live at exit"));
    CHECK(t && !strstr(t, "class=\"frame\""));
    free(t);
    result_free(&r);

    /* the same prefix, a program that takes no sample: no profile */
    const char *none[] = {"--profile", "--rate", "1099511627776", "--out", prefix, "--",
                          subject, "quick", NULL};
    run_tool(none, NULL, &r);
    CHECK_EQ(exit_code(&r), 0);
    CHECK_STR_HAS(r.err, "no heap profile");
    snprintf(svg, sizeof svg, "%s.peak.svg", prefix);
    check_svg(svg);
    t = slurp(svg);
    CHECK(t && strstr(t, "class=\"empty\"") && strstr(t, "no heap profile"));
    free(t);
    snprintf(named, sizeof named, "%s.peak.folded", prefix);
    CHECK(access(named, F_OK) != 0);
    result_free(&r);
}

/* A stack deeper than the profile records (64 frames): the flame graph
 * keeps to one screen, its rows narrowed, and still adds up. */
static void test_profile_deep(void)
{
    char prefix[300], svg[320];
    scratch_path(prefix, sizeof prefix, "deep");
    const char *args[] = {"--profile", "--rate", "1", "--out", prefix, "--",
                          subject, "deep", "100", NULL};
    result r;
    run_tool(args, NULL, &r);
    CHECK_EQ(exit_code(&r), 0);
    snprintf(svg, sizeof svg, "%s.exit.svg", prefix);
    CHECK(check_flame(svg) >= 5000);
    char *t = slurp(svg);
    REQUIRE_NOT_NULL(t);
    int height = 0, rows = 0;
    const char *h = strstr(t, "height=\"");
    if (h)
        height = atoi(h + 8);
    for (const char *p = t; (p = strstr(p, "data-depth=\"")); p += 12) {
        int d = atoi(p + 12);
        rows = d > rows ? d : rows;
    }
    CHECK_GE(rows, 60);       /* the deep stack is there */
    CHECK(height <= 900);     /* and fits a screen (17 px rows: 1,180) */
    CHECK_STR_HAS(t, "rows narrowed to fit");
    free(t);
    result_free(&r);
}

/* 64 MiB allocated, touched, held 150 ms, freed, then 300 ms of sleep:
 * exit 3, the peak and the drop, memkit's view, the CSV and the SVG. */
static void test_peak_memkit(void)
{
    char csv[300], svg[300], nogp[300], path_env[320];
    scratch_path(csv, sizeof csv, "peak.csv");
    scratch_path(svg, sizeof svg, "peak.svg");
    scratch_path(nogp, sizeof nogp, "empty");
    snprintf(path_env, sizeof path_env, "PATH=%s", nogp);
    const char *args[] = {"--csv", csv, "--svg", svg, "--", subject, "peak",
                          "64", NULL};
    const char *env[] = {path_env, NULL};
    result r;
    run_tool(args, env, &r);
    CHECK_EQ(exit_code(&r), 3);
    CHECK_STR_EQ(r.out, ""); /* the report is on stderr */
    CHECK_STR_HAS(r.err, "  allocator   memkit (");
    CHECK_STR_HAS(r.err, "  exit        status 3\n");
    double peak = number_after(r.err, "  peak RSS"),
           final = number_after(r.err, "  final RSS"),
           samples = number_after(r.err, "  samples");
    CHECK(peak >= 64);
    CHECK(final >= 0 && final < 16); /* purged at once: well below */
    CHECK_GE(samples, 3);
    CHECK_EQ(number_after(r.err, "  processes"), 1);
    CHECK(number_after(r.err, "  wall time") >= 0.4);
    /* the chart: axis, labels in MiB and seconds */
    CHECK_STR_HAS(r.err, "     MiB\n");
    CHECK_STR_HAS(r.err, "       0 +-----");
    CHECK_STR_HAS(r.err, " s\n");
    /* memkit's view: the program's own figures */
    CHECK_STR_HAS(r.err, "memkit's view at exit (pid ");
    CHECK_STR_HAS(r.err, ", the program)\n");
    CHECK(mib_after(r.err, "  committed") >= 0);
    CHECK(mib_after(r.err, "  committed") < 16);
    CHECK(mib_after(r.err, "  purged") >= 60); /* the 64 MiB went back */
    CHECK_STR_HAS(r.err, "(mode dontneed, delay 0 ms)");
    CHECK_STR_HAS(r.err, "  classes     ");
    /* the files */
    csv_figures c;
    check_csv(csv, &c);
    CHECK_EQ(c.rows, (int)samples);
    CHECK_GE(c.max_rss_kib, 64L * 1024); /* samples saw the plateau */
    CHECK(c.last_rss_kib / 1024.0 - final < 0.06 &&
          final - c.last_rss_kib / 1024.0 < 0.06);
    CHECK_EQ(c.max_procs, 1);
    check_svg(svg);
    char *text = slurp(svg);
    REQUIRE_NOT_NULL(text);
    CHECK_STR_HAS(text, "<polyline");
    CHECK_STR_HAS(text, ">time (s)</text>");
    CHECK_STR_HAS(text, ">resident memory (MiB)</text>"); /* the y axis has its unit */
    CHECK_STR_HAS(text, "peak 64 (memkit)");
    free(text);
    CHECK_STR_HAS(r.err, "(written by memkit-run: no gnuplot on PATH)");
    result_free(&r);
}

/* The same at memkit's default policy: the memory freed goes back though
 * the program then sleeps 300 ms without allocating, at the frees that
 * dropped its peak, all but the margin the free rule keeps (8 MiB:
 * page/purge.c), with no thread of memkit's own. */
static void test_peak_default_delay(void)
{
    const char *args[] = {subject, "peak", "64", NULL};
    const char *env[] = {"MEMKIT_PURGE_DELAY_MS", NULL}; /* the default */
    result r;
    run_tool(args, env, &r);
    CHECK_EQ(exit_code(&r), 3);
    CHECK_STR_HAS(r.err, "(mode dontneed, delay 100 ms)");
    CHECK(number_after(r.err, "  peak RSS") >= 64);
    CHECK(number_after(r.err, "  final RSS") < 16);
    CHECK(mib_after(r.err, "  purged") >= 64 - 8 - 2);
    result_free(&r);
}

/* The same program on the system allocator: no memkit anywhere. */
static void test_system(void)
{
    const char *args[] = {"--system", subject, "peak", "64", NULL};
    result r;
    run_tool(args, NULL, &r);
    CHECK_EQ(exit_code(&r), 3);
    CHECK_STR_HAS(r.err, "  allocator   system (no preload)\n");
    CHECK(number_after(r.err, "  peak RSS") >= 64);
    CHECK(!strstr(r.err, "memkit's view"));
    result_free(&r);

    /* an inherited preload of memkit is removed; others stay */
    char env_pre[600];
    snprintf(env_pre, sizeof env_pre,
             "LD_PRELOAD=/nonexistent/libother.so:%s", lib);
    const char *env[] = {env_pre, NULL};
    const char *maps[] = {"--system", subject, "maps", NULL};
    run_tool(maps, env, &r);
    CHECK_EQ(exit_code(&r), 0);
    CHECK_STR_EQ(r.out, "memkit: no\n");
    result_free(&r);
    const char *show[] = {"--system", subject, "env", "LD_PRELOAD", NULL};
    run_tool(show, env, &r);
    CHECK_STR_EQ(r.out, "LD_PRELOAD=/nonexistent/libother.so\n");
    result_free(&r);
}

/* Without --system the program runs on memkit, whose library goes first
 * in LD_PRELOAD, once. */
static void test_preload(void)
{
    const char *maps[] = {subject, "maps", NULL};
    result r;
    run_tool(maps, NULL, &r);
    CHECK_EQ(exit_code(&r), 0);
    CHECK_STR_EQ(r.out, "memkit: yes\n");
    result_free(&r);

    char real[4096], want[4200], env_pre[600];
    REQUIRE(realpath(lib, real) != NULL);
    snprintf(env_pre, sizeof env_pre,
             "LD_PRELOAD=%s /nonexistent/libother.so", lib);
    const char *env[] = {env_pre, NULL};
    const char *show[] = {subject, "env", "LD_PRELOAD", NULL};
    run_tool(show, env, &r);
    snprintf(want, sizeof want, "LD_PRELOAD=%s /nonexistent/libother.so\n",
             real);
    CHECK_STR_EQ(r.out, want);
    result_free(&r);

    /* MEMKIT_RUN_LIB chooses the library; one that is not there is an
     * error, not a fallback */
    char env_lib[4200];
    snprintf(env_lib, sizeof env_lib, "MEMKIT_RUN_LIB=%s", lib);
    const char *env2[] = {env_lib, NULL};
    run_tool(maps, env2, &r);
    CHECK_STR_EQ(r.out, "memkit: yes\n");
    result_free(&r);
    const char *env3[] = {"MEMKIT_RUN_LIB=/nonexistent/libmemkit-malloc.so",
                          NULL};
    run_tool(maps, env3, &r);
    CHECK_EQ(exit_code(&r), 125);
    CHECK_STR_HAS(r.err, "cannot find libmemkit-malloc: MEMKIT_RUN_LIB=");
    CHECK_STR_EQ(r.out, "");
    result_free(&r);
}

/* Exit statuses: passed through; a signal is 128+N; memkit's view says
 * why it has no figures.  A program that never allocated has memkit's
 * view too (all zero; until 2c3bbe3 memkit read MEMKIT_STATS only on its
 * first allocation and wrote nothing). */
static void test_exit_status(void)
{
    const char *fail[] = {subject, "fail", NULL};
    result r;
    run_tool(fail, NULL, &r);
    CHECK_EQ(exit_code(&r), 1);
    CHECK_STR_HAS(r.err, "  exit        status 1\n");
    CHECK_STR_HAS(r.err, "memkit's view at exit (pid ");
    CHECK_STR_HAS(r.err, "  committed   0 B of 0 B reserved");
    result_free(&r);

    const char *kill[] = {subject, "kill", NULL};
    run_tool(kill, NULL, &r);
    CHECK_EQ(exit_code(&r), 137);
    CHECK_STR_HAS(r.err, "  exit        killed by signal 9 (");
    CHECK_STR_HAS(r.err, "): status 137\n");
    CHECK_STR_HAS(r.err, "memkit's view: none: ");
    result_free(&r);

    const char *garbage[] = {subject, "garbage", NULL};
    run_tool(garbage, NULL, &r);
    CHECK_EQ(exit_code(&r), 0);
    CHECK_STR_HAS(r.err, "memkit's view: unreadable statistics (");
    result_free(&r);

    /* a program shorter than one sample still gets a peak */
    const char *quick[] = {subject, "quick", NULL};
    run_tool(quick, NULL, &r);
    CHECK_EQ(exit_code(&r), 0);
    CHECK(number_after(r.err, "  peak RSS") > 0);
    result_free(&r);
}

/* Programs that cannot run: 127 not found, 126 not executable; the
 * tool's own errors: 125, and the program does not run. */
static void test_cannot_run(void)
{
    const char *missing[] = {"/nonexistent/program", NULL};
    result r;
    run_tool(missing, NULL, &r);
    CHECK_EQ(exit_code(&r), 127);
    CHECK_STR_HAS(r.err, "memkit-run: cannot run /nonexistent/program: "
                         "No such file or directory\n");
    CHECK(!strstr(r.err, "  exit "));
    result_free(&r);

    const char *unknown[] = {"memkit-run-no-such-program", NULL};
    run_tool(unknown, NULL, &r);
    CHECK_EQ(exit_code(&r), 127);
    CHECK_STR_HAS(r.err, "(searched PATH)");
    result_free(&r);

    char plain[300];
    scratch_path(plain, sizeof plain, "not-executable");
    FILE *f = fopen(plain, "w");
    REQUIRE_NOT_NULL(f);
    fputs("not a program\n", f);
    fclose(f);
    const char *noexec[] = {plain, NULL};
    run_tool(noexec, NULL, &r);
    CHECK_EQ(exit_code(&r), 126);
    CHECK_STR_HAS(r.err, "Permission denied");
    result_free(&r);

    const char *none[] = {NULL};
    run_tool(none, NULL, &r);
    CHECK_EQ(exit_code(&r), 125);
    CHECK_STR_HAS(r.err, "no PROGRAM");
    result_free(&r);
    const char *bad_iv[] = {"--interval", "0", subject, "quick", NULL};
    run_tool(bad_iv, NULL, &r);
    CHECK_EQ(exit_code(&r), 125);
    result_free(&r);
    const char *bad_opt[] = {"--bogus", subject, "quick", NULL};
    run_tool(bad_opt, NULL, &r);
    CHECK_EQ(exit_code(&r), 125);
    result_free(&r);
    const char *bad_csv[] = {"--csv", "/nonexistent/dir/x.csv", subject,
                             "env", "HOME", NULL};
    run_tool(bad_csv, NULL, &r);
    CHECK_EQ(exit_code(&r), 125);
    CHECK_STR_EQ(r.out, ""); /* the program did not run */
    result_free(&r);
    /* options after PROGRAM are the program's */
    const char *after[] = {subject, "env", "--csv", NULL};
    run_tool(after, NULL, &r);
    CHECK_EQ(exit_code(&r), 0);
    CHECK_STR_EQ(r.out, "--csv unset\n");
    result_free(&r);
}

/* A child that allocates: two processes summed. */
static void test_fork(void)
{
    char csv[300];
    scratch_path(csv, sizeof csv, "fork.csv");
    const char *args[] = {"--csv", csv, subject, "fork", "64", NULL};
    result r;
    run_tool(args, NULL, &r);
    CHECK_EQ(exit_code(&r), 0);
    CHECK_EQ(number_after(r.err, "  processes"), 2);
    CHECK_STR_HAS(r.err, "2 at most at once, 2 in all");
    CHECK(number_after(r.err, "  peak RSS") >= 64);
    csv_figures c;
    check_csv(csv, &c);
    CHECK_GE(c.max_rss_kib, 64L * 1024); /* the child's memory counted */
    CHECK_EQ(c.max_procs, 2);
    /* both wrote their figures; the view names whose it shows */
    CHECK_STR_HAS(r.err, "memkit's view at exit (pid ");
    CHECK_STR_HAS(r.err, "of the 2 processes on memkit");
    result_free(&r);
}

/* A wrapper script that runs the real program (not exec'd: the shell
 * waits and exits last): the view shows the program that held 32 MiB at
 * its exit, not the shell. */
static void test_wrapper(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "%s keep 32; true", subject);
    const char *args[] = {"/bin/sh", "-c", cmd, NULL};
    result r;
    run_tool(args, NULL, &r);
    CHECK_EQ(exit_code(&r), 0);
    /* the shell may or may not report (dash leaves no figures); either
     * way the figures shown are the real program's, not the shell's */
    CHECK_STR_HAS(r.err, "memkit's view at exit (pid ");
    CHECK(strstr(r.err, ", the program") == NULL);
    CHECK(mib_after(r.err, "  committed   ") >= 32);
    result_free(&r);
}

/* Children of children: the grandchild's memory counts, 3 processes. */
static void test_tree(void)
{
    char csv[300];
    scratch_path(csv, sizeof csv, "tree.csv");
    const char *args[] = {"--csv", csv, subject, "tree", "32", NULL};
    result r;
    run_tool(args, NULL, &r);
    CHECK_EQ(exit_code(&r), 0);
    CHECK_EQ(number_after(r.err, "  processes"), 3);
    csv_figures c;
    check_csv(csv, &c);
    CHECK_GE(c.max_rss_kib, 32L * 1024);
    CHECK_EQ(c.max_procs, 3);
    result_free(&r);
}

/* A grandchild whose parent exited stays in the tree (the tool is its
 * reaper). */
static void test_orphan(void)
{
    char csv[300];
    scratch_path(csv, sizeof csv, "orphan.csv");
    const char *args[] = {"--csv", csv, subject, "orphan", "32", NULL};
    result r;
    run_tool(args, NULL, &r);
    CHECK_EQ(exit_code(&r), 0);
    csv_figures c;
    check_csv(csv, &c);
    CHECK_GE(c.max_rss_kib, 32L * 1024);
    CHECK_GE(c.max_procs, 2);
    result_free(&r);
}

/* --interval; MEMKIT_STATS set by the user is left alone. */
static void test_interval_and_user_stats(void)
{
    const char *args[] = {"--interval", "10", subject, "sleep", "200", NULL};
    const char *env[] = {"MEMKIT_STATS=text", NULL};
    result r;
    run_tool(args, env, &r);
    CHECK_EQ(exit_code(&r), 0);
    double samples = number_after(r.err, "  samples");
    CHECK(samples >= 5 && samples <= 25); /* ~20; a loaded machine skips */
    CHECK_STR_HAS(r.err, ", every 10 ms\n");
    CHECK_STR_HAS(r.err, "memkit: os_committed_bytes "); /* memkit's own */
    CHECK_STR_HAS(r.err, "memkit's view: not collected (MEMKIT_STATS is set");
    result_free(&r);
}

/* SIGINT to the tool alone is ignored; SIGTERM goes to the program. */
static void signal_tool(pid_t pid)
{
    struct timespec ts = {0, 300 * 1000000L};
    nanosleep(&ts, NULL);
    kill(pid, SIGINT);
    ts.tv_nsec = 50 * 1000000L;
    nanosleep(&ts, NULL);
    kill(pid, SIGTERM);
}

static void test_signals(void)
{
    const char *args[] = {subject, "sleep", "5000", NULL};
    result r;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    run_tool_with(args, NULL, signal_tool, &r);
    clock_gettime(CLOCK_MONOTONIC, &b);
    CHECK_EQ(exit_code(&r), 128 + SIGTERM);
    CHECK_STR_HAS(r.err, "  exit        killed by signal 15 (");
    CHECK(b.tv_sec - a.tv_sec < 4); /* it did not sleep 5 s */
    result_free(&r);
}

/* gnuplot: a fake one records the script it gets and writes the file; a
 * failing one leaves the SVG to the tool; the real one when installed. */
static void write_script(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    REQUIRE_NOT_NULL(f);
    fputs(text, f);
    fclose(f);
    chmod(path, 0755);
}

static void test_gnuplot(void)
{
    char dir[300], gp[340], log[300], svg[300], env_path[700], env_log[340];
    scratch_path(dir, sizeof dir, "fakegp");
    mkdir(dir, 0755);
    snprintf(gp, sizeof gp, "%s/gnuplot", dir);
    scratch_path(log, sizeof log, "gnuplot.script");
    scratch_path(svg, sizeof svg, "fake.svg");
    write_script(gp,
        "#!/bin/sh\n"
        "cat > \"$FAKE_GNUPLOT_LOG\"\n"
        "out=$(sed -n \"s/^set output '\\(.*\\)'$/\\1/p\" \"$FAKE_GNUPLOT_LOG\")\n"
        "echo '<svg xmlns=\"http://www.w3.org/2000/svg\"><!-- fake --></svg>'"
        " > \"$out\"\n");
    snprintf(env_path, sizeof env_path, "PATH=%s:/usr/bin:/bin", dir);
    snprintf(env_log, sizeof env_log, "FAKE_GNUPLOT_LOG=%s", log);
    const char *env[] = {env_path, env_log, NULL};
    const char *args[] = {"--interval", "20", "--svg", svg, subject, "sleep",
                          "150", NULL};
    result r;
    run_tool(args, env, &r);
    CHECK_EQ(exit_code(&r), 0);
    CHECK_STR_HAS(r.err, " (gnuplot)\n");
    char *script = slurp(log), *out = slurp(svg);
    REQUIRE_NOT_NULL(script);
    REQUIRE_NOT_NULL(out);
    CHECK_STR_HAS(out, "<!-- fake -->");
    CHECK_STR_HAS(script, "set terminal svg");
    CHECK_STR_HAS(script, "plot '-' using 1:2 with lines");
    /* one data line per sample and line plotted, each block ended by "e" */
    int data = 0, ends = 0;
    for (char *l = script; l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        double t, v;
        char c;
        if (sscanf(l, "%lf %lf%c", &t, &v, &c) == 3 && c == '\n')
            data++;
        if (strncmp(l, "e\n", 2) == 0)
            ends++;
    }
    double samples = number_after(r.err, "  samples");
    CHECK_GE(samples, 3);
    CHECK_EQ(data, (int)samples * ends);
    CHECK(ends == 1 || ends == 2);
    free(script);
    free(out);
    result_free(&r);

    /* a gnuplot that fails: the tool writes the SVG itself */
    write_script(gp, "#!/bin/sh\ncat >/dev/null\nexit 1\n");
    run_tool(args, env, &r);
    CHECK_EQ(exit_code(&r), 0);
    CHECK_STR_HAS(r.err, "(written by memkit-run: gnuplot exited with "
                         "status 1)");
    check_svg(svg);
    result_free(&r);

    /* the real gnuplot, when there is one */
    unlink(gp);
    if (!on_path("gnuplot")) {
        th_note("gnuplot is not installed: its real output is not checked");
        return;
    }
    const char *real_args[] = {"--svg", svg, subject, "sleep", "100", NULL};
    run_tool(real_args, NULL, &r);
    CHECK_EQ(exit_code(&r), 0);
    CHECK_STR_HAS(r.err, " (gnuplot)\n");
    check_svg(svg);
    result_free(&r);
}

/* A peak between two samples: the report's peak is the high-water mark,
 * above every sample; the plot's y axis must still reach it (gnuplot's
 * script and the SVG written here), and a line marks it. */
static void test_plot_peak(void)
{
    char dir[300], gp[340], log[300], svg[300], env_path[700], env_log[340], nogp[340];
    scratch_path(dir, sizeof dir, "fakegp2");
    mkdir(dir, 0755);
    snprintf(gp, sizeof gp, "%s/gnuplot", dir);
    scratch_path(log, sizeof log, "gnuplot2.script");
    scratch_path(svg, sizeof svg, "between.svg");
    write_script(gp,
        "#!/bin/sh\n"
        "cat > \"$FAKE_GNUPLOT_LOG\"\n"
        "out=$(sed -n \"s/^set output '\\(.*\\)'$/\\1/p\" \"$FAKE_GNUPLOT_LOG\")\n"
        "echo '<svg xmlns=\"http://www.w3.org/2000/svg\"><!-- fake --></svg>'"
        " > \"$out\"\n");
    snprintf(env_path, sizeof env_path, "PATH=%s:/usr/bin:/bin", dir);
    snprintf(env_log, sizeof env_log, "FAKE_GNUPLOT_LOG=%s", log);
    const char *env[] = {env_path, env_log, NULL};
    /* one sample at the start, none after: the program is done in 0.5 s */
    const char *args[] = {"--interval", "3000", "--svg", svg, subject, "peak", "64", NULL};
    result r;
    run_tool(args, env, &r);
    CHECK_EQ(exit_code(&r), 3);
    CHECK_STR_HAS(r.err, "(the program's high-water mark; sampled at most");
    double peak = number_after(r.err, "  peak RSS");
    CHECK(peak >= 64);
    char *script = slurp(log);
    REQUIRE_NOT_NULL(script);
    const char *yr = strstr(script, "set yrange [0:");
    CHECK_NOT_NULL(yr);
    if (yr)
        CHECK(atof(yr + strlen("set yrange [0:")) >= peak);
    CHECK_STR_HAS(script, "high-water mark");
    free(script);
    result_free(&r);

    /* the SVG written here: its top tick reaches the peak, a line marks it */
    snprintf(nogp, sizeof nogp, "PATH=%s/empty", scratch);
    const char *env2[] = {nogp, NULL};
    run_tool(args, env2, &r);
    CHECK_EQ(exit_code(&r), 3);
    peak = number_after(r.err, "  peak RSS");
    check_svg(svg);
    char *t = slurp(svg);
    REQUIRE_NOT_NULL(t);
    double top = 0; /* the y axis's labels: the group anchored at their end */
    const char *g = strstr(t, "<g text-anchor=\"end\">"), *gend = g ? strstr(g, "</g>") : NULL;
    for (const char *p = g; p && gend && (p = strstr(p, "<text ")) && p < gend; p++) {
        double v;
        const char *gt = strchr(p, '>');
        if (gt && sscanf(gt + 1, "%lf", &v) == 1 && v > top)
            top = v;
    }
    CHECK(top >= peak);
    CHECK_STR_HAS(t, "class=\"hwm\"");
    CHECK_STR_HAS(t, "(high-water mark, between samples)");
    free(t);
    result_free(&r);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: run_test MEMKIT_RUN SUBJECT LIB NODEBUG_LIB\n");
        return 2;
    }
    tool = argv[1];
    subject = argv[2];
    lib = argv[3];
    nodebug_lib = argv[4];
    const char *tmp = getenv("TMPDIR");
    snprintf(scratch, sizeof scratch, "%s/memkit-run-test.XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(scratch)) {
        perror("mkdtemp");
        return 1;
    }
    char empty[300];
    scratch_path(empty, sizeof empty, "empty");
    mkdir(empty, 0755);

    RUN(test_peak_memkit);
    RUN(test_peak_default_delay);
    RUN(test_system);
    RUN(test_preload);
    RUN(test_exit_status);
    RUN(test_cannot_run);
    RUN(test_fork);
    RUN(test_tree);
    RUN(test_wrapper);
    RUN(test_orphan);
    RUN(test_interval_and_user_stats);
    RUN(test_signals);
    RUN(test_gnuplot);
    RUN(test_plot_peak);
    RUN(test_profile);
    RUN(test_profile_own_files);
    RUN(test_profile_nodebug);
    RUN(test_profile_empty);
    RUN(test_profile_deep);

    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", scratch);
    return th_done();
}
