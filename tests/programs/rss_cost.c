/* SPDX-License-Identifier: MIT */
/*
 * rss_cost.c - the fixed cost of the drop-in in resident memory: the peak
 * RSS of a program that allocates almost nothing, run on the system
 * allocator and with LD_PRELOAD=<libmemkit-malloc>, must differ by at most
 * LIMIT KiB.
 *
 * usage: rss_cost LIB LIMIT_KIB RUNS COMMAND [ARG...]
 *
 * Each run is fork + exec, the two ways alternating, RUNS times each; the
 * peak RSS of one child comes from wait4 (ru_maxrss, KiB), and the verdict
 * is the median of the differences of the pairs (memkit's run minus the
 * system allocator's run just before it): on a loaded machine the figures
 * of either way move by up to ~150 KiB from run to run (page cache and
 * reclaim), which made a comparison of the two medians flip across the
 * limit; runs made back to back share those conditions.  The medians of
 * each way are printed too.  ru_maxrss also counts the child's memory before
 * exec (the kernel keeps the larger of the two peaks), so the child is a
 * fork, not a vfork: a forked child's resident pages are only the anonymous
 * pages it copied from this small runner.  That floor is measured too (a
 * fork that exits at once) and must stay below the system allocator's
 * figure, or the figures would be the runner's and prove nothing.
 * The command's stdout goes to /dev/null; each run must exit 0.
 *
 * Two things outside the allocator move these figures, and both are held
 * still.  Fault-around maps a file page's whole 64 KiB window, but only
 * the pages of it that are in the page cache: on a machine that reclaims
 * cold file pages (DAMON, memory pressure) the system allocator's side
 * swung 912 .. 1,084 KiB on `true`, with the same binary.  So the files
 * the child maps are read whole just before each run: the command, the
 * preloaded library, and the shared objects this runner maps itself (the
 * C library and the dynamic loader, all that `true` and hello link; a
 * command with libraries of its own would have those left out).  And
 * with address randomisation the windows a
 * library's pages fall into move with where it lands: libc under glibc's
 * hello peaked at 1,044 .. 1,332 KiB over 41 runs, while under memkit
 * (whose 2 MiB-aligned mapping places libc the same way every time) it
 * stayed at 1,388 .. 1,504.  So each child runs with ADDR_NO_RANDOMIZE
 * (personality(2); where that is refused, randomised, as before): one
 * layout, the same for every run.  With both, hello measured 1,220
 * against 1,452 KiB in ten runs out of ten.  But one layout is one draw
 * of where the libraries' pages fall in those windows: a change to the
 * preloaded library that moved the C library by a few pages moved the
 * figure by 128 KiB with no change in what either touched (with
 * randomisation, the medians of 41 runs moved by 8).  So run i of each
 * way gets layout i % LAYOUTS: the kernel places mappings below a gap
 * that is the stack limit when that is over 128 MiB, so a stack limit of
 * 128 MiB plus k pages moves every mapping down by k pages (k = 0 .. 15,
 * every place in a 64 KiB window), the same for both ways of a pair.
 *
 * That the preload takes at all is compare.sh's check (fixed_cost.sh runs
 * it first); this program only measures.
 */
#define _GNU_SOURCE
#include <link.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

enum { MAX_RUNS = 51, MAX_FILES = 16, LAYOUTS = 16 };

/* The files a child maps, read whole before each run (see above). */
static char files[MAX_FILES][PATH_MAX];
static int nfiles;

static void add_file(const char *path)
{
    if (nfiles < MAX_FILES && path && *path)
        snprintf(files[nfiles++], PATH_MAX, "%s", path);
}

static int add_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    add_file(info->dlpi_name); /* (the runner itself has an empty name) */
    return 0;
}

/* @cmd as execvp finds it: itself if it has a slash, else the first
 * executable of that name along PATH. */
static void add_command(const char *cmd)
{
    if (strchr(cmd, '/')) {
        add_file(cmd);
        return;
    }
    const char *path = getenv("PATH");
    char dir[PATH_MAX];
    while (path && *path) {
        size_t n = strcspn(path, ":");
        snprintf(dir, sizeof dir, "%.*s/%s", (int)n, path, cmd);
        if (access(dir, X_OK) == 0) {
            add_file(dir);
            return;
        }
        path += n + (path[n] == ':');
    }
}

static void warm_files(void)
{
    static char buf[1 << 16];
    for (int i = 0; i < nfiles; i++) {
        int fd = open(files[i], O_RDONLY);
        if (fd < 0)
            continue;
        while (read(fd, buf, sizeof buf) > 0)
            ;
        close(fd);
    }
}

/* One child: exec @argv (preloading @lib unless NULL) in layout @layout;
 * its ru_maxrss in KiB, or -1 if it did not exit 0.  @argv NULL: the child
 * exits at once. */
static long run(const char *lib, char **argv, int layout)
{
    warm_files();
    pid_t pid = fork();
    if (pid < 0) {
        perror("rss_cost: fork");
        exit(2);
    }
    if (pid == 0) {
        if (!argv)
            _exit(0);
        int persona = personality(0xffffffff);
        if (persona != -1)
            (void)personality((unsigned long)persona | ADDR_NO_RANDOMIZE);
        struct rlimit st;
        if (getrlimit(RLIMIT_STACK, &st) == 0) { /* (the layout: above) */
            rlim_t want = ((rlim_t)128 << 20) + (rlim_t)layout * 4096;
            if (st.rlim_max == RLIM_INFINITY || st.rlim_max >= want) {
                st.rlim_cur = want;
                (void)setrlimit(RLIMIT_STACK, &st);
            }
        }
        if (lib)
            setenv("LD_PRELOAD", lib, 1);
        else
            unsetenv("LD_PRELOAD");
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0)
            dup2(null, STDOUT_FILENO);
        execvp(argv[0], argv);
        perror(argv[0]);
        _exit(127);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid) {
        perror("rss_cost: wait4");
        exit(2);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "rss_cost: %s run of %s: status 0x%x\n",
                lib ? "memkit" : "system", argv ? argv[0] : "(fork)", status);
        return -1;
    }
    return ru.ru_maxrss;
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

static long median(long *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_long);
    return v[n / 2];
}

static void print_all(const char *what, const long *v, int n)
{
    printf("%-22s", what);
    for (int i = 0; i < n; i++)
        printf(" %ld", v[i]);
    printf("  (KiB, sorted)\n");
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: rss_cost LIB LIMIT_KIB RUNS COMMAND [ARG...]\n");
        return 2;
    }
    const char *lib = argv[1];
    long limit = strtol(argv[2], NULL, 10);
    int runs = atoi(argv[3]);
    char **cmd = argv + 4;
    if (runs < 1 || runs > MAX_RUNS || limit < 0) {
        fprintf(stderr, "rss_cost: RUNS must be 1..%d, LIMIT_KIB >= 0\n", MAX_RUNS);
        return 2;
    }
    add_file(lib);
    add_command(cmd[0]);
    dl_iterate_phdr(add_object, NULL);
    long floor_kib[MAX_RUNS], sys[MAX_RUNS], mk[MAX_RUNS];
    for (int i = 0; i < runs; i++) {
        floor_kib[i] = run(NULL, NULL, 0);
        sys[i] = run(NULL, cmd, i % LAYOUTS);
        mk[i] = run(lib, cmd, i % LAYOUTS);
        if (floor_kib[i] < 0 || sys[i] < 0 || mk[i] < 0)
            return 1;
    }
    long diff[MAX_RUNS];
    for (int i = 0; i < runs; i++)
        diff[i] = mk[i] - sys[i];
    long d = median(diff, runs);
    long f = median(floor_kib, runs), s = median(sys, runs), m = median(mk, runs);
    print_all("runner floor:", floor_kib, runs);
    print_all("system allocator:", sys, runs);
    print_all("memkit:", mk, runs);
    print_all("pair differences:", diff, runs);
    printf("peak RSS of %s over %d runs: medians system allocator %ld KiB, "
           "memkit %ld KiB; median difference of the pairs %+ld KiB (limit "
           "%+ld KiB); runner floor %ld KiB\n", cmd[0], runs, s, m, d, limit,
           f);
    if (f >= s) {
        printf("FAIL: the runner's own floor (%ld KiB) is not below the "
               "system allocator's figure: the measurement proves nothing\n", f);
        return 1;
    }
    if (d > limit) {
        printf("FAIL: the drop-in costs %ld KiB of peak RSS, more than %ld KiB\n",
               d, limit);
        return 1;
    }
    printf("PASS: fixed cost %+ld KiB, within %ld KiB\n", d, limit);
    return 0;
}
