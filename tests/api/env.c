/* SPDX-License-Identifier: MIT */
/*
 * api/env.c - the environment variables of the options, each read by a fresh
 * process (respawn.h: this program again, with MEMKIT_* set as the case
 * says and nothing inherited): MEMKIT_PURGE, MEMKIT_PURGE_DELAY_MS,
 * MEMKIT_PURGE_THREAD, MEMKIT_VERBOSE, MEMKIT_STATS and MEMKIT_STATS_FILE.
 *
 * What is proved:
 *  - with nothing set, the documented defaults, and memkit prints nothing;
 *  - each word and number MEMKIT_PURGE takes gives its mode through
 *    mk_option_get in the child; MEMKIT_PURGE_DELAY_MS gives 0, -1, 250;
 *    MEMKIT_PURGE_THREAD=off gives 0;
 *  - words in any case (Unmap, DONTNEED) and the usual booleans (yes,
 *    true, no, false) are accepted;
 *  - one rule for every option that has an off: 1/0, yes/no, on/off,
 *    true/false in any case (MEMKIT_STATS=yes is text, MEMKIT_SECURE=yes
 *    is on, MEMKIT_PURGE=yes is its default way, dontneed), and signal
 *    names with and without SIG (USR2, SIGUSR2, sigusr2, 12);
 *  - the message about an ignored MEMKIT_PROFILE_SIGNAL states the rule
 *    and the value in force whole, however long the value given;
 *  - values out of range or not numbers (bogus, 4, 12abc, -2, 3600001) are
 *    ignored, with one "memkit: ignoring MEMKIT_X=value: NAME takes ...;
 *    in force: VALUE" line each, naming the values, and the default stays;
 *  - a MEMKIT_* variable that is no option (MEMKIT_PURG) gets one warning
 *    naming the nearest option; the tools' own (MEMKIT_RUN_*) none;
 *  - the variables act: MEMKIT_PURGE=unmap gives the address space of a
 *    freed peak back, MEMKIT_PURGE_DELAY_MS=0 gives its memory back on the
 *    free;
 *  - MEMKIT_VERBOSE=1 (or on) prints one "memkit: option NAME = VALUE
 *    (from MEMKIT_X | default | default; ignored MEMKIT_X)" line per
 *    option, values as words where the option has words, when memkit
 *    starts (before what the child printed after its first call);
 *  - MEMKIT_STATS=1 / text prints "memkit: name value" lines at exit whose
 *    values are the child's mk_process_stats at the end of main;
 *  - MEMKIT_STATS=text also names the process (pid and program), the
 *    committed peak, the purge mode and delay and the size classes, and
 *    gives bytes in a person's units too;
 *  - MEMKIT_STATS_FILE is appended to (two processes: two records) and
 *    expands %p, %e and %%;
 *  - MEMKIT_STATS=json / 2 with MEMKIT_STATS_FILE: the file holds exactly
 *    one JSON object (json.h parses it strictly), schema
 *    "memkit-process-stats", version 1, with the child's pid, its
 *    mk_process_stats figures, the purge mode and delay the environment
 *    set, its one live huge chunk, and its size classes (largest first,
 *    at most 8, the class the child filled on top); nothing on stderr.
 *    Without the file (or with one that cannot be created) the object goes
 *    to stderr.
 */
#include "json.h"
#include "option.h"
#include "purge_util.h"

static const char *const option_names[] = {
    "purge", "purge_delay_ms", "purge_thread", "verbose", "stats",
    "valgrind", "secure", "thp", "profile_signal", "report_contexts",
    "ctx_quarantine"};
#define NOPT (sizeof option_names / sizeof *option_names)

/* ---- the child's side ---------------------------------------------------- */

static void c_options(void)
{
    printf("child: before first use\n");
    fflush(stdout);
    for (size_t i = 0; i < NOPT; i++) {
        long v = -2;
        CHECK_EQ(mk_option_get(option_names[i], &v), 0);
        printf("child: option %s %ld\n", option_names[i], v);
    }
    printf("child: after first use\n");
    fflush(stdout);
}

static void c_unmap_effect(void)
{
    CHECK_EQ(th_option("purge"), 3L);
    pu_snap base = pu_now();
    mk_ctx *ctx = mk_ctx_new(NULL, "peak", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(ctx);
    REQUIRE(pu_peak(ctx, PU_LARGE, 64 * MiB) == 64 * MiB / PU_LARGE);
    pu_free_peak(0);
    pu_limits lim = {base.f.os_committed + 2 * MiB, 0,
                     base.f.os_reserved + 4 * MiB, 0};
    pu_snap after;
    double delay = (double)th_option("purge_delay_ms") / 1000.0;
    double t = pu_wait(pu_below, &lim, rs_now(), 2 * delay + 1.5, &after);
    pu_print("after", &after);
    CHECK(t >= 0);
    mk_ctx_delete(ctx);
}

static void c_delay0_effect(void)
{
    CHECK_EQ(th_option("purge_delay_ms"), 0L);
    pu_snap base = pu_now();
    mk_ctx *ctx = mk_ctx_new(NULL, "peak", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(ctx);
    REQUIRE(pu_peak(ctx, PU_LARGE, 32 * MiB) == 32 * MiB / PU_LARGE);
    pu_free_peak(0);
    pu_snap after = pu_now();
    pu_print("freed", &after);
    CHECK_LE(after.f.os_committed, base.f.os_committed + 2 * MiB);
    mk_ctx_delete(ctx);
}

/* Some memory in use at exit (small chunks of one class above all, one
 * huge chunk), then the figures MEMKIT_STATS must repeat. */
static void c_work(void)
{
    mk_ctx *ctx = mk_ctx_new(NULL, "work", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(ctx);
    for (int i = 0; i < 20000; i++) /* 960 KB of 48-byte chunks */
        REQUIRE_NOT_NULL(mk_alloc(ctx, 48));
    for (int i = 0; i < 200; i++)
        REQUIRE_NOT_NULL(mk_alloc(ctx, 16 + (size_t)i * 8));
    void *big = mk_alloc(ctx, 4 * MiB);
    REQUIRE_NOT_NULL(big);
    memset(big, 1, 4 * MiB);
    mk_process_figures f;
    mk_process_stats(&f);
    printf("child: pid %ld\n", (long)getpid());
    printf("child: os_reserved_bytes %zu\n", f.os_reserved);
    printf("child: os_committed_bytes %zu\n", f.os_committed);
    printf("child: os_calls %zu\n", f.os_calls);
    printf("child: segments %zu\n", f.segments);
    printf("child: meta_bytes %zu\n", f.meta_bytes);
    printf("child: purged_bytes %zu\n", f.purged_bytes);
    printf("child: purge_passes %zu\n", f.purge_passes);
    CHECK(1);
    fflush(stdout);
    /* the context stays: its memory is what the figures at exit show */
}

static const rs_case cases[] = {
    {"options", c_options},
    {"unmap_effect", c_unmap_effect},
    {"delay0_effect", c_delay0_effect},
    {"work", c_work},
};

/* ---- the parent's side --------------------------------------------------- */

static char out[1 << 16];

/* The number after @prefix at the start of a line of @text, or -1. */
static long long value_after(const char *text, const char *prefix)
{
    size_t n = strlen(prefix);
    for (const char *s = text; s && *s; s = strchr(s, '\n'), s = s ? s + 1 : s)
        if (strncmp(s, prefix, n) == 0)
            return strtoll(s + n, NULL, 10);
    return -1;
}

/* How many lines of @text start with @prefix. */
static int lines_with(const char *text, const char *prefix)
{
    int k = 0;
    size_t n = strlen(prefix);
    for (const char *s = text; s && *s; s = strchr(s, '\n'), s = s ? s + 1 : s)
        k += strncmp(s, prefix, n) == 0;
    return k;
}

static long option_in(const char *text, const char *name)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "child: option %s ", name);
    return (long)value_after(text, prefix);
}

/* Run the "options" child with one variable; @name must read @expect. */
static void expect_option(const char *var, const char *name, long expect)
{
    const char *env[] = {var, NULL};
    printf("  %s\n", var);
    rs_expect_ok("options", env, out, sizeof out);
    CHECK_EQ(option_in(out, name), expect);
    CHECK_EQ(lines_with(out, "memkit: ignoring"), 0);
}

static void test_defaults(void)
{
    rs_expect_ok("options", NULL, out, sizeof out);
    CHECK_EQ(option_in(out, "purge"), 1L);
    CHECK_EQ(option_in(out, "purge_delay_ms"), 100L);
    CHECK_EQ(option_in(out, "purge_thread"), 0L); /* no thread of its own */
    CHECK_EQ(option_in(out, "verbose"), 0L);
    CHECK_EQ(option_in(out, "stats"), 0L);
    CHECK(!strstr(out, "memkit:")); /* memkit says nothing */
}

static void test_purge_values(void)
{
    expect_option("MEMKIT_PURGE=off", "purge", 0);
    expect_option("MEMKIT_PURGE=dontneed", "purge", 1);
    expect_option("MEMKIT_PURGE=free", "purge", 2);
    expect_option("MEMKIT_PURGE=unmap", "purge", 3);
    expect_option("MEMKIT_PURGE=0", "purge", 0);
    expect_option("MEMKIT_PURGE=3", "purge", 3);
    expect_option("MEMKIT_PURGE_DELAY_MS=0", "purge_delay_ms", 0);
    expect_option("MEMKIT_PURGE_DELAY_MS=-1", "purge_delay_ms", -1);
    expect_option("MEMKIT_PURGE_DELAY_MS=250", "purge_delay_ms", 250);
    expect_option("MEMKIT_PURGE_THREAD=off", "purge_thread", 0);
    expect_option("MEMKIT_PURGE_THREAD=0", "purge_thread", 0);
    /* any case, and the usual booleans */
    expect_option("MEMKIT_PURGE=Unmap", "purge", 3);
    expect_option("MEMKIT_PURGE=DONTNEED", "purge", 1);
    expect_option("MEMKIT_PURGE=no", "purge", 0);
    expect_option("MEMKIT_PURGE=yes", "purge", 1); /* (its default way) */
    expect_option("MEMKIT_PURGE_THREAD=no", "purge_thread", 0);
    expect_option("MEMKIT_PURGE_THREAD=False", "purge_thread", 0);
    expect_option("MEMKIT_PURGE_THREAD=yes", "purge_thread", 1);
    expect_option("MEMKIT_VERBOSE=true", "verbose", 1);
}

static void test_ignored_values(void)
{
    static const struct {
        const char *var, *name;
        long def;
    } bad[] = {
        {"MEMKIT_PURGE=bogus", "purge", 1},
        {"MEMKIT_PURGE=4", "purge", 1},
        {"MEMKIT_PURGE=maybe", "purge", 1},
        {"MEMKIT_STATS=sometimes", "stats", 0},
        {"MEMKIT_PROFILE_SIGNAL=SIGNOPE", "profile_signal", 0},
        {"MEMKIT_PROFILE_SIGNAL=32", "profile_signal", 0},
        {"MEMKIT_PURGE_DELAY_MS=12abc", "purge_delay_ms", 100},
        {"MEMKIT_PURGE_DELAY_MS=-2", "purge_delay_ms", 100},
        {"MEMKIT_PURGE_DELAY_MS=3600001", "purge_delay_ms", 100},
        {"MEMKIT_PURGE_THREAD=maybe", "purge_thread", 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *env[] = {bad[i].var, NULL};
        printf("  %s\n", bad[i].var);
        rs_expect_ok("options", env, out, sizeof out);
        char line[128];
        snprintf(line, sizeof line, "memkit: ignoring %s", bad[i].var);
        CHECK_EQ(lines_with(out, line), 1);
        CHECK_EQ(lines_with(out, "memkit: ignoring"), 1);
        CHECK_EQ(option_in(out, bad[i].name), bad[i].def);
    }
    /* the message says what the option takes and what is in force */
    const char *purge[] = {"MEMKIT_PURGE=bogus", NULL};
    rs_expect_ok("options", purge, out, sizeof out);
    CHECK_STR_HAS(out, "memkit: ignoring MEMKIT_PURGE=bogus: purge takes off, "
                       "dontneed, free, unmap (also no, false; yes, true: "
                       "dontneed); in force: dontneed\n");
    /* a signal's: the rule, not 31 names cut at the line's end; a long
     * value is shortened, so the line still ends with the value in force */
    const char *sig[] = {"MEMKIT_PROFILE_SIGNAL=bogus", NULL};
    rs_expect_ok("options", sig, out, sizeof out);
    CHECK_STR_HAS(out, "memkit: ignoring MEMKIT_PROFILE_SIGNAL=bogus: "
                       "profile_signal takes a signal's name (USR2 or "
                       "SIGUSR2), its number (1 to 31), or off; in force: "
                       "off\n");
    static char longv[400] = "MEMKIT_PROFILE_SIGNAL=";
    for (size_t n = strlen(longv); n < sizeof longv - 1; n++)
        longv[n] = 'x';
    const char *sig_long[] = {longv, NULL};
    rs_expect_ok("options", sig_long, out, sizeof out);
    CHECK_STR_HAS(out, "memkit: ignoring MEMKIT_PROFILE_SIGNAL=xxxxxxxxxx"
                       "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...: profile_signal "
                       "takes a signal's name (USR2 or SIGUSR2), its number "
                       "(1 to 31), or off; in force: off\n");
    const char *delay[] = {"MEMKIT_PURGE_DELAY_MS=12abc", NULL};
    rs_expect_ok("options", delay, out, sizeof out);
    CHECK_STR_HAS(out, "memkit: ignoring MEMKIT_PURGE_DELAY_MS=12abc: "
                       "purge_delay_ms takes a number from -1 to 3600000; "
                       "in force: 100\n");
}

/* Every option that has an off takes the same boolean words, in any
 * case; "yes" means the option's "on" value (stats: text, secure: on,
 * purge: dontneed, report_contexts: flagged). */
static void test_boolean_words(void)
{
    static const struct {
        const char *env, *name;
        long on;
    } opts[] = {
        {"MEMKIT_PURGE", "purge", 1},
        {"MEMKIT_PURGE_THREAD", "purge_thread", 1},
        {"MEMKIT_VERBOSE", "verbose", 1},
        {"MEMKIT_STATS", "stats", 1},
        {"MEMKIT_VALGRIND", "valgrind", 1},
        {"MEMKIT_SECURE", "secure", 1},
        {"MEMKIT_THP", "thp", 1},
        {"MEMKIT_REPORT_CONTEXTS", "report_contexts", 1},
    };
    static const struct {
        const char *word;
        int yes;
    } words[] = {{"1", 1},    {"0", 0},     {"yes", 1},  {"no", 0},
                 {"on", 1},   {"off", 0},   {"true", 1}, {"false", 0},
                 {"YES", 1},  {"Off", 0},   {"True", 1}, {"NO", 0}};
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++)
        for (size_t k = 0; k < sizeof words / sizeof *words; k++) {
            char var[64];
            snprintf(var, sizeof var, "%s=%s", opts[i].env, words[k].word);
            expect_option(var, opts[i].name, words[k].yes ? opts[i].on : 0);
        }
}

/* Signals by name, with or without SIG, in any case, or by number. */
static void test_signal_words(void)
{
    expect_option("MEMKIT_PROFILE_SIGNAL=SIGUSR2", "profile_signal", 12);
    expect_option("MEMKIT_PROFILE_SIGNAL=USR2", "profile_signal", 12);
    expect_option("MEMKIT_PROFILE_SIGNAL=sigusr2", "profile_signal", 12);
    expect_option("MEMKIT_PROFILE_SIGNAL=usr1", "profile_signal", 10);
    expect_option("MEMKIT_PROFILE_SIGNAL=12", "profile_signal", 12);
    expect_option("MEMKIT_PROFILE_SIGNAL=PROF", "profile_signal", 27);
    expect_option("MEMKIT_PROFILE_SIGNAL=off", "profile_signal", 0);
    expect_option("MEMKIT_PROFILE_SIGNAL=no", "profile_signal", 0);
}

static void test_unknown_variable(void)
{
    const char *typo[] = {"MEMKIT_PURG=off", NULL};
    rs_expect_ok("options", typo, out, sizeof out);
    CHECK_STR_HAS(out, "memkit: unknown variable MEMKIT_PURG ignored (did "
                       "you mean MEMKIT_PURGE?)\n");
    CHECK_EQ(lines_with(out, "memkit: unknown variable"), 1);
    CHECK_EQ(option_in(out, "purge"), 1L); /* not taken for MEMKIT_PURGE */
    const char *far[] = {"MEMKIT_COLOUR=blue", NULL};
    rs_expect_ok("options", far, out, sizeof out);
    CHECK_STR_HAS(out, "memkit: unknown variable MEMKIT_COLOUR ignored\n");
    const char *tools[] = {"MEMKIT_RUN_LIB=/nowhere", "MEMKIT_STATS_FILE=",
                           "MEMKIT_TEST_SEED=1", NULL};
    rs_expect_ok("options", tools, out, sizeof out);
    CHECK_EQ(lines_with(out, "memkit: unknown variable"), 0);
}

static void test_variables_act(void)
{
    /* (with the thread: the program makes no call after its frees) */
    const char *unmap[] = {"MEMKIT_PURGE=unmap", "MEMKIT_PURGE_THREAD=1", NULL};
    rs_expect_ok("unmap_effect", unmap, out, sizeof out);
    const char *zero[] = {"MEMKIT_PURGE_DELAY_MS=0", NULL};
    rs_expect_ok("delay0_effect", zero, out, sizeof out);
}

static void test_verbose(void)
{
    static const char *const words[] = {"MEMKIT_VERBOSE=1",
                                        "MEMKIT_VERBOSE=on"};
    for (int w = 0; w < 2; w++) {
        const char *env[] = {words[w], "MEMKIT_PURGE=unmap", NULL};
        rs_expect_ok("options", env, out, sizeof out);
        for (size_t i = 0; i < NOPT; i++) {
            char prefix[64];
            snprintf(prefix, sizeof prefix, "memkit: option %s = ",
                     option_names[i]);
            CHECK_EQ(lines_with(out, prefix), 1);
        }
        CHECK_STR_HAS(out, "memkit: option purge = unmap (from MEMKIT_PURGE)\n");
        CHECK_STR_HAS(out, "memkit: option verbose = on (from MEMKIT_VERBOSE)\n");
        CHECK_STR_HAS(out, "memkit: option purge_delay_ms = 100 (default)\n");
        CHECK(!strstr(out, " set)")); /* (the old wording) */
        /* printed when memkit starts: by the first call at the latest */
        const char *first = strstr(out, "memkit: option ");
        const char *after = strstr(out, "child: after first use");
        CHECK(first && after && first < after);
    }
    /* an ignored value: the default, and the variable named as ignored */
    const char *bad[] = {"MEMKIT_VERBOSE=1", "MEMKIT_PURGE=bogus", NULL};
    rs_expect_ok("options", bad, out, sizeof out);
    CHECK_STR_HAS(out, "memkit: option purge = dontneed (default; ignored "
                       "MEMKIT_PURGE)\n");
}

static const char *const figure_names[] = {
    "os_reserved_bytes", "os_committed_bytes", "os_calls", "segments",
    "meta_bytes", "purged_bytes", "purge_passes"};
#define NFIG (sizeof figure_names / sizeof *figure_names)

static void test_stats_text(void)
{
    static const char *const words[] = {"MEMKIT_STATS=1", "MEMKIT_STATS=text"};
    for (int w = 0; w < 2; w++) {
        const char *env[] = {words[w], NULL};
        rs_expect_ok("work", env, out, sizeof out);
        for (size_t i = 0; i < NFIG; i++) {
            char mine[64], theirs[64];
            snprintf(mine, sizeof mine, "child: %s ", figure_names[i]);
            snprintf(theirs, sizeof theirs, "memkit: %s ", figure_names[i]);
            CHECK_EQ(lines_with(out, theirs), 1);
            CHECK_GE(value_after(out, mine), 0LL);
            CHECK_EQ(value_after(out, theirs), value_after(out, mine));
        }
        CHECK_EQ(value_after(out, "memkit: huge_chunks "), 1LL);
        CHECK_GE(value_after(out, "memkit: huge_bytes "), (long long)(4 * MiB));
        CHECK_GT(value_after(out, "memkit: page_bytes "), 0LL);
        CHECK_GE(value_after(out, "memkit: segment_committed_bytes "),
                 value_after(out, "memkit: page_bytes ") / 2);
        CHECK_EQ(lines_with(out, "memkit: huge_cached_bytes "), 1);
    }
    /* the same figures as the JSON: the process, the peak, the purge
     * policy, the classes; bytes also in a person's units */
    const char *env[] = {"MEMKIT_STATS=text", "MEMKIT_PURGE=unmap",
                         "MEMKIT_PURGE_DELAY_MS=250", NULL};
    rs_expect_ok("work", env, out, sizeof out);
    char want[128];
    snprintf(want, sizeof want, "memkit: process %lld respawned\n",
             value_after(out, "child: pid ")); /* (the child's argv[0]) */
    CHECK_STR_HAS(out, want);
    CHECK_GE(value_after(out, "memkit: os_committed_peak_bytes "),
             value_after(out, "memkit: os_committed_bytes "));
    CHECK_STR_HAS(out, "memkit: purge_mode unmap\n");
    CHECK_STR_HAS(out, "memkit: purge_delay_ms 250\n");
    CHECK_STR_HAS(out, "memkit: huge_chunks 1\n"); /* (a count: no unit) */
    CHECK_STR_HAS(out, " MiB)\n");
    CHECK_STR_HAS(out, " B: page_bytes ");
    CHECK_GE(lines_with(out, "memkit: class "), 2);
    CHECK_GE(value_after(out, "memkit: class 48 B: page_bytes ") +
                 value_after(out, "memkit: class 64 B: page_bytes ") +
                 value_after(out, "memkit: class 80 B: page_bytes "),
             960000LL);
}

/* Check the process-stats JSON @text against the child's output. */
static void check_process_json(const char *text, const char *child_out,
                               const char *mode, long delay)
{
    REQUIRE_NOT_NULL(text);
    size_t len = strlen(text);
    CHECK(len > 0 && text[len - 1] == '\n');
    CHECK(strchr(text, '\n') == text + len - 1); /* one line, one object */
    const char *err = NULL;
    jn *doc = jn_parse(text, &err);
    if (!doc)
        printf("  parse error: %s\n  text: %s\n", err, text);
    REQUIRE_NOT_NULL(doc);
    REQUIRE(doc->type == JN_OBJ);
    int ok = 1;
    CHECK_STR_EQ(jn_str(doc, "schema"), "memkit-process-stats");
    CHECK_EQ(jn_int(doc, "version", &ok), 1LL);
    CHECK_EQ(jn_int(doc, "pid", &ok), value_after(child_out, "child: pid "));
    CHECK_STR_EQ(jn_str(doc, "program"), "respawned"); /* (its argv[0]) */
    const jn *os = jn_get(doc, "os"), *purge = jn_get(doc, "purge");
    const jn *heap = jn_get(doc, "heap"), *classes = jn_get(doc, "classes");
    REQUIRE(os && purge && heap && classes);
    CHECK_EQ(jn_int(os, "reserved_bytes", &ok),
             value_after(child_out, "child: os_reserved_bytes "));
    CHECK_EQ(jn_int(os, "committed_bytes", &ok),
             value_after(child_out, "child: os_committed_bytes "));
    CHECK_EQ(jn_int(os, "calls", &ok),
             value_after(child_out, "child: os_calls "));
    CHECK_GE(jn_int(os, "committed_peak_bytes", &ok),
             jn_int(os, "committed_bytes", &ok));
    CHECK_GE(jn_int(os, "committed_peak_bytes", &ok), (long long)(5 * MiB));
    CHECK_EQ(jn_int(os, "segments", &ok),
             value_after(child_out, "child: segments "));
    CHECK_STR_EQ(jn_str(purge, "mode"), mode);
    CHECK_EQ(jn_int(purge, "delay_ms", &ok), (long long)delay);
    CHECK_EQ(jn_int(purge, "purged_bytes", &ok),
             value_after(child_out, "child: purged_bytes "));
    CHECK_EQ(jn_int(purge, "passes", &ok),
             value_after(child_out, "child: purge_passes "));
    CHECK_EQ(jn_int(heap, "meta_bytes", &ok),
             value_after(child_out, "child: meta_bytes "));
    CHECK_EQ(jn_int(heap, "huge_chunks", &ok), 1LL);
    CHECK_GE(jn_int(heap, "huge_bytes", &ok), (long long)(4 * MiB));
    CHECK_GE(jn_int(heap, "huge_cached_bytes", &ok), 0LL);
    long long page = jn_int(heap, "page_bytes", &ok);
    CHECK_GE(page, 960000LL); /* the 48-byte chunks at least */
    CHECK_GE(jn_int(heap, "segment_committed_bytes", &ok), page / 2);
    CHECK(ok);
    REQUIRE(classes->type == JN_ARR);
    CHECK_GE(classes->n, (size_t)2);
    CHECK_LE(classes->n, (size_t)8);
    long long prev = -1;
    for (size_t i = 0; i < classes->n; i++) {
        long long sz = jn_int(classes->items[i], "chunk_size", &ok);
        long long pb = jn_int(classes->items[i], "page_bytes", &ok);
        CHECK_GT(sz, 0LL);
        CHECK_GT(pb, 0LL);
        if (i > 0)
            CHECK_LE(pb, prev); /* largest first */
        prev = pb;
    }
    CHECK(ok);
    if (classes->n > 0) { /* the class the child filled: 48 bytes, or the
                             class above with the checking build's tail */
        CHECK_GE(jn_int(classes->items[0], "chunk_size", &ok), 48LL);
        CHECK_LE(jn_int(classes->items[0], "chunk_size", &ok), 80LL);
        CHECK_GE(jn_int(classes->items[0], "page_bytes", &ok), 960000LL);
    }
    jn_free(doc);
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void test_stats_json_file(void)
{
    char path[64], var[96];
    snprintf(path, sizeof path, "/tmp/memkit-env-%ld.json", (long)getpid());
    snprintf(var, sizeof var, "MEMKIT_STATS_FILE=%s", path);
    static const char *const words[] = {"MEMKIT_STATS=json", "MEMKIT_STATS=2"};
    for (int w = 0; w < 2; w++) {
        unlink(path);
        const char *env[] = {words[w], var, "MEMKIT_PURGE=unmap",
                             "MEMKIT_PURGE_DELAY_MS=250", NULL};
        rs_expect_ok("work", env, out, sizeof out);
        CHECK(!strstr(out, "memkit-process-stats")); /* not on stderr */
        char *text = read_file(path);
        CHECK_NOT_NULL(text);
        if (text)
            printf("  %s", text);
        check_process_json(text, out, "unmap", 250);
    }
    unlink(path);
}

/* The JSON line of @text that starts with {"schema": copied to @line. */
static const char *json_line(const char *text, char *line, size_t cap)
{
    const char *s = strstr(text, "{\"schema\":\"memkit-process-stats\"");
    if (!s)
        return NULL;
    const char *e = strchr(s, '\n');
    size_t n = e ? (size_t)(e - s) + 1 : strlen(s);
    if (n >= cap)
        return NULL;
    memcpy(line, s, n);
    line[n] = '\0';
    return line;
}

/* MEMKIT_STATS_FILE is appended to, one record per process, and %p, %e
 * and %% expand to the pid, the program's name and a percent sign. */
static void test_stats_file_append_and_pattern(void)
{
    char path[96], var[128];
    snprintf(path, sizeof path, "/tmp/memkit-env-append-%ld.json", (long)getpid());
    snprintf(var, sizeof var, "MEMKIT_STATS_FILE=%s", path);
    unlink(path);
    const char *env[] = {"MEMKIT_STATS=json", var, NULL};
    long long pids[2];
    for (int i = 0; i < 2; i++) {
        rs_expect_ok("work", env, out, sizeof out);
        pids[i] = value_after(out, "child: pid ");
    }
    char *text = read_file(path);
    REQUIRE_NOT_NULL(text);
    CHECK_EQ(lines_with(text, "{\"schema\":\"memkit-process-stats\""), 2);
    char want[64];
    for (int i = 0; i < 2; i++) {
        snprintf(want, sizeof want, "\"pid\":%lld,", pids[i]);
        CHECK_STR_HAS(text, want);
    }
    unlink(path);

    snprintf(var, sizeof var, "MEMKIT_STATS_FILE=/tmp/memkit-env-%%e-%%p-100%%%%.json");
    const char *env2[] = {"MEMKIT_STATS=text", var, NULL};
    rs_expect_ok("work", env2, out, sizeof out);
    snprintf(path, sizeof path, "/tmp/memkit-env-respawned-%lld-100%%.json",
             value_after(out, "child: pid "));
    text = read_file(path);
    CHECK_NOT_NULL(text);
    if (text)
        CHECK_GE(value_after(text, "memkit: os_calls "), 1LL);
    unlink(path);
}

static void test_stats_json_stderr(void)
{
    static char line[1 << 14];
    const char *env[] = {"MEMKIT_STATS=json", NULL};
    rs_expect_ok("work", env, out, sizeof out);
    CHECK_EQ(lines_with(out, "{\"schema\":\"memkit-process-stats\""), 1);
    check_process_json(json_line(out, line, sizeof line), out, "dontneed", 100);
    /* a file that cannot be created: stderr instead */
    const char *env2[] = {"MEMKIT_STATS=json",
                          "MEMKIT_STATS_FILE=/nonexistent-memkit-dir/x.json",
                          "MEMKIT_PURGE=off", NULL};
    rs_expect_ok("work", env2, out, sizeof out);
    CHECK_EQ(lines_with(out, "{\"schema\":\"memkit-process-stats\""), 1);
    check_process_json(json_line(out, line, sizeof line), out, "off", 100);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        return rs_run_case(cases, RS_NCASES(cases), argv[1]);
    RUN(test_defaults);
    RUN(test_purge_values);
    RUN(test_ignored_values);
    RUN(test_boolean_words);
    RUN(test_signal_words);
    RUN(test_unknown_variable);
    RUN(test_variables_act);
    RUN(test_verbose);
    RUN(test_stats_text);
    RUN(test_stats_json_file);
    RUN(test_stats_json_stderr);
    RUN(test_stats_file_append_and_pattern);
    return th_done();
}
