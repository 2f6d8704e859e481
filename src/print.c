/*
 * print.c - one line of text built on the stack and written with write(2):
 * how memkit speaks (error reports, MEMKIT_VERBOSE, MEMKIT_STATS, malloc_stats)
 * without allocating.  An allocator cannot print through stdio while it is
 * the allocator stdio would call, nor while its heap may be corrupt, so
 * every message goes through this tiny formatter instead.
 *
 * A line holds at most MKI_LINE_MAX - 2 characters; anything longer is cut
 * (a message is one line, and a cut line is better than an allocation).
 */
#include "internal.h"

#include <unistd.h>

void mki_line_str(mki_line *l, const char *s)
{
    while (s && *s && l->len < sizeof l->buf - 2)
        l->buf[l->len++] = *s++;
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
    for (size_t done = 0; done < l->len;) {
        ssize_t r = write(fd, l->buf + done, l->len - done);
        if (r <= 0)
            break;
        done += (size_t)r;
    }
    l->len = 0;
}
