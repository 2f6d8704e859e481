/* SPDX-License-Identifier: MIT */
/*
 * annotate.c - whether the process runs under Valgrind, read once: the one
 * run-time fact behind annotate.h's inline client requests (AddressSanitizer
 * is a compile-time one).  MEMKIT_VALGRIND=0 turns the annotations off even
 * under Valgrind, so that callgrind counts the release paths.
 */
#include "annotate.h"

#include <pthread.h>

int mki_valgrind_on;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init_once(void)
{
#if MKI_VALGRIND
    mki_options_init();
    mki_valgrind_on = RUNNING_ON_VALGRIND && mki_option(MKI_OPT_VALGRIND) ? 1 : 0;
#endif
}

void mki_annotate_init(void) { pthread_once(&once, init_once); }
