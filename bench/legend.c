/*
 * legend.c - the meaning of the workload codes the report, the verdict
 * and the chart use (W1, W1M, W2, W2M, W3, W3-ctx, W5, W6, W7, W8, RSS).
 *
 * A code is short so that tables line up, and means nothing to a reader
 * who has not read bench/README.md; so every code the report prints is
 * explained before its first use: the verdict says "W5 (10,000 small
 * contexts)", and the legend that follows it gives each code of the run
 * one sentence.  The codes stay because the CSV files, the claims and the
 * docs name workloads by them.  Trade-off: one table here, kept next to
 * the workloads by hand (a workload added without a line here prints
 * with an empty label, which the bench's test catches).  An M after the
 * number means the same test through malloc, under each drop-in.
 */
#include "legend.h"

#include <string.h>

#include "report.h"

static const struct legend {
    const char *code, *label, *what;
} legend[] = {
    {"W1", "palloc test",
     "PostgreSQL's palloc test: chunk sizes 8 B..1 KiB x live memory, pattern "
     "free-oldest (allocate, free the oldest) and pattern reset (allocate, then reset "
     "the context / free every chunk)"},
    {"W2", "24/48 B objects",
     "Godot's object pool test: 10M allocate, write, read, free of 24- and 48-byte "
     "objects, one at a time and in a ring of 1000"},
    {"W5", "10,000 small contexts",
     "10,000 contexts of ten 64-byte chunks each: creating, filling and deleting "
     "the tree (time), and the memory it holds"},
    {"RSS", "memory per chunk",
     "memory per chunk: resident growth for 1,000,000 live 24- and 48-byte chunks"},
    {"W3-ctx", "peak, then churn (in-process)",
     "W3 inside one context: 512 MiB peak of 1 MiB chunks, all freed, then 64-byte "
     "churn: is the memory given back, and at what cost"},
    {"W1M", "palloc test via malloc",
     "W1's free-oldest pattern through malloc/free, in a child process under each "
     "malloc drop-in (LD_PRELOAD)"},
    {"W2M", "W2 via malloc",
     "W2 through malloc/free, in a child process under each malloc drop-in"},
    {"W6", "threads",
     "malloc from 1, 2 and 4 threads (--threads): a Larson-style server, "
     "producer/consumer pairs, threads created and joined in a loop"},
    {"W7", "real programs",
     "real programs on each drop-in: perl, python3, ruby, sqlite3, gcc, clang (wall "
     "time and peak resident memory)"},
    {"W8", "large blocks",
     "large blocks, 64 KiB..32 MiB, through malloc: time and peak resident memory"},
    {"W3", "peak, then churn",
     "FORM's sort buffers: a 512 MiB peak, all freed, then 64-byte churn, then quiet: "
     "resident memory over time under each drop-in and purge mode, and the churn's time"},
};

static const struct legend *find(const char *code)
{
    for (size_t i = 0; i < sizeof legend / sizeof legend[0]; i++)
        if (strcmp(legend[i].code, code) == 0)
            return &legend[i];
    return NULL;
}

const char *legend_label(const char *code)
{
    const struct legend *l = find(code);
    return l ? l->label : "";
}

const char *legend_what(const char *code)
{
    const struct legend *l = find(code);
    return l ? l->what : "";
}

/* @text after a hanging indent of @indent, wrapped at @width columns. */
static void put_hanging(FILE *out, const char *text, int indent, int width)
{
    int col = indent;
    while (*text) {
        const char *sp = strchr(text, ' ');
        int n = sp ? (int)(sp - text) : (int)strlen(text);
        if (col > indent && col + 1 + n > width) {
            fprintf(out, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', out);
            col++;
        }
        fprintf(out, "%.*s", n, text);
        col += n;
        text += n;
        while (*text == ' ')
            text++;
    }
    fputc('\n', out);
}

void legend_print(FILE *out)
{
    fprintf(out, "\n== workloads: what the codes stand for (bench/README.md has each in full) ==\n");
    for (int pass = 0; pass < 2; pass++) /* those of this run, then the others */
        for (size_t i = 0; i < sizeof legend / sizeof legend[0]; i++) {
            int ran = 0;
            for (int s = 0; s < report_nsections() && !ran; s++)
                ran = strcmp(report_get_section(s)->workload, legend[i].code) == 0;
            if (ran != !pass)
                continue;
            char text[640];
            snprintf(text, sizeof text, "%s%s", legend[i].what, ran ? "" : " (not in this run)");
            fprintf(out, "  %-7s", legend[i].code);
            put_hanging(out, text, 9, 96);
        }
}

void legend_help(FILE *out)
{
    for (size_t i = 0; i < sizeof legend / sizeof legend[0]; i++) {
        fprintf(out, "  %-7s", legend[i].code);
        put_hanging(out, legend[i].what, 9, 80);
    }
}
