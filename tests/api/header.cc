/* SPDX-License-Identifier: MIT */
/*
 * api/header.cc - memkit.h as a C++ program sees it: every macro and every
 * inline function of the header, compiled as C++ (api/header.sh builds it
 * with -std=c++11, c++17 and c++20 under -Wall -Wextra -Wpedantic
 * -Wold-style-cast -Werror) and run.  The same file is the C++ consumer of
 * the installed library (tests/install/check_install.sh: pkg-config and
 * CMake).  It stands alone (no test harness: it is built as a user builds a
 * program) and exits 0 only if every check held; it prints how many ran.
 *
 * Covered: the version macros, MK_CTX_REPORT_LEAKS, MK_CTX_RELEASE_ON_RESET,
 * MK_POOL_THREADSAFE, MK_POOL_DECLARE (a plain and an over-aligned type,
 * plain and thread-safe pools), mk_pool_get / mk_pool_put (and through them
 * the header's internal helpers), MK_MALLOC_LIKE results used as C++ code
 * uses them, and a deliberately discarded mk_strdup (no warning).
 */
#include <memkit.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

namespace {

int checks, failures;

void check(bool ok, const char *what, int line)
{
    checks++;
    if (!ok) {
        failures++;
        std::fprintf(stderr, "header.cc:%d: FAILED: %s\n", line, what);
    }
}
#define CHECK(cond) check((cond), #cond, __LINE__)

struct vec3 {
    double x, y, z;
};
struct alignas(64) line64 {
    char bytes[64];
};

} // namespace

MK_POOL_DECLARE(vec3, vec3)
MK_POOL_DECLARE(line64, line64)

// A C++ type that owns a context, as a program would wrap one.
class Arena {
  public:
    explicit Arena(const char *name, unsigned flags = 0)
    {
        mk_ctx_opts o = {};
        o.flags = flags;
        ctx_ = mk_ctx_new(nullptr, name, MK_GENERAL, &o);
    }
    ~Arena() { mk_ctx_delete(ctx_); }
    Arena(const Arena &) = delete;
    Arena &operator=(const Arena &) = delete;
    mk_ctx *get() const { return ctx_; }
    template <class T> T *make(const T &v)
    {
        void *p = mk_alloc_aligned(ctx_, sizeof(T), alignof(T));
        return p ? new (p) T(v) : nullptr;
    }

  private:
    mk_ctx *ctx_;
};

static void test_version()
{
    std::string v = std::to_string(MK_VERSION_MAJOR) + "." + std::to_string(MK_VERSION_MINOR) +
                    "." + std::to_string(MK_VERSION_PATCH);
    CHECK(v == MK_VERSION_STRING);
}

static void test_contexts()
{
    Arena a("cxx", MK_CTX_RELEASE_ON_RESET);
    CHECK(a.get() != nullptr);
    CHECK(std::strcmp(mk_ctx_name(a.get()), "cxx") == 0);
    vec3 *v = a.make(vec3{1, 2, 3});
    CHECK(v != nullptr && v->y == 2);
    CHECK(mk_ctx_of(v) == a.get());
    char *s = mk_strdup(a.get(), "memkit");
    CHECK(s != nullptr && std::strcmp(s, "memkit") == 0);
    (void)mk_strdup(a.get(), "discarded on purpose: the context takes it back");
    int *ids = static_cast<int *>(mk_alloc_array(a.get(), 10, sizeof(int)));
    CHECK(ids != nullptr && ids[9] == 0);
    int *more = static_cast<int *>(mk_realloc(ids, 1000 * sizeof(int)));
    CHECK(more != nullptr && mk_ctx_of(more) == a.get());
    mk_stats st;
    CHECK(mk_ctx_stats(a.get(), &st, 1) == 0 && st.chunks >= 3);
    mk_ctx_reset(a.get());
    CHECK(mk_ctx_stats(a.get(), &st, 0) == 0 && st.chunks == 0);

    mk_ctx_opts leaky = {};
    leaky.flags = MK_CTX_REPORT_LEAKS;
    mk_ctx *c = mk_ctx_new(a.get(), "child", MK_GENERAL, &leaky);
    CHECK(c != nullptr && mk_ctx_parent(c) == a.get());
    void *p = mk_alloc(c, 10);
    CHECK(p != nullptr);
    mk_free(p);
    mk_ctx_delete(c); // nothing leaked: no report
}

template <class Pool, class T>
static void exercise(Pool *pool, T *(*alloc)(Pool *), void (*release)(Pool *, T *),
                     std::size_t align)
{
    T *objs[100];
    for (auto &o : objs) {
        o = alloc(pool);
        CHECK(o != nullptr);
        if (o) {
            CHECK(reinterpret_cast<std::uintptr_t>(o) % align == 0);
            std::memset(static_cast<void *>(o), 0x5a, sizeof(T));
        }
    }
    for (auto &o : objs)
        release(pool, o);
    // Freed objects come back first (the pool's inline front, when it has one).
    T *again = alloc(pool);
    CHECK(again != nullptr);
    release(pool, again);
}

static void test_typed_pools()
{
    for (unsigned flags : {0u, static_cast<unsigned>(MK_POOL_THREADSAFE)}) {
        vec3_pool *vp = vec3_pool_new("vec3", flags);
        CHECK(vp != nullptr);
        exercise(vp, vec3_alloc, vec3_free, alignof(vec3));
        vec3_pool_delete(vp);

        line64_pool *lp = line64_pool_new("line64", flags);
        CHECK(lp != nullptr);
        exercise(lp, line64_alloc, line64_free, 64);
        line64_pool_delete(lp);
    }
    // In a context's tree, with its figures.
    mk_ctx *parent = mk_ctx_new(nullptr, "parent", MK_GENERAL, nullptr);
    CHECK(parent != nullptr);
    vec3_pool *in = vec3_pool_new_in(parent, "vec3-in", 0);
    CHECK(in != nullptr);
    vec3 *v = vec3_alloc(in);
    CHECK(v != nullptr);
    mk_stats st;
    CHECK(vec3_stats(in, &st) == 0);
    CHECK(st.chunks == 1);
    vec3_free(in, v);
    mk_ctx_delete(parent); // the pool goes with it
}

static void test_untyped_pool()
{
    mk_pool *p = mk_pool_new("raw", 32, 0, 0);
    CHECK(p != nullptr);
    void *a = mk_pool_get(p), *b = mk_pool_get(p);
    CHECK(a != nullptr && b != nullptr && a != b);
    mk_pool_put(p, a);
    void *again = mk_pool_get(p);
    // the release build's inline front hands the last freed object back
    CHECK(again == a || mk_checking());
    mk_pool_put(p, again);
    mk_pool_free(p, b);
    void *c = mk_pool_alloc(p);
    CHECK(c != nullptr);
    mk_pool_put(p, c);
    mk_stats st;
    CHECK(mk_pool_stats(p, &st) == 0 && st.chunks == 0);
    mk_pool_delete(p);
}

int main()
{
    test_version();
    test_contexts();
    test_typed_pools();
    test_untyped_pool();
    std::printf("%d checks, %d failed\n", checks, failures);
    return failures || checks == 0 ? 1 : 0;
}
