// SPDX-License-Identifier: MIT
// override/late_cxx_plugin.cc - the C++ plugin late_cxx_host.c loads with
// dlopen: plugin_run(0) asks operator new for 2^60 bytes and returns 1 if
// it caught std::bad_alloc; plugin_run(1) does the same with a new-handler
// installed (it counts its calls, then removes itself) and returns 2 if
// the handler ran and bad_alloc was caught; plugin_run(2) returns 0 after
// an ordinary new/delete.
#include <cstddef>
#include <new>

static int handler_calls;

static void handler()
{
    handler_calls++;
    std::set_new_handler(nullptr); // no memory to free: give up
}

extern "C" int plugin_run(int how)
{
    if (how == 2) {
        int *p = new int[100];
        p[99] = 1;
        int r = p[99] - 1;
        delete[] p;
        return r;
    }
    if (how == 1)
        std::set_new_handler(handler);
    handler_calls = 0;
    try {
        volatile std::size_t n = std::size_t(1) << 60;
        char *p = new char[n];
        delete[] p;
        return -1;
    } catch (const std::bad_alloc &) {
        return how == 1 ? (handler_calls == 1 ? 2 : -2) : 1;
    }
}
