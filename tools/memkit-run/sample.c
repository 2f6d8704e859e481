/* SPDX-License-Identifier: MIT */
/*
 * sample.c - the program's process tree and its resident memory, read
 * from /proc.
 *
 * A sample sums, over every descendant of the tool (the program, its
 * children, theirs, and orphans re-parented to the tool, see launch.c):
 *   VmRSS          /proc/PID/status: resident pages, shared ones included
 *                  (what top and ps show);
 *   Private_Dirty  /proc/PID/smaps_rollup (Linux 4.14+): pages only this
 *                  process has written: what the allocator really costs,
 *                  without the shared libraries; -1 when the kernel has no
 *                  smaps_rollup.  Where it has, the resident figure is that
 *                  file's Rss, read with Private_Dirty in one read (the
 *                  same as VmRSS, of the same instant: a process growing
 *                  between two reads gave dirty > rss).
 * A zombie has no VmRSS and is not counted: after exit its memory is gone.
 * Summing VmRSS counts a page shared by a parent and its forked child
 * twice, as the kernel's own accounting would charge each of them.
 *
 * The tree, two ways (one chosen once, at start):
 *   children  /proc/PID/task/TID/children lists each thread's children
 *             (CONFIG_PROC_CHILDREN): the cost follows the tree's size;
 *   scan      read every /proc/PID/stat for its parent: works on every
 *             kernel, but costs O(processes on the machine) per sample.
 * MEMKIT_RUN_PROC_SCAN=1 forces the scan (the tests use it to run both).
 *
 * Races are harmless by construction: a process that appears or ends
 * between two reads is counted in the next sample or not at all, never
 * half.  Every file is read into one buffer per sampler; apart from
 * opendir, nothing allocates per sample once the lists have grown to the
 * tree's size.
 */
#include "run.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_TREE 100000 /* a guard against a runaway list, not a limit */

typedef struct pid_pair {
    pid_t pid, ppid;
} pid_pair;

struct mr_sampler {
    int scan;
    int rollup; /* the kernel has smaps_rollup */
    pid_t self;
    char *buf; /* file contents */
    size_t buf_cap;
    pid_t *tree; /* this sample's processes, parents before children */
    size_t ntree, tree_cap;
    pid_pair *all; /* scan: every process of the machine */
    size_t nall, all_cap;
    pid_t *seen; /* sorted: every process a sample has counted */
    size_t nseen, seen_cap;
};

static int grow(void **v, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap * 2 : 64;
    while (n < need)
        n *= 2;
    void *p = realloc(*v, n * size);
    if (!p)
        return -1;
    *v = p;
    *cap = n;
    return 0;
}

/* The whole file @path into s->buf, NUL-terminated; its length or -1. */
static ssize_t slurp(mr_sampler *s, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = 0;
    for (;;) {
        if (len + 1 >= s->buf_cap &&
            grow((void **)&s->buf, &s->buf_cap, len + 4096, 1) != 0)
            break;
        ssize_t n = read(fd, s->buf + len, s->buf_cap - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    s->buf[len] = '\0';
    return (ssize_t)len;
}

/* The number after "@key:" in s->buf (kB figures), or -1. */
static long field(const mr_sampler *s, const char *key)
{
    size_t klen = strlen(key);
    for (const char *l = s->buf; l;) {
        if (strncmp(l, key, klen) == 0 && l[klen] == ':')
            return strtol(l + klen + 1, NULL, 10);
        l = strchr(l, '\n');
        if (l)
            l++;
    }
    return -1;
}

static int push_tree(mr_sampler *s, pid_t pid)
{
    if (s->ntree >= MAX_TREE ||
        grow((void **)&s->tree, &s->tree_cap, s->ntree + 1, sizeof(pid_t)))
        return -1;
    s->tree[s->ntree++] = pid;
    return 0;
}

/* children: append the children of every thread of @pid. */
static void children_of(mr_sampler *s, pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        char cpath[96];
        snprintf(cpath, sizeof cpath, "/proc/%d/task/%.16s/children",
                 (int)pid, e->d_name);
        if (slurp(s, cpath) <= 0)
            continue;
        char *p = s->buf;
        for (;;) {
            char *end;
            long c = strtol(p, &end, 10);
            if (end == p || (c > 0 && push_tree(s, (pid_t)c) != 0))
                break;
            p = end;
        }
    }
    closedir(d);
}

/* scan: every process's parent, from /proc/PID/stat. */
static void scan_all(mr_sampler *s)
{
    s->nall = 0;
    DIR *d = opendir("/proc");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/%.16s/stat", e->d_name);
        if (slurp(s, path) <= 0)
            continue;
        /* "pid (comm) state ppid ...": comm may hold spaces and ')' */
        const char *close_paren = strrchr(s->buf, ')');
        char state;
        int ppid;
        if (!close_paren || sscanf(close_paren + 1, " %c %d", &state, &ppid) != 2)
            continue;
        if (grow((void **)&s->all, &s->all_cap, s->nall + 1, sizeof *s->all))
            break;
        s->all[s->nall].pid = (pid_t)atoi(e->d_name);
        s->all[s->nall].ppid = (pid_t)ppid;
        s->nall++;
    }
    closedir(d);
}

static void walk(mr_sampler *s)
{
    s->ntree = 0;
    if (s->scan)
        scan_all(s);
    /* breadth first from the tool itself: tree[i]'s children are appended
     * after it; the tool is not part of the sample */
    pid_t parent = s->self;
    size_t i = 0;
    for (;;) {
        if (s->scan) {
            for (size_t k = 0; k < s->nall; k++)
                if (s->all[k].ppid == parent && push_tree(s, s->all[k].pid))
                    return;
        } else {
            children_of(s, parent);
        }
        if (i >= s->ntree)
            return;
        parent = s->tree[i++];
    }
}

static void note_seen(mr_sampler *s, pid_t pid)
{
    size_t lo = 0, hi = s->nseen;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->seen[mid] == pid)
            return;
        if (s->seen[mid] < pid)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (grow((void **)&s->seen, &s->seen_cap, s->nseen + 1, sizeof(pid_t)))
        return;
    memmove(s->seen + lo + 1, s->seen + lo, (s->nseen - lo) * sizeof(pid_t));
    s->seen[lo] = pid;
    s->nseen++;
}

mr_sampler *mr_sample_new(void)
{
    mr_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->self = getpid();
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)s->self,
             (int)s->self);
    const char *force = getenv("MEMKIT_RUN_PROC_SCAN");
    s->scan = (force && strcmp(force, "1") == 0) || access(path, R_OK) != 0;
    s->rollup = access("/proc/self/smaps_rollup", R_OK) == 0;
    return s;
}

void mr_sample_delete(mr_sampler *s)
{
    if (!s)
        return;
    free(s->buf);
    free(s->tree);
    free(s->all);
    free(s->seen);
    free(s);
}

int mr_sample_take(mr_sampler *s, pid_t program, mr_sample *out)
{
    walk(s);
    out->rss_kib = 0;
    out->dirty_kib = 0;
    out->procs = 0;
    int program_alive = 0;
    for (size_t i = 0; i < s->ntree; i++) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/status", (int)s->tree[i]);
        if (slurp(s, path) <= 0)
            continue;
        long rss = field(s, "VmRSS"); /* absent in a zombie */
        if (rss < 0)
            continue;
        snprintf(path, sizeof path, "/proc/%d/smaps_rollup", (int)s->tree[i]);
        long dirty = -1;
        if (s->rollup && slurp(s, path) > 0) {
            /* both figures from one read, so that they are of one instant
             * (VmRSS, read before, may have grown since) */
            dirty = field(s, "Private_Dirty");
            long rollup_rss = field(s, "Rss");
            if (rollup_rss >= 0)
                rss = rollup_rss;
        }
        out->rss_kib += rss;
        if (!s->rollup)
            out->dirty_kib = -1;
        else if (dirty > 0) /* (unreadable: it ended since) */
            out->dirty_kib += dirty;
        out->procs++;
        note_seen(s, s->tree[i]);
        if (s->tree[i] == program)
            program_alive = 1;
    }
    return program_alive;
}

size_t mr_sample_seen(const mr_sampler *s) { return s->nseen; }
