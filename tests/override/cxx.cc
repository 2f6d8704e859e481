/* SPDX-License-Identifier: MIT */
/*
 * override/cxx.cc - C++ operator new and delete on the drop-in, every form:
 * plain, array, nothrow, sized delete, aligned new and delete (alignas(64)
 * and alignas(4096) types, explicit std::align_val_t calls, nothrow and
 * sized aligned forms), and the standard containers' churn (vector, string,
 * map) with their contents checked.
 *
 * What it proves:
 *  - the operators are memkit's: every pointer they return belongs to the
 *    thread's current context (linked build, mk_ctx_of) or carries
 *    memkit's telltale (preloaded build: malloc_usable_size of a 1-byte
 *    new is 8 where glibc gives 24); the preloaded build also finds
 *    libmemkit-malloc in /proc/self/maps;
 *  - alignment requests are honoured (64, 4096 and an explicit 128 KiB);
 *  - array new with a non-trivial destructor (the array cookie) and every
 *    delete form free what they should (the heap's chunk count, linked
 *    build; contents and no crash in both);
 *  - failure follows the standard: new char[SIZE_MAX / 2] and aligned new
 *    of an impossible size throw std::bad_alloc; the nothrow forms return
 *    nullptr; a new-handler is called until it gives up (uninstalls
 *    itself), then std::bad_alloc is thrown.
 *
 * Built twice: linked with libmemkit-malloc (OVR_LINKED) and as a plain
 * C++ program run with LD_PRELOAD.  Fixed seeds; well under a second.
 *
 * tests/harness.h is C only (it converts void * implicitly), so the few
 * pieces of it used here are restated below in C++, with the same output
 * and the same rule: a run in which no check ran fails.
 */
#include <malloc.h>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <new>
#include <string>
#include <vector>
#ifdef OVR_LINKED
#include <memkit.h>
#endif

/* ---- the harness, in C++ ------------------------------------------------ */

static long th_checks;
static int th_failures, th_test_failed;
static const char *th_current = "?";

__attribute__((format(printf, 3, 4))) static void th_fail(const char *file,
                                                           int line,
                                                           const char *fmt, ...)
{
    fflush(stdout);
    fprintf(stderr, "%s:%d: [%s] FAILED: ", file, line, th_current);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    th_failures++;
    th_test_failed++;
}

#define CHECK(cond)                                                         \
    do {                                                                    \
        th_checks++;                                                        \
        if (!(cond))                                                        \
            th_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);                \
    } while (0)
#define TH_CMP(a, op, b)                                                    \
    do {                                                                    \
        th_checks++;                                                        \
        auto th_a_ = (a);                                                   \
        auto th_b_ = (b);                                                   \
        if (!(th_a_ op th_b_))                                              \
            th_fail(__FILE__, __LINE__, "%s %s %s: left %lld, right %lld",  \
                    #a, #op, #b, (long long)th_a_, (long long)th_b_);       \
    } while (0)
#define CHECK_EQ(a, b) TH_CMP(a, ==, b)
#define CHECK_GT(a, b) TH_CMP(a, >, b)
#define REQUIRE(cond)                                                       \
    do {                                                                    \
        th_checks++;                                                        \
        if (!(cond)) {                                                      \
            th_fail(__FILE__, __LINE__, "REQUIRE(%s)", #cond);              \
            return;                                                         \
        }                                                                   \
    } while (0)
#define RUN(fn) th_run(#fn, fn)

static void th_run(const char *name, void (*fn)())
{
    th_current = name;
    th_test_failed = 0;
    printf("[ RUN  ] %s\n", name);
    fflush(stdout);
    fn();
    printf("[ %s ] %s\n", th_test_failed ? "FAIL" : " OK ", name);
    fflush(stdout);
}

static int th_done()
{
    printf("%ld checks, %d failed\n", th_checks, th_failures);
    return th_failures || th_checks == 0 ? 1 : 0;
}

struct th_rng {
    uint64_t s;
};
static uint64_t th_below(th_rng *r, uint64_t n) /* xorshift64*, as harness.h */
{
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return (x * 0x2545F4914F6CDD1Dull) % n;
}

/* ---- the tests ---------------------------------------------------------- */

/* Keep the compiler from eliding or folding an allocation. */
static void *volatile sink;
static size_t opaque(size_t n)
{
    volatile size_t v = n;
    return v;
}

/* Does @p come from memkit? */
static void check_memkit(const void *p, const char *what, int line)
{
    th_checks++;
    if (!p) {
        th_fail(__FILE__, line, "%s returned nullptr", what);
        return;
    }
#ifdef OVR_LINKED
    if (mk_ctx_of(p) != mk_ctx_current())
        th_fail(__FILE__, line, "%s = %p is not in the current context", what,
                p);
#else
    (void)what;
#endif
}
#define CHECK_MEMKIT(p, what) check_memkit((p), (what), __LINE__)

static size_t live_chunks(void)
{
#ifdef OVR_LINKED
    mk_stats st;
    mk_ctx_stats(mk_ctx_current(), &st, 0);
    return st.chunks;
#else
    return 0; /* not visible without memkit's API */
#endif
}

static void test_operators_are_memkit()
{
#ifndef OVR_LINKED
    FILE *f = fopen("/proc/self/maps", "r");
    REQUIRE(f != nullptr);
    char line[4096];
    int found = 0;
    while (fgets(line, sizeof line, f))
        found |= strstr(line, "libmemkit-malloc") != nullptr;
    fclose(f);
    CHECK(found);
#endif
    char *one = new char[opaque(1)];
    CHECK_EQ(malloc_usable_size(one), 16u); /* glibc: 24 */
    CHECK_MEMKIT(one, "new char[1]");
    delete[] one;
    int *i = new int(7);
    CHECK_MEMKIT(i, "new int");
    CHECK_EQ(*i, 7);
    delete i;
    void *raw = ::operator new(opaque(100));
    CHECK_MEMKIT(raw, "operator new(100)");
    ::operator delete(raw);
}

/* ---- every form, allocation and release --------------------------------- */

static int constructed, destroyed;

struct counted {
    uint64_t v[3];
    counted() : v{1, 2, 3} { constructed++; }
    ~counted() { destroyed++; }
};

struct alignas(64) line64 {
    unsigned char b[64];
};

struct alignas(4096) page4k {
    unsigned char b[100];
};

static void test_forms()
{
    size_t base = live_chunks();

    /* plain and array, with a non-trivial destructor (array cookie) */
    counted *c = new counted;
    counted *arr = new counted[opaque(17)];
    CHECK_MEMKIT(c, "new counted");
    CHECK_EQ(constructed, 18);
    CHECK_EQ(arr[16].v[2], 3u);
#ifdef OVR_LINKED
    CHECK_EQ(live_chunks(), base + 2);
#endif
    delete c;
    delete[] arr;
    CHECK_EQ(destroyed, 18);

    /* nothrow */
    int *nt = new (std::nothrow) int[opaque(1000)];
    CHECK_MEMKIT(nt, "new (nothrow) int[1000]");
    nt[999] = 5;
    delete[] nt;
    void *ntr = ::operator new(opaque(64), std::nothrow);
    CHECK_MEMKIT(ntr, "operator new(64, nothrow)");
    ::operator delete(ntr, std::nothrow);

    /* sized delete, plain and array, small to huge */
    static const size_t sizes[] = {1, 24, 100, 5000, 40000, 3 * 1024 * 1024};
    for (size_t s : sizes) {
        void *p = ::operator new(s);
        void *q = ::operator new[](s);
        CHECK_MEMKIT(p, "operator new(n)");
        CHECK_MEMKIT(q, "operator new[](n)");
        memset(p, 1, s);
        memset(q, 2, s);
        ::operator delete(p, s);
        ::operator delete[](q, s);
    }

    /* aligned types: new picks the align_val_t forms */
    line64 *l = new line64;
    line64 *la = new line64[opaque(9)];
    page4k *pg = new page4k;
    page4k *pga = new page4k[opaque(3)];
    CHECK_EQ((uintptr_t)l % 64, 0u);
    CHECK_EQ((uintptr_t)la % 64, 0u);
    CHECK_EQ((uintptr_t)pg % 4096, 0u);
    CHECK_EQ((uintptr_t)pga % 4096, 0u);
    CHECK_EQ((uintptr_t)&pga[2] % 4096, 0u);
    CHECK_MEMKIT(l, "new line64");
    CHECK_MEMKIT(pga, "new page4k[3]");
    memset(la, 9, 9 * sizeof *la);
    delete l;
    delete[] la;
    delete pg;
    delete[] pga;

    /* explicit aligned forms, with and without size, nothrow */
    const std::align_val_t big{128 * 1024};
    void *a1 = ::operator new(opaque(1000), big);
    void *a2 = ::operator new[](opaque(70000), big);
    void *a3 = ::operator new(opaque(10), big, std::nothrow);
    void *a4 = ::operator new[](opaque(10), big, std::nothrow);
    CHECK_EQ((uintptr_t)a1 % (128 * 1024), 0u);
    CHECK_EQ((uintptr_t)a2 % (128 * 1024), 0u);
    CHECK_EQ((uintptr_t)a3 % (128 * 1024), 0u);
    CHECK_EQ((uintptr_t)a4 % (128 * 1024), 0u);
    CHECK_MEMKIT(a2, "operator new[](70000, 128 KiB)");
    ::operator delete(a1, 1000, big);
    ::operator delete[](a2, big);
    ::operator delete(a3, big, std::nothrow);
    ::operator delete[](a4, 10, big);

#ifdef OVR_LINKED
    CHECK_EQ(live_chunks(), base); /* every form freed its chunk */
#else
    (void)base;
#endif
}

/* ---- failure ------------------------------------------------------------ */

static int handler_calls;
static void give_up_handler()
{
    if (++handler_calls == 2)
        std::set_new_handler(nullptr); /* the next failure throws */
}

static void test_failure()
{
    int threw = 0;
    try {
        sink = new char[opaque(SIZE_MAX / 2)];
    } catch (const std::bad_alloc &) {
        threw = 1;
    }
    CHECK_EQ(threw, 1);

    threw = 0;
    try {
        sink = ::operator new(opaque(SIZE_MAX / 2), std::align_val_t{64});
    } catch (const std::bad_alloc &) {
        threw = 1;
    }
    CHECK_EQ(threw, 1);

    CHECK(new (std::nothrow) char[opaque(SIZE_MAX / 2)] == nullptr);
    CHECK(::operator new(opaque(SIZE_MAX / 2), std::nothrow) == nullptr);
    CHECK(::operator new[](opaque(SIZE_MAX / 2), std::align_val_t{4096},
                           std::nothrow) == nullptr);

    /* the new-handler is called until it uninstalls itself */
    std::set_new_handler(give_up_handler);
    threw = 0;
    try {
        sink = ::operator new(opaque((size_t)1 << 50));
    } catch (const std::bad_alloc &) {
        threw = 1;
    }
    CHECK_EQ(threw, 1);
    CHECK_EQ(handler_calls, 2);
    CHECK(std::get_new_handler() == nullptr);

    /* and allocation works afterwards */
    char *ok = new char[100];
    CHECK_MEMKIT(ok, "new char[100] after failures");
    delete[] ok;
}

/* ---- containers --------------------------------------------------------- */

static void test_containers()
{
    size_t base = live_chunks();
    th_rng r = {0xc0ffee};
    {
        std::map<uint64_t, std::string> m;
        std::vector<std::vector<uint64_t>> vs;
        for (int round = 0; round < 20000; round++) {
            uint64_t k = th_below(&r, 4096);
            switch (th_below(&r, 4)) {
            case 0: /* strings of every length, keyed by their seed */
                m[k] = std::string(1 + k % 300, (char)('a' + k % 26));
                break;
            case 1:
                m.erase(k);
                break;
            case 2: { /* vectors grown element by element: k, k, 2k, .. */
                std::vector<uint64_t> v{k};
                for (uint64_t j = 1; j < k % 2000; j++)
                    v.push_back(j * k);
                vs.push_back(std::move(v));
                break;
            }
            default:
                if (!vs.empty())
                    vs.erase(vs.begin() + (long)th_below(&r, vs.size()));
                break;
            }
        }
        int bad = 0;
        for (auto &kv : m)
            bad += kv.second != std::string(1 + kv.first % 300,
                                            (char)('a' + kv.first % 26));
        for (auto &v : vs)
            for (size_t j = 1; j < v.size(); j++)
                bad += v[j] != j * v[0];
        CHECK_EQ(bad, 0);
        CHECK_GT(m.size(), 100u);
        CHECK_GT(vs.size(), 10u);
        std::string probe(100, 'x'); /* past the small-string buffer */
        CHECK_MEMKIT(probe.data(), "std::string(100) data");
        CHECK_MEMKIT(vs.back().data(), "std::vector data");
    }
#ifdef OVR_LINKED
    CHECK_EQ(live_chunks(), base); /* the containers freed everything */
#else
    (void)base;
#endif
}

int main()
{
    RUN(test_operators_are_memkit);
    RUN(test_forms);
    RUN(test_failure);
    RUN(test_containers);
    return th_done();
}
