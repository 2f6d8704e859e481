# SPDX-License-Identifier: MIT
# churn.py - Python's allocation churn through malloc (run it with
# PYTHONMALLOC=malloc): dicts, lists and strings built and dropped, then a
# JSON round trip of a large nested structure; prints checksums (zlib.crc32,
# never hash(), which is randomized per process).  Run by compare.sh on
# memkit and on the system allocator: the outputs must be identical.
import json
import sys
import zlib

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 6
crc = 0
x = 12345


def rand():
    global x
    x = (x * 1103515245 + 12345) % 2147483648
    return x


for r in range(rounds):
    d = {}
    for i in range(20000):
        k = "k%d_%x" % (i, rand())
        d[k] = [rand() % 1000, "v" * (rand() % 40), (i, r)]
    # drop two thirds in insertion order, grow the rest
    for k in list(d)[::3]:
        del d[k]
    for k in list(d)[::2]:
        d[k].append(k.upper() * 3)
    s = "|".join("%s=%r" % kv for kv in list(d.items())[:5000])
    words = s.split("|")
    words.sort(key=lambda w: (len(w), w))
    crc = zlib.crc32(s.encode(), crc)
    crc = zlib.crc32("".join(words[:100]).encode(), crc)
    del d, s, words
print("churn crc:", crc)

big = {
    "rows": [
        {"id": i, "name": "row%d" % i, "tags": ["t%d" % (i % 7)] * (i % 5),
         "score": (i * 37 % 1001) / 7.0, "nested": {"a": [i, i * 2], "b": None}}
        for i in range(25000)
    ],
    "meta": {"count": 25000, "note": "\u00e9t\u00e9 \u2603 " * 100},
}
text = json.dumps(big, sort_keys=True)
back = json.loads(text)
assert back == big, "json round trip changed the data"
print("json bytes:", len(text), "crc:", zlib.crc32(text.encode()))
again = json.dumps(back, sort_keys=True, indent=1)
print("indented bytes:", len(again), "crc:", zlib.crc32(again.encode()))
