#!/usr/bin/env python3
"""Experiment (host only, session 47): how far the gap between back-to-back kernels moved within each committed
gated pair, and what moving the held-out predictions by it does to the accuracy table.

The sample files of sessions before 47 carry no measured gap. Their matrices, though, repeat from run to run: each
warm-up times the same grid, each held-out run the same matrices. For every run, the median over the one-kernel
formats' products under --max-us of (reference run's time - this run's time) is the run's offset per kernel
against the reference run (the products of a run whose kernels run closer together are faster by that much,
whatever their size: docs/models.md, Session 47). A pair's shift is its warm-up's offset minus its held-out's:
what the gap at the held-out measurements was, minus the gap at the warm-up, give or take the reference pair's own
shift (unknown, taken as 0). For each pair the script then runs aijp_refit on the pair with --launch-shift 0 and
with the estimated shift, and prints the formats meeting mean <= 5 % and p95 <= 12 %, the formats' average mean
error and the regret.

This is an estimate from the products themselves, not the measured gap (aijp::measure_launch_gap): it shows what
the correction can do where the gap tracks the products' offsets, which the next GPU run has to confirm.

Usage: launch_gap_pairs.py [--build DIR] [--gpu h100] [--since 2026-12-07] [--reference NAME] [--max-us 20]
"""
import argparse
import glob
import json
import lzma
import os
import statistics
import subprocess
import sys

ONE_KERNEL = {'csr_vector', 'csr_scalar', 'ell', 'ellr', 'pellr', 'jad', 'sell', 'sell_sigma', 'sell_delta16', 'cusparse_sell'}


def load(path):
    times = {}
    with lzma.open(path, 'rt') as f:
        for line in f:
            s = json.loads(line)
            times[(s['matrix'], s['format'])] = s['measured_us']
    return times


def offset(run, reference, max_us):
    d = [reference[k] - t for k, t in run.items() if k in reference and k[1] in ONE_KERNEL and t < max_us]
    return (statistics.median(d), len(d)) if d else (None, 0)


def table(refit, run, shift):
    out = subprocess.run([refit, '--cache', run + '_gated_cache.json', '--train', run + '_warmup_gated_samples.jsonl.xz', '--test',
                          run + '_accuracy_gated_samples.jsonl.xz', '--models', 'guo_wang', '--launch-shift', '%.3f' % shift],
                         capture_output=True, text=True, check=True).stdout
    meet, means, regret = 0, [], None
    for line in out.splitlines():
        f = line.split()
        if len(f) == 6 and f[0] == 'placeholder' and f[2].isdigit():
            means.append(float(f[3]))
            meet += float(f[3]) <= 5 and float(f[5]) <= 12
        elif len(f) >= 4 and f[0] == 'placeholder' and f[3].endswith('%') and regret is None:
            regret = f[2]
    return meet, statistics.mean(means), regret


def main():
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--build', default=os.path.join(here, 'build'))
    ap.add_argument('--gpu', default='h100')
    ap.add_argument('--since', default='2026-12-07')
    ap.add_argument('--reference', default='2026-12-07_h100_session46_call1_run2', help='run whose offsets are 0')
    ap.add_argument('--max-us', type=float, default=20.0, help='products shorter than this (launch-bound) give the offsets')
    a = ap.parse_args()
    refit = os.path.join(a.build, 'bench', 'aijp_refit')
    if not os.access(refit, os.X_OK):
        sys.exit('launch_gap_pairs.py: %s not found: build the project first (or pass --build DIR)' % refit)
    results = os.path.join(here, 'bench', 'results')
    ref = os.path.join(results, a.reference)
    if not os.path.exists(ref + '_warmup_gated_samples.jsonl.xz') or not os.path.exists(ref + '_accuracy_gated_samples.jsonl.xz'):
        sys.exit('launch_gap_pairs.py: no gated pair %s in bench/results' % a.reference)
    ref_w, ref_h = load(ref + '_warmup_gated_samples.jsonl.xz'), load(ref + '_accuracy_gated_samples.jsonl.xz')
    print('# offsets per kernel against %s (one-kernel formats, products under %.0f us); shift = warm-up offset - held-out offset'
          % (a.reference, a.max_us))
    print('%-42s %9s %9s %7s | %-24s | %-24s' % ('pair', 'warm-up', 'held-out', 'shift', 'no shift: meet mean regret',
                                                   'shifted: meet mean regret'))
    for cache in sorted(glob.glob(os.path.join(results, '*_%s_*_gated_cache.json' % a.gpu))):
        run = cache[:-len('_gated_cache.json')]
        name = os.path.basename(run)
        if name[:10] < a.since:
            continue
        if not os.path.exists(run + '_warmup_gated_samples.jsonl.xz') or not os.path.exists(run + '_accuracy_gated_samples.jsonl.xz'):
            continue
        w, nw = offset(load(run + '_warmup_gated_samples.jsonl.xz'), ref_w, a.max_us)
        h, nh = offset(load(run + '_accuracy_gated_samples.jsonl.xz'), ref_h, a.max_us)
        if w is None or h is None:
            print('%-42s no products in common with the reference' % name)
            continue
        shift = w - h
        m0, e0, r0 = table(refit, run, 0.0)
        m1, e1, r1 = table(refit, run, shift)
        print('%-42s %+9.3f %+9.3f %+7.3f | %2d of 14  %5.2f %%  %s | %2d of 14  %5.2f %%  %s' % (name, w, h, shift, m0, e0, r0, m1, e1, r1))


if __name__ == '__main__':
    main()
