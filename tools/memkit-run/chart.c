/* SPDX-License-Identifier: MIT */
/*
 * chart.c - resident memory over time as a small chart in the terminal.
 *
 *      MiB                               (64 MiB held, freed, then sleep)
 *       80 |
 *          |          .................
 *          |     .....#################
 *          |     ######################.....
 *       40 |     ###########################
 *          |     ###########################
 *          |     ###########################
 *          |.....###########################...........................
 *        0 +-----------------------------------------------------------
 *           0                           0.28                       0.55 s
 *
 * Columns are slices of equal time, not of equal sample count, so an
 * irregular sampling (a loaded machine) does not bend the time axis.  A
 * column shows the largest sample in its slice (downsampling by max: a
 * short peak is never averaged away); a slice with no sample repeats the
 * last one before it (a sample holds until the next one).  Each line is
 * two half-steps: '#' a full cell, '.' the lower half; a running program
 * (RSS > 0) always shows at least a '.'.  The y axis ends at a round
 * number (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten) at or
 * above the peak, labelled at the top, the middle and 0; time runs from 0
 * (the program's start) to the last sample.  Plain ASCII: the report may
 * go to a file or to a terminal without UTF-8.
 */
#include "run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double mr_chart_nice(double v)
{
    if (!(v > 0))
        return 1;
    double p = 1;
    while (p * 10 <= v)
        p *= 10;
    while (p > v)
        p /= 10;
    static const double steps[] = {1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        if (steps[i] * p >= v * (1 - 1e-12))
            return steps[i] * p;
    return 10 * p;
}

static double mib(const mr_sample *s) { return s->rss_kib / 1024.0; }

/* Column values (MiB): the max of each time slice, holding the last (0
 * before the first sample). */
static void columns(const mr_series *s, double *col, int w)
{
    double span = s->v[s->n - 1].t;
    if (!(span > 0)) {
        double m = 0;
        for (size_t k = 0; k < s->n; k++)
            m = mib(&s->v[k]) > m ? mib(&s->v[k]) : m;
        for (int c = 0; c < w; c++)
            col[c] = m;
        return;
    }
    size_t k = 0;
    double hold = 0;
    for (int c = 0; c < w; c++) {
        double end = span * (c + 1) / w;
        double m = -1;
        while (k < s->n && (s->v[k].t < end || c == w - 1)) {
            hold = mib(&s->v[k]);
            m = hold > m ? hold : m;
            k++;
        }
        col[c] = m >= 0 ? m : hold;
    }
}

static void label(char *buf, size_t cap, double v)
{
    if (v >= 1000)
        snprintf(buf, cap, "%.0f", v);
    else
        snprintf(buf, cap, "%.3g", v);
}

/* Put @text into @line at column @at (clipped to @len). */
static void put(char *line, size_t len, size_t at, const char *text)
{
    for (size_t i = 0; text[i] && at + i < len; i++)
        line[at + i] = text[i];
}

void mr_chart_print(FILE *out, const mr_series *s, int width, int height)
{
    if (s->n == 0 || width < 8 || height < 2)
        return;
    double *col = malloc((size_t)width * sizeof *col);
    if (!col)
        return;
    columns(s, col, width);
    double peak = 0;
    for (int c = 0; c < width; c++)
        peak = col[c] > peak ? col[c] : peak;
    double ymax = mr_chart_nice(peak);

    const int gutter = 10; /* "%8s |" */
    fprintf(out, "%*s\n", gutter - 2, "MiB");
    for (int r = 0; r < height; r++) {
        char lab[32] = "";
        if (r == 0)
            label(lab, sizeof lab, ymax);
        else if (r == height / 2)
            label(lab, sizeof lab, ymax * (height - r) / height);
        fprintf(out, "%8s |", lab);
        int bottom = height - 1 - r; /* this line's index from the axis */
        char row[512];
        int n = width < (int)sizeof row - 1 ? width : (int)sizeof row - 1;
        for (int c = 0; c < n; c++) {
            int lvl = (int)(col[c] / ymax * 2 * height + 0.5);
            if (col[c] > 0 && lvl == 0)
                lvl = 1;
            row[c] = lvl >= 2 * bottom + 2 ? '#'
                     : lvl == 2 * bottom + 1 ? '.' : ' ';
        }
        while (n > 0 && row[n - 1] == ' ')
            n--;
        row[n] = '\0';
        fprintf(out, "%s\n", row);
    }
    fprintf(out, "%8s +", "0");
    for (int c = 0; c < width; c++)
        fputc('-', out);
    fputc('\n', out);

    /* time labels under the first, middle and last columns */
    double t1 = s->v[s->n - 1].t;
    int prec = t1 < 10 ? 2 : t1 < 100 ? 1 : 0;
    char line[600], mid[32], end[40];
    size_t len = (size_t)gutter + (size_t)width + 8;
    if (len >= sizeof line)
        len = sizeof line - 1;
    memset(line, ' ', len);
    line[len] = '\0';
    snprintf(mid, sizeof mid, "%.*f", prec, t1 / 2);
    snprintf(end, sizeof end, "%.*f s", prec, t1);
    const char *first = "0";
    put(line, len, (size_t)gutter, first);
    size_t mid_at = (size_t)gutter + (size_t)width / 2 - strlen(mid) / 2;
    size_t end_at = (size_t)gutter + (size_t)width - (strlen(end) - 2);
    if (mid_at > (size_t)gutter + strlen(first) + 1 &&
        mid_at + strlen(mid) + 1 < end_at)
        put(line, len, mid_at, mid);
    put(line, len, end_at, end);
    size_t used = len;
    while (used > 0 && line[used - 1] == ' ')
        used--;
    line[used] = '\0';
    fprintf(out, "%s\n", line);
    free(col);
}

/* Is @v 1, 2, 2.5 or 5 times a power of ten? */
static int round_step(double v)
{
    if (!(v > 0))
        return 0;
    double p = 1;
    while (p * 10 <= v * (1 + 1e-9))
        p *= 10;
    while (p > v * (1 + 1e-9))
        p /= 10;
    double m = v / p;
    static const double ok[] = {1, 2, 2.5, 5, 10};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (m > ok[i] * (1 - 1e-9) && m < ok[i] * (1 + 1e-9))
            return 1;
    return 0;
}

int mr_chart_ticks(double top)
{
    static const int tries[] = {5, 4, 6, 3};
    for (size_t i = 0; i < sizeof tries / sizeof tries[0]; i++)
        if (round_step(top / tries[i]))
            return tries[i];
    return 5;
}
