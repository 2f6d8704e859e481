/* SPDX-License-Identifier: MIT */
/*
 * flame.c - a flame graph of a heap profile, as an SVG written here (no
 * external script): one box per frame, its width the bytes of the stacks
 * through it, the whole process at the bottom, callers below callees.
 *
 * Each box has a hover title "FRAME: BYTES (SHARE of the total)" and
 * carries its figures as attributes (data-bytes, data-depth), which the
 * tests read back: the boxes of one depth never hold more than their
 * parents, and the first row holds the total.  Names too long for their
 * box are cut with "..", and boxes narrower than a pixel and a half are
 * not drawn (their bytes stay in their parent's width).  Colours are warm
 * and stable: a hash of the frame's name, so one function keeps its
 * colour between the peak's graph and the exit's.  Trade-off: a tree of
 * names in memory (a profile has thousands of stacks, not millions).
 *
 * Tall stacks are fitted: past MAX_ROWS_H pixels of rows the rows get
 * thinner (down to MIN_ROW) and their text smaller, so that a stack of
 * memkit's 64 frames plus its context stays on one screen; the title says
 * how deep the graph is.  A graph with nothing in it (a process that had
 * nothing live at exit, or no profile at all) is not an empty box: it
 * says why, in words, where the boxes would be.
 */
#include "run.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct node {
    char *name;
    double bytes;
    struct node *child, *next;
} node;

struct mr_flame {
    node root;
};

mr_flame *mr_flame_new(void)
{
    mr_flame *f = calloc(1, sizeof *f);
    if (f)
        f->root.name = strdup("all");
    return f;
}

static void node_free(node *n)
{
    for (node *c = n->child, *next; c; c = next) {
        next = c->next;
        node_free(c);
        free(c);
    }
    free(n->name);
}

void mr_flame_free(mr_flame *f)
{
    if (!f)
        return;
    node_free(&f->root);
    free(f);
}

void mr_flame_add(mr_flame *f, const char *const *frames, int n, double bytes)
{
    node *at = &f->root;
    at->bytes += bytes;
    for (int i = 0; i < n; i++) {
        node *c = at->child;
        while (c && strcmp(c->name, frames[i]) != 0)
            c = c->next;
        if (!c) {
            c = calloc(1, sizeof *c);
            if (!c)
                return;
            c->name = strdup(frames[i]);
            c->next = at->child;
            at->child = c;
        }
        c->bytes += bytes;
        at = c;
    }
}

static int depth_of(const node *n)
{
    int d = 0;
    for (const node *c = n->child; c; c = c->next) {
        int k = depth_of(c);
        if (k > d)
            d = k;
    }
    return d + 1;
}

static void xml_text(FILE *f, const char *s, size_t max)
{
    size_t n = 0;
    for (; *s && n < max; s++, n++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            if ((unsigned char)*s >= 0x20)
                fputc(*s, f);
        }
    }
    if (*s)
        fputs("..", f);
}

enum { WIDTH = 1200, ROW = 17, MIN_ROW = 10, MAX_ROWS_H = 760, TOP = 40 };

typedef struct layout {
    FILE *f;
    double total;
    int height;
    int row;    /* pixels per row (ROW, or less for a tall graph) */
    int font;   /* text size in the boxes */
    double cw;  /* the width of one character of that size */
} layout;

static void draw(const layout *l, const node *n, double x, int depth)
{
    double w = l->total > 0 ? n->bytes / l->total * (WIDTH - 20) : 0;
    if (w < 1.5 && depth > 0)
        return;
    int y = l->height - 10 - (depth + 1) * l->row;
    uint32_t h = 2166136261u;
    for (const char *c = n->name; *c; c++)
        h = (h ^ (unsigned char)*c) * 16777619u;
    int r = 205 + (int)(h % 50), g = 80 + (int)((h >> 8) % 120), b = (int)((h >> 16) % 55);
    char bytes[32];
    mr_view_bytes(bytes, sizeof bytes, n->bytes);
    fprintf(l->f, "<g><title>");
    xml_text(l->f, n->name, 400);
    fprintf(l->f, ": %s (%.2f%%)</title><rect class=\"frame\" x=\"%.2f\" y=\"%d\" "
                  "width=\"%.2f\" height=\"%d\" fill=\"rgb(%d,%d,%d)\" rx=\"2\" "
                  "data-depth=\"%d\" data-bytes=\"%.0f\"/>",
            bytes, l->total > 0 ? 100 * n->bytes / l->total : 0, 10 + x, y, w, l->row - 1,
            r, g, b, depth, n->bytes);
    size_t fit = (size_t)(w / l->cw);
    if (fit >= 4) {
        fprintf(l->f, "<text x=\"%.2f\" y=\"%d\">", 10 + x + 3, y + l->row - 1 - (l->row - l->font) / 2 - 1);
        xml_text(l->f, n->name, fit - 2);
        fprintf(l->f, "</text>");
    }
    fprintf(l->f, "</g>\n");
    double cx = x;
    for (const node *c = n->child; c; c = c->next) {
        draw(l, c, cx, depth + 1);
        cx += l->total > 0 ? c->bytes / l->total * (WIDTH - 20) : 0;
    }
}

int mr_flame_write(const mr_flame *fl, const char *path, const char *title,
                   const char *empty)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int rows = fl->root.bytes > 0 ? depth_of(&fl->root) : 0;
    layout l = {f, fl->root.bytes, 0, ROW, 11, 7};
    if (rows * ROW > MAX_ROWS_H) { /* a tall stack: thinner rows, smaller text */
        l.row = MAX_ROWS_H / rows < MIN_ROW ? MIN_ROW : MAX_ROWS_H / rows;
        l.font = l.row - 4 < 11 ? l.row - 4 : 11;
        l.cw = l.font * 0.62;
    }
    l.height = TOP + (rows ? rows : 3) * l.row + 20;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"monospace\" font-size=\"%d\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"#fdfaf4\"/>\n"
               "<text x=\"%d\" y=\"22\" font-size=\"15\" text-anchor=\"middle\">",
            WIDTH, l.height, WIDTH, l.height, l.font, WIDTH / 2);
    xml_text(f, title, 200);
    char total[32];
    mr_view_bytes(total, sizeof total, fl->root.bytes);
    if (rows)
        fprintf(f, " (%s, %d levels%s; hover a box for its bytes)</text>\n", total,
                rows, l.row < ROW ? ", rows narrowed to fit" : "");
    else
        fprintf(f, "</text>\n");
    if (!rows) {
        fprintf(f, "<text class=\"empty\" x=\"%d\" y=\"%d\" font-size=\"13\" "
                   "text-anchor=\"middle\" fill=\"#555555\">",
                WIDTH / 2, TOP + 2 * ROW);
        xml_text(f, empty && *empty ? empty : "nothing to draw", 300);
        fprintf(f, "</text>\n");
    } else {
        draw(&l, &fl->root, 0, 0);
    }
    fprintf(f, "</svg>\n");
    return fclose(f) == 0 ? 0 : -1;
}
