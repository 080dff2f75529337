#!/usr/bin/env python3
"""Attributes the extra time of aijpredict's solves to the staged parts that ran in them.

Reads the output of aijp_solve_ab (with its "round N:" lines) and the -info file of the same run
(-info <file>:mat): for every round, the staged steps' parts (host time and the product after the step's
start they ran in, from AIJPInstallStep's line) are mapped to the solve they ran in (-products per solve),
and each later solve's paired excess (aijpredict's time over the reference type's k-th solve in the same
round, minus one) is set against the host time of the parts in it. Prints, by host time in parts per
solve, the solves' count and their median excess in microseconds, and the ratio of the two (what a
microsecond of a part's host time costs the solve); then, for the solves that ran exactly one part, the
median excess by what that part did.

Usage: part_attribution.py --ab AB_OUTPUT --info INFO_FILE [--products-per-solve 10] [--ref aijcusparse]
                           [--type aijpredict] [--min-solves 15]
"""
import argparse
import re
import statistics
import sys


def parse_rounds(path, ref, typ):
    rounds = []
    for line in open(path, errors="replace"):
        if not line.startswith("round"):
            continue
        times = {}
        for m in re.finditer(r"(\S+) (\d+) its, ([0-9.]+) s((?: [0-9.]+)*)", line):
            times[m.group(1)] = [float(m.group(3))] + [float(v) for v in m.group(4).split()]
        if ref in times and typ in times:
            rounds.append((times[ref], times[typ]))
    return rounds


def parse_info(path):
    """Per round (split at each upload of the type), the steps: (start product, [(us, offset, label)])."""
    rounds, cur, start = [], None, None
    for line in open(path, errors="replace"):
        if "aijpredict: uploaded" in line:
            cur = []
            rounds.append(cur)
            continue
        m = re.search(r"started staged over the next products at product (\d+)", line)
        if m:
            start = int(m.group(1))
            continue
        if "host time of each part" in line and cur is not None and start is not None:
            body = line.split("where it changes:", 1)[1]
            parts, last = [], ""
            for m in re.finditer(r" (\d+)@(\d+)((?: \((?:[^()]|\([^()]*\))*\))?)", body):
                if m.group(3).strip():  # a label is printed where it changes: carried forward
                    last = re.sub(r"\{.*?\}|\[.*?\]|\(\d+ us\)|\d+", "#", m.group(3).strip()[1:-1])
                parts.append((int(m.group(1)), int(m.group(2)), last))
            cur.append((start, parts))
            start = None
    return rounds


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ab", required=True)
    ap.add_argument("--info", required=True)
    ap.add_argument("--products-per-solve", type=int, default=10)
    ap.add_argument("--ref", default="aijcusparse")
    ap.add_argument("--type", default="aijpredict")
    ap.add_argument("--min-solves", type=int, default=15, help="fewest solves a part kind needs to be listed")
    a = ap.parse_args()
    rounds = parse_rounds(a.ab, a.ref, a.type)
    steps = parse_info(a.info)
    if len(rounds) != len(steps):
        print(f"part_attribution: {len(rounds)} rounds in {a.ab} but {len(steps)} uploads in {a.info}", file=sys.stderr)
        return 1
    pps = a.products_per_solve
    rows = []  # (host us of parts in the solve, parts, excess us, excess fraction)
    single = {}  # label -> [(part us, excess us)] of the solves with that one part
    before = []  # excess us of the later solves before the round's first step began
    for (ref, typ), rsteps in zip(rounds, steps):
        first = (rsteps[0][0] - 1) // pps if rsteps else len(typ)
        before += [1e6 * (typ[j] - ref[j]) for j in range(1, min(first, len(ref), len(typ)))]
        host = [0.0] * len(typ)
        count = [0] * len(typ)
        label = [""] * len(typ)
        for start, parts in rsteps:
            for us, off, lab in parts:
                product = start + off - 1  # 1-based product index the part ran after
                solve = (product - 1) // pps  # 0-based solve index
                if 0 <= solve < len(typ):
                    host[solve] += us
                    count[solve] += 1
                    label[solve] = lab
        for j in range(1, min(len(ref), len(typ))):  # later solves
            rows.append((host[j], count[j], 1e6 * (typ[j] - ref[j]), typ[j] / ref[j] - 1))
            if count[j] == 1:
                single.setdefault(label[j], []).append((host[j], 1e6 * (typ[j] - ref[j])))
    bins = [(0, 0.5), (0.5, 10), (10, 20), (20, 30), (30, 50), (50, 100), (100, 1e9)]
    print(f"{'parts us in solve':>18} {'solves':>7} {'parts':>6} {'median us':>10} {'median excess us':>17} {'median excess %':>16} {'cost/us':>8}")
    for lo, hi in bins:
        sel = [r for r in rows if lo <= r[0] < hi]
        if not sel:
            continue
        h = statistics.median(r[0] for r in sel)
        e = statistics.median(r[2] for r in sel)
        pct = 100 * statistics.median(r[3] for r in sel)
        n = statistics.mean(r[1] for r in sel)
        ratio = f"{e / h:8.2f}" if h > 0 else f"{'-':>8}"
        print(f"{f'[{lo:g}, {hi:g})':>18} {len(sel):7d} {n:6.1f} {h:10.1f} {e:17.1f} {pct:16.2f} {ratio}")
    if before:
        print(f"\nLater solves before the first step began: {len(before)}, median excess {statistics.median(before):.1f} us")
    print(f"\nSolves with exactly one part, by what the part did (at least {a.min_solves} such solves):")
    print(f"{'part':54s} {'solves':>7} {'median us':>10} {'median excess us':>17}")
    for lab, v in sorted(single.items(), key=lambda kv: -len(kv[1])):
        if len(v) >= a.min_solves:
            print(f"{lab[:54]:54s} {len(v):7d} {statistics.median(x for x, _ in v):10.1f} {statistics.median(y for _, y in v):17.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
