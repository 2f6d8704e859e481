/* SPDX-License-Identifier: MIT */
/*
 * gen_lines.c - the input of the sort tests: N lines (argv[1]) from a fixed
 * generator (a 64-bit LCG), so every run and every machine gets the same
 * file.  A line is "<word>,<number>,<word>" with words of 1..16 lowercase
 * letters and numbers of 1..9 digits: short keys with many duplicates (the
 * first word has few letters often), so sort's comparisons and merges both
 * have work.  About 20 bytes a line, to stdout or to the file argv[2].
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t state = 0x9e3779b97f4a7c15u;

static uint32_t next(void)
{
    state = state * 6364136223846793005u + 1442695040888963407u;
    return (uint32_t)(state >> 33);
}

static void word(char *out, int *len, int max)
{
    int n = 1 + (int)(next() % (uint32_t)max);
    for (int i = 0; i < n; i++)
        out[(*len)++] = (char)('a' + next() % 26);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 1000000;
    if (n <= 0 || argc > 3) {
        fprintf(stderr, "usage: gen_lines N [FILE]\n");
        return 2;
    }
    if (argc == 3 && !freopen(argv[2], "w", stdout)) {
        perror(argv[2]);
        return 1;
    }
    char line[64];
    for (long i = 0; i < n; i++) {
        int len = 0;
        word(line, &len, (i & 3) ? 4 : 16);
        uint32_t range = 1u + next() % 999999999u; /* one call a statement: */
        uint32_t num = next() % range;             /* a fixed order */
        len += sprintf(line + len, ",%u,", num);
        word(line, &len, 8);
        line[len++] = '\n';
        if (fwrite(line, 1, (size_t)len, stdout) != (size_t)len) {
            perror("gen_lines: write");
            return 1;
        }
    }
    return fflush(stdout) == 0 ? 0 : 1;
}
