/* SPDX-License-Identifier: MIT */
/*
 * api/json.h - a small, strict JSON reader for the tests of memkit's JSON
 * statistics (stats_json.c, env.c): the output is parsed back and its
 * figures compared with the API's, rather than searched for substrings.
 *
 * It reads one value and nothing after it but white space: objects,
 * arrays, strings (every escape, \uXXXX decoded to UTF-8, surrogate pairs
 * joined), integers, true, false, null.  It refuses what a sloppy writer
 * would get wrong: a raw control character inside a string (they must be
 * escaped), a fraction or an exponent (memkit writes integers only), a
 * number with a leading zero, a duplicate key in an object, a trailing
 * comma, trailing garbage.  Nesting is limited to 64 levels.  The error
 * says what and at which offset.
 *
 *     const char *err = NULL;
 *     jn *doc = jn_parse(text, &err);     // NULL on error, err says why
 *     const jn *v = jn_get(doc, "version");
 *     if (v && v->type == JN_INT) ... v->i ...
 *     jn_free(doc);
 *
 * Memory comes from the C library's malloc: in these tests that is never
 * memkit's (they link libmemkit, not the malloc drop-in).
 */
#ifndef MK_TEST_JSON_H
#define MK_TEST_JSON_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum jn_type {
    JN_NULL, JN_BOOL, JN_INT, JN_STR, JN_ARR, JN_OBJ
} jn_type;

typedef struct jn {
    jn_type type;
    long long i;       /* JN_INT, JN_BOOL (0/1) */
    char *s;           /* JN_STR: decoded, NUL-terminated */
    size_t n;          /* JN_ARR, JN_OBJ: members */
    struct jn **items; /* their values */
    char **keys;       /* JN_OBJ: their keys */
} jn;

typedef struct jn_reader {
    const char *p, *start;
    const char *err;
    char errbuf[128];
    int depth;
} jn_reader;

static void jn_free(jn *v)
{
    if (!v)
        return;
    for (size_t k = 0; k < v->n; k++) {
        jn_free(v->items[k]);
        if (v->keys)
            free(v->keys[k]);
    }
    free(v->items);
    free(v->keys);
    free(v->s);
    free(v);
}

static void *jn_fail(jn_reader *r, const char *what)
{
    if (!r->err) {
        snprintf(r->errbuf, sizeof r->errbuf, "%s at offset %ld", what,
                 (long)(r->p - r->start));
        r->err = r->errbuf;
    }
    return NULL;
}

static void jn_ws(jn_reader *r)
{
    while (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')
        r->p++;
}

static int jn_hex4(const char *s, unsigned *out)
{
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        char c = s[k];
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
    *out = v;
    return 0;
}

/* A string at r->p (which is at its opening quote); malloc'ed, decoded. */
static char *jn_string(jn_reader *r)
{
    size_t cap = strlen(r->p) + 1, len = 0; /* decoding never grows it */
    char *out = malloc(cap);
    if (!out)
        return jn_fail(r, "out of memory");
    r->p++;
    for (;;) {
        unsigned char c = (unsigned char)*r->p;
        if (c == '\0') {
            free(out);
            return jn_fail(r, "unterminated string");
        }
        if (c < 0x20) {
            free(out);
            return jn_fail(r, "raw control character in a string");
        }
        r->p++;
        if (c == '"')
            break;
        if (c != '\\') {
            out[len++] = (char)c;
            continue;
        }
        char e = *r->p++;
        unsigned u = 0;
        switch (e) {
        case '"': out[len++] = '"'; break;
        case '\\': out[len++] = '\\'; break;
        case '/': out[len++] = '/'; break;
        case 'b': out[len++] = '\b'; break;
        case 'f': out[len++] = '\f'; break;
        case 'n': out[len++] = '\n'; break;
        case 'r': out[len++] = '\r'; break;
        case 't': out[len++] = '\t'; break;
        case 'u':
            if (jn_hex4(r->p, &u) != 0) {
                free(out);
                return jn_fail(r, "bad \\u escape");
            }
            r->p += 4;
            if (u >= 0xD800 && u < 0xDC00) { /* a surrogate pair */
                unsigned lo;
                if (r->p[0] != '\\' || r->p[1] != 'u' ||
                    jn_hex4(r->p + 2, &lo) != 0 || lo < 0xDC00 || lo > 0xDFFF) {
                    free(out);
                    return jn_fail(r, "lone surrogate");
                }
                r->p += 6;
                u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
            } else if (u >= 0xDC00 && u < 0xE000) {
                free(out);
                return jn_fail(r, "lone surrogate");
            }
            if (u == 0) {
                free(out);
                return jn_fail(r, "\\u0000 in a string");
            }
            if (u < 0x80) {
                out[len++] = (char)u;
            } else if (u < 0x800) {
                out[len++] = (char)(0xC0 | (u >> 6));
                out[len++] = (char)(0x80 | (u & 0x3F));
            } else if (u < 0x10000) {
                out[len++] = (char)(0xE0 | (u >> 12));
                out[len++] = (char)(0x80 | ((u >> 6) & 0x3F));
                out[len++] = (char)(0x80 | (u & 0x3F));
            } else {
                out[len++] = (char)(0xF0 | (u >> 18));
                out[len++] = (char)(0x80 | ((u >> 12) & 0x3F));
                out[len++] = (char)(0x80 | ((u >> 6) & 0x3F));
                out[len++] = (char)(0x80 | (u & 0x3F));
            }
            break;
        default:
            free(out);
            return jn_fail(r, "unknown escape");
        }
    }
    out[len] = '\0';
    return out;
}

static jn *jn_new(jn_reader *r, jn_type t)
{
    jn *v = calloc(1, sizeof *v);
    if (!v)
        return jn_fail(r, "out of memory");
    v->type = t;
    return v;
}

static int jn_push(jn *v, jn *item, char *key)
{
    jn **items = realloc(v->items, (v->n + 1) * sizeof *items);
    if (!items)
        return -1;
    v->items = items;
    if (v->type == JN_OBJ) {
        char **keys = realloc(v->keys, (v->n + 1) * sizeof *keys);
        if (!keys)
            return -1;
        v->keys = keys;
        v->keys[v->n] = key;
    }
    v->items[v->n++] = item;
    return 0;
}

static jn *jn_value(jn_reader *r);

static jn *jn_container(jn_reader *r, jn_type t)
{
    char close = t == JN_OBJ ? '}' : ']';
    if (++r->depth > 64)
        return jn_fail(r, "nested too deep");
    jn *v = jn_new(r, t);
    if (!v)
        return NULL;
    r->p++;
    jn_ws(r);
    if (*r->p == close) {
        r->p++;
        r->depth--;
        return v;
    }
    for (;;) {
        char *key = NULL;
        jn_ws(r);
        if (t == JN_OBJ) {
            if (*r->p != '"')
                goto bad_key;
            key = jn_string(r);
            if (!key)
                goto fail;
            for (size_t k = 0; k < v->n; k++)
                if (strcmp(v->keys[k], key) == 0) {
                    free(key);
                    jn_fail(r, "duplicate key");
                    goto fail;
                }
            jn_ws(r);
            if (*r->p != ':') {
                free(key);
                jn_fail(r, "':' expected");
                goto fail;
            }
            r->p++;
        }
        jn *item = jn_value(r);
        if (!item || jn_push(v, item, key) != 0) {
            free(key);
            jn_free(item);
            jn_fail(r, "bad member");
            goto fail;
        }
        jn_ws(r);
        if (*r->p == ',') {
            r->p++;
            continue;
        }
        if (*r->p == close) {
            r->p++;
            r->depth--;
            return v;
        }
        jn_fail(r, t == JN_OBJ ? "',' or '}' expected" : "',' or ']' expected");
        goto fail;
    }
bad_key:
    jn_fail(r, "a key (string) expected");
fail:
    jn_free(v);
    return NULL;
}

static jn *jn_value(jn_reader *r)
{
    jn_ws(r);
    const char *s = r->p;
    if (*s == '{')
        return jn_container(r, JN_OBJ);
    if (*s == '[')
        return jn_container(r, JN_ARR);
    if (*s == '"') {
        char *str = jn_string(r);
        if (!str)
            return NULL;
        jn *v = jn_new(r, JN_STR);
        if (!v) {
            free(str);
            return NULL;
        }
        v->s = str;
        return v;
    }
    if (*s == '-' || (*s >= '0' && *s <= '9')) {
        const char *d = s + (*s == '-');
        if (*d < '0' || *d > '9')
            return jn_fail(r, "digit expected");
        if (d[0] == '0' && d[1] >= '0' && d[1] <= '9')
            return jn_fail(r, "leading zero");
        char *end;
        errno = 0;
        long long x = strtoll(s, &end, 10);
        if (errno == ERANGE)
            return jn_fail(r, "integer out of range");
        if (*end == '.' || *end == 'e' || *end == 'E')
            return jn_fail(r, "not an integer");
        r->p = end;
        jn *v = jn_new(r, JN_INT);
        if (v)
            v->i = x;
        return v;
    }
    static const struct { const char *word; jn_type t; int i; } words[] = {
        {"true", JN_BOOL, 1}, {"false", JN_BOOL, 0}, {"null", JN_NULL, 0}};
    for (int k = 0; k < 3; k++) {
        size_t n = strlen(words[k].word);
        if (strncmp(s, words[k].word, n) == 0) {
            r->p += n;
            jn *v = jn_new(r, words[k].t);
            if (v)
                v->i = words[k].i;
            return v;
        }
    }
    return jn_fail(r, "a value expected");
}

/* Parse @text: one value, white space around it, nothing else. */
static jn *jn_parse(const char *text, const char **err)
{
    static jn_reader r;
    memset(&r, 0, sizeof r);
    r.p = r.start = text;
    jn *v = jn_value(&r);
    if (v) {
        jn_ws(&r);
        if (*r.p != '\0') {
            jn_free(v);
            v = jn_fail(&r, "trailing characters after the value");
        }
    }
    if (err)
        *err = v ? NULL : r.err;
    return v;
}

/* Member @key of object @obj, or NULL. */
static const jn *jn_get(const jn *obj, const char *key)
{
    if (!obj || obj->type != JN_OBJ)
        return NULL;
    for (size_t k = 0; k < obj->n; k++)
        if (strcmp(obj->keys[k], key) == 0)
            return obj->items[k];
    return NULL;
}

/* Integer member @key of @obj, or -1 (and *@ok = 0) when absent or not an
 * integer. */
static long long jn_int(const jn *obj, const char *key, int *ok)
{
    const jn *v = jn_get(obj, key);
    if (!v || v->type != JN_INT) {
        *ok = 0;
        return -1;
    }
    return v->i;
}

/* String member @key of @obj, or NULL. */
static const char *jn_str(const jn *obj, const char *key)
{
    const jn *v = jn_get(obj, key);
    return v && v->type == JN_STR ? v->s : NULL;
}

#endif /* MK_TEST_JSON_H */
