/* SPDX-License-Identifier: MIT */
/*
 * unit/lockstat.c - the lock statistics of a -DMEMKIT_LOCK_STATS=ON build
 * (os/lockstat.c), compiled here into the test with MKI_LOCK_STATS on (the
 * library under test is built without it): every mki_os_lock counts as
 * taken under the lock's own name (the argument's text); one that finds
 * the lock held counts as found held, with the time it waited; the report
 * is one line per lock, and a short buffer cuts it without overflowing.
 */
#define MKI_LOCK_STATS 1
#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "os/lockstat.c"

static pthread_mutex_t quiet = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t busy = PTHREAD_MUTEX_INITIALIZER;
static atomic_int trying;

static void test_uncontended(void)
{
    for (int i = 0; i < 1000; i++) {
        mki_os_lock(&quiet);
        mki_os_unlock(&quiet);
    }
    char buf[4096];
    mki_os_lock_report(buf, sizeof buf);
    CHECK_STR_HAS(buf, "memkit: lock &quiet: taken 1000, found held 0, waited 0 us\n");
}

static void *waiter(void *arg)
{
    (void)arg;
    atomic_store(&trying, 1);
    mki_os_lock(&busy); /* held by the main thread for 50 ms */
    mki_os_unlock(&busy);
    return NULL;
}

static void test_contended(void)
{
    mki_os_lock(&busy);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, waiter, NULL) == 0);
    while (!atomic_load(&trying))
        sched_yield();
    struct timespec d = {0, 50 * 1000 * 1000};
    nanosleep(&d, NULL);
    mki_os_unlock(&busy);
    pthread_join(t, NULL);

    char buf[4096];
    mki_os_lock_report(buf, sizeof buf);
    CHECK_STR_HAS(buf, "memkit: lock &busy: taken 2, found held 1, waited ");
    const char *w = strstr(buf, "&busy: taken 2, found held 1, waited ");
    REQUIRE(w != NULL);
    long us = strtol(w + strlen("&busy: taken 2, found held 1, waited "), NULL, 10);
    CHECK_GE(us, 20000); /* it waited most of the 50 ms */
    CHECK_LT(us, 10000000);
}

static void test_short_buffer(void)
{
    char buf[16];
    memset(buf, 'x', sizeof buf);
    size_t n = mki_os_lock_report(buf, 12);
    CHECK_LE(n, (size_t)11);
    CHECK_EQ(buf[n], '\0');
    CHECK_EQ(buf[12], 'x'); /* nothing past the length it was given */
    CHECK_EQ(strncmp(buf, "memkit: loc", n), 0);
}

int main(void)
{
    RUN(test_uncontended);
    RUN(test_contended);
    RUN(test_short_buffer);
    return th_done();
}
