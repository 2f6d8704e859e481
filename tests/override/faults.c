/* SPDX-License-Identifier: MIT */
/*
 * override/faults.c - a whole program on the malloc drop-in survives an
 * OS request that fails at any point: it runs under
 * LD_PRELOAD=libmemkit-malloc-faults.so (the drop-in built with
 * MK_CONFIG_FAULTS: MEMKIT_FAIL_OS=N makes memkit's N-th OS request fail,
 * N+ every request from the N-th on; requests are reserve, commit,
 * decommit, resize).
 *
 * `faults work` is the program: a plain C program (libc only) that uses the
 * malloc family the way programs do, on a thread of its own: malloc of
 * small, large (64 KiB .. 1 MiB) and huge (2-3 MiB) sizes, calloc, realloc
 * growing a chunk from 100 bytes to 3 MiB and back, posix_memalign /
 * aligned_alloc / memalign, strdup, frees of half the chunks,
 * malloc_trim(0), more growth; then another thread that allocates and
 * frees.  Each malloc that returns NULL must
 * have set errno to ENOMEM; a realloc that fails must leave its chunk
 * intact; every chunk it got holds its fill pattern until it frees it.  At
 * the end it frees everything, calls malloc_trim(0), and prints one line:
 * how many calls failed, whether any broke a rule, memkit's committed and
 * bookkeeping bytes (mk_process_stats, found with dlsym), and whether a
 * final probe (a fresh 64 MiB malloc after the trim, which must map) was
 * refused.
 *
 * `faults` (no argument) is the driver: it runs `faults work` with no
 * failure, then for N = 1, 2, ... with MEMKIT_FAIL_OS=N and with
 * MEMKIT_FAIL_OS=N+, and requires each run to exit normally (status 0,
 * nothing on stderr) with no rule broken, and, in the single-failure runs,
 * after everything was freed and trimmed, no more committed memory held by
 * no context than the run without failure (bookkeeping aside; one OS page
 * of slack, see below).  It stops at the first N whose N+ run had its probe
 * granted: no request from the N-th on was ever made, so N - 1 is the
 * number of requests the program makes and every one of them has failed
 * once (and from there on) in some run.
 */
#include "harness.h"
#include "wrong/reexec.h"

#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>

/* mk_process_stats' figures (memkit.h's struct, repeated: this program
 * does not see memkit's header) */
typedef struct figures {
    size_t os_reserved, os_committed, os_calls, segments, meta_bytes,
        purged_bytes, purge_passes;
} figures;
/* and mk_ctx_stats' */
typedef struct ctx_figures {
    size_t contexts, blocks, bytes_reserved, bytes_used, bytes_free, chunks;
} ctx_figures;

enum { MAXHELD = 4096 };

typedef struct held_chunk {
    char *p;
    size_t n;
    uint64_t id;
} held_chunk;

static held_chunk held[MAXHELD];
static int nheld;
static uint64_t next_id = 1;
static long fails, broken;

static void got(char *p, size_t n)
{
    if (nheld < MAXHELD) {
        held[nheld] = (held_chunk){p, n, next_id++};
        th_fill(p, n, held[nheld].id);
        nheld++;
    } else {
        free(p);
    }
}

static void *failed(void)
{
    fails++;
    if (errno != ENOMEM)
        broken++;
    return NULL;
}

static char *m(size_t n)
{
    errno = 0;
    char *p = malloc(n);
    if (!p)
        return failed();
    got(p, n);
    return p;
}

static void drop(int i)
{
    if (th_verify(held[i].p, held[i].n, held[i].id) != (size_t)-1)
        broken++;
    free(held[i].p);
    held[i] = held[--nheld];
}

static void *thread_work(void *arg)
{
    (void)arg;
    char *p[64];
    for (int i = 0; i < 64; i++) {
        errno = 0;
        p[i] = malloc(32 + (size_t)i * 100);
        if (!p[i])
            failed();
        else
            memset(p[i], i, 32 + (size_t)i * 100);
    }
    for (int i = 0; i < 64; i++)
        free(p[i]);
    return NULL;
}

static void work(void)
{
    static const size_t sizes[] = {8,     24,    100,    1000,    5000,
                                   20000, 65536, 300000, 1 << 20, 2 << 20,
                                   3 << 20};
    for (int r = 0; r < 3; r++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            if (r == 0 || sizes[i] < (1 << 20))
                m(sizes[i]);
    for (int i = 0; i < 1500; i++)
        m(16 + (size_t)(i % 50) * 24);

    errno = 0;
    char *z = calloc(1000, 70);
    if (!z)
        failed();
    else if (!th_all_zero(z, 70000))
        broken++;
    else
        got(z, 70000);

    /* realloc through every range and back */
    char *r = m(100);
    if (r) {
        int i = nheld - 1;
        static const size_t steps[] = {5000, 70000, 3 << 20, 200000, 50};
        for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
            errno = 0;
            char *q = realloc(held[i].p, steps[s]);
            if (!q) {
                failed();
                if (th_verify(held[i].p, held[i].n, held[i].id) != (size_t)-1)
                    broken++;
                continue;
            }
            size_t keep = held[i].n < steps[s] ? held[i].n : steps[s];
            if (th_verify(q, keep, held[i].id) != (size_t)-1)
                broken++;
            held[i].p = q;
            held[i].n = steps[s];
            held[i].id = next_id++;
            th_fill(q, steps[s], held[i].id);
        }
    }

    /* aligned */
    static const size_t aligns[] = {64, 4096, 65536, 1 << 21};
    for (int i = 0; i < 4; i++) {
        void *p = NULL;
        int e = posix_memalign(&p, aligns[i], 3000 + (size_t)i * 50000);
        if (e) {
            fails++;
            if (e != ENOMEM)
                broken++;
        } else {
            if ((uintptr_t)p % aligns[i])
                broken++;
            got(p, 3000 + (size_t)i * 50000);
        }
        errno = 0;
        p = aligned_alloc(aligns[i], aligns[i] * 2);
        if (!p)
            failed();
        else
            got(p, aligns[i] * 2);
        errno = 0;
        p = memalign(aligns[i], 100);
        if (!p)
            failed();
        else
            got(p, 100);
    }
    errno = 0;
    char *d = strdup("a string the program keeps");
    if (!d)
        failed();
    else
        got(d, strlen(d) + 1);

    /* free half, give memory back, grow again */
    for (int i = nheld - 1; i >= 0; i -= 2)
        drop(i);
    malloc_trim(0);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        m(sizes[i] / 2 + 1);
    for (int i = 0; i < 500; i++)
        m(16 + (size_t)(i % 50) * 24);
}

/* The program's work runs on a thread of its own, whose heap is deleted
 * when it exits having freed everything: after that the only pages a heap
 * keeps are those of the main thread's heap, which holds what the C
 * library allocated for itself (thread set-up), so the committed memory
 * that no context holds is comparable from run to run.  (The worker
 * starts no thread: the C library would keep that thread's set-up in the
 * worker's heap, which would then outlive the worker, orphaned.) */
static void *worker(void *arg)
{
    (void)arg;
    work();
    while (nheld)
        drop(nheld - 1);
    return NULL;
}

static int run_work(void)
{
    void (*stats)(figures *) =
        (void (*)(figures *))dlsym(RTLD_DEFAULT, "mk_process_stats");
    void *(*current)(void) =
        (void *(*)(void))dlsym(RTLD_DEFAULT, "mk_ctx_current");
    int (*ctx_stats)(const void *, ctx_figures *, int) =
        (int (*)(const void *, ctx_figures *, int))dlsym(RTLD_DEFAULT,
                                                         "mk_ctx_stats");
    if (!stats || !current || !ctx_stats) {
        printf("not on memkit\n");
        return 2;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) == 0)
        pthread_join(t, NULL);
    else
        worker(NULL); /* (no thread: the comparison is then looser) */
    /* another thread that allocates and frees (its heap is made and
     * given back) */
    if (pthread_create(&t, NULL, thread_work, NULL) == 0)
        pthread_join(t, NULL);
    malloc_trim(0);
    malloc_trim(0); /* what a failed decommit kept, the second one takes */
    figures f;
    ctx_figures h = {0};
    stats(&f);
    ctx_stats(current(), &h, 1);
    /* the probe: a fresh mapping, every cached one having been trimmed */
    errno = 0;
    void *probe = malloc((size_t)64 << 20);
    int refused = probe == NULL;
    free(probe);
    /* committed memory that no context holds: the thread's heap keeps
     * pages (one per class in use, whose size depends on the order the
     * heap grew in), memkit's bookkeeping is never given back */
    printf("fails %ld broken %ld unheld %zu probe %s\n", fails, broken,
           f.os_committed - f.meta_bytes - h.bytes_reserved,
           refused ? "refused" : "granted");
    return broken ? 1 : 0;
}

/* ---- the driver -------------------------------------------------------------- */

typedef struct outcome {
    int ok;
    long fails, broken;
    size_t unheld;
    int refused;
} outcome;

static outcome run_with(const char *fail_os, char *out, size_t cap)
{
    char env_var[64];
    const char *env[2] = {NULL, NULL};
    if (fail_os) {
        snprintf(env_var, sizeof env_var, "MEMKIT_FAIL_OS=%s", fail_os);
        env[0] = env_var;
    }
    char err[4096];
    outcome o = {0};
    int st = rx_run("work", "-", env, out, cap, err, sizeof err);
    char word[16] = "";
    if (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && !err[0]) {
        const char *line = strstr(out, "fails ");
        if (line && sscanf(line, "fails %ld broken %ld unheld %zu probe %15s",
                           &o.fails, &o.broken, &o.unheld, word) == 4)
            o.ok = 1;
    }
    o.refused = strcmp(word, "refused") == 0;
    if (!o.ok)
        th_fail(__FILE__, __LINE__, "MEMKIT_FAIL_OS=%s: status 0x%x (%s %d), "
                "stderr \"%s\", stdout \"%s\"", fail_os ? fail_os : "(none)",
                st, st != -1 && WIFSIGNALED(st) ? "signal" : "exit",
                st == -1 ? -1 : WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st),
                err, out);
    return o;
}

static void test_every_request(void)
{
    char out[4096];
    outcome base = run_with(NULL, out, sizeof out);
    REQUIRE(base.ok);
    CHECK_EQ(base.fails, 0L);
    CHECK_EQ(base.refused, 0);
    long n, errors = 0, with_fails = 0;
    for (n = 1; n < 5000 && errors < 10; n++) {
        char arg[32];
        snprintf(arg, sizeof arg, "%ld", n);
        outcome one = run_with(arg, out, sizeof out);
        snprintf(arg, sizeof arg, "%ld+", n);
        outcome from = run_with(arg, out, sizeof out);
        th_checks += 2;
        if (!one.ok || !from.ok) {
            errors++;
            continue;
        }
        with_fails += one.fails > 0;
        /* (from the n-th on, decommits fail too: memory stays committed
         * by design, so only the single failure is held to this; one OS
         * page of slack: free units that share an OS page with a page in
         * use stay committed, and which ones do depends on the layout,
         * which a failure changes; api/faults.c checks contexts exactly) */
        if (one.unheld > base.unheld + 4096) {
            th_fail(__FILE__, __LINE__, "MEMKIT_FAIL_OS=%ld: %zu bytes "
                    "committed and held by no context after freeing "
                    "everything, %zu without failure", n, one.unheld,
                    base.unheld);
            errors++;
        }
        if (!from.refused)
            break; /* no request from the n-th on: all have been covered */
    }
    printf("  the program makes %ld OS requests; each failed alone (%ld "
           "runs saw a call fail) and from there on\n", n - 1, with_fails);
    CHECK_GT(n, 10L);
    CHECK_GT(with_fails, 0L);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "work") == 0)
        return run_work();
    RUN(test_every_request);
    return th_done();
}
