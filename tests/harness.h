/* SPDX-License-Identifier: MIT */
/*
 * harness.h - memkit's tiny, self-contained test harness (header only).
 *
 * A test file defines `static void test_x(void)` functions and a main() that
 * calls RUN(test_x) for each, then `return th_done();`.  Checks do not stop
 * the test; REQUIRE* return from the (void) test function on failure, for
 * when going on would crash (a NULL pointer about to be used), and
 * REQUIRE_RET(cond, value) returns @value from a function that returns one.
 * (tests/CMakeLists.txt compiles the tests with -Werror=return-type: a bare
 * REQUIRE in a function returning a value is an error, not a warning.)
 *
 *     CHECK(cond)              any condition
 *     CHECK_EQ(a, b) ...       integers (and pointers cast to uintptr_t);
 *                              prints both values, decimal and hex
 *     CHECK_PTR_EQ(a, b)       pointers
 *     CHECK_NULL(p) CHECK_NOT_NULL(p)
 *     CHECK_STR_EQ(a, b)  CHECK_STR_HAS(haystack, needle)
 *     CHECK_ERRNO(e)           errno == e (prints strerror of both)
 *     CHECK_DIES(fn, arg, msg) fork; fn(arg) in the child with its stderr
 *                              captured through a pipe; the child must die
 *                              of SIGABRT and have written @msg to stderr
 *     CHECK_PATTERN(p, n, id)  the n bytes at p hold th_fill's pattern for id
 *     th_run_child(...)        the same machinery for other outcomes
 *     th_fill / th_verify / th_rand   fill patterns and a seeded PRNG
 *
 * TH_ONLY / TH_SKIP in the environment (comma-separated test names) select
 * the tests RUN runs.
 *
 * Every failure prints "file:line: ..." and counts; th_done() prints a
 * summary and returns the process exit code (0 only if nothing failed and
 * at least one check ran, so a test that checks nothing fails).
 */
#ifndef MK_TEST_HARNESS_H
#define MK_TEST_HARNESS_H

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static int th_failures;     /* checks failed, whole program */
static long th_checks;      /* checks evaluated */
static int th_test_failed;  /* failures in the running test */
static const char *th_current = "?";

static void th_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void th_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "%s:%d: [%s] FAILED: ", file, line, th_current);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    th_failures++;
    th_test_failed++;
}

#define CHECK(cond)                                                         \
    do {                                                                    \
        th_checks++;                                                        \
        if (!(cond))                                                        \
            th_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);                \
    } while (0)

/* Integer comparisons.  Both sides are converted to the type C would
 * compare them in (that of a + b), then printed as signed and unsigned
 * 64-bit values. */
#define TH_CMP(a, op, b)                                                    \
    do {                                                                    \
        th_checks++;                                                        \
        __typeof__((a) + (b)) th_a_ = (a), th_b_ = (b);                     \
        if (!(th_a_ op th_b_))                                              \
            th_fail(__FILE__, __LINE__,                                     \
                    "%s %s %s: left %lld (0x%llx), right %lld (0x%llx)",    \
                    #a, #op, #b, (long long)th_a_,                          \
                    (unsigned long long)th_a_, (long long)th_b_,            \
                    (unsigned long long)th_b_);                             \
    } while (0)

#define CHECK_EQ(a, b) TH_CMP(a, ==, b)
#define CHECK_NE(a, b) TH_CMP(a, !=, b)
#define CHECK_LT(a, b) TH_CMP(a, <, b)
#define CHECK_LE(a, b) TH_CMP(a, <=, b)
#define CHECK_GT(a, b) TH_CMP(a, >, b)
#define CHECK_GE(a, b) TH_CMP(a, >=, b)

#define CHECK_PTR_EQ(a, b)                                                  \
    do {                                                                    \
        th_checks++;                                                        \
        const void *th_a_ = (a), *th_b_ = (b);                              \
        if (th_a_ != th_b_)                                                 \
            th_fail(__FILE__, __LINE__, "%s == %s: left %p, right %p", #a,  \
                    #b, th_a_, th_b_);                                      \
    } while (0)

#define CHECK_NULL(p)                                                       \
    do {                                                                    \
        th_checks++;                                                        \
        const void *th_p_ = (p);                                            \
        if (th_p_ != NULL)                                                  \
            th_fail(__FILE__, __LINE__, "%s is %p, expected NULL", #p,      \
                    th_p_);                                                 \
    } while (0)

#define CHECK_NOT_NULL(p)                                                   \
    do {                                                                    \
        th_checks++;                                                        \
        if ((p) == NULL)                                                    \
            th_fail(__FILE__, __LINE__, "%s is NULL", #p);                  \
    } while (0)

#define CHECK_STR_EQ(a, b)                                                  \
    do {                                                                    \
        th_checks++;                                                        \
        const char *th_a_ = (a), *th_b_ = (b);                              \
        if (!th_a_ || !th_b_ || strcmp(th_a_, th_b_) != 0)                  \
            th_fail(__FILE__, __LINE__, "%s == %s: \"%s\" vs \"%s\"", #a,   \
                    #b, th_a_ ? th_a_ : "(null)", th_b_ ? th_b_ : "(null)"); \
    } while (0)

#define CHECK_STR_HAS(hay, needle)                                          \
    do {                                                                    \
        th_checks++;                                                        \
        const char *th_h_ = (hay), *th_n_ = (needle);                       \
        if (!th_h_ || !strstr(th_h_, th_n_))                                \
            th_fail(__FILE__, __LINE__, "%s does not contain \"%s\": \"%s\"", \
                    #hay, th_n_, th_h_ ? th_h_ : "(null)");                 \
    } while (0)

#define CHECK_ERRNO(e)                                                      \
    do {                                                                    \
        th_checks++;                                                        \
        int th_e_ = errno;                                                  \
        if (th_e_ != (e))                                                   \
            th_fail(__FILE__, __LINE__, "errno is %d (%s), expected %s",    \
                    th_e_, strerror(th_e_), #e);                            \
    } while (0)

/* As CHECK, but return from the calling void function on failure. */
#define REQUIRE(cond)                                                       \
    do {                                                                    \
        th_checks++;                                                        \
        if (!(cond)) {                                                      \
            th_fail(__FILE__, __LINE__, "REQUIRE(%s)", #cond);              \
            return;                                                         \
        }                                                                   \
    } while (0)

#define REQUIRE_NOT_NULL(p) REQUIRE((p) != NULL)

/* As REQUIRE, in a function that returns a value: return @value. */
#define REQUIRE_RET(cond, value)                                            \
    do {                                                                    \
        th_checks++;                                                        \
        if (!(cond)) {                                                      \
            th_fail(__FILE__, __LINE__, "REQUIRE(%s)", #cond);              \
            return value;                                                   \
        }                                                                   \
    } while (0)

/* Run one test function and report it. */
#define RUN(fn) th_run(#fn, fn)

/* Resident bytes of this process (0 if /proc cannot tell). */
static inline size_t th_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    unsigned long size = 0, resident = 0;
    if (fscanf(f, "%lu %lu", &size, &resident) != 2)
        resident = 0;
    fclose(f);
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* Say why a test checks nothing in this build (it is not a check: a
 * program whose tests all skip still fails for having checked nothing). */
static inline void th_note(const char *why) { printf("  note: %s\n", why); }

/* Is @name in the comma-separated @list? */
static int th_listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *s = list; s && *s;) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len == n && strncmp(s, name, n) == 0)
            return 1;
        s = e ? e + 1 : NULL;
    }
    return 0;
}

/* TH_ONLY=a,b runs only the tests named; TH_SKIP=a,b skips those (ctest
 * uses this to register a known-failing test on its own). */
static void th_run(const char *name, void (*fn)(void))
{
    const char *only = getenv("TH_ONLY"), *skip = getenv("TH_SKIP");
    if ((only && *only && !th_listed(only, name)) ||
        (skip && th_listed(skip, name))) {
        printf("[ SKIP ] %s\n", name);
        return;
    }
    th_current = name;
    th_test_failed = 0;
    printf("[ RUN  ] %s\n", name);
    fflush(stdout);
    fn();
    printf("[ %s ] %s\n", th_test_failed ? "FAIL" : " OK ", name);
    fflush(stdout);
    th_current = "?";
}

/* Print the summary; returns the exit status for main(). */
static int th_done(void)
{
    printf("%ld checks, %d failed\n", th_checks, th_failures);
    if (th_checks == 0) {
        printf("no check ran: a test that checks nothing fails\n");
        return 1;
    }
    return th_failures ? 1 : 0;
}

/* ---- child processes (death tests) ------------------------------------- */

/*
 * Fork; in the child run fn(arg) with stderr redirected into a pipe (core
 * dumps off), then _exit(0).  The parent reads what the child wrote into
 * @out (NUL-terminated, truncated to @cap - 1) and returns the wait status,
 * or -1 if fork/pipe failed.
 */
static int th_run_child(void (*fn)(void *), void *arg, char *out, size_t cap)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        close(fds[0]);
        dup2(fds[1], STDERR_FILENO);
        close(fds[1]);
        fn(arg);
        fflush(stdout);
        _exit(0);
    }
    close(fds[1]);
    size_t len = 0;
    char sink[256];
    for (;;) {
        char *dst = len + 1 < cap ? out + len : sink;
        size_t room = len + 1 < cap ? cap - 1 - len : sizeof sink;
        ssize_t n = read(fds[0], dst, room);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (dst != sink)
            len += (size_t)n;
    }
    out[len] = '\0';
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return -1;
    }
    return status;
}

static void th_check_dies(const char *file, int line, const char *what,
                          void (*fn)(void *), void *arg, const char *expect)
{
    char buf[4096];
    th_checks++;
    int st = th_run_child(fn, arg, buf, sizeof buf);
    if (st == -1) {
        th_fail(file, line, "%s: could not fork: %s", what, strerror(errno));
        return;
    }
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGABRT) {
        if (WIFSIGNALED(st))
            th_fail(file, line, "%s: child died of signal %d, expected "
                    "SIGABRT; stderr: \"%s\"", what, WTERMSIG(st), buf);
        else
            th_fail(file, line, "%s: child exited with status %d, expected "
                    "to die of SIGABRT; stderr: \"%s\"", what,
                    WEXITSTATUS(st), buf);
        return;
    }
    if (!strstr(buf, expect))
        th_fail(file, line, "%s: stderr of the child does not contain "
                "\"%s\": \"%s\"", what, expect, buf);
}

#define CHECK_DIES(fn, arg, expect)                                         \
    th_check_dies(__FILE__, __LINE__, #fn, fn, arg, expect)

/* ---- helpers -------------------------------------------------------------- */

/* Fill patterns: byte i of a chunk with id @id is byte (i % 8) of
 * th_pattern_word(id, i / 8), so any two chunks, and any two offsets of one
 * chunk, differ; a copy that lost or moved bytes is caught. */
static inline uint64_t th_pattern_word(uint64_t id, size_t i)
{
    uint64_t x = (id + 1) * 0x9E3779B97F4A7C15ull + (uint64_t)i * 0xBF58476D1CE4E5B9ull;
    return x ^ (x >> 29);
}

static void th_fill(void *p, size_t n, uint64_t id)
{
    unsigned char *c = p;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w = th_pattern_word(id, i / 8);
        memcpy(c + i, &w, 8);
    }
    if (i < n) {
        uint64_t w = th_pattern_word(id, i / 8);
        memcpy(c + i, &w, n - i);
    }
}

/* Offset of the first byte of [p, p+n) that does not hold the pattern of
 * @id, or (size_t)-1 if all do. */
static size_t th_verify(const void *p, size_t n, uint64_t id)
{
    const unsigned char *c = p;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w = th_pattern_word(id, i / 8);
        if (memcmp(c + i, &w, 8) != 0)
            break;
    }
    for (; i < n; i++) {
        uint64_t w = th_pattern_word(id, i / 8);
        if (c[i] != ((const unsigned char *)&w)[i % 8])
            return i;
    }
    return (size_t)-1;
}

#define CHECK_PATTERN(p, n, id)                                             \
    do {                                                                    \
        th_checks++;                                                        \
        size_t th_bad_ = th_verify((p), (n), (id));                         \
        if (th_bad_ != (size_t)-1)                                          \
            th_fail(__FILE__, __LINE__, "pattern %llu of %s (%zu bytes at " \
                    "%p) broken at offset %zu", (unsigned long long)(id),   \
                    #p, (size_t)(n), (const void *)(p), th_bad_);           \
    } while (0)

/* Non-zero if the @n bytes at @p are all zero. */
static int th_all_zero(const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i])
            return 0;
    return 1;
}

/* A small fast PRNG (xorshift64*), for reproducible random tests. */
typedef struct th_rng {
    uint64_t s;
} th_rng;

static inline uint64_t th_rand(th_rng *r)
{
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* Uniform in [0, n) (n > 0; the tiny modulo bias does not matter here). */
static inline uint64_t th_below(th_rng *r, uint64_t n) { return th_rand(r) % n; }

/* A long from argv[i] or the environment variable @env, else @def. */
static long th_arg_long(int argc, char **argv, int i, const char *env,
                        long def)
{
    const char *s = i < argc ? argv[i] : NULL;
    if (!s && env)
        s = getenv(env);
    if (!s || !*s)
        return def;
    return strtol(s, NULL, 0);
}

#endif /* MK_TEST_HARNESS_H */
