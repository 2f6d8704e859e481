# SPDX-License-Identifier: MIT
# test_more.pl - load Test::More (a few dozen modules: a realistic start-up
# of Perl's allocations) and run some of its checks; the TAP output is
# compared on memkit and on the system allocator by compare.sh.
use strict;
use warnings;
use Test::More;

ok(1, 'loaded');
is_deeply({a => [1 .. 3], b => {c => 'd'}}, {a => [1 .. 3], b => {c => 'd'}},
          'deep structures');
like('memkit', qr/kit$/, 'regex');
is(join(',', sort { $a <=> $b } map { $_ * 3 % 7 } 1 .. 6), '1,2,3,4,5,6',
   'sort');
done_testing;
