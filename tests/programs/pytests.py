# SPDX-License-Identifier: MIT
"""pytests.py - a slice of CPython's own regression suite (Debian's
libpython3.11-testsuite), run in this one process for compare.sh: with
PYTHONMALLOC=malloc, every object the tests make goes through malloc.

Each module's tests run with unittest, quiet (test.support.verbose off);
the only output on stdout is one line per module (tests run, failures,
errors, skipped), the same on every allocator when the tests behave the
same; a failure or an error also makes the exit status 1.  What the tests
print themselves goes to stderr, which compare.sh does not compare
(--no-stderr: thread messages come in any order).

usage: python3 pytests.py MODULE...   (test_list test_dict ...)
"""
import contextlib
import io
import sys
import unittest

from test import support

support.verbose = False
out = sys.stdout
bad = 0
for name in sys.argv[1:]:
    with contextlib.redirect_stdout(sys.stderr):
        suite = unittest.defaultTestLoader.loadTestsFromName("test." + name)
        result = unittest.TextTestRunner(stream=io.StringIO(), verbosity=0).run(suite)
    print(name, "run", result.testsRun, "failures", len(result.failures),
          "errors", len(result.errors), "skipped", len(result.skipped), file=out)
    for test, trace in result.failures + result.errors:
        print("  FAILED:", test.id(), file=out)
        sys.stderr.write(trace)
    bad += len(result.failures) + len(result.errors)
out.flush()
sys.exit(1 if bad else 0)
