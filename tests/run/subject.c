/* SPDX-License-Identifier: MIT */
/*
 * subject.c - the programs memkit-run is tried on (tests/run/), one per
 * mode, each with a memory profile a test can predict:
 *
 *   peak MIB      allocate MIB MiB in 64 KiB chunks (segment pages, so that
 *                 memkit's purge policy is what gives them back), touch
 *                 every page, hold them 150 ms (several samples see the
 *                 peak), free them all, sleep 300 ms, exit 3
 *   fork MIB      fork a child that allocates MIB MiB, touches it and
 *                 holds it 300 ms; wait for it; exit 0
 *   tree MIB      fork a child that forks a grandchild; the grandchild
 *                 allocates MIB MiB and holds it 300 ms (3 processes)
 *   orphan MIB    fork a child that forks a grandchild and exits at once;
 *                 the grandchild (an orphan) holds MIB MiB for 300 ms; the
 *                 program waits for it through a pipe (EOF when it has
 *                 exited: it cannot waitpid an orphan), sleeps 100 ms
 *   keep MIB      allocate MIB MiB, touch it and exit holding it (memkit's
 *                 figures at exit show it committed)
 *   fail          exit 1
 *   kill          SIGKILL itself (status 137 through memkit-run)
 *   garbage       write "{not json" into $MEMKIT_STATS_FILE, _exit(0)
 *                 (memkit's exit handler does not run)
 *   maps          print "memkit: yes" or "memkit: no" on stdout: whether
 *                 libmemkit-malloc is mapped in this process
 *   quick         exit 0 at once (a program shorter than one sample)
 *   sleep MS      allocate and touch 1 MiB, sleep MS ms, exit 0
 *   env NAME      print "NAME=value" or "NAME unset" on stdout
 *   leak          10,000 blocks allocated and freed, then 3 kept to the
 *                 end, from leak_small (40 B), leak_mid (3000 B) and
 *                 leak_big (200,000 B): what a heap profile at rate 1 finds
 *   freed         the same 10,000 blocks allocated and freed, and nothing
 *                 kept: at rate 1, nothing is live at exit
 *   deep N        recurse N calls deep (deep_call), then keep 5000 bytes:
 *                 a stack taller than the profile's 64 frames
 *   nodebug LIB   dlopen LIB (tests/run/nodebug.c, built without debug
 *                 information and stripped to its exported symbols) and
 *                 keep the 5000 bytes its static function allocates
 *
 * Allocation goes through malloc, so LD_PRELOAD decides whose; the
 * chunks are written through a volatile pointer so the compiler cannot
 * drop the allocation.  Not a test by itself: tests/run/run_test.c runs
 * it under memkit-run.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHUNK ((size_t)64 << 10)

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Allocate @mib MiB in chunks and write every page; the chunks. */
static char **grab(long mib, size_t *count)
{
    size_t n = (size_t)mib * ((size_t)1 << 20) / CHUNK;
    char **v = malloc(n * sizeof *v);
    if (!v) {
        perror("subject: malloc");
        exit(2);
    }
    for (size_t i = 0; i < n; i++) {
        char *volatile p = malloc(CHUNK);
        if (!p) {
            perror("subject: malloc");
            exit(2);
        }
        for (size_t o = 0; o < CHUNK; o += 4096)
            p[o] = (char)(i + o);
        v[i] = p;
    }
    *count = n;
    return v;
}

static void release(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void hold(long mib, long ms)
{
    size_t n;
    char **v = grab(mib, &n);
    sleep_ms(ms);
    release(v, n);
}

static void wait_for(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0) {
    }
}

/* (the asm after the call: no tail call, each function keeps its frame;
 * noipa: nor is it merged with its identical twins) */
#define LEAKER(name)                                                          \
    __attribute__((noinline, noipa)) static void *name(size_t n)             \
    {                                                                         \
        void *p = malloc(n);                                                  \
        __asm__ volatile("" : : "r"(p) : "memory");                           \
        return p;                                                             \
    }
LEAKER(leak_small)
LEAKER(leak_mid)
LEAKER(leak_big)
LEAKER(churn_one)

/* @n calls deep, then the allocation (the asm: no tail call, no loop) */
__attribute__((noinline, noipa)) static void *deep_call(int n)
{
    void *p = n > 0 ? deep_call(n - 1) : leak_mid(5000);
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    long mib = argc > 2 ? atol(argv[2]) : 64;
    if (strcmp(mode, "peak") == 0) {
        size_t n;
        char **v = grab(mib, &n);
        sleep_ms(150);
        release(v, n);
        sleep_ms(300);
        return 3;
    }
    if (strcmp(mode, "leak") == 0) {
        for (int i = 0; i < 10000; i++) {
            char *volatile p = churn_one((size_t)(i % 900) + 1);
            p[0] = 1;
            free(p);
        }
        static void *volatile kept[3];
        kept[0] = leak_small(40);
        kept[1] = leak_mid(3000);
        kept[2] = leak_big(200000);
        return kept[0] && kept[1] && kept[2] ? 0 : 1;
    }
    if (strcmp(mode, "freed") == 0) {
        for (int i = 0; i < 10000; i++) {
            char *volatile p = churn_one((size_t)(i % 900) + 1);
            p[0] = 1;
            free(p);
        }
        return 0;
    }
    if (strcmp(mode, "deep") == 0) {
        static void *volatile kept;
        kept = deep_call((int)mib);
        return kept ? 0 : 1;
    }
    if (strcmp(mode, "nodebug") == 0 && argc > 2) {
        void *lib = dlopen(argv[2], RTLD_NOW);
        void *(*alloc)(size_t);
        *(void **)&alloc = lib ? dlsym(lib, "mr_nodebug_alloc") : NULL;
        if (!alloc) {
            fprintf(stderr, "subject: %s\n", dlerror());
            return 2;
        }
        static void *volatile kept;
        kept = alloc(5000);
        return kept ? 0 : 1;
    }
    if (strcmp(mode, "keep") == 0) {
        size_t n;
        grab(mib, &n);
        return 0;
    }
    if (strcmp(mode, "fork") == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            hold(mib, 300);
            exit(0);
        }
        wait_for(pid);
        return 0;
    }
    if (strcmp(mode, "tree") == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            pid_t g = fork();
            if (g == 0) {
                hold(mib, 300);
                exit(0);
            }
            wait_for(g);
            exit(0);
        }
        wait_for(pid);
        return 0;
    }
    if (strcmp(mode, "orphan") == 0) {
        int fds[2];
        if (pipe(fds) != 0)
            return 2;
        pid_t pid = fork();
        if (pid == 0) {
            if (fork() == 0) {
                close(fds[0]);
                hold(mib, 300);
                exit(0); /* the pipe closes after memkit's exit handler */
            }
            _exit(0); /* the grandchild is an orphan now */
        }
        close(fds[1]);
        wait_for(pid);
        char c;
        while (read(fds[0], &c, 1) > 0) {
        }
        sleep_ms(100);
        return 0;
    }
    if (strcmp(mode, "fail") == 0)
        return 1;
    if (strcmp(mode, "kill") == 0) {
        raise(SIGKILL);
        return 0;
    }
    if (strcmp(mode, "garbage") == 0) {
        const char *f = getenv("MEMKIT_STATS_FILE");
        int fd = f ? open(f, O_WRONLY | O_TRUNC) : -1;
        if (fd < 0 || write(fd, "{not json", 9) != 9)
            _exit(2);
        _exit(0);
    }
    if (strcmp(mode, "maps") == 0) {
        FILE *m = fopen("/proc/self/maps", "r");
        char line[4096];
        int found = 0;
        while (m && fgets(line, sizeof line, m))
            if (strstr(line, "libmemkit-malloc"))
                found = 1;
        if (m)
            fclose(m);
        printf("memkit: %s\n", found ? "yes" : "no");
        return 0;
    }
    if (strcmp(mode, "quick") == 0)
        return 0;
    if (strcmp(mode, "sleep") == 0) {
        hold(1, mib); /* (the second argument is milliseconds here) */
        return 0;
    }
    if (strcmp(mode, "env") == 0 && argc > 2) {
        const char *v = getenv(argv[2]);
        if (v)
            printf("%s=%s\n", argv[2], v);
        else
            printf("%s unset\n", argv[2]);
        return 0;
    }
    fprintf(stderr, "subject: unknown mode '%s'\n", mode);
    return 2;
}
