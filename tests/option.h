/*
 * option.h - an option's value in a test's expressions: mk_option_get's,
 * or LONG_MIN (a value no option takes) when it cannot be read, which the
 * test's comparison then fails on.
 */
#ifndef MK_TEST_OPTION_H
#define MK_TEST_OPTION_H

#include <limits.h>
#include <memkit.h>

static inline long th_option(const char *name)
{
    long v;
    return mk_option_get(name, &v) == 0 ? v : LONG_MIN;
}

#endif /* MK_TEST_OPTION_H */
