/* SPDX-License-Identifier: MIT */
/*
 * registry_oom.c - the checking build records every segment it takes in a
 * registry, made with the first segment.  If the OS refuses the registry (or
 * the segment), the allocation must fail cleanly and a retry must give a
 * chunk the checks accept: never a chunk that looks foreign.  Each case runs
 * in a fresh child, so that the failing request really is among the first.
 */
#include "harness.h"

#include <memkit.h>
#include <sys/wait.h>
#include <unistd.h>

#include "os/os.h"

/* In a fresh process: the @n-th OS request fails during the first
 * allocation; a retry must work and the chunk must free cleanly. */
static int first_alloc_with_failure(long n)
{
    mk_ctx *c = mk_ctx_new(NULL, "fresh", MK_GENERAL, NULL);
    if (!c)
        return 2;
    mki_os_fail_at(n, 0);
    void *p = mk_alloc(c, 100);
    mki_os_fail_at(0, 0);
    if (!p)
        p = mk_alloc(c, 100);
    if (!p)
        return 3;
    mk_free(p); /* aborts if the chunk looks foreign */
    mk_ctx_delete(c);
    return 0;
}

static void test_first_requests_fail(void)
{
    for (long n = 1; n <= 6; n++) {
        fflush(stdout);
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0)
            _exit(first_alloc_with_failure(n));
        int st = 0;
        waitpid(pid, &st, 0);
        th_checks++;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            th_fail(__FILE__, __LINE__,
                    "OS request %ld failing in the first allocation: child "
                    "status %d",
                    n, st);
    }
}

int main(void)
{
    RUN(test_first_requests_fail);
    return th_done();
}
