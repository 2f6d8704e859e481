/* SPDX-License-Identifier: MIT */
/*
 * gc_list.c - a program with a conservative garbage collector (Boehm GC,
 * libgc) on the drop-in: a list of 100,000 nodes, half of it dropped, 50
 * collections; it prints what survived.  Every collection scans the
 * static data of every loaded library as roots, memkit's included, so the
 * drop-in's static data must stay small (tests/override/static_data.sh;
 * it was 36 MiB, and this program ran 14x slower).  compare.sh checks the
 * output is glibc's.
 */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <gc.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

typedef struct node {
    struct node *next;
    long value;
    char text[40];
} node;

int main(void)
{
    GC_INIT();
    node *head = NULL;
    for (long i = 0; i < 100000; i++) {
        node *n = GC_MALLOC(sizeof *n);
        if (!n)
            return 1;
        n->value = i;
        snprintf(n->text, sizeof n->text, "node %ld", i);
        n->next = head;
        head = n;
        char *scratch = strdup(n->text); /* malloc too, freed */
        free(scratch);
    }
    for (node *n = head; n && n->next; n = n->next)
        n->next = n->next->next; /* drop every other node */
    for (int c = 0; c < 50; c++)
        GC_gcollect();
    long count = 0, sum = 0;
    for (node *n = head; n; n = n->next) {
        count++;
        sum += n->value;
    }
    printf("%ld nodes survive, values summing to %ld; last \"%s\"\n", count, sum,
           head ? head->text : "");
    return 0;
}
