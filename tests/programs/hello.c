/* SPDX-License-Identifier: MIT */
/*
 * hello.c - a program that allocates almost nothing (stdio's buffer, if
 * that): the fixed cost of the drop-in is measured on it (rss_cost.c) and
 * its output compared on memkit and on the system allocator (compare.sh).
 */
#include <stdio.h>

int main(void)
{
    printf("hello, world\n");
    return 0;
}
