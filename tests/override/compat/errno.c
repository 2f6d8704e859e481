/* SPDX-License-Identifier: MIT */
/*
 * compat/errno.c - a call of the malloc family that succeeds leaves errno
 * as it found it, as glibc's does, whatever system calls failed on the
 * way (programs test errno after a loop of calls: `errno = 0; while
 * (getline(...) != -1) ...; if (errno) error`).
 *
 * Each case sets errno to a value no call of the allocator sets, makes the
 * allocator take the path where a system call fails before the request
 * succeeds, and checks the value is still there:
 *  - realloc of a big block whose mapping cannot grow in place (a page of
 *    the test's own is mapped right after it): the in-place mremap fails
 *    (ENOMEM), the block moves;
 *  - the getline idiom on a file of lines from 1 KiB to 16 MiB;
 *  - the first big malloc of a process where /sys is absent (a mount
 *    namespace with an empty /sys: containers, chroots), in a child that
 *    execs this program again, so that the allocator starts there;
 *    skipped with a message where no namespace can be made;
 *  - the first mallocs of a process under `ulimit -v` (RLIMIT_AS), where a
 *    reservation larger than the limit allows is refused;
 *  - free, which since glibc 2.33 keeps errno too, of blocks whose memory
 *    goes back to the OS.
 */
#include "compat.h"

#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>

#define MiB ((size_t)1 << 20)
#define MARK 7919 /* an errno value no system call gives */

static char self[4096];

static void test_realloc_cannot_grow_in_place(void)
{
    for (int round = 0; round < 8; round++) {
        size_t n = compat_opaque((size_t)(8 + round) * MiB);
        char *p = malloc(n);
        REQUIRE_NOT_NULL(p);
        memset(p, 1, n);
        /* the page after the block's last one, taken if free */
        uintptr_t end = ((uintptr_t)p + n + 4095) & ~(uintptr_t)4095;
        void *block = mmap((void *)end, 4096, PROT_READ,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        int mine = block == (void *)end;
        if (block != MAP_FAILED && !mine)
            munmap(block, 4096); /* (an old kernel took it as a hint) */
        errno = MARK;
        char *q = realloc(p, 4 * n);
        REQUIRE_NOT_NULL(q);
        CHECK_EQ(errno, MARK);
        CHECK_EQ(q[0], 1);
        CHECK_EQ(q[n - 1], 1);
        errno = MARK;
        free(q);
        CHECK_EQ(errno, MARK);
        if (mine)
            munmap(block, 4096);
    }
}

static void test_getline_idiom(void)
{
    char path[] = "/tmp/memkit-errno-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    FILE *f = fdopen(fd, "w+");
    REQUIRE_NOT_NULL(f);
    unlink(path);
    for (size_t len = 1024; len <= 16 * MiB; len *= 2) {
        for (size_t i = 0; i < len; i++)
            fputc('a' + (int)(i % 26), f);
        fputc('\n', f);
    }
    rewind(f);
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    int lines = 0;
    errno = 0;
    while ((got = getline(&line, &cap, f)) != -1)
        lines++;
    CHECK_EQ(errno, 0); /* end of file, not an error */
    CHECK_EQ(lines, 15);
    free(line);
    fclose(f);
}

/* errno across the first allocations of this process (the child's part):
 * 0, or the number of the first call that changed it */
static int first_allocations(void)
{
    static const size_t sizes[] = {100, 64 << 20, 32 << 20, 5000, 1 << 20};
    char *p[5];
    for (int i = 0; i < 5; i++) {
        errno = MARK;
        p[i] = i == 2 ? calloc(compat_opaque(sizes[i]), 1) : malloc(compat_opaque(sizes[i]));
        if (!p[i] || errno != MARK) {
            fprintf(stderr, "call %d (%zu bytes): %s, errno %d (%s)\n", i + 1, sizes[i],
                    p[i] ? "ok" : "NULL", errno, strerror(errno));
            return i + 1;
        }
        memset(p[i], 1, sizes[i]);
    }
    for (int i = 0; i < 5; i++) {
        errno = MARK;
        free(p[i]);
        if (errno != MARK) {
            fprintf(stderr, "free %d: errno %d (%s)\n", i + 1, errno, strerror(errno));
            return 10 + i;
        }
    }
    return 0;
}

/* Run this program again with argument @arg, after @setup in the child;
 * returns its exit status (77: skipped), -1 if it did not exit. */
static int rerun(const char *arg, int (*setup)(void))
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (setup && setup() != 0)
            _exit(77);
        execl(self, self, arg, (char *)NULL);
        _exit(126);
    }
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

static int hide_sys(void)
{
    /* root: a mount namespace of its own; else a user namespace first */
    if (unshare(CLONE_NEWNS) != 0 && unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
        fprintf(stderr, "skip: no mount namespace (%s)\n", strerror(errno));
        return -1;
    }
    if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", "/sys", "tmpfs", 0, "size=64k") != 0) {
        fprintf(stderr, "skip: cannot hide /sys (%s)\n", strerror(errno));
        return -1;
    }
    return 0;
}

static void test_first_big_malloc_without_sys(void)
{
    int r = rerun("child-nosys", hide_sys);
    if (r == 77) {
        printf("skipped: no namespace to hide /sys in\n");
        return;
    }
    CHECK_EQ(r, 0);
}

static int limit_as(void)
{
    struct rlimit rl = {(rlim_t)1 << 30, (rlim_t)1 << 30}; /* ulimit -v 1G */
    return setrlimit(RLIMIT_AS, &rl);
}

static void test_first_mallocs_under_ulimit_v(void)
{
    CHECK_EQ(rerun("child-first", limit_as), 0);
    CHECK_EQ(rerun("child-first", NULL), 0);
}

static void test_free_keeps_errno(void)
{
    enum { N = 512 };
    static char *b[N];
    for (int i = 0; i < N; i++) {
        b[i] = malloc(compat_opaque((size_t)(i % 4 ? 64 << 10 : 2 << 20)));
        REQUIRE_NOT_NULL(b[i]);
        memset(b[i], 1, 64 << 10);
    }
    for (int i = 0; i < N; i++) {
        errno = MARK;
        free(b[i]);
        th_checks++;
        if (errno != MARK) {
            th_fail(__FILE__, __LINE__, "free of block %d set errno to %d", i, errno);
            break;
        }
    }
}

int main(int argc, char **argv)
{
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 1;
    self[n] = 0;
    if (argc > 1 && strncmp(argv[1], "child-", 6) == 0)
        return first_allocations();
    compat_start();
    RUN(test_realloc_cannot_grow_in_place);
    RUN(test_getline_idiom);
    RUN(test_first_big_malloc_without_sys);
    RUN(test_first_mallocs_under_ulimit_v);
    RUN(test_free_keeps_errno);
    return th_done();
}
