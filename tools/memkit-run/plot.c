/* SPDX-License-Identifier: MIT */
/*
 * plot.c - the samples as files: CSV for any tool, SVG for people.
 *
 * CSV: one header line "time_s,rss_kib,private_dirty_kib,processes", then
 * one line per sample; times in seconds with microseconds (strictly
 * increasing: samples are at least a millisecond apart), sizes in KiB as
 * the kernel gives them; private_dirty_kib is empty when the kernel has no
 * smaps_rollup (a spreadsheet reads an empty cell as missing, not 0).
 *
 * SVG: gnuplot draws better plots than a tool should, so when `gnuplot` is
 * on PATH a script is piped into it (terminal svg, the data inline with
 * '-': no temporary file, gnuplot 4.6 and later).  gnuplot is optional:
 * when it is not there, or fails (an old version, a broken install: its
 * exit status, or a file without "<svg"), the tool writes a plain SVG
 * itself: axes with round ticks, labels with their units (time in s,
 * resident memory in MiB), the RSS line and the private
 * dirty line (dashed), a legend.
 *
 * Both reach the peak the report gives: when the program's high-water mark
 * (wait4's ru_maxrss) is above every sample - a peak between two samples,
 * or shorter than one - the y axis goes up to it too and a dotted line
 * marks it, labelled; else a peak the text states would sit above the top
 * of the chart that is meant to show it.  That SVG is plain XML: text is escaped,
 * and bytes outside printable ASCII in a title (a program's arguments)
 * become '?', so the file is valid whatever the command line held.
 */
#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int mr_plot_csv(FILE *f, const mr_series *s)
{
    fprintf(f, "time_s,rss_kib,private_dirty_kib,processes\n");
    for (size_t i = 0; i < s->n; i++) {
        const mr_sample *x = &s->v[i];
        if (x->dirty_kib >= 0)
            fprintf(f, "%.6f,%ld,%ld,%d\n", x->t, x->rss_kib, x->dirty_kib,
                    x->procs);
        else
            fprintf(f, "%.6f,%ld,,%d\n", x->t, x->rss_kib, x->procs);
    }
    return fflush(f) == 0 && !ferror(f) ? 0 : -1;
}

/* ---- the SVG written here ---------------------------------------------------- */

enum { W = 720, H = 360, LEFT = 70, RIGHT = 24, TOP = 40, BOTTOM = 50 };

static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        switch (c) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(c >= 0x20 && c < 0x7f ? c : '?', f);
        }
    }
}

static void polyline(FILE *f, const mr_series *s, int dirty, double tmax,
                     double ymax, const char *style)
{
    double pw = W - LEFT - RIGHT, ph = H - TOP - BOTTOM;
    fprintf(f, "<polyline fill=\"none\" %s points=\"", style);
    for (size_t i = 0; i < s->n || (s->n == 1 && i < 2); i++) {
        const mr_sample *x = &s->v[i < s->n ? i : 0];
        double v = (dirty ? x->dirty_kib : x->rss_kib) / 1024.0;
        double px = LEFT + (s->n == 1 ? (double)i : x->t / tmax) * pw;
        double py = TOP + ph - v / ymax * ph;
        fprintf(f, "%s%.1f,%.1f", i ? " " : "", px, py);
    }
    fprintf(f, "\"/>\n");
}

/* The high-water mark line, when @hwm is above the samples' @peak. */
static int hwm_above(double hwm, double peak)
{
    return hwm > peak * 1.001 && hwm > peak + 0.05;
}

int mr_plot_svg_builtin(FILE *f, const mr_series *s, const char *title, double hwm_mib)
{
    double peak = 0, tend = 0;
    int dirty = s->n > 0;
    for (size_t i = 0; i < s->n; i++) {
        double v = s->v[i].rss_kib / 1024.0;
        peak = v > peak ? v : peak;
        if (s->v[i].dirty_kib < 0)
            dirty = 0;
        tend = s->v[i].t;
    }
    int hwm = hwm_above(hwm_mib, peak);
    double ymax = mr_chart_nice(hwm ? hwm_mib : peak), tmax = mr_chart_nice(tend);
    double pw = W - LEFT - RIGHT, ph = H - TOP - BOTTOM;

    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
               "height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n",
            W, H, W, H);
    fprintf(f, "<title>");
    xml_text(f, title);
    fprintf(f, "</title>\n<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" "
               "fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" "
               "font-size=\"14\">", W / 2, TOP - 16);
    xml_text(f, title);
    fprintf(f, "</text>\n");

    /* grid, ticks and their labels */
    int ny = mr_chart_ticks(ymax), nx = mr_chart_ticks(tmax);
    fprintf(f, "<g stroke=\"#dddddd\" stroke-width=\"1\">\n");
    for (int i = 1; i <= ny; i++) {
        double y = TOP + ph - ph * i / ny;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
                LEFT, y, LEFT + pw, y);
    }
    for (int i = 1; i <= nx; i++) {
        double x = LEFT + pw * i / nx;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
                x, TOP, x, TOP + ph);
    }
    fprintf(f, "</g>\n<g text-anchor=\"end\">\n");
    for (int i = 0; i <= ny; i++)
        fprintf(f, "<text x=\"%d\" y=\"%.1f\">%.4g</text>\n", LEFT - 6,
                TOP + ph - ph * i / ny + 4, ymax * i / ny);
    fprintf(f, "</g>\n<g text-anchor=\"middle\">\n");
    for (int i = 0; i <= nx; i++)
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">%.4g</text>\n",
                LEFT + pw * i / nx, TOP + ph + 16, tmax * i / nx);
    fprintf(f, "<text x=\"%.1f\" y=\"%d\">time (s)</text>\n", LEFT + pw / 2,
            H - 12);
    fprintf(f, "<text x=\"16\" y=\"%.1f\" transform=\"rotate(-90 16 %.1f)\">"
               "resident memory (MiB)</text>\n</g>\n", TOP + ph / 2, TOP + ph / 2);
    fprintf(f, "<g stroke=\"black\" stroke-width=\"1\">\n"
               "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%.1f\"/>\n"
               "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n</g>\n",
            LEFT, TOP, LEFT, TOP + ph, LEFT, TOP + ph, LEFT + pw, TOP + ph);

    /* the lines and their legend */
    if (s->n > 0) {
        polyline(f, s, 0, tmax, ymax,
                 "stroke=\"#1f5fbf\" stroke-width=\"2\"");
        if (dirty)
            polyline(f, s, 1, tmax, ymax,
                     "stroke=\"#d9661f\" stroke-width=\"1.5\" "
                     "stroke-dasharray=\"6 3\"");
    }
    if (hwm) {
        double y = TOP + ph - hwm_mib / ymax * ph;
        fprintf(f, "<line class=\"hwm\" x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                   "stroke=\"#b22222\" stroke-width=\"1\" stroke-dasharray=\"2 3\"/>\n"
                   "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" fill=\"#b22222\">"
                   "peak %.1f MiB (high-water mark, between samples)</text>\n",
                LEFT, y, LEFT + pw, y, LEFT + 6, y - 4, hwm_mib);
    }
    double lx = LEFT + pw - 150, ly = TOP + 14;
    fprintf(f, "<g font-size=\"11\">\n"
               "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
               "stroke=\"#1f5fbf\" stroke-width=\"2\"/>\n"
               "<text x=\"%.1f\" y=\"%.1f\">RSS</text>\n",
            lx, ly, lx + 24, ly, lx + 30, ly + 4);
    if (dirty)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                   "stroke=\"#d9661f\" stroke-width=\"1.5\" "
                   "stroke-dasharray=\"6 3\"/>\n"
                   "<text x=\"%.1f\" y=\"%.1f\">private dirty</text>\n",
                lx, ly + 16, lx + 24, ly + 16, lx + 30, ly + 20);
    fprintf(f, "</g>\n</svg>\n");
    return fflush(f) == 0 && !ferror(f) ? 0 : -1;
}

/* ---- gnuplot ------------------------------------------------------------------- */

/* @s in a gnuplot single-quoted string (quotes doubled, controls '?'). */
static void gp_str(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\'')
            fputs("''", f);
        else
            fputc(c >= 0x20 && c != 0x7f ? c : '?', f);
    }
    fputc('\'', f);
}

static void gp_script(FILE *f, const char *path, const mr_series *s,
                      const char *title, double hwm_mib)
{
    int dirty = s->n > 0;
    double peak = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->v[i].dirty_kib < 0)
            dirty = 0;
        if (s->v[i].rss_kib / 1024.0 > peak)
            peak = s->v[i].rss_kib / 1024.0;
    }
    int hwm = hwm_above(hwm_mib, peak);
    fprintf(f, "set terminal svg size %d,%d dynamic noenhanced\n", W, H);
    fprintf(f, "set output ");
    gp_str(f, path);
    fprintf(f, "\nset title ");
    gp_str(f, title);
    fprintf(f, "\nset xlabel 'time (s)'\nset ylabel 'resident memory (MiB)'\nset grid\n"
               "set key top right\nset xrange [0:*]\n");
    /* the axis reaches the peak the report states, with a margin: gnuplot's
     * autoscale sees only the samples */
    fprintf(f, "set yrange [0:%.6g]\n", mr_chart_nice((hwm ? hwm_mib : peak) * 1.05));
    if (hwm)
        fprintf(f, "set arrow from graph 0, first %.4f to graph 1, first %.4f nohead "
                   "dashtype 3 linecolor rgb '#b22222'\n"
                   "set label 'peak %.1f MiB (high-water mark, between samples)' at graph "
                   "0.02, first %.4f offset 0,0.6 textcolor rgb '#b22222'\n",
                hwm_mib, hwm_mib, hwm_mib, hwm_mib);
    fprintf(f, "plot '-' using 1:2 with lines lw 2 title 'RSS'");
    if (dirty)
        fprintf(f, ", '-' using 1:2 with lines title 'private dirty'");
    fputc('\n', f);
    for (int pass = 0; pass < 1 + dirty; pass++) {
        for (size_t i = 0; i < s->n; i++)
            fprintf(f, "%.6f %.4f\n", s->v[i].t,
                    (pass ? s->v[i].dirty_kib : s->v[i].rss_kib) / 1024.0);
        if (s->n == 0)
            fprintf(f, "0 0\n");
        fprintf(f, "e\n");
    }
}

/* Does @path hold an SVG (some bytes, "<svg" near the start)? */
static int looks_svg(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char buf[4097];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, "<svg") != NULL;
}

/* Run gnuplot; 0 if it wrote the SVG, else -1 with why in @why. */
static int with_gnuplot(const char *gp, const char *path, const mr_series *s,
                        const char *title, double hwm_mib, char *why, size_t why_cap)
{
    int fds[2];
    if (pipe(fds) != 0) {
        snprintf(why, why_cap, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, why_cap, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(fds[0], STDIN_FILENO);
        if (null >= 0) {
            dup2(null, STDOUT_FILENO);
            dup2(null, STDERR_FILENO);
        }
        close(fds[0]);
        close(fds[1]);
        execl(gp, "gnuplot", (char *)NULL);
        _exit(127);
    }
    close(fds[0]);
    FILE *f = fdopen(fds[1], "w");
    if (f) {
        gp_script(f, path, s, title, hwm_mib);
        fclose(f); /* EPIPE if it died early: its status says why */
    } else {
        close(fds[1]);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        if (WIFSIGNALED(st))
            snprintf(why, why_cap, "gnuplot died of signal %d", WTERMSIG(st));
        else
            snprintf(why, why_cap, "gnuplot exited with status %d",
                     WEXITSTATUS(st));
        return -1;
    }
    if (!looks_svg(path)) {
        snprintf(why, why_cap, "gnuplot wrote no SVG");
        return -1;
    }
    return 0;
}

int mr_plot_svg(const char *path, const mr_series *s, const char *title,
                double hwm_mib, FILE *log)
{
    char gp[4096], why[256];
    if (mr_locate_program("gnuplot", gp, sizeof gp)) {
        if (with_gnuplot(gp, path, s, title, hwm_mib, why, sizeof why) == 0) {
            fprintf(log, "  svg         %s (gnuplot)\n", path);
            return 0;
        }
    } else {
        snprintf(why, sizeof why, "no gnuplot on PATH");
    }
    FILE *f = fopen(path, "w");
    if (!f || mr_plot_svg_builtin(f, s, title, hwm_mib) != 0) {
        fprintf(log, "memkit-run: cannot write %s: %s\n", path,
                strerror(errno));
        if (f)
            fclose(f);
        return -1;
    }
    if (fclose(f) != 0) {
        fprintf(log, "memkit-run: cannot write %s: %s\n", path,
                strerror(errno));
        return -1;
    }
    fprintf(log, "  svg         %s (written by memkit-run: %s)\n", path, why);
    return 0;
}
