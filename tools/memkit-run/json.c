/* SPDX-License-Identifier: MIT */
/*
 * json.c - a small JSON reader for memkit's statistics: objects, arrays,
 * strings and integers, nothing else.
 *
 * The statistics file is written by memkit's exit handler, which prints
 * without allocating and so only ever writes those four kinds of value;
 * a reader of exactly that subset is short enough to check by reading,
 * and anything else in the file (true, null, a fraction) means it is not
 * what memkit wrote: it is rejected with the byte offset, not guessed at.
 * Strict where it is cheap to be: no trailing commas, no leading zeros,
 * no control characters inside strings, \u escapes decoded to UTF-8 with
 * surrogate pairs joined (a lone surrogate is an error), integers that
 * overflow a long long are errors, one value per text.  Depth is bounded
 * (64) so that a hostile file cannot exhaust the stack.
 *
 * The tree: one node per value; an object's or array's members hang from
 * `first` and chain through `next` (an object member also has its `key`).
 * Lookups are linear: the objects here have a handful of members.
 */
#include "run.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64

typedef struct parser {
    const char *start, *p, *end;
    char *err;
    size_t err_cap;
    int depth;
} parser;

static mr_json *fail(parser *ps, const char *fmt, ...)
{
    if (ps->err && ps->err[0] == '\0' && ps->err_cap > 0) {
        char what[160];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
        snprintf(ps->err, ps->err_cap, "%s at byte %zu", what,
                 (size_t)(ps->p - ps->start));
    }
    return NULL;
}

static void skip_ws(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' ||
                               *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static mr_json *node(parser *ps, mr_json_type t)
{
    mr_json *j = calloc(1, sizeof *j);
    if (!j)
        return fail(ps, "out of memory");
    j->type = t;
    return j;
}

static int hex4(parser *ps, unsigned *out)
{
    if (ps->end - ps->p < 4)
        return -1;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = ps->p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    ps->p += 4;
    *out = v;
    return 0;
}

static size_t utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A string at ps->p (the opening quote), as a new NUL-terminated copy.
 * Decoded text is never longer than its escaped form. */
static char *string(parser *ps)
{
    const char *open = ps->p++;
    const char *q = ps->p;
    while (q < ps->end && *q != '"')
        q += *q == '\\' && q + 1 < ps->end ? 2 : 1;
    if (q >= ps->end) {
        ps->p = open;
        fail(ps, "unterminated string");
        return NULL;
    }
    char *s = malloc((size_t)(q - ps->p) + 1), *o = s;
    if (!s) {
        fail(ps, "out of memory");
        return NULL;
    }
    while (*ps->p != '"') {
        unsigned char c = (unsigned char)*ps->p;
        if (c < 0x20) {
            fail(ps, "control character in a string");
            goto bad;
        }
        if (c != '\\') {
            *o++ = (char)c;
            ps->p++;
            continue;
        }
        ps->p++;
        char e = *ps->p++;
        switch (e) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (hex4(ps, &cp) != 0) {
                fail(ps, "bad \\u escape");
                goto bad;
            }
            if (cp >= 0xDC00 && cp <= 0xDFFF) {
                fail(ps, "lone low surrogate");
                goto bad;
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (ps->end - ps->p < 2 || ps->p[0] != '\\' ||
                    ps->p[1] != 'u') {
                    fail(ps, "lone high surrogate");
                    goto bad;
                }
                ps->p += 2;
                if (hex4(ps, &lo) != 0 || lo < 0xDC00 || lo > 0xDFFF) {
                    fail(ps, "bad surrogate pair");
                    goto bad;
                }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (cp == 0) {
                fail(ps, "\\u0000 in a string");
                goto bad;
            }
            o += utf8(o, cp);
            break;
        }
        default:
            ps->p--;
            fail(ps, "bad escape");
            goto bad;
        }
    }
    ps->p++; /* the closing quote */
    *o = '\0';
    return s;
bad:
    free(s);
    return NULL;
}

static mr_json *integer(parser *ps)
{
    const char *q = ps->p;
    int neg = q < ps->end && *q == '-';
    if (neg)
        q++;
    if (q >= ps->end || *q < '0' || *q > '9')
        return fail(ps, "unexpected character");
    if (*q == '0' && q + 1 < ps->end && q[1] >= '0' && q[1] <= '9')
        return fail(ps, "leading zero");
    unsigned long long v = 0, limit = neg ? (unsigned long long)LLONG_MAX + 1
                                          : (unsigned long long)LLONG_MAX;
    for (; q < ps->end && *q >= '0' && *q <= '9'; q++) {
        unsigned d = (unsigned)(*q - '0');
        if (v > (limit - d) / 10)
            return fail(ps, "integer out of range");
        v = v * 10 + d;
    }
    if (q < ps->end && (*q == '.' || *q == 'e' || *q == 'E')) {
        ps->p = q;
        return fail(ps, "not an integer");
    }
    mr_json *j = node(ps, MR_JSON_INT);
    if (!j)
        return NULL;
    j->num = neg ? (v == limit ? LLONG_MIN : -(long long)v) : (long long)v;
    ps->p = q;
    return j;
}

static mr_json *value(parser *ps);

/* An object or array at ps->p ('{' or '['). */
static mr_json *container(parser *ps)
{
    int obj = *ps->p == '{';
    char close = obj ? '}' : ']';
    if (++ps->depth > MAX_DEPTH)
        return fail(ps, "nested too deep");
    mr_json *j = node(ps, obj ? MR_JSON_OBJECT : MR_JSON_ARRAY);
    if (!j)
        return NULL;
    ps->p++;
    mr_json **tail = &j->first;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        ps->depth--;
        return j;
    }
    for (;;) {
        char *key = NULL;
        skip_ws(ps);
        if (obj) {
            if (ps->p >= ps->end || *ps->p != '"') {
                fail(ps, "expected a member name");
                goto bad;
            }
            if (!(key = string(ps)))
                goto bad;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                free(key);
                fail(ps, "expected ':'");
                goto bad;
            }
            ps->p++;
        }
        mr_json *v = value(ps);
        if (!v) {
            free(key);
            goto bad;
        }
        v->key = key;
        *tail = v;
        tail = &v->next;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            ps->depth--;
            return j;
        }
        fail(ps, ps->p < ps->end ? "expected ',' or '%c'"
                                 : "unexpected end (expected '%c')", close);
        goto bad;
    }
bad:
    mr_json_free(j);
    return NULL;
}

static mr_json *value(parser *ps)
{
    skip_ws(ps);
    if (ps->p >= ps->end)
        return fail(ps, "unexpected end");
    switch (*ps->p) {
    case '{':
    case '[':
        return container(ps);
    case '"': {
        char *s = string(ps);
        if (!s)
            return NULL;
        mr_json *j = node(ps, MR_JSON_STRING);
        if (!j) {
            free(s);
            return NULL;
        }
        j->str = s;
        return j;
    }
    default:
        return integer(ps);
    }
}

mr_json *mr_json_parse(const char *text, size_t len, char *err,
                       size_t err_cap)
{
    if (err && err_cap)
        err[0] = '\0';
    parser ps = {text, text, text + len, err, err_cap, 0};
    mr_json *j = value(&ps);
    if (!j)
        return NULL;
    skip_ws(&ps);
    if (ps.p != ps.end) {
        mr_json_free(j);
        return fail(&ps, "text after the value");
    }
    return j;
}

void mr_json_free(mr_json *j)
{
    while (j) {
        mr_json *next = j->next;
        mr_json_free(j->first); /* depth bounded by MAX_DEPTH */
        free(j->key);
        free(j->str);
        free(j);
        j = next;
    }
}

const mr_json *mr_json_get(const mr_json *obj, const char *key)
{
    if (!obj || obj->type != MR_JSON_OBJECT)
        return NULL;
    for (const mr_json *m = obj->first; m; m = m->next)
        if (m->key && strcmp(m->key, key) == 0)
            return m;
    return NULL;
}

int mr_json_int(const mr_json *obj, const char *key, long long *out)
{
    const mr_json *v = mr_json_get(obj, key);
    if (!v || v->type != MR_JSON_INT)
        return -1;
    *out = v->num;
    return 0;
}
