/* SPDX-License-Identifier: MIT */
/*
 * override/late_cxx_host.c - a C program, run with
 * LD_PRELOAD=libmemkit-malloc.so, that loads a C++ plugin with dlopen
 * (late_cxx_plugin.cc) after memkit: libstdc++ was not there when memkit
 * was loaded, so its weak references to the C++ runtime are unbound.  A
 * failed operator new in the plugin must still throw std::bad_alloc,
 * which the plugin catches (found by review: memkit called abort()), and
 * call the new-handler the plugin installed first.
 *
 * Usage: override_late_cxx PLUGIN.so
 */
#include "harness.h"

#include <dlfcn.h>

static const char *plugin_path;

static void test_plugin_catches_bad_alloc(void)
{
    void *h = dlopen(plugin_path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        printf("  dlopen: %s\n", dlerror());
    REQUIRE_NOT_NULL(h);
    int (*run)(int) = (int (*)(int))dlsym(h, "plugin_run");
    REQUIRE_NOT_NULL(run);
    CHECK_EQ(run(0), 1); /* caught std::bad_alloc */
    CHECK_EQ(run(1), 2); /* its new-handler was called, then bad_alloc */
    CHECK_EQ(run(2), 0); /* an ordinary new and delete */
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        printf("usage: %s PLUGIN.so\n", argv[0]);
        return 2;
    }
    plugin_path = argv[1];
    RUN(test_plugin_catches_bad_alloc);
    return th_done();
}
