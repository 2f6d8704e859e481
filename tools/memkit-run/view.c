/* SPDX-License-Identifier: MIT */
/*
 * view.c - memkit's own view of the run: the figures its exit handler
 * wrote (MEMKIT_STATS=json into MEMKIT_STATS_FILE), in a few lines.
 *
 * The tool samples what the kernel sees (RSS); memkit knows why: how much
 * it has committed and reserved, how much its purge policy gave back and
 * in how many passes, which size classes hold the most pages.  Together
 * they tell "the program still uses it" from "the allocator kept it".
 *
 * Schema (src/stats.c, "memkit-process-stats" version 1):
 *   {"schema","version","pid",
 *    "os":{"reserved_bytes","committed_bytes","calls","segments"},
 *    "purge":{"mode","delay_ms","purged_bytes","passes"},
 *    "heap":{"segment_committed_bytes","page_bytes","huge_chunks",
 *            "huge_bytes","huge_cached_bytes","meta_bytes"},
 *    "classes":[{"chunk_size","page_bytes"},...]}   (largest first)
 * A newer version is read if the fields used here are still there; an
 * unknown schema, a missing field or a file that is not JSON gives one
 * line saying so, never figures that might be wrong.
 *
 * Every process that ran on memkit writes its record when it exits.
 * memkit-run makes the file a FIFO and keeps every record (main.c); the
 * view shows the process that held the most at its exit, which for a
 * wrapper script is the program it runs, not the wrapper.  The pid says
 * whose figures these are; when it is not the program's, the view says
 * so, with what the program itself held.  An empty
 * file means nobody wrote: the program was killed, left through _exit,
 * or exec'd something that does not run on memkit.
 */
#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_FILE (1 << 20)

void mr_view_bytes(char *buf, size_t cap, double b)
{
    if (b < 1024)
        snprintf(buf, cap, "%.0f B", b);
    else if (b < 1024.0 * 1024)
        snprintf(buf, cap, "%.1f KiB", b / 1024);
    else if (b < 1024.0 * 1024 * 1024)
        snprintf(buf, cap, "%.1f MiB", b / (1024.0 * 1024));
    else
        snprintf(buf, cap, "%.2f GiB", b / (1024.0 * 1024 * 1024));
}

/* The integer at @obj.@key, or a message in @missing. */
static long long need(const mr_json *obj, const char *section,
                      const char *key, const char **missing)
{
    long long v = 0;
    if (mr_json_int(obj, key, &v) != 0 && !*missing) {
        static char what[96];
        snprintf(what, sizeof what, "no integer %s%s%s", section,
                 section[0] ? "." : "", key);
        *missing = what;
    }
    return v;
}

/* One record (one JSON object) in words.  @nrec: how many records the
 * run left; @prog_committed: the program's own committed bytes (-1 if it
 * left no record). */
static int print_record(FILE *out, const char *text, size_t len, pid_t program, int nrec,
                        long long prog_committed)
{
    size_t ws = 0;
    while (ws < len && strchr(" \t\r\n", text[ws]))
        ws++;
    if (ws == len) {
        fprintf(out, "memkit's view: none: no statistics were written at "
                     "exit (the program was killed, left through _exit, or "
                     "exec'd something not on memkit)\n");
        return -1;
    }
    char err[200];
    mr_json *j = mr_json_parse(text, len, err, sizeof err);
    if (!j) {
        fprintf(out, "memkit's view: unreadable statistics (%s)\n", err);
        return -1;
    }
    const mr_json *schema = mr_json_get(j, "schema");
    long long version = 0;
    if (!schema || schema->type != MR_JSON_STRING ||
        strcmp(schema->str, "memkit-process-stats") != 0 ||
        mr_json_int(j, "version", &version) != 0 || version < 1) {
        fprintf(out, "memkit's view: unreadable statistics (not the "
                     "memkit-process-stats schema, version 1 or later)\n");
        mr_json_free(j);
        return -1;
    }
    const char *missing = NULL;
    const mr_json *os = mr_json_get(j, "os"), *pg = mr_json_get(j, "purge"),
                  *heap = mr_json_get(j, "heap"),
                  *classes = mr_json_get(j, "classes"),
                  *mode = mr_json_get(pg, "mode");
    long long pid = need(j, "", "pid", &missing);
    long long reserved = need(os, "os", "reserved_bytes", &missing);
    long long committed = need(os, "os", "committed_bytes", &missing);
    long long calls = need(os, "os", "calls", &missing);
    long long segments = need(os, "os", "segments", &missing);
    long long delay = need(pg, "purge", "delay_ms", &missing);
    long long purged = need(pg, "purge", "purged_bytes", &missing);
    long long passes = need(pg, "purge", "passes", &missing);
    long long pages = need(heap, "heap", "page_bytes", &missing);
    long long seg_b = need(heap, "heap", "segment_committed_bytes", &missing);
    long long huge_n = need(heap, "heap", "huge_chunks", &missing);
    long long huge_b = need(heap, "heap", "huge_bytes", &missing);
    long long huge_c = need(heap, "heap", "huge_cached_bytes", &missing);
    long long meta = need(heap, "heap", "meta_bytes", &missing);
    if (!missing && (!mode || mode->type != MR_JSON_STRING))
        missing = "no string purge.mode";
    if (!missing && (!classes || classes->type != MR_JSON_ARRAY))
        missing = "no array classes";
    if (missing) {
        fprintf(out, "memkit's view: unreadable statistics (%s)\n", missing);
        mr_json_free(j);
        return -1;
    }

    char a[32], b[32];
    if (pid == program && nrec <= 1)
        fprintf(out, "memkit's view at exit (pid %lld, the program)\n", pid);
    else if (pid == program)
        fprintf(out, "memkit's view at exit (pid %lld, the program: of the %d processes on "
                     "memkit, it held the most)\n", pid, nrec);
    else if (nrec <= 1)
        fprintf(out, "memkit's view at exit (pid %lld: a process the program "
                     "started, the only one on memkit to report; the program was "
                     "pid %d)\n", pid, (int)program);
    else {
        if (prog_committed >= 0)
            mr_view_bytes(a, sizeof a, (double)prog_committed);
        fprintf(out, "memkit's view at exit (pid %lld: of the %d processes on memkit, the "
                     "one that held the most; the program, pid %d, %s%s)\n", pid, nrec,
                (int)program, prog_committed >= 0 ? "held " : "left no figures",
                prog_committed >= 0 ? a : "");
    }
    mr_view_bytes(a, sizeof a, (double)committed);
    mr_view_bytes(b, sizeof b, (double)reserved);
    fprintf(out, "  committed   %s of %s reserved (%lld segment%s, %lld OS "
                 "calls), every byte of it:\n", a, b, segments,
            segments == 1 ? "" : "s", calls);
    /* where it is: the segments' committed units (the pages contexts
     * hold, a large chunk's page counted whole, and the rest: free units
     * not given back yet, and the headers), huge chunks, cached huge
     * mappings, bookkeeping; what the figures, read one after another,
     * leave over (the purge thread's own work meanwhile) is "other" */
    long long in_pages = pages < seg_b ? pages : seg_b;
    long long parts[5] = {in_pages, seg_b - in_pages, huge_b, huge_c, meta};
    static const char *const names[5] = {
        "in pages that contexts hold (small and large chunks, with the free "
        "room of those pages)",
        "free in segments, not given back yet (and the segments' headers)",
        "in huge chunks", "in freed huge mappings kept for reuse",
        "memkit's bookkeeping"};
    long long rest = committed;
    for (int i = 0; i < 5; i++) {
        mr_view_bytes(a, sizeof a, (double)parts[i]);
        if (i == 2)
            fprintf(out, "    %10s  in %lld huge chunk%s\n", a, huge_n,
                    huge_n == 1 ? "" : "s");
        else
            fprintf(out, "    %10s  %s\n", a, names[i]);
        rest -= parts[i];
    }
    if (rest > 0) {
        mr_view_bytes(a, sizeof a, (double)rest);
        fprintf(out, "    %10s  other (committed meanwhile)\n", a);
    }
    mr_view_bytes(a, sizeof a, (double)purged);
    fprintf(out, "  purged      %s in %lld pass%s (mode %s, delay %lld ms)\n",
            a, passes, passes == 1 ? "" : "es", mode->str, delay);

    int shown = 0;
    for (const mr_json *k = classes->first; k && shown < 4; k = k->next) {
        long long size, bytes;
        if (mr_json_int(k, "chunk_size", &size) != 0 ||
            mr_json_int(k, "page_bytes", &bytes) != 0)
            continue;
        mr_view_bytes(a, sizeof a, (double)bytes);
        fprintf(out, "%s%lld B: %s", shown ? ", " : "  classes     ", size,
                a);
        shown++;
    }
    if (shown)
        fprintf(out, " (the largest, by bytes of pages)\n");
    mr_json_free(j);
    return 0;
}

/* committed_bytes and pid of one record, or -1 if it is not one. */
static int record_key(const char *text, size_t len, long long *committed, long long *pid)
{
    char err[8];
    mr_json *j = mr_json_parse(text, len, err, sizeof err);
    if (!j)
        return -1;
    int ok = mr_json_int(j, "pid", pid) == 0 &&
             mr_json_int(mr_json_get(j, "os"), "committed_bytes", committed) == 0;
    mr_json_free(j);
    return ok ? 0 : -1;
}

/* Every process on memkit writes one record, one line, at its exit (a
 * wrapper script and what it runs: several).  The one shown is the one
 * that held the most at its exit - committed bytes, the program's record
 * on a tie - since a wrapper that starts the real work holds almost
 * nothing; the header says whose it is and what the program held. */
int mr_view_print_text(FILE *out, const char *text, size_t len, pid_t program)
{
    const char *best = NULL, *p = text, *end = text + len;
    size_t best_len = 0;
    long long best_committed = -1, prog_committed = -1;
    int nrec = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        long long committed, pid;
        if (record_key(p, n, &committed, &pid) == 0) {
            nrec++;
            if (pid == program)
                prog_committed = committed;
            if (committed > best_committed || (committed == best_committed && pid == program)) {
                best = p;
                best_len = n;
                best_committed = committed;
            }
        }
        p += n + 1;
    }
    if (nrec <= 1 || !best) /* one record, or none readable: as it is */
        return print_record(out, text, len, program, nrec, prog_committed);
    return print_record(out, best, best_len, program, nrec, prog_committed);
}

int mr_view_print(FILE *out, const char *path, pid_t program)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return mr_view_print_text(out, "", 0, program);
    char *buf = malloc(MAX_FILE);
    size_t len = 0;
    while (buf && len < MAX_FILE) {
        ssize_t n = read(fd, buf + len, MAX_FILE - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    if (!buf) {
        fprintf(out, "memkit's view: out of memory\n");
        return -1;
    }
    int r = mr_view_print_text(out, buf, len, program);
    free(buf);
    return r;
}
