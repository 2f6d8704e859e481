/* SPDX-License-Identifier: MIT */
/*
 * reports.h - memkit's error reports captured in a test that misuses on
 * purpose and goes on: th_reports_begin() installs a handler that counts
 * the reports and keeps the last one in th_report; th_reports_end() takes
 * it away and returns the count.  (Tests that must see the abort use a
 * death test instead: wrong/.)
 */
#ifndef TH_REPORTS_H
#define TH_REPORTS_H

#include <memkit.h>
#include <stdio.h>

static char th_report[256]; /* the last report */
static int th_nreports;

static void th_reports_handler(const char *msg, void *arg)
{
    (void)arg;
    th_nreports++;
    snprintf(th_report, sizeof th_report, "%s", msg);
}

static void th_reports_begin(void)
{
    th_nreports = 0;
    th_report[0] = 0;
    mk_set_error_handler(th_reports_handler, NULL);
}

static int th_reports_end(void)
{
    mk_set_error_handler(NULL, NULL);
    return th_nreports;
}

#endif /* TH_REPORTS_H */
