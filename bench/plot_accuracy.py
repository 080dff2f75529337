#!/usr/bin/env python3
"""Scatter plot of predicted versus measured SpMV time (log-log), one panel per format, one colour per model,
from the CSV written by aijp_accuracy --csv. Usage: plot_accuracy.py INPUT.csv OUTPUT.png [--title TEXT]"""
import argparse
import csv
import math
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("csv")
    ap.add_argument("png")
    ap.add_argument("--title", default="aijpredict: predicted vs measured SpMV time")
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_accuracy.py: matplotlib is required")
    with open(args.csv, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit("plot_accuracy.py: %s has no rows" % args.csv)
    models = [k for k in rows[0].keys() if k not in ("matrix", "format", "measured_us")]
    formats = sorted({r["format"] for r in rows})
    ncol = 4
    nrow = math.ceil(len(formats) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4 * ncol, 3.6 * nrow), squeeze=False)
    colours = ["#999999", "#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e"]
    for i, fmt in enumerate(formats):
        ax = axes[i // ncol][i % ncol]
        sel = [r for r in rows if r["format"] == fmt]
        lo, hi = math.inf, 0
        for j, m in enumerate(models):
            pts = [(float(r["measured_us"]), float(r[m])) for r in sel if r[m]]
            if not pts:
                continue
            xs, ys = zip(*pts)
            lo, hi = min(lo, *xs, *ys), max(hi, *xs, *ys)
            err = sum(abs(y - x) / x for x, y in pts) / len(pts)
            ax.scatter(xs, ys, s=10, alpha=0.7, color=colours[j % len(colours)], label="%s (%.0f%%)" % (m, 100 * err))
        if hi > 0:
            ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(fmt)
        ax.set_xlabel("measured [us]")
        ax.set_ylabel("predicted [us]")
        ax.legend(fontsize=6)
    for k in range(len(formats), nrow * ncol):
        axes[k // ncol][k % ncol].axis("off")
    fig.suptitle(args.title)
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)


if __name__ == "__main__":
    main()
