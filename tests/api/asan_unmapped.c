/* SPDX-License-Identifier: MIT */
/*
 * api/asan_unmapped.c - memkit built with AddressSanitizer must not leave
 * poison on memory it gave back to the OS (a library bug found by
 * fuzz/ctx_fuzz_asan, fixed in 2656fea; this test runs only in the ASan
 * build).
 *
 * ASan keeps its shadow across munmap, so memkit unpoisons a range before
 * it unmaps it (mki_mem_forget): otherwise the next mapping at that
 * address, memkit's own next segment or anyone's mmap, starts out
 * "poisoned" and its first write is reported as a use-after-poison.  The
 * fuzzer hit it inside mki_segment_page_alloc, writing the page map of a
 * new segment that mmap had placed where a huge mapping had been.
 *
 * The path: a freed huge chunk's mapping is cached, poisoned; a larger
 * huge request takes it and grows it (huge.c grow() -> mki_os_resize);
 * when the pages cannot grow in place, mremap moves them and the old
 * range is gone, its shadow still poisoned.  The test blocks growth in
 * place with a page of its own after the mapping, makes memkit grow the
 * cached mapping, then checks that the old range, now unmapped, is not
 * poisoned, and that a mapping of its own there can be written.
 * (mki_huge_resize's move and its shrink, mki_os_release_tail, unpoison
 * the same way; the instrumented build's realloc always moves, so they
 * are not reached from here.)
 */
#include "harness.h"

#include <memkit.h>
#include <sanitizer/asan_interface.h>
#include <sys/mman.h>

static void test_moved_mapping_unpoisoned(void)
{
    mk_ctx *c = mk_ctx_new(NULL, "asan-unmapped", MK_GENERAL, NULL);
    REQUIRE_NOT_NULL(c);
    size_t first = (size_t)3 << 20;
    char *p = mk_alloc(c, first);
    REQUIRE_NOT_NULL(p);
    memset(p, 1, first);
    mk_free(p); /* the mapping is cached, poisoned */
    /* the mapping: a page of header, then the chunk; block the pages right
     * after it (if something is there already, it blocks them too) */
    char *seg = p - 4096, *after = p + first;
    void *blocker = mmap(after, 4096, PROT_READ,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                         -1, 0);
    REQUIRE(blocker == after || errno == EEXIST);
    char *q = mk_alloc(c, (size_t)9 << 20); /* the cached mapping, grown */
    REQUIRE_NOT_NULL(q);
    int mapped = msync(seg, 4096, MS_ASYNC) == 0;
    if (mapped) {
        th_note("the mapping grew in place or stayed: nothing to check");
        CHECK_PTR_EQ(q, p);
    } else {
        CHECK_EQ(__asan_address_is_poisoned(p), 0);
        char *m = mmap(p, 4096, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1,
                       0);
        if (m == p && !__asan_address_is_poisoned(p))
            m[0] = 1; /* (only then: ASan would stop the test) */
        CHECK(m == p);
        if (m == p)
            munmap(m, 4096);
    }
    if (blocker == after)
        munmap(blocker, 4096);
    mk_free(q);
    mk_ctx_delete(c);
}

int main(void)
{
    RUN(test_moved_mapping_unpoisoned);
    return th_done();
}
