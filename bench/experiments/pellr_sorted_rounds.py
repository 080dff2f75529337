#!/usr/bin/env python3
"""Experiment (host only, session 28): PELLR's worst sorted warp in unrolled rounds and remainder steps.

Reads an `aijp_refit --explain` CSV (placeholder terms per sample), regenerates each matrix's row lengths (warm-up
names as kernels/src/device_generate.cu draws them, bit for bit in the hash, numpy libm for the length draws, as
bench/experiments/longrow_locality.cpp; Matrix Market files of --matrices, symmetric ones expanded; gen: names are
skipped: they are stream-bound), sorts them by decreasing length (stable, as the device sort) and prints per pellr
(or --format) sample: U = the most unrolled rounds (floor(len / 4)) and V = the most remainder steps (len % 4) of
any 32-row warp, the rows of the sorted first 256-row block relative to max_len (fill: 1 = a full block of
longest rows), and (measured - fixed) / raw chain. With --fit it fits, on the in-L2 samples of up to 33792 rows
of a training CSV (--train), chain = max over warps of u (1 + b fill) U + v V by a grid on the mean relative
error of fixed + max(chain, stream, l2), and prints the held-out errors (docs/models.md, Session 28: pellr).
"""
import argparse, csv, gzip, os, sys
import numpy as np

M = np.uint64


def mix(x):
    x = x + M(0x9E3779B97F4A7C15)
    x = (x ^ (x >> M(30))) * M(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> M(27))) * M(0x94D049BB133111EB)
    return x ^ (x >> M(31))


def unit(h):
    return (h >> M(11)).astype(np.float64) * 2.0 ** -53


def warmup_lengths(name):
    dist, rest = name.split(":", 1)
    if dist not in ("constant", "normal", "uniform", "pareto"):
        return None
    kv = dict(it.split("=", 1) for it in rest.split(",") if "=" in it)
    rows, cols, mean, window = int(kv["rows"]), int(kv["cols"]), float(kv["mean"]), int(kv["window"])
    seed = M(int(kv["seed"]))
    param = next((float(kv[k]) for k in ("sigma", "width", "exponent") if k in kv), 0.0)
    r = np.arange(rows, dtype=np.uint64)
    with np.errstate(over="ignore"):
        h1 = mix(seed ^ mix(r * M(2) + M(1)))
        h2 = mix(h1 ^ M(0x5BD1E995))
    if dist == "constant":
        l = np.full(rows, mean)
    elif dist == "normal":
        l = mean + param * np.sqrt(-2.0 * np.log(1.0 - unit(h1))) * np.cos(np.pi * 2.0 * unit(h2))
    elif dist == "uniform":
        l = np.floor(mean - param + (2.0 * param + 1.0) * unit(h1))
    else:
        l = mean * (param - 1.0) / param * np.power(1.0 - unit(h1), -1.0 / param)
    return np.clip(np.rint(l).astype(np.int64), 0, min(window, cols))


def mtx_lengths(path):
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
        header = f.readline().lower().split()
        sym = any(s in header for s in ("symmetric", "hermitian", "skew-symmetric"))
        for line in f:
            if not line.startswith("%"):
                m = int(line.split()[0])
                break
        entries = set()
        for line in f:
            p = line.split()
            if len(p) < 2:
                continue
            i, j = int(p[0]) - 1, int(p[1]) - 1
            entries.add((i, j))
            if sym and i != j:
                entries.add((j, i))
    L = np.zeros(m, dtype=np.int64)
    for i, _ in entries:
        L[i] += 1
    return L


_cache = {}


def lengths(name, matrices):
    if name.startswith("gen:"):
        return None
    if name not in _cache:
        _cache[name] = warmup_lengths(name) if ":" in name else mtx_lengths(os.path.join(matrices, name))
    return _cache[name]


def warp_terms(L):
    s = -np.sort(-L, kind="stable")
    w = np.concatenate([s, np.zeros((-len(s)) % 32, dtype=s.dtype)]).reshape(-1, 32)
    fill = s[:256].sum() / (256.0 * s[0]) if s[0] > 0 else 0.0
    return (w // 4).max(1), (w % 4).max(1), fill


def load(path, fmt, matrices, keep=lambda r: True):
    out = []
    for r in csv.DictReader(open(path)):
        if r["format"] != fmt or not keep(r):
            continue
        L = lengths(r["matrix"], matrices)
        if L is not None:
            out.append((r, *warp_terms(L)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("explain", help="aijp_refit --explain CSV (held-out samples)")
    ap.add_argument("--train", help="explain CSV of the warm-up samples (aijp_refit --test WARMUP --explain)")
    ap.add_argument("--format", default="pellr")
    ap.add_argument("--matrices", default="/work/shared/matrices")
    ap.add_argument("--fit", action="store_true")
    a = ap.parse_args()
    te = load(a.explain, a.format, a.matrices)
    for r, U, V, fill in te:
        m, fx, raw = float(r["measured_us"]), float(r["fixed_us"]), float(r["raw_chain_us"])
        worst = int((U + V).max())
        print(f"{r['matrix'][:40]:40s} measured {m:8.2f} predicted {float(r['predicted_us']):8.2f} "
              f"U {int(U.max()):4d} V {int(V.max())} U+V {worst:4d} fill {fill:.2f} ratio {(m - fx) / raw if raw else 0:.2f}")
    if not (a.fit and a.train):
        return
    tr = load(a.train, a.format, a.matrices, lambda r: r["in_l2"] == "1" and int(r["rows"]) <= 33792)

    def pred(r, U, V, f, u, b, v):
        return float(r["fixed_us"]) + max((u * (1 + b * f) * U + v * V).max(), float(r["stream_us"]), float(r["l2_us"]))

    def err(S, u, b, v):
        return np.array([abs(pred(r, U, V, f, u, b, v) / float(r["measured_us"]) - 1) for r, U, V, f in S])

    best = min(((err(tr, u, b, v).mean(), u, b, v) for u in np.arange(0.4, 1.0, 0.02)
                for b in np.arange(0, 1.01, 0.05) for v in np.arange(0.1, 1.0, 0.03)), key=lambda t: t[0])
    _, u, b, v = best
    old = np.array([abs(float(r["predicted_us"]) / float(r["measured_us"]) - 1) for r, *_ in te])
    new = err(te, u, b, v)
    print(f"fit on {len(tr)} warm-up samples: u {u:.2f} us (1 + {b:.2f} fill) per unrolled round, v {v:.2f} us per remainder step")
    print(f"held-out ({len(te)}): mean / p95 % {100 * old.mean():.1f} / {100 * np.percentile(old, 95):.1f} -> "
          f"{100 * new.mean():.1f} / {100 * np.percentile(new, 95):.1f}")


if __name__ == "__main__":
    sys.exit(main())
