/* SPDX-License-Identifier: MIT */
/*
 * print.c - one line of text built on the stack and written with write(2):
 * how memkit speaks (error reports, MEMKIT_VERBOSE, MEMKIT_STATS, malloc_stats)
 * without allocating.  An allocator cannot print through stdio while it is
 * the allocator stdio would call, nor while its heap may be corrupt, so
 * every message goes through this tiny formatter instead.
 *
 * A line holds at most MKI_LINE_MAX - 2 characters; anything longer is cut
 * (a message is one line, and a cut line is better than an allocation).
 * In stream mode the buffer is written out whenever it fills, so a long
 * text (MEMKIT_STATS=json) goes out in pieces, still without allocating;
 * with a sink (a caller's buffer) the pieces gather there and go out in
 * one write, a record that does not interleave with another process's.
 */

#include "base.h"

#include <unistd.h>

static void write_all(int fd, const char *buf, size_t len);

/* Where the buffered bytes go: the sink, else the file. */
static void out(mki_line *l, int fd, const char *buf, size_t len)
{
    if (l->sink) {
        size_t room = l->sink_cap - l->sink_len;
        size_t n = len < room ? len : room;
        for (size_t i = 0; i < n; i++)
            l->sink[l->sink_len + i] = buf[i];
        l->sink_len += n;
        return;
    }
    write_all(fd, buf, len);
}

static void write_all(int fd, const char *buf, size_t len)
{
    for (size_t done = 0; done < len;) {
        ssize_t r = write(fd, buf + done, len - done);
        if (r <= 0)
            break;
        done += (size_t)r;
    }
}

void mki_line_flush(mki_line *l)
{
    if (l->stream || l->sink)
        out(l, l->stream - 1, l->buf, l->len);
    l->len = 0;
}

static void put_char(mki_line *l, char c)
{
    if (l->len >= sizeof l->buf - 2) {
        if (!l->stream && !l->sink)
            return; /* one line: cut */
        mki_line_flush(l);
    }
    l->buf[l->len++] = c;
}

void mki_line_str(mki_line *l, const char *s)
{
    while (s && *s)
        put_char(l, *s++);
}

void mki_line_json_str(mki_line *l, const char *s)
{
    if (!s) {
        mki_line_str(l, "null");
        return;
    }
    put_char(l, '"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            put_char(l, '\\');
            put_char(l, (char)c);
        } else if (c < 0x20) {
            put_char(l, '\\');
            put_char(l, 'u');
            put_char(l, '0');
            put_char(l, '0');
            put_char(l, "0123456789abcdef"[c >> 4]);
            put_char(l, "0123456789abcdef"[c & 15]);
        } else {
            put_char(l, (char)c);
        }
    }
    put_char(l, '"');
}

void mki_line_ptr(mki_line *l, const void *p)
{
    char tmp[2 + 16 + 1];
    uintptr_t v = (uintptr_t)p;
    int i = (int)sizeof tmp - 1;
    tmp[i] = '\0';
    do {
        tmp[--i] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v && i > 2);
    tmp[--i] = 'x';
    tmp[--i] = '0';
    mki_line_str(l, tmp + i);
}

void mki_line_num(mki_line *l, long long v)
{
    char tmp[24];
    int i = (int)sizeof tmp - 1;
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v
                                 : (unsigned long long)v;
    tmp[i] = '\0';
    do {
        tmp[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u && i > 1);
    if (v < 0)
        tmp[--i] = '-';
    mki_line_str(l, tmp + i);
}

void mki_line_write(mki_line *l, int fd)
{
    l->buf[l->len++] = '\n';
    out(l, fd, l->buf, l->len);
    l->len = 0;
}

void mki_line_sink_write(mki_line *l, int fd)
{
    mki_line_flush(l);
    write_all(fd, l->sink, l->sink_len);
    l->sink_len = 0;
}
