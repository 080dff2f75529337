#!/usr/bin/env python3
"""Run-to-run noise floor of the accuracy report.

Reads several aijp_accuracy --samples files measured on the same kind of GPU (the same held-out matrices)
and, per format, scores an oracle that knows every matrix's time from the OTHER runs (the median of
their measurements) against each run in turn, with the report's metric: mean, median and 95th-percentile
of |oracle - measured| / measured. No model can be expected to beat this oracle on a run it has not seen:
where the oracle's error exceeds a target, the target is below the measurement's reproducibility.

Usage: bench/accuracy_noise_floor.py [--csv OUT] SAMPLES [SAMPLES ...]   (.jsonl or .jsonl.xz)
"""
import argparse
import json
import lzma
import statistics
import sys


def read(path):
    opener = lzma.open if path.endswith(".xz") else open
    runs = {}
    with opener(path, "rt") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                j = json.loads(line)
                runs[(j["matrix"], j["format"])] = float(j["measured_us"])
            except (ValueError, KeyError) as e:
                sys.exit(f"accuracy_noise_floor.py: {path}:{n}: bad sample line ({e})")
    if not runs:
        sys.exit(f"accuracy_noise_floor.py: {path}: no samples")
    return runs


def pct(sorted_values, q):
    return sorted_values[min(len(sorted_values) - 1, int(q * (len(sorted_values) - 1) + 0.5))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="Every sample file must come from aijp_accuracy --samples on the same matrix list.")
    ap.add_argument("samples", nargs="+", help="aijp_accuracy --samples files (at least 2)")
    ap.add_argument("--csv", help="also write one row per (run, matrix, format): measured, oracle, relative error")
    a = ap.parse_args()
    if len(a.samples) < 2:
        ap.error("need at least two runs")
    runs = [read(p) for p in a.samples]
    common = sorted(set.intersection(*(set(r) for r in runs)))
    if not common:
        sys.exit("accuracy_noise_floor.py: the runs share no (matrix, format) sample")
    errors = {}
    rows = []
    for i, run in enumerate(runs):
        for key in common:
            oracle = statistics.median(r[key] for j, r in enumerate(runs) if j != i)
            e = abs(oracle - run[key]) / run[key]
            errors.setdefault(key[1], []).append(e)
            rows.append((a.samples[i], key[0], key[1], run[key], oracle, e))
    print(f"# oracle = median of the other {len(runs) - 1} runs; {len(common)} (matrix, format) pairs in all {len(runs)} runs")
    print(f"{'format':<20}{'n':>5}{'mean%':>9}{'median%':>9}{'p95%':>9}")
    for fmt in sorted(errors):
        v = sorted(errors[fmt])
        print(f"{fmt:<20}{len(v):>5}{100 * statistics.mean(v):>9.1f}{100 * statistics.median(v):>9.1f}{100 * pct(v, 0.95):>9.1f}")
    if a.csv:
        with open(a.csv, "w") as f:
            f.write("run,matrix,format,measured_us,oracle_us,relative_error\n")
            for r in rows:
                f.write(f"\"{r[0]}\",\"{r[1]}\",{r[2]},{r[3]:.6g},{r[4]:.6g},{r[5]:.6g}\n")


if __name__ == "__main__":
    main()
