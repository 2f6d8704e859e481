# SPDX-License-Identifier: MIT
# hash.pl - a Perl hash of N strings (default 1,000,000) built, read back
# in a fixed order (Perl's hash order is randomized per process, so nothing
# here depends on it), then freed; prints checksums.  Run by compare.sh on
# memkit and on the system allocator: the two outputs must be identical.
use strict;
use warnings;

my $n = shift // 1_000_000;
my %h;
for my $i (0 .. $n - 1) {
    # values of varied lengths: 1..64 bytes of one character
    $h{"key$i"} = chr(97 + $i % 26) x (1 + ($i * 7919) % 64);
}
print "keys: ", scalar(keys %h), "\n";

my ($sum, $len) = (0, 0);
for my $i (0 .. $n - 1) {
    my $v = $h{"key$i"};
    $len += length $v;
    $sum = ($sum * 31 + unpack("%32C*", $v) + $i) % 4294967291;
}
print "bytes: $len\nchecksum: $sum\n";

# delete half one by one (frees in hash order), then the rest at once
for my $i (grep { $_ % 2 } 0 .. $n - 1) {
    delete $h{"key$i"};
}
print "after delete: ", scalar(keys %h), "\n";
undef %h;
print "after undef: ", scalar(keys %h), "\n";
