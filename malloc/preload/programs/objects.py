"""Allocation-heavy Python workload with deterministic output (checksums only).

Run with PYTHONMALLOC=malloc so that every object, not only those over 512 bytes,
is a block from the C allocator:  PYTHONMALLOC=malloc python3 objects.py [SCALE]
(SCALE 1: about 2 s with glibc). Pyperformance-like pieces: object graphs of
class instances, dicts and lists built and dropped, json and pickle round trips,
regular expressions, string formatting and joining, sorting, a deep copy, and
threads that allocate and free at the same time.
"""
import copy
import hashlib
import json
import pickle
import re
import sys
import threading
import zlib

SCALE = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0


def n(base):
    return max(1, int(base * SCALE))


class Rng:
    """31-bit LCG: the same numbers on every run (no hash or time seeding)."""

    def __init__(self, seed):
        self.s = seed

    def __call__(self, m):
        self.s = (self.s * 1103515245 + 12345) % 2147483648
        return self.s % m


def digest(obj):
    return hashlib.sha256(repr(obj).encode()).hexdigest()[:16]


class Node:
    __slots__ = ("key", "left", "right")

    def __init__(self, key):
        self.key = key
        self.left = None
        self.right = None


class Record:
    def __init__(self, i, rnd):
        self.id = i
        self.name = "item-%06d" % rnd(1000000)
        self.tags = ["t%d" % rnd(50) for _ in range(rnd(5))]
        self.attrs = {"w": rnd(1000), "h": rnd(1000), "kind": "k%d" % rnd(7)}


def trees(rnd):
    total = 0
    for _ in range(n(40)):
        root = Node(rnd(1 << 20))
        for _ in range(2000):
            k = rnd(1 << 20)
            cur = root
            while True:
                if k < cur.key:
                    if cur.left is None:
                        cur.left = Node(k)
                        break
                    cur = cur.left
                else:
                    if cur.right is None:
                        cur.right = Node(k)
                        break
                    cur = cur.right
        stack, depth_sum = [(root, 1)], 0
        while stack:
            node, d = stack.pop()
            depth_sum += d
            if node.left:
                stack.append((node.left, d + 1))
            if node.right:
                stack.append((node.right, d + 1))
        total += depth_sum
    return total


def records(rnd):
    recs = [Record(i, rnd) for i in range(n(60000))]
    by_kind = {}
    for r in recs:
        by_kind.setdefault(r.attrs["kind"], []).append(r)
    recs.sort(key=lambda r: (r.attrs["w"] * r.attrs["h"], r.name, r.id))
    tags = {}
    for r in recs:
        for t in r.tags:
            tags[t] = tags.get(t, 0) + 1
    sizes = sorted((k, len(v)) for k, v in by_kind.items())
    return digest((sizes, sorted(tags.items()), [r.id for r in recs[::997]]))


def json_pickle(rnd):
    docs = []
    for i in range(n(3000)):
        docs.append({
            "id": i,
            "name": "doc %d" % rnd(100000),
            "values": [rnd(1000) / 7 for _ in range(20)],
            "nested": {"a": [{"x": rnd(10), "y": "s" * rnd(30)} for _ in range(5)]},
        })
    text = json.dumps(docs, sort_keys=True)
    back = json.loads(text)
    blob = pickle.dumps(back, protocol=5)
    again = pickle.loads(blob)
    deep = copy.deepcopy(again[: len(again) // 2])
    return len(text), zlib.crc32(text.encode()), len(blob), digest(deep[-1] if deep else None)


def regex(rnd):
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    lines = []
    for i in range(n(40000)):
        w = [words[rnd(8)] for _ in range(6)]
        lines.append("%05d %s user%d@host%d.example %s" % (i, " ".join(w), rnd(500), rnd(50), "x" * rnd(20)))
    text = "\n".join(lines)
    mail = re.compile(r"(\w+)@(host\d+)\.example")
    users = {}
    for m in mail.finditer(text):
        users[m.group(2)] = users.get(m.group(2), 0) + 1
    subst = re.sub(r"\b(\w)(\w*)a\b", lambda m: m.group(2).upper() + m.group(1), text)
    split = re.split(r"\s+(?:eta|zeta)\s+", text)
    return len(users), sum(users.values()), zlib.crc32(subst.encode()), len(split)


def strings(rnd):
    parts = []
    for i in range(n(200000)):
        parts.append(f"{i}:{rnd(1 << 30):x}")
    s = ",".join(parts)
    pieces = s.split(",")
    d = {p: i for i, p in enumerate(pieces)}
    upper = [p.upper() for p in pieces if p.endswith(("a", "b", "c"))]
    return len(s), len(d), len(upper), zlib.crc32(s.encode())


def threads(rnd):
    results = [0] * 4

    def work(t):
        r = Rng(1000 + t)
        acc = []
        total = 0
        for i in range(n(40000)):
            acc.append({"i": i, "v": [r(100)] * (r(8) + 1), "s": str(i) * (r(4) + 1)})
            if len(acc) > 500:
                for x in acc[:250]:
                    total += sum(x["v"]) + len(x["s"])
                del acc[:250]
        results[t] = total

    ts = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return results


def main():
    rnd = Rng(42)
    print("trees", trees(rnd))
    print("records", records(rnd))
    print("json/pickle", *json_pickle(rnd))
    print("regex", *regex(rnd))
    print("strings", *strings(rnd))
    print("threads", *threads(rnd))


main()
