/* SPDX-License-Identifier: MIT */
/*
 * json_test.c - memkit-run's JSON reader (tools/memkit-run/json.c) and the
 * view it feeds (view.c), on text written here: what memkit writes must
 * read back exactly, and anything else must be refused with a reason, not
 * half-read.  The chart (chart.c) is checked here too: its round numbers
 * and its drawing are pure functions of the samples, like the reader.
 *
 * Why text written here and not memkit's own output: run_test already
 * reads what a real memkit wrote; this file covers what a real run rarely
 * produces (a truncated file, a foreign schema, a field missing, escapes,
 * the limits of integers), where a reader that guesses would show wrong
 * figures instead of saying it cannot read them.
 *
 * Built from the tool's own sources (no library), so it runs everywhere
 * (also under Valgrind: label valgrind).
 */
#include "harness.h"

#include "run.h"

#include <limits.h>

/* What src/stats.c writes (one line), figures of a real run. */
static const char *memkit_line =
    "{\"schema\":\"memkit-process-stats\",\"version\":1,\"pid\":4242,"
    "\"os\":{\"reserved_bytes\":4390912,\"committed_bytes\":473088,"
    "\"calls\":1043,\"segments\":1},\"purge\":{\"mode\":\"dontneed\","
    "\"delay_ms\":0,\"purged_bytes\":67600384,\"passes\":1023},"
    "\"heap\":{\"segment_committed_bytes\":276480,\"page_bytes\":241664,"
    "\"huge_chunks\":0,\"huge_bytes\":0,\"huge_cached_bytes\":0,"
    "\"meta_bytes\":196608},\"classes\":[{\"chunk_size\":4096,"
    "\"page_bytes\":98304},{\"chunk_size\":1024,\"page_bytes\":8192}]}\n";

static mr_json *parse(const char *text, char *err, size_t cap)
{
    return mr_json_parse(text, strlen(text), err, cap);
}

static void test_reads_memkit_line(void)
{
    char err[200];
    mr_json *j = parse(memkit_line, err, sizeof err);
    REQUIRE_NOT_NULL(j);
    CHECK_EQ(j->type, MR_JSON_OBJECT);
    const mr_json *schema = mr_json_get(j, "schema");
    REQUIRE_NOT_NULL(schema);
    CHECK_STR_EQ(schema->str, "memkit-process-stats");
    long long v = 0;
    CHECK_EQ(mr_json_int(j, "pid", &v), 0);
    CHECK_EQ(v, 4242);
    CHECK_EQ(mr_json_int(mr_json_get(j, "purge"), "purged_bytes", &v), 0);
    CHECK_EQ(v, 67600384);
    const mr_json *classes = mr_json_get(j, "classes");
    REQUIRE_NOT_NULL(classes);
    CHECK_EQ(classes->type, MR_JSON_ARRAY);
    int n = 0;
    for (const mr_json *c = classes->first; c; c = c->next)
        n++;
    CHECK_EQ(n, 2);
    CHECK_EQ(mr_json_int(classes->first->next, "chunk_size", &v), 0);
    CHECK_EQ(v, 1024);
    /* absent keys, wrong types */
    CHECK_EQ(mr_json_int(j, "nope", &v), -1);
    CHECK_EQ(mr_json_int(j, "schema", &v), -1);
    CHECK_NULL(mr_json_get(classes, "chunk_size"));
    CHECK_NULL(mr_json_get(NULL, "x"));
    mr_json_free(j);
}

static void test_values(void)
{
    char err[200];
    mr_json *j = parse(" [ -9223372036854775808, 9223372036854775807, 0, -0,"
                       " \"a\\\"b\\\\c\\/\\n\\u00e9\\ud83d\\ude00\", {}, [] ] ",
                       err, sizeof err);
    REQUIRE_NOT_NULL(j);
    const mr_json *e = j->first;
    REQUIRE_NOT_NULL(e);
    CHECK(e->num == LLONG_MIN);
    CHECK(e->next->num == LLONG_MAX);
    CHECK_EQ(e->next->next->num, 0);
    const mr_json *s = e->next->next->next->next;
    CHECK_EQ(s->type, MR_JSON_STRING);
    CHECK_STR_EQ(s->str, "a\"b\\c/\n\xc3\xa9\xf0\x9f\x98\x80");
    CHECK_EQ(s->next->type, MR_JSON_OBJECT);
    CHECK_NULL(s->next->first);
    CHECK_EQ(s->next->next->type, MR_JSON_ARRAY);
    CHECK_NULL(s->next->next->next);
    mr_json_free(j);
}

/* Each bad text is refused, with a reason that names what and where. */
static void test_refuses(void)
{
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"", "unexpected end"},
        {"   ", "unexpected end"},
        {"{", "expected a member name"},
        {"{\"a\":1", "unexpected end"},
        {"{\"a\":1,}", "expected a member name"},
        {"[1,]", "unexpected character"},
        {"[1 2]", "expected ','"},
        {"{\"a\" 1}", "expected ':'"},
        {"{1:2}", "expected a member name"},
        {"\"abc", "unterminated string"},
        {"\"a\\qb\"", "bad escape"},
        {"\"\\u12\"", "bad \\u escape"},
        {"\"\\ud800\"", "lone high surrogate"},
        {"\"\\udc00\"", "lone low surrogate"},
        {"\"a\tb\"", "control character"},
        {"1.5", "not an integer"},
        {"1e3", "not an integer"},
        {"01", "leading zero"},
        {"-", "unexpected character"},
        {"9223372036854775808", "out of range"},
        {"-9223372036854775809", "out of range"},
        {"true", "unexpected character"},
        {"null", "unexpected character"},
        {"{} {}", "text after the value"},
        {"{not json", "expected a member name"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[200] = "";
        mr_json *j = parse(bad[i].text, err, sizeof err);
        CHECK_NULL(j);
        mr_json_free(j);
        CHECK_STR_HAS(err, bad[i].why);
        CHECK_STR_HAS(err, " at byte ");
    }
    /* nesting is bounded */
    char deep[300];
    memset(deep, '[', 200);
    deep[200] = '\0';
    char err[200] = "";
    CHECK_NULL(parse(deep, err, sizeof err));
    CHECK_STR_HAS(err, "nested too deep");
    /* a truncated memkit line */
    size_t len = strlen(memkit_line) / 2;
    CHECK_NULL(mr_json_parse(memkit_line, len, err, sizeof err));
}

__attribute__((noinline)) static char *view(const char *text,
                                            pid_t program, int *ret)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    *ret = mr_view_print_text(f, text, strlen(text), program);
    fclose(f);
    return buf;
}

static void test_view(void)
{
    int ret;
    char *v = view(memkit_line, 4242, &ret);
    CHECK_EQ(ret, 0);
    CHECK_STR_HAS(v, "memkit's view at exit (pid 4242, the program)\n");
    CHECK_STR_HAS(v, "  committed   462.0 KiB of 4.2 MiB reserved "
                     "(1 segment, 1043 OS calls), every byte of it:\n"
                     "     236.0 KiB  in pages that contexts hold (small and "
                     "large chunks, with the free room of those pages)\n"
                     "      34.0 KiB  free in segments, not given back yet (and "
                     "the segments' headers)\n"
                     "           0 B  in 0 huge chunks\n"
                     "           0 B  in freed huge mappings kept for reuse\n"
                     "     192.0 KiB  memkit's bookkeeping\n");
    CHECK(strstr(v, "other (committed meanwhile)") == NULL); /* it adds up */
    CHECK_STR_HAS(v, "  purged      64.5 MiB in 1023 passes (mode dontneed, "
                     "delay 0 ms)\n");
    CHECK_STR_HAS(v, "  classes     4096 B: 96.0 KiB, 1024 B: 8.0 KiB");
    free(v);

    v = view(memkit_line, 17, &ret);
    CHECK_STR_HAS(v, "(pid 4242: a process the program started");
    free(v);

    /* A wrapper (pid 17, little committed) and the program it ran (4242):
     * two records; the view shows the one that held the most, and what
     * the wrapper held.  Either order. */
    static const char wrapper[] =
        "{\"schema\":\"memkit-process-stats\",\"version\":1,\"pid\":17,"
        "\"os\":{\"reserved_bytes\":4194304,\"committed_bytes\":8192,"
        "\"calls\":3,\"segments\":1},\"purge\":{\"mode\":\"dontneed\","
        "\"delay_ms\":100,\"purged_bytes\":0,\"passes\":0},"
        "\"heap\":{\"segment_committed_bytes\":8192,\"page_bytes\":4096,"
        "\"huge_chunks\":0,\"huge_bytes\":0,\"huge_cached_bytes\":0,"
        "\"meta_bytes\":4096},\"classes\":[]}\n";
    char both[4096];
    for (int order = 0; order < 2; order++) {
        snprintf(both, sizeof both, "%s%s", order ? memkit_line : wrapper,
                 order ? wrapper : memkit_line);
        v = view(both, 17, &ret);
        CHECK_EQ(ret, 0);
        CHECK_STR_HAS(v, "memkit's view at exit (pid 4242: of the 2 processes on memkit, the "
                         "one that held the most; the program, pid 17, held 8.0 KiB)\n");
        CHECK_STR_HAS(v, "  committed   462.0 KiB of 4.2 MiB reserved");
        free(v);
        v = view(both, 4242, &ret);
        CHECK_STR_HAS(v, "(pid 4242, the program: of the 2 processes on memkit, it held the "
                         "most)\n");
        free(v);
    }

    v = view("", 1, &ret);
    CHECK_EQ(ret, -1);
    CHECK_STR_HAS(v, "memkit's view: none: ");
    free(v);
    v = view("{not json", 1, &ret);
    CHECK_EQ(ret, -1);
    CHECK_STR_HAS(v, "memkit's view: unreadable statistics (expected a "
                     "member name at byte 1)");
    free(v);
    v = view("{\"schema\":\"other\",\"version\":1}", 1, &ret);
    CHECK_EQ(ret, -1);
    CHECK_STR_HAS(v, "not the memkit-process-stats schema");
    free(v);
    /* a field missing: refused, not shown as 0 */
    v = view("{\"schema\":\"memkit-process-stats\",\"version\":1,\"pid\":1,"
             "\"os\":{\"reserved_bytes\":1}}", 1, &ret);
    CHECK_EQ(ret, -1);
    CHECK_STR_HAS(v, "(no integer os.committed_bytes)");
    CHECK(!strstr(v, "committed   "));
    free(v);
}

static void test_bytes_and_nice(void)
{
    char b[32];
    mr_view_bytes(b, sizeof b, 512);
    CHECK_STR_EQ(b, "512 B");
    mr_view_bytes(b, sizeof b, 1536);
    CHECK_STR_EQ(b, "1.5 KiB");
    mr_view_bytes(b, sizeof b, 64.0 * 1024 * 1024);
    CHECK_STR_EQ(b, "64.0 MiB");
    mr_view_bytes(b, sizeof b, 3.0 * 1024 * 1024 * 1024);
    CHECK_STR_EQ(b, "3.00 GiB");
    CHECK(mr_chart_nice(55.6) == 60);
    CHECK(mr_chart_nice(66.1) == 80);
    CHECK(mr_chart_nice(100) == 100);
    CHECK(mr_chart_nice(0.3) > 0.2999 && mr_chart_nice(0.3) < 0.3001);
    CHECK(mr_chart_nice(1001) == 1200);
    CHECK(mr_chart_nice(0) == 1);
    CHECK_EQ(mr_chart_ticks(80), 4);
    CHECK_EQ(mr_chart_ticks(60), 6);
    CHECK_EQ(mr_chart_ticks(100), 5);
    CHECK_EQ(mr_chart_ticks(2.5), 5);
}

/* (noinline: GCC takes open_memstream's buffer for a dangling local) */
__attribute__((noinline)) static char *chart(const mr_series *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    mr_chart_print(f, s, 60, 8);
    fclose(f);
    return buf;
}

static void test_chart(void)
{
    mr_sample v[3] = {{0.1, 10 * 1024, -1, 1}, {0.2, 40 * 1024, -1, 1},
                      {0.3, 20 * 1024, -1, 1}};
    mr_series s = {v, 3, 3};
    char *c = chart(&s);
    REQUIRE_NOT_NULL(c);
    int lines = 0;
    for (char *l = c; *l; lines++) {
        char *e = strchr(l, '\n');
        REQUIRE(e != NULL);
        CHECK_LE(e - l, 72); /* fits a terminal */
        l = e + 1;
    }
    CHECK_EQ(lines, 1 + 8 + 2); /* "MiB", the plot, the axis, the times */
    CHECK_STR_HAS(c, "     MiB\n      40 |");
    CHECK_STR_HAS(c, "\n      20 |");
    CHECK_STR_HAS(c, "\n       0 +-----");
    CHECK_STR_HAS(c, "0.30 s\n");
    /* a sample holds until the next one: the top line is full from the
     * 40 MiB sample (t = 0.2 s of 0.3 s: column 40) to the next sample
     * (the last column), blank before; nothing before the first sample */
    const char *top = strstr(c, "      40 |");
    REQUIRE(top != NULL);
    top += 10;
    CHECK_EQ(top[0], ' ');
    CHECK_EQ(top[39], ' ');
    CHECK_EQ(top[40], '#');
    CHECK_EQ(top[58], '#');
    CHECK_EQ(top[59], '\n');
    const char *bottom = strstr(c, "       0 +");
    REQUIRE(bottom != NULL);
    CHECK_EQ(bottom[-2], '#'); /* the last column's 20 MiB reaches down */
    CHECK(strstr(c, "         |                    #####") != NULL);
    free(c);

    /* downsampling by max: one short spike among 1000 samples shows */
    mr_sample *many = malloc(1000 * sizeof *many);
    REQUIRE_NOT_NULL(many);
    for (int i = 0; i < 1000; i++)
        many[i] = (mr_sample){0.01 * (i + 1), 1024, -1, 1};
    many[500].rss_kib = 50 * 1024;
    mr_series m = {many, 1000, 1000};
    c = chart(&m);
    REQUIRE_NOT_NULL(c);
    top = strstr(c, "      50 |");
    REQUIRE(top != NULL);
    CHECK_EQ(strcspn(top + 10, "\n"), strcspn(top + 10, "#") + 1);
    CHECK_EQ(top[10 + 30], '#'); /* t = 5.01 s of 10 s: column 30 */
    free(c);
    free(many);
}

int main(void)
{
    RUN(test_reads_memkit_line);
    RUN(test_values);
    RUN(test_refuses);
    RUN(test_view);
    RUN(test_bytes_and_nice);
    RUN(test_chart);
    return th_done();
}
