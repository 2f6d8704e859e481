/* SPDX-License-Identifier: MIT */
/*
 * wrong/foreign.c - the checking build (libmemkit-check) catches pointers
 * memkit never returned.  Death tests (each in a child process): mk_free of
 * a stack address, of a malloc()ed block, of an address inside a small, a
 * large or a huge chunk, of a chunk's page after the page went back; and
 * mk_realloc / mk_usable_size / mk_ctx_of of a foreign pointer: each
 * aborts (SIGABRT) after one line "memkit: FN(): <what> 0x..." naming
 * the context where there is one.  With mk_set_error_handler the handler
 * gets that line, nothing aborts, and the chunk is not freed; with
 * mk_silence_errors(1) nothing is reported and nothing aborts.  Correct
 * use reports nothing.
 */
#include "harness.h"

#include <memkit.h>

static mk_ctx *ctx;

/* ---- the misuses, each run in a child ------------------------------------- */

static void free_stack(void *arg)
{
    (void)arg;
    volatile char buf[64];
    buf[0] = 1;
    mk_free((void *)&buf[16]);
}

static void free_malloced(void *arg)
{
    (void)arg;
    char *p = malloc(100);
    mk_free(p);
}

static void free_static(void *arg)
{
    (void)arg;
    static char blob[32];
    mk_free(blob + 8);
}

static void free_inside_small(void *arg)
{
    (void)arg;
    char *p = mk_alloc(ctx, 100);
    mk_free(p + 16);
}

static void free_inside_small_by_one(void *arg)
{
    (void)arg;
    char *p = mk_alloc(ctx, 24);
    mk_free(p + 8);
}

static void free_inside_large(void *arg)
{
    (void)arg;
    char *p = mk_alloc(ctx, 100000);
    mk_free(p + 4096);
}

static void free_inside_huge(void *arg)
{
    (void)arg;
    char *p = mk_alloc(ctx, (size_t)3 << 20);
    mk_free(p + 64);
}

/* A large chunk's page goes back when it is freed: its address is then
 * memory memkit holds free. */
static void free_released_page(void *arg)
{
    (void)arg;
    char *keep = mk_alloc(ctx, 100); /* keeps the segment in use */
    char *p = mk_alloc(ctx, 100000);
    mk_free(p);
    (void)keep;
    mk_free(p);
}

static void realloc_foreign(void *arg)
{
    (void)arg;
    char *p = malloc(64);
    void *volatile moved = mk_realloc(p, 200); /* (it aborts) */
    (void)moved;
}

static void usable_size_foreign(void *arg)
{
    (void)arg;
    int x = 0;
    (void)mk_usable_size(&x);
}

static void ctx_of_foreign(void *arg)
{
    (void)arg;
    char *p = mk_alloc(ctx, 1000);
    (void)mk_ctx_of(p + 1);
}

/* Correct use in the checking build does not report. */
static void correct_use(void *arg)
{
    (void)arg;
    const size_t sizes[] = {0, 8, 24, 100, 4000, 32768, 100000, (size_t)3 << 20};
    for (int r = 0; r < 50; r++)
        for (int i = 0; i < 8; i++) {
            char *p = mk_alloc(ctx, sizes[i]);
            if (!p)
                _exit(3);
            p = mk_realloc(p, sizes[(i + 1) % 8]);
            if (!p || mk_ctx_of(p) != ctx ||
                mk_usable_size(p) < sizes[(i + 1) % 8])
                _exit(4);
            mk_free(p);
        }
    mk_ctx *c = mk_ctx_new(ctx, "k", MK_GENERAL, NULL);
    for (int i = 0; i < 1000; i++)
        if (!mk_alloc(c, (size_t)i))
            _exit(5);
    mk_ctx_delete(c);
}

static void test_checking_build(void)
{
    CHECK_EQ(mk_checking(), 1);
}

static void test_death_foreign(void)
{
    CHECK_DIES(free_stack, NULL, "memkit: mk_free(): invalid pointer 0x");
    CHECK_DIES(free_stack, NULL, "(memkit never returned it)");
    CHECK_DIES(free_malloced, NULL, "memkit: mk_free(): invalid pointer");
    CHECK_DIES(free_static, NULL, "memkit never returned it");
    CHECK_DIES(realloc_foreign, NULL, "memkit: mk_realloc(): invalid pointer");
    CHECK_DIES(usable_size_foreign, NULL,
               "memkit: mk_usable_size(): invalid pointer");
}

static void test_death_inside_chunk(void)
{
    CHECK_DIES(free_inside_small, NULL,
               "memkit: mk_free(): invalid pointer 0x");
    CHECK_DIES(free_inside_small, NULL,
               "(not the start of a chunk, context \"wrong\")");
    CHECK_DIES(free_inside_small_by_one, NULL,
               "(not the start of a chunk, context \"wrong\")");
    CHECK_DIES(free_inside_large, NULL,
               "memkit: mk_free(): invalid pointer 0x");
    CHECK_DIES(free_inside_large, NULL,
               "(not the start of a chunk, context \"wrong\")");
    CHECK_DIES(free_inside_huge, NULL,
               "(not the start of a chunk, context \"wrong\")");
    CHECK_DIES(ctx_of_foreign, NULL, "memkit: mk_ctx_of(): invalid pointer");
    CHECK_DIES(free_released_page, NULL,
               "memkit: mk_free(): double free of 0x");
    CHECK_DIES(free_released_page, NULL, "(memory memkit holds free)");
}

/* The line names the pointer exactly. */
static void *stack_ptr;
static void free_known(void *arg)
{
    (void)arg;
    mk_free(stack_ptr);
}

static void test_death_message_pointer(void)
{
    char buf[16];
    stack_ptr = buf + 3;
    char want[64];
    snprintf(want, sizeof want, "pointer 0x%lx", (unsigned long)(uintptr_t)stack_ptr);
    CHECK_DIES(free_known, NULL, want);
}

static void test_correct_use_silent(void)
{
    char out[1024];
    int st = th_run_child(correct_use, NULL, out, sizeof out);
    th_checks++;
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
        th_fail(__FILE__, __LINE__, "correct use: status %d, stderr \"%s\"", st,
                out);
    CHECK_STR_EQ(out, "");
}

/* ---- a handler instead of abort ------------------------------------------ */

static char last_msg[512];
static int handler_calls;
static void *handler_arg_seen;

static void handler(const char *msg, void *arg)
{
    handler_calls++;
    handler_arg_seen = arg;
    snprintf(last_msg, sizeof last_msg, "%s", msg);
}

static void test_handler(void)
{
    int token;
    mk_set_error_handler(handler, &token);
    handler_calls = 0;

    char local[32];
    mk_free(local + 8); /* no abort: we are still here */
    CHECK_EQ(handler_calls, 1);
    CHECK_PTR_EQ(handler_arg_seen, &token);
    CHECK_STR_HAS(last_msg, "memkit: mk_free(): invalid pointer 0x");
    CHECK_STR_HAS(last_msg, "(memkit never returned it)");
    CHECK(strchr(last_msg, '\n') == NULL); /* one line, no newline */

    char *p = mk_alloc(ctx, 100);
    REQUIRE_NOT_NULL(p);
    th_fill(p, 100, 3);
    mk_free(p + 16);
    CHECK_EQ(handler_calls, 2);
    CHECK_STR_HAS(last_msg, "memkit: mk_free(): invalid pointer 0x");
    CHECK_STR_HAS(last_msg, "(not the start of a chunk, context \"wrong\")");
    /* the chunk was not freed: still live and intact */
    mk_stats st;
    mk_ctx_stats(ctx, &st, 0);
    CHECK_EQ(st.chunks, 1u);
    CHECK_PATTERN(p, 100, 3);

    /* queries give their empty answer */
    char *m = malloc(50);
    REQUIRE_NOT_NULL(m);
    CHECK_NULL(mk_realloc(m, 100));
    CHECK_EQ(handler_calls, 3);
    CHECK_EQ(mk_usable_size(m), 0u);
    CHECK_EQ(handler_calls, 4);
    CHECK_NULL(mk_ctx_of(m));
    CHECK_EQ(handler_calls, 5);
    free(m);

    /* correct use does not call the handler */
    mk_free(p);
    CHECK_EQ(handler_calls, 5);
    mk_ctx_stats(ctx, &st, 0);
    CHECK_EQ(st.chunks, 0u);

    /* NULL restores the default (abort) */
    mk_set_error_handler(NULL, NULL);
    CHECK_DIES(free_malloced, NULL, "memkit: mk_free(): invalid pointer");
}

/* ---- silence ---------------------------------------------------------------- */

static void silenced_misuse(void *arg)
{
    (void)arg;
    mk_silence_errors(1);
    char local[32];
    mk_free(local);
    char *p = mk_alloc(ctx, 100);
    mk_free(p + 8);
    char *m = malloc(10);
    mk_free(m);
    if (mk_realloc(m, 10) != NULL)
        _exit(7);
}

static void test_silence(void)
{
    /* in a child: the default action would abort it */
    char out[1024];
    int st = th_run_child(silenced_misuse, NULL, out, sizeof out);
    th_checks++;
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
        th_fail(__FILE__, __LINE__, "silenced misuse: status 0x%x, stderr "
                "\"%s\"", st, out);
    CHECK_STR_EQ(out, "");

    /* silence wins over a handler too, and is undone by 0 */
    mk_set_error_handler(handler, NULL);
    handler_calls = 0;
    CHECK_EQ(mk_silence_errors(1), 0);
    char local[16];
    mk_free(local);
    CHECK_EQ(handler_calls, 0);
    CHECK_EQ(mk_silence_errors(0), 1);
    mk_free(local);
    CHECK_EQ(handler_calls, 1);
    mk_set_error_handler(NULL, NULL);
}

int main(void)
{
    ctx = mk_ctx_new(NULL, "wrong", MK_GENERAL, NULL);
    if (!ctx)
        return 1;
    RUN(test_checking_build);
    RUN(test_death_foreign);
    RUN(test_death_inside_chunk);
    RUN(test_death_message_pointer);
    RUN(test_correct_use_silent);
    RUN(test_handler);
    RUN(test_silence);
    mk_ctx_delete(ctx);
    return th_done();
}
