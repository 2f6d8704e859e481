# SPDX-License-Identifier: MIT
# churn.pl - Perl's everyday allocation churn: sort, regular expressions with
# captures, join/split, string growth, arrays of arrays; prints checksums.
# Run by compare.sh on memkit and on the system allocator.
use strict;
use warnings;

my $rounds = shift // 40;
my $total = 0;
for my $r (1 .. $rounds) {
    # words from a fixed generator
    my $x = $r;
    my @words = map { $x = ($x * 1103515245 + 12345) % 2147483648;
                      sprintf("w%x_%d", $x, $x % 977) } 1 .. 5000;
    my @sorted = sort @words;
    my @bynum = sort { ($a =~ /_(\d+)$/)[0] <=> ($b =~ /_(\d+)$/)[0]
                       or $a cmp $b } @words;
    my $line = join(",", @sorted);
    my @back = split /,/, $line;
    die "split/join lost words" unless @back == @words;
    my $hex = 0;
    while ($line =~ /w([0-9a-f]{3})[0-9a-f]*_(\d+)/g) {
        $hex += hex($1) + $2;
    }
    (my $copy = $line) =~ s/_(\d+)/"<" . ($1 * 2) . ">"/ge;
    my $grown = "";
    $grown .= $_ x 3 for @bynum[0 .. 999];
    my @aoa = map { [ split //, $_ ] } @sorted[0 .. 499];
    my $cells = 0;
    $cells += @$_ for @aoa;
    $total = ($total + $hex + length($copy) + length($grown) + $cells
              + unpack("%32C*", $bynum[0] . $sorted[-1])) % 4294967291;
}
print "churn checksum: $total\n";
