#!/usr/bin/env python3
"""Where a staged step's cost lands in the solves it spans: the solver's work, the products, or the parts.

Reads aijp_solve_ab's output of a run with -mat_aijpredict_trace_buffer -mat_aijpredict_trace_ms 0 (every
product traced, printed at each matrix's MatDestroy). Each matrix's products are cut into solves by their count
(--products-per-solve: -ksp_max_it 10 GMRES from a zero guess makes 10), and each solve's host time from its
first product to the return of its last is split into
  gap      the solver's work between two products (dot products, norms, the preconditioner, its waits),
  product  the product's own host time (reuse check and the product, as the trace splits them),
  staged   AIJPInstallStep's column: the part a product ran, or a poll.
The solves are grouped by phase: before any step, while a step runs (every product of the solve was queued
with a step running), after it. Prints, per phase, the solves' count and the mean of each column per solve,
then the step's excess over the solves before it, split the same way, and what a microsecond of a part's
own host time costs the solve (the excess over the parts' time in those solves).

Usage: step_cycle.py AB_OUTPUT [--products-per-solve 10] [--skip-solves 5]
  --skip-solves: solves left out at a matrix's start (the first solves warm caches and the online timer).
"""
import argparse
import statistics
import sys


def parse(path):
    """Yields each matrix's traced products: (product, gap, reuse+product, staged, stepping, ran_part)."""
    cur = None
    for line in open(path, errors="replace"):
        at = line.find("aijpredict trace:")  # the header may follow the round's line on the same line
        if at < 0:
            continue
        f = line[at:].split()
        if f[3] == "products":  # a header: a new matrix
            if cur:
                yield cur
            cur = []
            continue
        if cur is None or len(f) < 11:
            continue
        cur.append((int(f[2]), float(f[4]), float(f[5]) + float(f[6]), float(f[7]), f[9] == "1", f[10] != "-"))
    if cur:
        yield cur


def solves(products, per_solve):
    """Cuts one matrix's products into solves of `per_solve` products (product 1 starts the first)."""
    out = {}
    for p in products:
        out.setdefault((p[0] - 1) // per_solve, []).append(p)
    return [out[k] for k in sorted(out)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ab_output")
    ap.add_argument("--products-per-solve", type=int, default=10)
    ap.add_argument("--skip-solves", type=int, default=5)
    a = ap.parse_args()
    phases = {"before": [], "step": [], "after": []}
    sizes = []
    for products in parse(a.ab_output):
        seen_step = False
        for s in solves(products, a.products_per_solve)[a.skip_solves:]:
            sizes.append(len(s))
            stepping = [p[4] for p in s]
            if all(stepping):
                phase = "step"
                seen_step = True
            elif not any(stepping):
                phase = "after" if seen_step else "before"
            else:
                seen_step = True
                continue  # a solve the step starts or ends in
            inner = s[1:]  # the first product's gap is the boundary
            gap = sum(p[1] for p in inner)
            prod = sum(p[2] for p in s)
            staged = sum(p[3] for p in s)
            parts = sum(p[3] for p in s if p[5])
            nparts = sum(1 for p in s if p[5])
            phases[phase].append((gap, prod, staged, parts, nparts))
    if not sizes:
        sys.exit("step_cycle.py: no traced products (run with -mat_aijpredict_trace_buffer -mat_aijpredict_trace_ms 0)")
    print("products per solve: median %d (min %d, max %d)" % (statistics.median(sizes), min(sizes), max(sizes)))
    print("%-7s %7s %10s %10s %10s %10s %10s %8s" % ("phase", "solves", "total us", "gap us", "product us", "staged us", "parts us", "parts"))
    means = {}
    for name, rows in phases.items():
        if not rows:
            continue
        m = [statistics.mean(r[k] for r in rows) for k in range(5)]
        means[name] = m
        print("%-7s %7d %10.1f %10.1f %10.1f %10.1f %10.1f %8.2f" % (name, len(rows), m[0] + m[1] + m[2], m[0], m[1], m[2], m[3], m[4]))
    if "before" in means and "step" in means:
        b, s = means["before"], means["step"]
        d = [s[k] - b[k] for k in range(4)]
        total = d[0] + d[1] + d[2]
        print("step - before: total %+.1f us per solve (%+.2f %% of a solve before the step): gap %+.1f, product %+.1f, staged %+.1f (parts %+.1f)"
              % (total, 100 * total / (b[0] + b[1] + b[2]), d[0], d[1], d[2], d[3]))
        if s[3] > 0:
            print("a microsecond of a part's host time costs the solve %.2f us" % (total / s[3]))


if __name__ == "__main__":
    main()
