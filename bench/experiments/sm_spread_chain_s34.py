#!/usr/bin/env python3
# Session 34 (offline, scratch, not a model): does a chain-bound product in the L2 cost more per step as its
# matrix spreads over more SMs? Reads two `aijp_refit --explain` tables (the warm-up explained with itself as
# --test, and the held-out set), fits per format measured = fixed + chain x a x (1 + s x min(1, blocks / SMs))
# on the warm-up's chain-bound in-L2 samples (fixed costs held, s on a 0.05 grid, least squares of the relative
# error), and prints the held-out mean / p95 % before and after. Blocks: ceil(rows / 256), csr_vector
# ceil(rows / (256 / lanes)). Usage: sm_spread_chain_s34.py TRAIN.csv TEST.csv SM_COUNT (docs/models.md,
# Session 34, "a chain cost that grows with the SMs in use").
import csv, sys, math
tr,te,sms=sys.argv[1],sys.argv[2],int(sys.argv[3])
def lanes_v(m):
    l=2
    while l<32 and l<m: l*=2
    return l
def blocks(r):
    n=int(r['rows'])
    if r['format']=='csr_vector': return math.ceil(n/(256/lanes_v(float(r['mean']))))
    return math.ceil(n/256)
def load(fn):
    out={}
    for r in csv.DictReader(open(fn)):
        ch=float(r['chain_us']); st=float(r['stream_us']); l2=float(r['l2_us']); fx=float(r['fixed_us'])
        pr=float(r['predicted_us']); me=float(r['measured_us'])
        cb = ch>=max(st,l2) and ch>0 and abs(pr-(fx+ch))<=1e-3*pr+0.01 and r['in_l2']=='1'
        out.setdefault(r['format'],[]).append(dict(cb=cb,ch=ch,fx=fx,pr=pr,me=me,frac=min(1,blocks(r)/sms),xs=float(r['x_sectors_per_nnz']),m=r['matrix'][:20],oth=max(st,l2)))
    return out
T=load(tr); E=load(te)
def fit(ss, g):
    # pred = fx + ch*a*(1+s*g); min sum ((pred-me)/me)^2 over grid s, closed-form a
    best=None
    for s in [x/20 for x in range(-10,21)]:
        num=sum((x['me']-x['fx'])*x['ch']*(1+s*g(x))/x['me']**2 for x in ss); den=sum((x['ch']*(1+s*g(x)))**2/x['me']**2 for x in ss)
        a=num/den if den>0 else 1
        e=sum(abs(x['fx']+x['ch']*a*(1+s*g(x))-x['me'])/x['me'] for x in ss)/len(ss)
        if best is None or e<best[0]: best=(e,s,a)
    return best
def stats(errs):
    errs=sorted(abs(e) for e in errs); n=len(errs)
    return sum(errs)/n*100, errs[min(n-1,int(math.ceil(0.95*n))-1)]*100
g=lambda x:x['frac']
for f in sorted(T):
    tc=[x for x in T[f] if x['cb']]
    if len(tc)<5: continue
    e0,s,a=fit(tc,g); e00,_,a0=fit(tc,lambda x:0)
    # a0 is the rescale relative to the current fitted factor (should be ~1)
    before=[x['pr']/x['me']-1 for x in E.get(f,[])]
    after=[(x['fx']+x['ch']*a*(1+s*g(x))/a0 if x['cb'] else x['pr'])/x['me']-1 for x in E.get(f,[])]
    bm,bp=stats(before); am,ap=stats(after)
    print(f"{f:14s} train n={len(tc):3d} s={s:+.2f} a/a0={a/a0:.3f} trainMAE {e00*100:.1f}->{e0*100:.1f} | held-out all {bm:.1f}/{bp:.1f} -> {am:.1f}/{ap:.1f}")
