#!/bin/sh
# bench_report.sh - what memkit-bench's report and charts promise a reader,
# checked on a cheap run (W2, W5, RSS, W8 at 2 runs, memkit's columns and
# the baselines; about 5 s): the figures are not judged, the report is.
#   - the report opens with the title and the verdict, whose rows name the
#     three families against the system allocator, and says where memkit
#     loses (or that it does not);
#   - every workload code the report prints is explained where it first
#     appears: in the verdict ("W5 (10,000 small contexts)") or in the
#     legend, which comes before the tables and has a sentence for each;
#   - a '~' in a table marks exactly the ratios whose runs overlap (checked
#     against the CSV's min and max for W2);
#   - the claims are printed, the engineering targets are not (one line
#     says how to see them), and --targets prints them after the claims;
#     targets.csv has both, with their kind;
#   - the charts: bench-chart.svg and one file per family are well-formed
#     XML (python3's xml.etree), hold memkit's bars, and a bar's ratio is
#     the table's ratio in the CSV (W8 time, one cell).
# Usage: bench_report.sh path/to/memkit-bench
set -u
bench=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
if ! "$bench" --only W2,W5,RSS,W8 --runs 2 --alloc mk-general,mk-pool,mk-slab,memkit \
        --csv "$tmp" >"$tmp/out" 2>"$tmp/err"; then
    echo "FAIL: memkit-bench exited non-zero"
    tail -20 "$tmp/err"
    exit 1
fi
if ! "$bench" --only W5 --runs 1 --alloc mk-general --targets --csv "$tmp/t" \
        >"$tmp/targets" 2>/dev/null; then
    echo "FAIL: memkit-bench --targets exited non-zero"
    fail=1
fi
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 is needed to read the report"; exit 0; }
python3 - "$tmp" <<'PY' || fail=1
import csv, math, os, re, sys
import xml.etree.ElementTree as ET

tmp = sys.argv[1]
out = open(os.path.join(tmp, "out")).read()
lines = out.split("\n")
bad = []

def check(cond, what):
    if not cond:
        bad.append(what)

# the verdict opens the report
check(lines[0].startswith("memkit-bench (memkit "), "the first line is not the title: %r" % lines[0])
check(lines[2].startswith("== verdict:"), "the verdict does not open the report: %r" % lines[2])
verdict = out[out.index("== verdict:"):out.index("== workloads:")] if "== workloads:" in out else ""
check(len(verdict.split("\n")) <= 30, "the verdict is longer than 30 lines")
for fam, base in (("contexts", "malloc"), ("pools", "malloc"), ("drop-in", "glibc")):
    check(re.search(r"^  %s +vs %s +[0-9.]+x" % (re.escape(fam), base), verdict, re.M),
          "no verdict row for %s against %s" % (fam, base))
check("where memkit loses" in verdict, "the verdict does not say where memkit loses")
check("noise:" in verdict, "the verdict does not say how many cells are within the noise")

# every code is explained where it first appears
codes = ["W1M", "W2M", "W3-ctx", "W1", "W2", "W3", "W5", "W6", "W7", "W8", "RSS"]
legend_at = out.find("== workloads:")
check(legend_at > 0, "no legend of the workload codes")
legend = out[legend_at:out.index("\n== ", legend_at + 5)] if legend_at > 0 else ""
first_table = out.find("\n== W")
check(legend_at < first_table, "the legend does not come before the tables")
for code in codes:
    m = re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(code), out[len(lines[0]):])
    if not m:
        continue
    at = m.start() + len(lines[0])
    line = out[out.rfind("\n", 0, at) + 1:out.find("\n", at)]
    explained = at >= legend_at or re.search(r"%s(?: [a-z-]+)? \(\S" % re.escape(code), line)
    check(explained, "%s first appears unexplained: %r" % (code, line))
    check(re.search(r"^  %s +\S" % re.escape(code), legend, re.M),
          "%s is printed but the legend has no sentence for it" % code)

# '~' marks exactly the W2 ratios whose runs overlap
rows = list(csv.DictReader(open(os.path.join(tmp, "w2.csv"))))
base = {r["cell"]: r for r in rows if r["allocator"] == "malloc"}
want = 0
for r in rows:
    b = base.get(r["cell"])
    if r["allocator"] == "malloc" or not b or not r["min"]:
        continue
    lo = float(b["min"]) / float(r["max"])
    hi = float(b["max"]) / float(r["min"])
    want += lo < 1 < hi
w2 = out[out.index("== W2 "):out.index("\n== ", out.index("== W2 ") + 5)]
got = len(re.findall(r"[0-9]x~", w2))
check(got == want, "the W2 table marks %d ratios with ~, the runs overlap in %d" % (got, want))

# claims, not targets, unless --targets
check("== claims:" in out, "no claims section")
check("== engineering targets" not in out, "engineering targets printed without --targets")
check("--targets prints them" in out, "no line saying how to see the engineering targets")
t = open(os.path.join(tmp, "targets")).read()
check("== engineering targets" in t and t.index("== engineering targets") > t.index("== claims:"),
      "--targets does not print the targets after the claims")
check("16 MiB" in t[t.find("== engineering targets"):], "--targets lacks W5's targets")
kinds = {r["kind"] for r in csv.DictReader(open(os.path.join(tmp, "targets.csv")))}
check(kinds == {"claim", "target"}, "targets.csv kinds: %s" % sorted(kinds))

# the charts
for name in ("bench-chart.svg", "chart-contexts.svg", "chart-pools.svg", "chart-dropin.svg"):
    path = os.path.join(tmp, name)
    try:
        root = ET.parse(path).getroot()
    except Exception as e:  # missing or not well-formed
        check(False, "%s: %s" % (name, e))
        continue
    bars = [e for e in root.iter("{http://www.w3.org/2000/svg}rect") if e.get("class") == "bar"]
    check(bars, "%s has no bars" % name)
    for b in bars:
        check(float(b.get("data-ratio", "0")) > 0, "%s: a bar without its ratio" % name)
svg = ET.parse(os.path.join(tmp, "bench-chart.svg")).getroot()
bars = {(b.get("data-col"), b.get("data-measure"), b.get("data-table")): float(b.get("data-ratio"))
        for b in svg.iter("{http://www.w3.org/2000/svg}rect") if b.get("class") == "bar"}
for col in ("mk-general", "mk-pool", "mk-slab", "memkit"):
    check(any(k[0] == col for k in bars), "the chart has no bar of %s" % col)
w8 = [r for r in csv.DictReader(open(os.path.join(tmp, "w8.csv")))
      if r["section"] == "time" and r["allocator"] == "memkit" and r["ratio_vs_glibc"]]
key = ("memkit", "time", "W8")
if w8 and key in bars:
    check(abs(bars[key] / float(w8[0]["ratio_vs_glibc"]) - 1) < 0.001,
          "the chart's W8 time bar (%.4f) is not the table's ratio (%s)"
          % (bars[key], w8[0]["ratio_vs_glibc"]))
else:
    check(False, "no W8 time bar for memkit, or no W8 figure in w8.csv")

for b in bad:
    print("FAIL: " + b)
sys.exit(1 if bad else 0)
PY
[ $fail -eq 0 ] && echo "PASS: the report's verdict, legend, marks, claims and charts"
exit $fail
