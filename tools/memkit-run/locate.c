/* SPDX-License-Identifier: MIT */
/*
 * locate.c - which libmemkit-malloc.so memkit-run preloads, the
 * environment the program runs with, and the helper programs found on
 * PATH (gnuplot, addr2line).
 *
 * The library, in order:
 *   1. MEMKIT_RUN_LIB, when set: the user said which; if it is not there
 *      that is an error, never a silent fallback to another build.
 *   2. The build tree's library, when this executable is the build tree's
 *      memkit-run (its directory is the one CMake built it in): a
 *      developer runs the tool against the library built with it.
 *   3. The installed library beside the installed tool: the directory of
 *      /proc/self/exe, then the path from CMAKE_INSTALL_BINDIR to
 *      CMAKE_INSTALL_LIBDIR (e.g. ../lib), then the SONAME
 *      (libmemkit-malloc.so.0), so that an installed prefix can be moved
 *      and `make install PREFIX=DIR` gives a working tool.
 *   4. The build tree's library if it still exists (a copied tool).
 * Trade-off: 2 before 3 only when the tool runs from the build tree, so an
 * installed tool never picks up a stale build tree that happens to exist
 * (the order "build tree, then installed" taken literally would do so).
 *
 * LD_PRELOAD is a list separated by spaces or colons: memkit's library goes
 * first (the first definition of malloc wins), other preloaded libraries
 * stay after it, an inherited libmemkit-malloc is not repeated.  With
 * --system every libmemkit-malloc entry is removed (and LD_PRELOAD unset if
 * nothing is left), so an inherited preload cannot turn the system run into
 * a memkit run.  A library path holding a space or colon cannot be
 * preloaded at all: that is refused with a message.
 */
#include "run.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Compile definitions from tools/CMakeLists.txt. */
#ifndef MEMKIT_RUN_BUILD_LIB
#define MEMKIT_RUN_BUILD_LIB ""
#endif
#ifndef MEMKIT_RUN_BUILD_DIR
#define MEMKIT_RUN_BUILD_DIR ""
#endif
#ifndef MEMKIT_RUN_LIBDIR
#define MEMKIT_RUN_LIBDIR "../lib"
#endif
#ifndef MEMKIT_RUN_SONAME
#define MEMKIT_RUN_SONAME "libmemkit-malloc.so.0"
#endif

static int readable(const char *p) { return p[0] && access(p, R_OK) == 0; }

/* @p as an absolute, resolved path into @out; 0 or -1. */
static int resolve(const char *p, char *out, size_t cap)
{
    char buf[PATH_MAX];
    if (!realpath(p, buf))
        return -1;
    if (strlen(buf) >= cap) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(out, buf);
    return 0;
}

/* The directory of this executable (resolved), or "" if unknown. */
static void exe_dir(char *out, size_t cap)
{
    out[0] = '\0';
    char buf[PATH_MAX];
    if (!realpath("/proc/self/exe", buf))
        return;
    char *slash = strrchr(buf, '/');
    if (!slash)
        return;
    *slash = '\0';
    if (strlen(buf) < cap)
        strcpy(out, buf[0] ? buf : "/");
}

static int same_dir(const char *a, const char *b)
{
    char ra[PATH_MAX], rb[PATH_MAX];
    return a[0] && b[0] && realpath(a, ra) && realpath(b, rb) &&
           strcmp(ra, rb) == 0;
}

static int found(const char *p, char *out, size_t cap, char *why,
                 size_t why_cap)
{
    if (resolve(p, out, cap) != 0) {
        snprintf(why, why_cap, "%s: %s", p, strerror(errno));
        return -1;
    }
    if (strpbrk(out, ": ")) {
        snprintf(why, why_cap, "%s: LD_PRELOAD cannot hold a path with a "
                 "space or a colon", out);
        return -1;
    }
    return 0;
}

int mr_locate_lib(char *out, size_t cap, char *why, size_t why_cap)
{
    const char *env = getenv("MEMKIT_RUN_LIB");
    if (env && *env) {
        if (!readable(env)) {
            snprintf(why, why_cap, "MEMKIT_RUN_LIB=%s: %s", env,
                     strerror(errno));
            return -1;
        }
        return found(env, out, cap, why, why_cap);
    }
    char dir[PATH_MAX];
    exe_dir(dir, sizeof dir);
    const char *build = MEMKIT_RUN_BUILD_LIB;
    if (same_dir(dir, MEMKIT_RUN_BUILD_DIR) && readable(build))
        return found(build, out, cap, why, why_cap);

    char inst[2 * PATH_MAX] = "";
    if (dir[0]) {
        if (MEMKIT_RUN_LIBDIR[0] == '/') /* an absolute LIBDIR */
            snprintf(inst, sizeof inst, "%s/%s", MEMKIT_RUN_LIBDIR,
                     MEMKIT_RUN_SONAME);
        else
            snprintf(inst, sizeof inst, "%s/%s/%s", dir, MEMKIT_RUN_LIBDIR,
                     MEMKIT_RUN_SONAME);
        if (readable(inst))
            return found(inst, out, cap, why, why_cap);
    }
    if (readable(build))
        return found(build, out, cap, why, why_cap);
    snprintf(why, why_cap, "no %s at %s%s%s; set MEMKIT_RUN_LIB=PATH, or "
             "use --system", MEMKIT_RUN_SONAME, inst[0] ? inst : "(unknown)",
             build[0] ? " nor " : "", build);
    return -1;
}

int mr_locate_is_memkit(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strncmp(base, "libmemkit-malloc.so", 19) == 0 ||
           strncmp(base, "libmemkit-malloc-prof.so", 24) == 0 ||
           strcmp(base, "libmemkit-malloc.a") == 0;
}

/* LD_PRELOAD without its libmemkit-malloc entries, @lib first if given;
 * NULL if nothing is left (or out of memory: errno). */
static char *preload_list(const char *old, const char *lib)
{
    size_t cap = (old ? strlen(old) : 0) + (lib ? strlen(lib) : 0) + 2;
    char *list = malloc(cap), *copy = old ? strdup(old) : NULL;
    if (!list || (old && !copy)) {
        free(list);
        free(copy);
        return NULL;
    }
    list[0] = '\0';
    if (lib)
        strcpy(list, lib);
    char *save = NULL;
    for (char *e = copy ? strtok_r(copy, ": ", &save) : NULL; e;
         e = strtok_r(NULL, ": ", &save)) {
        if (mr_locate_is_memkit(e))
            continue;
        if (list[0])
            strcat(list, " ");
        strcat(list, e);
    }
    free(copy);
    if (!list[0]) {
        free(list);
        errno = 0;
        return NULL;
    }
    return list;
}

int mr_locate_env(const char *lib, const char *stats_file)
{
    char *list = preload_list(getenv("LD_PRELOAD"), lib);
    if (!list && errno)
        return -1;
    int r = list ? setenv("LD_PRELOAD", list, 1) : unsetenv("LD_PRELOAD");
    free(list);
    if (r != 0)
        return -1;
    if (stats_file && (setenv("MEMKIT_STATS", "json", 1) != 0 ||
                       setenv("MEMKIT_STATS_FILE", stats_file, 1) != 0))
        return -1;
    return 0;
}

int mr_locate_program(const char *name, char *out, size_t cap)
{
    const char *path = getenv("PATH");
    for (const char *p = path ? path : ""; *p;) {
        size_t n = strcspn(p, ":");
        if (n > 0 && snprintf(out, cap, "%.*s/%s", (int)n, p, name) < (int)cap) {
            struct stat st;
            if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
                return 1;
        }
        p += n;
        if (*p == ':')
            p++;
    }
    return 0;
}
