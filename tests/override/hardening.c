/* SPDX-License-Identifier: MIT */
/*
 * override/hardening.c - the release build's reports through the malloc
 * drop-in: a plain C program (libc only, no memkit header) run under
 * LD_PRELOAD=libmemkit-malloc.so, as a user would run any program.
 *
 *   every build   free() twice of a small chunk, right after the first
 *                 free (sizes 8 .. 32 KiB): "memkit: double free of P
 *                 (context thread)" (malloc's chunks live in the thread's
 *                 heap, a GENERAL context named "thread"); of a large
 *                 (64 KiB) and a huge (3 MiB) chunk: "memkit: double free
 *                 of P (memory memkit holds free)"; realloc() of a pointer
 *                 memkit does not hold (stack, static array, a page of our
 *                 own from mmap): "memkit: realloc(): invalid pointer P";
 *                 free() of a stack pointer or a static array (outside the
 *                 span memkit's segments cover): "memkit: free(): invalid
 *                 pointer P";
 *   MEMKIT_SECURE=1  free() of those pointers: "memkit: free(): invalid
 *                 pointer P"; a free chunk's first word overwritten (with
 *                 an address of our choosing, or zero), in the chunk at the
 *                 head of its list and in the next one: "memkit: write to
 *                 freed memory (its free-list link was overwritten):
 *                 pointer P (context "thread")", and the forged address is
 *                 never returned by malloc.
 * Every build: free(a), free(b), free(a) (a second on its
 * list); a chunk freed by another thread, then by the owner or a third
 * thread (large and huge chunks too): "memkit: double free of P (context
 * thread)"; free() of an interior pointer (p + 16 of 48 bytes, p + 4096 of
 * 100 KB, p + 4096 of a huge chunk; p + 16 of 48 and p + 100 of 1000 bytes
 * by another thread too) and realloc() of one or of a freed
 * chunk: "memkit: FN(): invalid pointer P (not the start of a chunk of
 * context thread)" ("(a freed chunk ...)"); past a huge chunk's first
 * 4 MiB, "memkit: free(): invalid pointer P"; free() of a page of our own
 * from mmap, in the default mode too.  MEMKIT_SECURE=1: a write past the
 * end of a chunk into its neighbour, when either is freed: "memkit: write
 * past the end of a chunk (into its neighbour): pointer P (context
 * "thread")".
 * With an error handler (mk_set_error_handler, found with dlsym as a
 * program that knows of memkit would) the process goes on: free() twice
 * hands the chunk out once, realloc() of a stack pointer returns NULL.
 *
 * Each case runs in a fresh process (tests/wrong/reexec.h), which inherits
 * LD_PRELOAD; the child announces the exact line it expects.  First the
 * test proves that the preload took (memkit's symbols are in the process).
 */
#include "harness.h"
#include "wrong/reexec.h"

#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/mman.h>

static void poke8_impl(void *p, uint64_t v) { memcpy(p, &v, 8); }
static void (*volatile poke8)(void *p, uint64_t v) = poke8_impl;
static void *launder_impl(void *p) { return p; }
static void *(*volatile launder)(void *) = launder_impl;

static const char *const SECURE[] = {"MEMKIT_SECURE=1", NULL};
static const char *const SECURE2[] = {"MEMKIT_SECURE=2", NULL};
static const char *const DEFAULT[] = {NULL};
static const char *const *const MODES[] = {DEFAULT, SECURE, SECURE2};
#define NMODES (sizeof MODES / sizeof MODES[0])
/* the control: the same case on glibc's malloc (no preload) */
static const char *const GLIBC[] = {"LD_PRELOAD=", "HX_GLIBC=1", NULL};

static const char DOUBLE_FREE[] = "memkit: free(): double free of %p "
                                  "(context \"thread\")";
static const char HELD_FREE[] = "memkit: free(): double free of %p (memory "
                                "memkit holds free)";
static const char BAD_LINK[] = "memkit: write to freed memory at %p (its "
                               "free-list link was overwritten, context "
                               "\"thread\")";

static void *must(void *p)
{
    if (!p)
        _exit(4);
    return p;
}

/* ---- the cases (in the child) --------------------------------------------- */

static void case_double_free(const char *arg)
{
    size_t n = strtoul(arg, NULL, 0);
    char *keep = must(malloc(n));
    char *p = must(malloc(n));
    rx_expect_ptr(n > 32768 ? HELD_FREE : DOUBLE_FREE, p);
    memset(p, 1, n);
    free(p);
    free(p);
    free(keep);
}

static char static_array[256];

static void *foreign(const char *arg, char *stack)
{
    if (strcmp(arg, "stack") == 0)
        return stack;
    if (strcmp(arg, "static") == 0)
        return static_array + 16;
    if (strcmp(arg, "mmap") == 0) {
        char *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            _exit(5);
        return m + 64;
    }
    _exit(5);
}

static void case_free_foreign(const char *arg)
{
    char stack[64];
    void *p = launder(foreign(arg, stack));
    rx_expect_ptr("memkit: free(): invalid pointer %p (memkit never returned it)", p);
    free(p);
}

static void case_realloc_foreign(const char *arg)
{
    char stack[64];
    void *p = launder(foreign(arg, stack));
    rx_expect_ptr("memkit: realloc(): invalid pointer %p (memkit never returned it)", p);
    void *q = realloc(p, 100);
    printf("realloc returned %p\n", q);
}

/* arg "SIZE:VALUE:WHERE" as in wrong/release.c: VALUE forge or zero,
 * WHERE head or deep. */
static char forged_target[4096] __attribute__((aligned(64)));

static void case_link(const char *arg)
{
    size_t n = 0;
    char value[16] = "", where[16] = "";
    if (sscanf(arg, "%zu:%15[^:]:%15s", &n, value, where) != 3)
        _exit(5);
    char *keep = must(malloc(n)), *a = must(malloc(n)), *b = must(malloc(n));
    char *keep2 = must(malloc(n));
    (void)keep, (void)keep2;
    char *victim = strcmp(where, "deep") == 0 ? a : b;
    rx_expect_ptr(BAD_LINK, victim);
    free(a);
    free(b);
    poke8(victim, strcmp(value, "zero") == 0
                      ? 0
                      : (uint64_t)(uintptr_t)forged_target);
    for (int i = 0; i < 100000; i++) {
        char *q = malloc(n);
        if (!q)
            _exit(6);
        if (q == forged_target) {
            printf("the forged address was handed out\n");
            _exit(7);
        }
    }
}

/* ---- double frees anywhere, interior pointers ------------------------------------ */

static const char INTERIOR[] = "memkit: %s(): invalid pointer %p (not the "
                               "start of a chunk, context \"thread\")";

static void expect_fn(const char *fmt, const char *fn, const void *p)
{
    char buf[512];
    snprintf(buf, sizeof buf, fmt, fn, p);
    rx_expect(buf);
}

/* free(a), free(b), free(a): a is second on its list at the second free */
static void case_abab(const char *arg)
{
    size_t n = strtoul(arg, NULL, 0);
    char *a = must(malloc(n)), *b = must(malloc(n)), *keep = must(malloc(n));
    (void)keep;
    rx_expect_ptr(DOUBLE_FREE, a);
    free(a);
    free(b);
    free(a);
}

static void *remote_ptr;
static void *free_there(void *arg)
{
    (void)arg;
    free(remote_ptr);
    return NULL;
}
static void free_in_thread(void *p)
{
    remote_ptr = p;
    pthread_t t;
    if (pthread_create(&t, NULL, free_there, NULL) != 0)
        _exit(6);
    pthread_join(t, NULL);
}

/* arg "SIZE:owner" or "SIZE:other": the first free is another thread's */
static void case_remote(const char *arg)
{
    size_t n = 0;
    char who[16] = "";
    if (sscanf(arg, "%zu:%15s", &n, who) != 2)
        _exit(5);
    must(malloc(n));
    char *p = must(malloc(n));
    memset(p, 2, n < 4096 ? n : 4096);
    rx_expect_ptr(DOUBLE_FREE, p);
    free_in_thread(p);
    if (strcmp(who, "owner") == 0)
        free(p);
    else
        free_in_thread(p);
}

/* arg "SIZE:OFFSET": free(p + OFFSET); "SIZE:OFFSET:other": by another
 * thread (the path of other threads' frees, general.h) */
static void case_interior(const char *arg)
{
    size_t n = 0, off = 0;
    char who[16] = "";
    if (sscanf(arg, "%zu:%zu:%15s", &n, &off, who) < 2)
        _exit(5);
    char *p = must(malloc(n));
    must(malloc(n));
    if (off >= ((size_t)4 << 20))
        rx_expect_ptr("memkit: free(): invalid pointer %p (memkit never returned it)", p + off);
    else
        expect_fn(INTERIOR, "free", p + off);
    if (strcmp(who, "other") == 0)
        free_in_thread(launder(p + off));
    else
        free(launder(p + off));
}

/* arg "interior:SIZE" or "freed:SIZE" */
static void case_realloc_bad(const char *arg)
{
    char what[16] = "";
    size_t n = 0;
    if (sscanf(arg, "%15[^:]:%zu", what, &n) != 2)
        _exit(5);
    char *p = must(malloc(n));
    must(malloc(n));
    if (strcmp(what, "freed") == 0) {
        free(p);
        expect_fn("memkit: %s(): invalid pointer %p (a freed chunk, "
                  "context \"thread\")", "realloc", p);
        printf("%p\n", realloc(launder(p), n * 2));
    } else {
        expect_fn(INTERIOR, "realloc", p + 16);
        printf("%p\n", realloc(launder(p + 16), n * 2));
    }
}

/* Secure mode: arg "SIZE:self|next": a write past a's end into b */
static void case_overflow(const char *arg)
{
    size_t n = 0;
    char which[16] = "";
    if (sscanf(arg, "%zu:%15s", &n, which) != 2)
        _exit(5);
    char *a = must(malloc(n)), *b = must(malloc(n));
    size_t usable = malloc_usable_size(a);
    /* (MEMKIT_SECURE=2 cuts a page in a random order: "self" only) */
    if (strcmp(which, "next") == 0 && b != a + usable + 8) {
        printf("%p and %p are not neighbours\n", (void *)a, (void *)b);
        _exit(8);
    }
    memset(launder(a), 'x', usable + 12);
    rx_expect_ptr("memkit: free(): write past the end of chunk %p (into its "
                  "neighbour, context \"thread\")", a);
    free(strcmp(which, "self") == 0 ? a : b);
}

/* A correct program (test_correct_program_quiet): malloc, calloc and
 * realloc of many sizes, frees in a scattered order (a free's neighbours
 * in every state), a third of them by another thread; nothing may be
 * reported, on memkit in every mode and on glibc. */
static void *clean_ptrs[300];
static size_t clean_n;

static void *clean_free_thirds(void *arg)
{
    for (size_t i = (size_t)(uintptr_t)arg; i < clean_n; i += 3) {
        free(clean_ptrs[i]);
        clean_ptrs[i] = NULL;
    }
    return NULL;
}

static void case_clean(const char *arg)
{
    (void)arg;
    static const size_t sizes[] = {0,   1,    8,    9,    16,    24,     40,
                                   48,  100,  1000, 1016, 4096,  32760,  32768,
                                   100000, 3145728};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        clean_n = n > 100000 ? 20 : sizeof clean_ptrs / sizeof clean_ptrs[0];
        for (size_t i = 0; i < clean_n; i++) {
            clean_ptrs[i] = must(i % 4 == 3 ? calloc(1, n ? n : 1) : malloc(n ? n : 1));
            memset(clean_ptrs[i], (int)i, n);
        }
        clean_free_thirds((void *)(uintptr_t)1);
        pthread_t t;
        if (pthread_create(&t, NULL, clean_free_thirds, (void *)(uintptr_t)2) != 0)
            _exit(6);
        pthread_join(t, NULL);
        for (size_t i = 0; i < clean_n; i++)
            if (clean_ptrs[i]) { /* grown, then shrunk */
                clean_ptrs[i] = must(realloc(clean_ptrs[i], n + 24));
                memset(clean_ptrs[i], 7, n + 24);
                clean_ptrs[i] = must(realloc(clean_ptrs[i], n / 2 + 1));
            }
        for (size_t i = 0; i < clean_n; i++)
            if (!clean_ptrs[i] && i % 5 == 0)
                clean_ptrs[i] = must(malloc(n + 1));
        for (size_t i = 0; i < clean_n; i++)
            free(clean_ptrs[i]);
    }
    printf("clean: nothing reported\n");
}

static char lines[8][400];
static int nlines;

static void handler(const char *m, void *arg)
{
    (void)arg;
    if (nlines < 8)
        snprintf(lines[nlines], sizeof lines[0], "%s", m);
    nlines++;
}

static void expect_line(int line, const char *fmt, const void *p)
{
    char want[512];
    snprintf(want, sizeof want, fmt, p);
    th_checks++;
    if (nlines != 1 || strcmp(lines[0], want) != 0)
        th_fail(__FILE__, line, "%d handler calls, first \"%s\"; expected "
                "one, \"%s\"", nlines, nlines ? lines[0] : "", want);
    nlines = 0;
}

static void case_handler(const char *arg)
{
    int secure = strcmp(arg, "secure") == 0;
    void (*set_handler)(void (*)(const char *, void *), void *) =
        (void (*)(void (*)(const char *, void *), void *))dlsym(
            RTLD_DEFAULT, "mk_set_error_handler");
    if (!set_handler) {
        printf("mk_set_error_handler not found\n");
        exit(8);
    }
    set_handler(handler, NULL);
    static const size_t sizes[] = {8, 100, 1000, 32760};
    for (int s = 0; s < 4; s++) {
        char *keep = malloc(sizes[s]), *p = malloc(sizes[s]);
        if (!keep || !p)
            exit(9);
        free(p);
        free(p);
        expect_line(__LINE__, DOUBLE_FREE, p);
        /* p is on its list once: one of the next allocations, no repeat */
        char *got[32];
        int seen = 0;
        for (int i = 0; i < 32; i++) {
            got[i] = malloc(sizes[s]);
            if (!got[i])
                exit(9);
            seen += got[i] == p;
            for (int j = 0; j < i; j++)
                CHECK(got[i] != got[j]);
        }
        CHECK_EQ(seen, 1);
        for (int i = 0; i < 32; i++)
            free(got[i]);
        free(keep);
    }
    char stack[64];
    char *sp = launder(stack);
    CHECK_NULL(realloc(sp, 100));
    expect_line(__LINE__, "memkit: realloc(): invalid pointer %p (memkit never returned it)", sp);
    if (secure) {
        free(sp);
        expect_line(__LINE__, "memkit: free(): invalid pointer %p (memkit never returned it)", sp);
        free(static_array + 16);
        expect_line(__LINE__, "memkit: free(): invalid pointer %p (memkit never returned it)",
                    static_array + 16);
    }
    set_handler(NULL, NULL);
    exit(th_done());
}

static const struct {
    const char *name;
    void (*fn)(const char *arg);
} cases[] = {
    {"double-free", case_double_free},
    {"free-foreign", case_free_foreign},
    {"realloc-foreign", case_realloc_foreign},
    {"link", case_link},
    {"handler", case_handler},
    {"abab", case_abab},
    {"remote", case_remote},
    {"interior", case_interior},
    {"realloc-bad", case_realloc_bad},
    {"overflow", case_overflow},
    {"clean", case_clean},
};

static int rx_child(const char *name, const char *arg)
{
    rx_begin(name);
    int (*option_get)(const char *, long *) =
        (int (*)(const char *, long *))dlsym(RTLD_DEFAULT, "mk_option_get");
    long want = getenv("MEMKIT_SECURE") ? atol(getenv("MEMKIT_SECURE")) : 0;
    long secure = -1;
    if (getenv("HX_GLIBC") ? option_get != NULL
                           : !option_get || option_get("secure", &secure) != 0 ||
                                 secure != want) {
        rx_expect("not on the allocator, or not in the mode asked for");
        return 3;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (strcmp(cases[i].name, name) == 0) {
            cases[i].fn(arg);
            return 0;
        }
    rx_expect("no such case");
    return 2;
}

/* ---- the tests (in the parent) ------------------------------------------------ */

static void test_preloaded(void)
{
    CHECK_NOT_NULL(dlsym(RTLD_DEFAULT, "mk_ctx_current"));
    CHECK_NOT_NULL(getenv("LD_PRELOAD"));
}

/* The control of a misuse case: on glibc's malloc the same program dies
 * of SIGABRT too, with glibc's own report (so the case is a real misuse,
 * one glibc also catches). */
static void glibc_aborts(int line, const char *name, const char *arg)
{
    char out[4096], err[4096];
    th_checks++;
    int st = rx_run(name, arg, GLIBC, out, sizeof out, err, sizeof err);
    if (st == -1 || !WIFSIGNALED(st) || WTERMSIG(st) != SIGABRT || !err[0])
        th_fail(__FILE__, line, "%s %s on glibc: status 0x%x, stderr \"%s\", "
                "expected glibc's abort", name, arg, st, err);
}
#define GLIBC_ABORTS(name, arg) glibc_aborts(__LINE__, name, arg)

static void test_double_free(void)
{
    static const char *const sizes[] = {"8",    "24",    "100",   "1000",
                                        "4096", "20000", "32760", "65536",
                                        "3145728"};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        RX_DIES("double-free", sizes[i], DEFAULT);
        RX_DIES("double-free", sizes[i], SECURE);
    }
}

static void test_foreign(void)
{
    static const char *const what[] = {"stack", "static", "mmap"};
    for (int i = 0; i < 3; i++) {
        RX_DIES("realloc-foreign", what[i], DEFAULT);
        RX_DIES("realloc-foreign", what[i], SECURE);
        RX_DIES("free-foreign", what[i], SECURE);
    }
    /* the default mode too: every pointer that is in no segment of memkit's
     * (a fresh mmap page may fall between two of them) */
    RX_DIES("free-foreign", "stack", DEFAULT);
    RX_DIES("free-foreign", "static", DEFAULT);
    RX_DIES("free-foreign", "mmap", DEFAULT);
}

/* Double frees anywhere in a list, or after another thread's
 * free; interior pointers; realloc of a freed chunk. */
static void test_double_free_anywhere(void)
{
    static const char *const sizes[] = {"8", "24", "48", "100", "1000",
                                        "4096", "32760"};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        for (size_t m = 0; m < NMODES; m++)
            RX_DIES("abab", sizes[i], MODES[m]);
        GLIBC_ABORTS("abab", sizes[i]);
    }
    static const char *const remote[] = {"24:owner", "24:other", "1000:owner",
                                         "100000:owner", "100000:other",
                                         "3145728:owner", "3145728:other"};
    /* (no glibc control: its tcache catches a double free only in the
     * freeing thread's own cache) */
    for (size_t i = 0; i < sizeof remote / sizeof remote[0]; i++)
        for (size_t m = 0; m < NMODES; m++)
            RX_DIES("remote", remote[i], MODES[m]);
}

static void test_not_a_chunk(void)
{
    static const char *const interior[] = {"48:16", "24:8", "1000:100",
                                           "100000:4096", "3145728:4096",
                                           "9437184:5242880", "48:16:other",
                                           "1000:100:other"};
    for (size_t i = 0; i < sizeof interior / sizeof interior[0]; i++) {
        for (size_t m = 0; m < NMODES; m++)
            RX_DIES("interior", interior[i], MODES[m]);
        GLIBC_ABORTS("interior", interior[i]);
    }
    RX_DIES("realloc-bad", "interior:48", DEFAULT);
    RX_DIES("realloc-bad", "freed:48", DEFAULT);
    RX_DIES("realloc-bad", "freed:48", SECURE);
}

/* Secure mode: a write past the end of a chunk into its neighbour. */
static void test_overflow_secure(void)
{
    static const char *const args[] = {"8:self", "8:next", "24:self",
                                       "24:next", "100:next", "1000:self",
                                       "32760:next"};
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) {
        RX_DIES("overflow", args[i], SECURE);
        if (strstr(args[i], ":self")) /* (neighbours: not with SECURE=2) */
            RX_DIES("overflow", args[i], SECURE2);
    }
}

static void test_correct_program_quiet(void)
{
    for (size_t m = 0; m < NMODES; m++)
        RX_LIVES("clean", "", MODES[m]);
    RX_LIVES("clean", "", GLIBC);
}

static void test_overwritten_link_secure(void)
{
    static const char *const args[] = {
        "24:forge:head", "100:forge:head", "1000:forge:head",
        "16384:forge:head", "100:zero:head", "100:forge:deep",
        "48:zero:deep",
    };
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++)
        RX_DIES("link", args[i], SECURE);
}

static void test_handler(void)
{
    RX_LIVES("handler", "default", DEFAULT);
    RX_LIVES("handler", "secure", SECURE);
}

int main(int argc, char **argv)
{
    if (argc > 2)
        return rx_child(argv[1], argv[2]);
    RUN(test_preloaded);
    RUN(test_double_free);
    RUN(test_foreign);
    RUN(test_overwritten_link_secure);
    RUN(test_double_free_anywhere);
    RUN(test_not_a_chunk);
    RUN(test_overflow_secure);
    RUN(test_correct_program_quiet);
    RUN(test_handler);
    return th_done();
}
