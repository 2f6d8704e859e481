/*
 * wrong/contexts.c - misuse of a context as a whole: stale handles and
 * contexts shared by threads.  Built against the checking library
 * (wrong_contexts) and the release library (wrong_contexts_release).
 * Death tests: a forked child commits the error and must die of SIGABRT
 * after exactly one line on stderr (and, in the release build, the hint
 * line its first report adds):
 *  - a context used after mk_ctx_delete, in both builds: mk_alloc (every
 *    kind), mk_alloc_aligned, a second mk_ctx_delete, mk_ctx_reset,
 *    mk_ctx_switch, and every other call that takes a context ("memkit:
 *    FN(): use of deleted context P (context "NAME")"); a child deleted
 *    with its parent; the name reported even when the program's string is
 *    gone (copied, 31 bytes at most);
 *  - records are reused late: the checking build makes no new context on
 *    a deleted one's record (so the stale handle stays reported), the
 *    release build reuses it at the next mk_ctx_new of its kind (the old
 *    handle *is* the new context), unless MEMKIT_CTX_QUARANTINE keeps
 *    some, and then a double delete is reported there too;
 *  - the checking build only: a second thread inside a context ("memkit:
 *    FN(): context "NAME" used by thread A while thread B is inside it
 *    (...)"), provoked deterministically: one thread parked in a reset or
 *    delete callback, the other allocating, freeing, resetting, deleting
 *    or asking for figures; mk_ctx_switch to a context another thread
 *    owns; and what must stay quiet: a callback that uses its own
 *    context, two threads taking turns under a lock, a hand-over with
 *    mk_ctx_set_owner, frees from another thread;
 *  - the checking build only: at exit, a line for each context never
 *    deleted that was made with MK_CTX_REPORT_LEAKS ("memkit: at exit:
 *    context "NAME" (KIND) never deleted: N chunks (B bytes)"), for all
 *    with MEMKIT_REPORT_CONTEXTS=all, none with off; the release build
 *    prints nothing.
 */
#include "harness.h"

#include <memkit.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#define HINT "memkit: (the release build reports what it meets on its " \
             "way; link libmemkit-check, or run under Valgrind, to find " \
             "misuse where it happens)\n"

static int checking;
/* A page shared with the children: a child that knows what its report
 * will say (thread ids) writes the line here before it errs. */
static char *told;

static long tid(void) { return (long)syscall(SYS_gettid); }

/* The child runs fn(arg) and must die of SIGABRT with the line @want (or,
 * @want NULL, the one it wrote to `told`), plus the release build's hint. */
static void dies_with(const char *file, int line, const char *what,
                      void (*fn)(void *), void *arg, const char *want)
{
    char out[4096], exp[1024];
    told[0] = '\0';
    th_checks++;
    int st = th_run_child(fn, arg, out, sizeof out);
    snprintf(exp, sizeof exp, "%s\n%s", want ? want : told,
             checking ? "" : HINT);
    if (st == -1)
        th_fail(file, line, "%s: could not fork", what);
    else if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGABRT)
        th_fail(file, line, "%s: child %s %d, expected SIGABRT; stderr \"%s\"",
                what, WIFSIGNALED(st) ? "died of signal" : "exited with",
                WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), out);
    else if (strcmp(out, exp) != 0)
        th_fail(file, line, "%s: stderr is \"%s\", expected \"%s\"", what, out,
                exp);
}
#define DIES_WITH(fn, arg, want) dies_with(__FILE__, __LINE__, #fn, fn, arg, want)

static void lives_quietly(const char *file, int line, const char *what,
                          void (*fn)(void *), void *arg)
{
    char out[4096];
    th_checks++;
    int st = th_run_child(fn, arg, out, sizeof out);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || out[0])
        th_fail(file, line, "%s: child status 0x%x, stderr \"%s\"; expected "
                "exit 0 and nothing printed", what, st, out);
}
#define LIVES_QUIETLY(fn, arg) lives_quietly(__FILE__, __LINE__, #fn, fn, arg)

static const char *deleted_msg(const char *fn, const void *ctx, const char *name)
{
    static char buf[512];
    snprintf(buf, sizeof buf,
             "memkit: %s(): use of deleted context %p (context \"%s\")", fn,
             ctx, name);
    return buf;
}

/* ---- stale handles ---------------------------------------------------------- */

static void alloc_10(void *c) { (void)mk_alloc(c, 10); }
static void alloc_aligned_10(void *c) { (void)mk_alloc_aligned(c, 10, 64); }
static void strdup_it(void *c) { (void)mk_strdup(c, "x"); }
static void delete_it(void *c) { mk_ctx_delete(c); }
static void reset_it(void *c) { mk_ctx_reset(c); }
static void switch_to(void *c) { (void)mk_ctx_switch(c); }
static void name_of(void *c) { (void)mk_ctx_name(c); }
static void parent_of(void *c) { (void)mk_ctx_parent(c); }
static void kind_of(void *c) { (void)mk_ctx_kind(c); }
static void trim_it(void *c) { (void)mk_ctx_trim(c); }
static void own_it(void *c) { mk_ctx_set_owner(c); }
static void limit_it(void *c) { (void)mk_ctx_set_limit(c, 1 << 20); }
static void limit_of(void *c) { (void)mk_ctx_limit(c, NULL, NULL); }
static void unparent_it(void *c) { (void)mk_ctx_set_parent(c, NULL); }
static void stats_of(void *c)
{
    mk_stats st;
    (void)mk_ctx_stats(c, &st, 1);
}
static void print_it(void *c) { mk_ctx_stats_print(c, stdout); }
static void json_it(void *c) { (void)mk_ctx_stats_json(c, stdout); }
static void noop(void *arg) { (void)arg; }
static void on_reset_it(void *c) { (void)mk_ctx_on_reset(c, noop, NULL); }
static void child_of(void *c) { (void)mk_ctx_new(c, "child", MK_GENERAL, NULL); }
static void adopt_into(void *c)
{
    /* (another kind: in the release build a GENERAL one could take the
     * deleted record, and be the stale handle) */
    mk_ctx *other = mk_ctx_new(NULL, "other", MK_BUMP, NULL);
    (void)mk_ctx_set_parent(other, c);
}

/* A deleted context, with what its record held: pages, children,
 * callbacks. */
static mk_ctx *deleted(const char *name, mk_kind kind)
{
    mk_ctx_opts so = {.chunk_size = 32};
    mk_ctx *c = mk_ctx_new(NULL, name, kind, kind == MK_SLAB ? &so : NULL);
    if (!c)
        return NULL;
    for (int i = 0; i < 100; i++)
        (void)mk_alloc(c, 24);
    (void)mk_ctx_new(c, "kid", MK_GENERATION, NULL);
    (void)mk_ctx_on_reset(c, noop, NULL);
    mk_ctx_delete(c);
    return c;
}

static void test_use_after_delete(void)
{
    mk_ctx *a = deleted("a", MK_GENERAL);
    REQUIRE_NOT_NULL(a);
    DIES_WITH(alloc_10, a, deleted_msg("mk_alloc", a, "a"));
    DIES_WITH(strdup_it, a, deleted_msg("mk_alloc", a, "a"));
    DIES_WITH(alloc_aligned_10, a, deleted_msg("mk_alloc_aligned", a, "a"));
    DIES_WITH(delete_it, a, deleted_msg("mk_ctx_delete", a, "a"));
    DIES_WITH(reset_it, a, deleted_msg("mk_ctx_reset", a, "a"));
    DIES_WITH(switch_to, a, deleted_msg("mk_ctx_switch", a, "a"));
    DIES_WITH(name_of, a, deleted_msg("mk_ctx_name", a, "a"));
    DIES_WITH(parent_of, a, deleted_msg("mk_ctx_parent", a, "a"));
    DIES_WITH(kind_of, a, deleted_msg("mk_ctx_kind", a, "a"));
    DIES_WITH(trim_it, a, deleted_msg("mk_ctx_trim", a, "a"));
    DIES_WITH(own_it, a, deleted_msg("mk_ctx_set_owner", a, "a"));
    DIES_WITH(limit_it, a, deleted_msg("mk_ctx_set_limit", a, "a"));
    DIES_WITH(limit_of, a, deleted_msg("mk_ctx_limit", a, "a"));
    DIES_WITH(unparent_it, a, deleted_msg("mk_ctx_set_parent", a, "a"));
    DIES_WITH(adopt_into, a, deleted_msg("mk_ctx_set_parent", a, "a"));
    DIES_WITH(stats_of, a, deleted_msg("mk_ctx_stats", a, "a"));
    DIES_WITH(print_it, a, deleted_msg("mk_ctx_stats_print", a, "a"));
    DIES_WITH(json_it, a, deleted_msg("mk_ctx_stats_json", a, "a"));
    DIES_WITH(on_reset_it, a, deleted_msg("mk_ctx_on_reset", a, "a"));
    DIES_WITH(child_of, a, deleted_msg("mk_ctx_new", a, "a"));
}

/* Every kind's allocation path meets the poisoned record (their inline
 * paths test the kind first). */
static void test_every_kind(void)
{
    const struct { mk_kind kind; const char *name; } kinds[] = {
        {MK_GENERAL, "general"}, {MK_SLAB, "slab"},
        {MK_GENERATION, "generation"}, {MK_BUMP, "bump"}};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        mk_ctx *c = deleted(kinds[k].name, kinds[k].kind);
        REQUIRE_NOT_NULL(c);
        DIES_WITH(alloc_10, c, deleted_msg("mk_alloc", c, kinds[k].name));
        DIES_WITH(delete_it, c, deleted_msg("mk_ctx_delete", c, kinds[k].name));
    }
}

/* A child goes with its parent: its handle is as stale. */
static void test_child_of_deleted(void)
{
    mk_ctx *p = mk_ctx_new(NULL, "parent", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(p);
    mk_ctx *c = mk_ctx_new(p, "child", MK_BUMP, NULL);
    REQUIRE_NOT_NULL(c);
    mk_ctx *r = mk_ctx_new(NULL, "reset", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(r);
    mk_ctx *rc = mk_ctx_new(r, "reset-child", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(rc);
    mk_ctx_delete(p);
    mk_ctx_reset(r); /* a reset deletes the children too */
    DIES_WITH(alloc_10, c, deleted_msg("mk_alloc", c, "child"));
    DIES_WITH(delete_it, rc, deleted_msg("mk_ctx_delete", rc, "reset-child"));
    mk_ctx_delete(r);
}

/* The report names the context even when the program's string is gone:
 * the record keeps a copy, 31 bytes at most. */
static void test_name_copied(void)
{
    char *name = malloc(64);
    REQUIRE_NOT_NULL(name);
    snprintf(name, 64, "a name the program frees after the delete, long");
    mk_ctx *c = mk_ctx_new(NULL, name, MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    mk_ctx_delete(c);
    memset(name, 'X', 63);
    free(name);
    DIES_WITH(alloc_10, c,
              deleted_msg("mk_alloc", c, "a name the program frees after "));
}

/* Records are reused late.  The checking build gives a new context of the
 * same kind another record (the stale handle stays reported); the release
 * build reuses the record at once by default (no check can tell the old
 * handle from the new context then), or after MEMKIT_CTX_QUARANTINE
 * others. */
static void test_reuse(void)
{
    mk_ctx *a = mk_ctx_new(NULL, "a", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(a);
    mk_ctx_delete(a);
    /* (older deleted records, if any, are reused first: FIFO) */
    enum { N = 64 };
    mk_ctx *b[N];
    int reused = -1;
    for (int i = 0; i < N; i++) {
        b[i] = mk_ctx_new(NULL, "b", MK_GENERAL, NULL);
        REQUIRE_NOT_NULL(b[i]);
        CHECK_NOT_NULL(mk_alloc(b[i], 10));
        if (b[i] == a && reused < 0)
            reused = i;
    }
    if (checking) {
        CHECK_EQ(reused, -1);
        DIES_WITH(alloc_10, a, deleted_msg("mk_alloc", a, "a"));
        DIES_WITH(delete_it, a, deleted_msg("mk_ctx_delete", a, "a"));
    } else {
        CHECK_GE(reused, 0); /* documented: the stale handle is b[reused] */
    }
    for (int i = 0; i < N; i++)
        mk_ctx_delete(b[i]);

    /* with a quarantine of 4, the release build too keeps a deleted
     * record poisoned while 4 newer ones wait */
    long was = -1;
    REQUIRE(mk_option_get("ctx_quarantine", &was) == 0);
    CHECK_EQ(was, checking ? 65536L : 0L);
    CHECK_EQ(mk_option_set("ctx_quarantine", 4), 0);
    mk_ctx *first = mk_ctx_new(NULL, "first", MK_GENERATION, NULL);
    REQUIRE_NOT_NULL(first);
    mk_ctx_delete(first);
    mk_ctx *news[4];
    for (int i = 0; i < 4; i++) {
        news[i] = mk_ctx_new(NULL, "new", MK_GENERATION, NULL);
        REQUIRE_NOT_NULL(news[i]);
        CHECK(news[i] != first);
    }
    DIES_WITH(delete_it, first, deleted_msg("mk_ctx_delete", first, "first"));
    for (int i = 0; i < 4; i++)
        mk_ctx_delete(news[i]);
    CHECK_EQ(mk_option_set("ctx_quarantine", was), 0);
}

/* ---- two threads in one context (checking build) ------------------------------ */

/* The parked thread: inside @ctx (a callback of its reset or delete)
 * until the process dies. */
typedef struct shared {
    mk_ctx *ctx;
    void *chunk;
    int delete;
    atomic_int parked;
    long parked_tid;
} shared;

static void park(void *arg)
{
    shared *s = arg;
    s->parked_tid = tid();
    atomic_store(&s->parked, 1);
    for (;;)
        pause(); /* the other thread's report ends the process */
}

static void *enter_and_park(void *arg)
{
    shared *s = arg;
    if (s->delete)
        mk_ctx_delete(s->ctx);
    else
        mk_ctx_reset(s->ctx);
    return NULL;
}

/* In the child: a thread parks inside a reset (or delete) of the context;
 * then this thread calls @use on it. */
static void race(shared *s, void (*use)(shared *), const char *fn)
{
    s->ctx = mk_ctx_new(NULL, "shared", MK_GENERAL, NULL);
    s->chunk = mk_alloc(s->ctx, 100);
    mk_ctx_on_reset(s->ctx, park, s);
    pthread_t t;
    if (pthread_create(&t, NULL, enter_and_park, s) != 0)
        _exit(9);
    while (!atomic_load(&s->parked))
        usleep(1000);
    snprintf(told, 4096,
             "memkit: %s(): context \"shared\" used by thread %ld while "
             "thread %ld is inside it (one thread at a time, or a lock)",
             fn, tid(), s->parked_tid);
    use(s);
}

static void use_alloc(shared *s) { (void)mk_alloc(s->ctx, 10); }
static void use_free(shared *s) { mk_free(s->chunk); }
static void use_realloc(shared *s)
{
    void *q = mk_realloc(s->chunk, 1000);
    (void)q;
}
static void use_reset(shared *s) { mk_ctx_reset(s->ctx); }
static void use_delete(shared *s) { mk_ctx_delete(s->ctx); }
static void use_stats(shared *s)
{
    mk_stats st;
    (void)mk_ctx_stats(s->ctx, &st, 0);
}

static void race_alloc(void *a) { race(a, use_alloc, "mk_alloc"); }
static void race_free(void *a) { race(a, use_free, "mk_free"); }
static void race_realloc(void *a) { race(a, use_realloc, "mk_realloc"); }
static void race_reset(void *a) { race(a, use_reset, "mk_ctx_reset"); }
static void race_delete(void *a) { race(a, use_delete, "mk_ctx_delete"); }
static void race_stats(void *a) { race(a, use_stats, "mk_ctx_stats"); }

static void test_two_threads(void)
{
    if (!checking) {
        th_note("the release build does not look for a second thread");
        return;
    }
    shared s = {0};
    DIES_WITH(race_alloc, &s, NULL);
    DIES_WITH(race_free, &s, NULL);
    DIES_WITH(race_realloc, &s, NULL);
    DIES_WITH(race_reset, &s, NULL);
    DIES_WITH(race_delete, &s, NULL);
    DIES_WITH(race_stats, &s, NULL);
    s.delete = 1; /* parked inside a delete this time */
    DIES_WITH(race_alloc, &s, NULL);
}

static void *make_theirs(void *arg)
{
    *(mk_ctx **)arg = mk_ctx_new(NULL, "theirs", MK_GENERAL, NULL);
    return NULL;
}

static void switch_to_theirs(void *arg)
{
    (void)arg;
    mk_ctx *theirs = NULL;
    pthread_t t;
    if (pthread_create(&t, NULL, make_theirs, &theirs) != 0)
        _exit(9);
    pthread_join(t, NULL);
    snprintf(told, 4096,
             "memkit: mk_ctx_switch(): context \"theirs\" is owned by another "
             "thread, not by thread %ld (mk_ctx_set_owner hands a context "
             "over)", tid());
    (void)mk_ctx_switch(theirs);
}

static void test_switch_to_other_threads(void)
{
    if (!checking) {
        th_note("the release build does not look for the owner");
        return;
    }
    DIES_WITH(switch_to_theirs, NULL, NULL);
}

/* ---- what stays quiet ------------------------------------------------------------ */

static void alloc_in(void *c) { (void)mk_alloc(c, 32); }

/* A callback that uses its own context: the same thread, nested. */
static void nested_use(void *arg)
{
    (void)arg;
    mk_ctx *c = mk_ctx_new(NULL, "nested", MK_GENERAL, NULL);
    mk_ctx_on_reset(c, alloc_in, c);
    mk_ctx_reset(c);
    mk_ctx_on_reset(c, alloc_in, c);
    mk_ctx_delete(c);
}

typedef struct turns {
    mk_ctx *ctx;
    pthread_mutex_t lock;
} turns;

static void *take_turns(void *arg)
{
    turns *t = arg;
    for (int i = 0; i < 2000; i++) {
        pthread_mutex_lock(&t->lock);
        void *p = mk_alloc(t->ctx, 16 + (size_t)(i % 200));
        if (i % 3)
            mk_free(p);
        if (i % 500 == 499)
            mk_ctx_reset(t->ctx);
        pthread_mutex_unlock(&t->lock);
    }
    return NULL;
}

/* Two threads sharing a context under their own lock. */
static void shared_with_lock(void *arg)
{
    (void)arg;
    turns t = {mk_ctx_new(NULL, "locked", MK_GENERAL, NULL),
               PTHREAD_MUTEX_INITIALIZER};
    pthread_t a, b;
    pthread_create(&a, NULL, take_turns, &t);
    pthread_create(&b, NULL, take_turns, &t);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    mk_ctx_delete(t.ctx);
}

static void *switch_and_use(void *arg)
{
    mk_ctx *c = arg;
    mk_ctx_set_owner(c); /* the hand-over */
    mk_ctx *prev = mk_ctx_switch(c);
    (void)mk_alloc(mk_ctx_current(), 64);
    mk_ctx_switch(prev);
    return NULL;
}

static void *free_in_thread(void *p)
{
    mk_free(p);
    return NULL;
}

/* A context handed over with mk_ctx_set_owner, then switched to; chunks
 * freed by another thread. */
static void handed_over(void *arg)
{
    (void)arg;
    mk_ctx *c = mk_ctx_new(NULL, "handed", MK_GENERAL, NULL);
    void *p = mk_alloc(c, 100);
    pthread_t t;
    pthread_create(&t, NULL, switch_and_use, c);
    pthread_join(t, NULL);
    pthread_create(&t, NULL, free_in_thread, p);
    pthread_join(t, NULL);
    mk_ctx_set_owner(c); /* back to this thread, which deletes it */
    mk_ctx_delete(c);
}

static void test_quiet(void)
{
    LIVES_QUIETLY(nested_use, NULL);
    LIVES_QUIETLY(shared_with_lock, NULL);
    LIVES_QUIETLY(handed_over, NULL);
}

/* ---- contexts alive at exit ------------------------------------------------------ */

typedef struct at_exit {
    long mode; /* report_contexts; -1: the default */
} at_exit;

/* The child makes contexts it never deletes, then exits normally (the
 * report is a destructor's: _exit would skip it). */
static void leave_alive(void *arg)
{
    at_exit *e = arg;
    if (e->mode >= 0 && mk_option_set("report_contexts", e->mode) != 0)
        _exit(7);
    mk_ctx *kept = mk_ctx_new(NULL, "kept", MK_GENERAL,
                              &(mk_ctx_opts){.flags = MK_CTX_REPORT_LEAKS});
    (void)mk_alloc(kept, 10);
    (void)mk_alloc(kept, 20);
    mk_ctx *quiet = mk_ctx_new(kept, "quiet", MK_BUMP, NULL);
    (void)mk_alloc(quiet, 5);
    (void)mk_alloc(mk_ctx_current(), 100); /* the thread's heap: memkit's */
    mk_ctx *gone = mk_ctx_new(NULL, "gone", MK_GENERAL,
                              &(mk_ctx_opts){.flags = MK_CTX_REPORT_LEAKS});
    mk_ctx_delete(gone);
    fflush(stdout);
    exit(0);
}

static void test_alive_at_exit(void)
{
    static const char kept[] =
        "memkit: at exit: context \"kept\" (general) never deleted: 2 chunks "
        "(30 bytes)\n";
    static const char quiet[] =
        "memkit: at exit: context \"quiet\" (bump) never deleted: 1 chunk "
        "(5 bytes)\n";
    const struct { long mode; const char *want; } cases[] = {
        {-1, checking ? kept : ""},
        {1, checking ? kept : ""},
        {2, NULL}, /* both, in either order */
        {0, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        at_exit e = {cases[i].mode};
        char out[4096], both[512];
        th_checks++;
        int st = th_run_child(leave_alive, &e, out, sizeof out);
        const char *want = cases[i].want;
        if (!want) {
            snprintf(both, sizeof both, "%s%s", quiet, kept);
            want = !checking ? "" : strncmp(out, quiet, strlen(quiet)) == 0
                                        ? both
                                        : (snprintf(both, sizeof both, "%s%s",
                                                    kept, quiet),
                                           both);
        }
        if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 ||
            strcmp(out, want) != 0)
            th_fail(__FILE__, __LINE__, "report_contexts %ld: status 0x%x, "
                    "stderr \"%s\", expected \"%s\"", cases[i].mode, st, out,
                    want);
    }
}

int main(void)
{
    checking = mk_checking();
    told = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                -1, 0);
    if (told == MAP_FAILED)
        return 2;
    RUN(test_use_after_delete);
    RUN(test_every_kind);
    RUN(test_child_of_deleted);
    RUN(test_name_copied);
    RUN(test_reuse);
    RUN(test_two_threads);
    RUN(test_switch_to_other_threads);
    RUN(test_quiet);
    RUN(test_alive_at_exit);
    return th_done();
}
