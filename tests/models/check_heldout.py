#!/usr/bin/env python3
"""Checks an aijp_refit --json summary: on every format a published model covers, our model ("aijp") has a
lower mean relative error than that published model (issue 4: measurably more accurate than both published
models on held-out matrices). Usage: check_heldout.py SUMMARY.json"""
import json
import sys

d = json.load(open(sys.argv[1]))
mean = {(e["model"], e["format"]): e["mean"] for e in d["errors"]}
published = {m for m, _ in mean if m not in ("aijp", "placeholder")}
bad, compared = [], 0
for (m, f), err in sorted(mean.items()):
    if m not in published:
        continue
    ours = mean.get(("aijp", f))
    if ours is None:
        bad.append("aijp has no prediction for %s" % f)
        continue
    compared += 1
    print("%-20s %-18s published %8.1f %%   aijp %6.1f %%" % (m, f, 100 * err, 100 * ours))
    if not ours < err:
        bad.append("%s: aijp %.1f %% is not below %s %.1f %%" % (f, 100 * ours, m, 100 * err))
if compared == 0:
    bad.append("no published model was evaluated")
print("\n".join(bad) if bad else "aijp is more accurate than every published model on all %d comparisons" % compared)
sys.exit(1 if bad else 0)
