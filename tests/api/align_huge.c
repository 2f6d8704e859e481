/* SPDX-License-Identifier: MIT */
/*
 * api/align_huge.c - mk_alloc_aligned with alignments above the segment
 * size (8 MiB .. 64 MiB), small and huge sizes: the chunk is aligned, its
 * owner is found (mk_ctx_of, mk_usable_size), it can be freed, and the
 * context's figures follow.  Each case runs in a child process so that a
 * crash in the owner lookup is reported as a failure of that case.
 *
 * Registered DISABLED in CMakeLists.txt: it fails on the current library
 * (see the comment there).
 */
#include "harness.h"

#include <memkit.h>

typedef struct one_case {
    size_t size, align;
} one_case;

/* Runs in the child; prints what went wrong on stderr and exits non-zero. */
static void run_case(void *arg)
{
    const one_case *c = arg;
    mk_ctx *ctx = mk_ctx_new(NULL, "bigalign", MK_GENERAL, NULL);
    if (!ctx) {
        fprintf(stderr, "mk_ctx_new failed\n");
        _exit(2);
    }
    char *p = mk_alloc_aligned(ctx, c->size, c->align);
    if (!p) {
        fprintf(stderr, "mk_alloc_aligned returned NULL\n");
        _exit(3);
    }
    if ((uintptr_t)p % c->align) {
        fprintf(stderr, "misaligned: %p\n", (void *)p);
        _exit(4);
    }
    p[0] = 1;
    p[c->size - 1] = 2;
    if (mk_ctx_of(p) != ctx) {
        fprintf(stderr, "mk_ctx_of(%p) = %p, expected %p\n", (void *)p,
                (void *)mk_ctx_of(p), (void *)ctx);
        _exit(5);
    }
    if (mk_usable_size(p) < c->size) {
        fprintf(stderr, "usable size %zu\n", mk_usable_size(p));
        _exit(6);
    }
    mk_stats st;
    mk_ctx_stats(ctx, &st, 0);
    if (st.chunks != 1) {
        fprintf(stderr, "stats: %zu chunks\n", st.chunks);
        _exit(7);
    }
    mk_free(p);
    mk_ctx_stats(ctx, &st, 0);
    if (st.chunks != 0) {
        fprintf(stderr, "after free: %zu chunks\n", st.chunks);
        _exit(8);
    }
    mk_ctx_delete(ctx);
}

static void test_align_above_segment(void)
{
    const size_t aligns[] = {(size_t)8 << 20, (size_t)16 << 20,
                             (size_t)64 << 20};
    const size_t sizes[] = {100, (size_t)3 << 20, (size_t)9 << 20};
    for (int a = 0; a < 3; a++)
        for (int s = 0; s < 3; s++) {
            one_case c = {sizes[s], aligns[a]};
            char out[1024];
            int st = th_run_child(run_case, &c, out, sizeof out);
            th_checks++;
            if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
                th_fail(__FILE__, __LINE__,
                        "mk_alloc_aligned(%zu, %zu MiB): %s %d; %s", sizes[s],
                        aligns[a] >> 20,
                        WIFSIGNALED(st) ? "killed by signal" : "exit status",
                        WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), out);
        }
}

int main(void)
{
    RUN(test_align_above_segment);
    return th_done();
}
