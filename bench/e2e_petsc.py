#!/usr/bin/env python3
"""End-to-end PETSc benchmark: the same KSP/SNES solves with -mat_type aijpredict, aijcusparse and sellcuda.

For each system and matrix type the program is run on the GPU machine:
  1. --repeat timing runs with -log_view (no extra synchronisation), interleaved across the types (the order
     of the types reversed every other round) so that drift of the machine hits all of them alike: the median
     total KSPSolve (or SNESSolve) time (and the spread), iterations. Solves of small matrices are bound by
     launches and synchronisation, whose cost varied by 10-20 % between runs on the lent (virtual) machines,
     so one run per type decides nothing. Each run is bound to one CPU (--bind, default: the last CPU this
     process may use on the GPU's NUMA node), which keeps the scheduler from moving the host-bound loop between cores;
     --bind auto:2 gives it the last two, as aijpredict's background analysis needs a second CPU for its thread. Next to the
     ratio of the medians the report gives the paired ratio: the median over the rounds of the ratio of the
     two types' runs of the same round (runs a few seconds apart), which cancels drift slower than a round;
  2. a run with -log_view -log_view_gpu_time: PETSc then times the GPU work of every event with CUDA events;
     the SpMV time per product ('SpMV us') is MatMult's flops / its GPU flop rate / its count (GPU time only: launch and
     host-side setup excluded). It includes what the first products pay once: the first cuSPARSE product of a
     process (lazy module loading, ~5 ms) and its first cusparseSpMV_preprocess (20 ms on 56M nonzeros, H100:
     bench/results/2026-11-23_h100_session5_cusparse_first_product.txt) land in aijcusparse's first product
     and in aijpredict's (whose first -mat_aijpredict_defer_mults products run on cuSPARSE CSR), while
     sellcuda converts at assembly; on lap27 128^3 aijpredict's per-product figure is 287-312 us where its
     kernels' own median is 220 us (_session5_matmult_gpu_time.txt). For aijpredict the report also gives that
     own median ('plan us': the products its online refinement timed with CUDA events around its kernels,
     printed by -mat_aijpredict_view at MatDestroy; median over the timing runs). Setup is the time of the events that upload and convert the matrix:
     AIJPredAnalyze + AIJPredValues (aijpredict), MatCUSPARSCopyTo (aijcusparse, inside the first MatMult),
     MatAssemblyEnd (sellcuda copies to the GPU at assembly, before the solve: not in its solve time).
  3. with --inprocess R, for the systems solved by aijp_ksp_solve (a matrix file or generator and KSP options):
     examples/petsc/aijp_solve_ab, which converts the assembled matrix to each type in turn inside ONE
     process, R rounds (order alternating), 3 solves per round: the first solve includes the setup (upload,
     analysis, conversion), and the paired ratio (median over rounds of aijpredict / aijcusparse in the same
     round) is free of the process-to-process spread of host-bound solves (10-30 % on the lent machines).
  4. with --steady R, for the same systems: aijp_solve_ab -solves 1 -mults K -log_view_gpu_time (R rounds): after
     each type's solve, K more products in a log stage of their own; MatMult's GPU time per product there is the
     steady-state SpMV time (the same CUDA events as in 2., without the first products' one-time costs, which on
     a solve of a few hundred 10-us products outweigh the products themselves: bcsstk16's one-run figures
     were 94 against 51 us although both types ran the same cuSPARSE kernel). The summary then gives a second
     geometric mean: steady-state where measured, the -log_view_gpu_time run elsewhere. A system whose
     aijpredict solve never analysed its matrix (the short solve) is measured with the analysis held off
     (-mat_aijpredict_defer_mults 1000000000), as its solve ran; otherwise its K extra products would analyse and
     convert it, a state its solve never reached.
  5. with --control, a fourth type 'control': aijcusparse again, with the plugin loaded but unused. It runs
     interleaved with the others, so its ratios against aijcusparse are the spread of two medians of the very
     same solve in this run: the resolution of the solve-time comparison (bcsstk16 in separate processes, 30
     runs each: 1.024, bench/results/2026-11-23_h100_session11_bcsstk16_controls.txt).
Per system it reports SpMV time per product, setup time, solve time and iterations for each type, and the
ratios against aijcusparse; at the end the geometric mean SpMV speed-up and the worst solve-time ratio
(targets of issue 5: SpMV >= 1.15x faster than aijcusparse, solve never more than 2 % slower).

Run through scripts/device_run.sh (it sets the library paths and PETSC_OPTIONS=-use_gpu_aware_mpi 0):
  bash scripts/device_run.sh --no-tests -- python3 bench/e2e_petsc.py --out DIR [--quick] [--only NAME,...]
"""
import argparse
import datetime
import json
import math
import os
import re
import shlex
import subprocess
import sys
import time

TYPES = ["aijpredict", "aijcusparse", "sellcuda", "control"]
DEFAULT_TYPES = ["aijpredict", "aijcusparse", "sellcuda"]
# "control" is aijcusparse again, with the plugin loaded but unused (-dll_append as for aijpredict): an A/A
# comparison whose ratios against aijcusparse show how far two runs of the same solve differ in this run.
CONTROL_TYPE = "aijcusparse"
# Events nested in MatMult that are setup, not products: our analysis/conversion/value refresh, and the
# host-to-device copies of aijcusparse and sellcuda.
SETUP_EVENTS = {
    "aijpredict": ["AIJPredAnalyze", "AIJPredValues"],
    "aijcusparse": ["MatCUSPARSCopyTo"],
    "sellcuda": ["MatAssemblyEnd"],
    "control": ["MatCUSPARSCopyTo"],
}


def systems(build, matrices, quick):
    """(name, description, argv without the type options, how the type is set: 'mat' or 'dm')."""
    ex = os.path.join(build, "examples", "petsc")
    solve = os.path.join(ex, "aijp_ksp_solve")
    n45 = 96 if quick else 200
    n27 = 48 if quick else 128
    ne = 24 if quick else 64
    g19 = 128 if quick else 512
    cg = ["-ksp_type", "cg", "-pc_type", "jacobi"]
    s = [
        ("ex45_lap7_%d" % n45, "PETSc KSP ex45: 3D 7-point Laplacian on a DMDA, %d^3 = %.1fM unknowns, CG + Jacobi" % (n45, n45**3 / 1e6),
         [os.path.join(ex, "petsc_ksp_ex45"), "-da_grid_x", str(n45), "-da_grid_y", str(n45), "-da_grid_z", str(n45), "-ksp_rtol", "1e-6"] + cg, "dm"),
        ("lap27_%d" % n27, "3D 27-point stencil, %d^3 = %.1fM unknowns, CG + Jacobi (aijp_ksp_solve -gen lap27)" % (n27, n27**3 / 1e6),
         [solve, "-gen", "lap27:%dx%dx%d" % (n27, n27, n27), "-ksp_rtol", "1e-6", "-check_tol", "-1"] + cg, "mat"),
        ("ex56_elasticity_%d" % ne, "PETSc KSP ex56: 3D linear elasticity (Q1, 3 dof), -ne %d, CG + Jacobi" % ne,
         [os.path.join(ex, "petsc_ksp_ex56"), "-ne", str(ne), "-ksp_rtol", "1e-6", "-ksp_max_it", "3000"] + cg, "mat"),
        ("ex19_cavity_%d" % g19, "PETSc SNES ex19: driven cavity, %dx%d grid, 4 dof, Newton + GMRES + Jacobi" % (g19, g19),
         [os.path.join(build, "examples", "petsc", "petsc_snes_ex19"), "-da_grid_x", str(g19), "-da_grid_y", str(g19),
          "-ksp_type", "gmres", "-pc_type", "jacobi", "-snes_max_it", "3", "-ksp_max_it", "500", "-snes_converged_reason"], "dm"),
        ("short_lap7_128", "short solve: aijp_ksp_solve 7-point Laplacian 128^3, 8 CG iterations (<= 10 products: must not pay for an analysis)",
         [solve, "-gen", "lap7:%dx%dx%d" % ((64,) * 3 if quick else (128,) * 3), "-ksp_max_it", "8", "-check_tol", "-1"] + cg, "mat"),
    ]
    real = [("bcsstk16", cg), ("bcsstk13", ["-ksp_type", "gmres", "-pc_type", "jacobi"]),
            ("delaunay_n15", ["-ksp_type", "gmres", "-pc_type", "jacobi"]), ("astro-ph", ["-ksp_type", "gmres", "-pc_type", "jacobi"]),
            ("4elt", ["-ksp_type", "bcgs", "-pc_type", "jacobi"])]
    for name, solver in real:
        path = os.path.join(matrices, name + ".mtx.gz")
        s.append(("mm_" + name, "SuiteSparse %s (shared matrices), %s" % (name, " ".join(solver[1::2])),
                  [solve, "-f", path, "-ksp_max_it", "2000", "-ksp_rtol", "1e-8", "-check_tol", "-1"] + solver, "mat"))
    return s


def type_args(kind, how, lib):
    mat = CONTROL_TYPE if kind == "control" else kind
    if how == "dm":
        a = ["-dm_mat_type", mat, "-dm_vec_type", "cuda"]
    else:
        a = ["-mat_type", mat]
    if kind == "aijpredict":
        a = ["-dll_append", lib] + a + ["-mat_aijpredict_view"]
    elif kind == "control":
        a = ["-dll_append", lib] + a
    return a


def kind_of(cmd):
    """The type of a logged command line (the control is aijcusparse with the plugin appended)."""
    kind = next(k for k in TYPES if ("-mat_type %s" % k) in cmd or ("-dm_mat_type %s" % k) in cmd)
    return "control" if kind == CONTROL_TYPE and "-dll_append" in cmd else kind


def parse_log(text):
    """Event name -> {count, time (s, None for n/a), flops, gpu_mflops (None when not printed)} from -log_view's
    event tables, added over all stages (ex56 solves in its own stage)."""
    ev = {}
    in_events = False
    for line in text.splitlines():
        if line.startswith("Event ") and "Count" in line:
            in_events = True
            continue
        if line.startswith("Object Type") or line.startswith("Memory usage"):
            in_events = False
        t = line.split()
        if not in_events or len(t) < 21 or not t[1].isdigit():
            continue
        num = lambda x: None if x == "n/a" else float(x)
        e = ev.setdefault(t[0], {"count": 0, "time": 0.0, "flops": 0.0, "gpu_time": 0.0, "gpu": True})
        e["count"] += int(t[1])
        e["time"] = None if e["time"] is None or num(t[3]) is None else e["time"] + num(t[3])
        flops = num(t[5]) or 0.0
        e["flops"] += flops
        rate = num(t[-6]) if len(t) >= 27 else None
        if rate and flops:
            e["gpu_time"] += flops / (rate * 1e6)
        elif flops:
            e["gpu"] = False
    return ev


def parse_iterations(text):
    """Linear iterations, summed over the solves: from -ksp_converged_reason, else aijp_ksp_solve's own line."""
    its = [int(x) for x in re.findall(r"(?:converged|did not converge|diverged) due to \S+ iterations (\d+)", text)]
    if not its:
        its = [int(x) for x in re.findall(r"KSP iterations (\d+)", text)]
    return sum(its) if its else None


BIND = None  # the CPUs every run is bound to (--bind, a set), None: not bound


def run(argv, timeout, log):
    t0 = time.time()
    pre = (lambda: os.sched_setaffinity(0, BIND)) if BIND is not None else None
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout, preexec_fn=pre)
        out, rc = p.stdout, p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or "") if isinstance(e.stdout, str) else "", 124
    log.write("## %s (rc %d, %.1f s)\n" % (" ".join(shlex.quote(a) for a in argv), rc, time.time() - t0))
    log.write(out)
    log.write("\n")
    log.flush()
    return rc, out


def median(values):
    """Median of a non-empty list (the mean of the two middle values for an even count); None when empty."""
    v = sorted(values)
    if not v:
        return None
    return v[len(v) // 2] if len(v) % 2 else 0.5 * (v[len(v) // 2 - 1] + v[len(v) // 2])


def evaluate(kind, plains, gpu):
    """The numbers of one (system, type) from its timing runs' outputs and its GPU-time run's output."""
    r = {"type": kind}
    times = []
    for plain in plains:
        ev = parse_log(plain)
        solve_ev = "SNESSolve" if "SNESSolve" in ev else "KSPSolve"
        times.append(ev.get(solve_ev, {}).get("time"))
    r["solve_seq_s"] = times  # in round order (None where the log had no time): for the paired ratio
    times = sorted(t for t in times if t)
    r["solve_runs_s"] = times
    r["solve_s"] = median(times)
    plain = plains[0] if plains else ""
    r["iterations"] = parse_iterations(plain)
    fmt = re.findall(r"choice: ([^\n;]+)", plain)
    if fmt:
        r["choice"] = fmt[-1].strip()
    # aijpredict's own measure of its running plan (-mat_aijpredict_view at MatDestroy: the median of the
    # products its online refinement timed with CUDA events around its kernels only), median over the runs.
    own = []
    for out in plains:
        m = re.findall(r"running \S+: measured ([0-9.]+) us \(median of \d+ timed products\)", out)
        if m:
            own.append(float(m[-1]))
    if own:
        r["plan_us"] = median(own)
    if gpu is None:
        return r
    ev = parse_log(gpu)
    mm = ev.get("MatMult", {})
    r["mults"] = mm.get("count", 0)
    r["setup_s"] = sum((ev.get(e, {}).get("time") or 0.0) for e in SETUP_EVENTS[kind])
    r["spmv_us"] = mm["gpu_time"] / mm["count"] * 1e6 if mm.get("count") and mm.get("gpu") and mm.get("gpu_time") else None
    r["iterations_gpu_time_run"] = parse_iterations(gpu)
    return r


def measure_system(argv, how, types, lib, timeout, repeat, log):
    """All runs of one system: `repeat` interleaved timing rounds, then one GPU-time run per type."""
    plains = {k: [] for k in types}
    failed = {}
    for rnd in range(repeat):
        for kind in (types if rnd % 2 == 0 else types[::-1]):
            if kind in failed:
                continue
            base = argv + type_args(kind, how, lib) + ["-ksp_converged_reason"]
            rc, out = run(base + ["-log_view"], timeout, log)
            if rc != 0:
                failed[kind] = "exit %d%s" % (rc, " (time limit %g s)" % timeout if rc == 124 else "")
            else:
                plains[kind].append(out)
    runs = []
    for kind in types:
        if kind in failed:
            runs.append({"type": kind, "error": failed[kind]})
            continue
        base = argv + type_args(kind, how, lib) + ["-ksp_converged_reason"]
        rc, gpu = run(base + ["-log_view", "-log_view_gpu_time"], timeout, log)
        r = evaluate(kind, plains[kind], gpu if rc == 0 else None)
        if rc != 0:
            r["error"] = "gpu-time run: exit %d" % rc
        runs.append(r)
    return runs


def solve_ab_command(argv, build):
    """aijp_solve_ab's path and an aijp_ksp_solve system's options that it takes (all but -check_tol and its value)."""
    opts, skip = [], False
    for a in argv[1:]:
        if skip:
            skip = False
        elif a == "-check_tol":
            skip = True
        else:
            opts.append(a)
    return os.path.join(build, "examples", "petsc", "aijp_solve_ab"), opts


def measure_inprocess(argv, build, rounds, timeout, log):
    """aijp_solve_ab on an aijp_ksp_solve system: {type: {first_s, later_s, first_paired, later_paired, its}}."""
    ab, opts = solve_ab_command(argv, build)
    rc, out = run([ab] + opts + ["-types", "aijcusparse,aijpredict", "-rounds", str(rounds), "-solves", "3"], timeout, log)
    if rc != 0:
        return {"error": "aijp_solve_ab exit %d" % rc}
    res = {}
    for line in out.splitlines():
        t = line.split()
        if len(t) == 8 and t[0] in ("aijcusparse", "aijpredict"):
            res[t[0]] = {"its": t[1].rstrip("*"), "first_s": float(t[2]), "later_s": float(t[3]), "first_paired": float(t[4]),
                         "later_paired": float(t[5]), "first_fastest_s": float(t[6]), "later_fastest_s": float(t[7])}
    res["same_iterations"] = "iterations: the same for every type" in out
    return res if "aijpredict" in res else {"error": "no result table in aijp_solve_ab's output"}


def measure_steady(argv, build, rounds, mults, timeout, log, hold_analysis=False):
    """aijp_solve_ab -mults on an aijp_ksp_solve system: the per-product time after one solve per type and round
    (-log_view_gpu_time: MatMult's GPU time), {type: {gpu_us, event_us, gpu_speedup, event_speedup}}.
    hold_analysis: for a system whose solve never analysed its matrix (a short solve), the analysis is held off
    during the extra products too (-mat_aijpredict_defer_mults 1000000000), so that they run as the solve's did."""
    ab, opts = solve_ab_command(argv, build)
    rc, out = run([ab] + opts + ["-types", "aijcusparse,aijpredict", "-rounds", str(rounds), "-solves", "1", "-mults", str(mults),
                                 "-log_view", "-log_view_gpu_time"] + (["-mat_aijpredict_defer_mults", "1000000000"] if hold_analysis else []), timeout, log)
    if rc != 0:
        return {"error": "aijp_solve_ab -mults exit %d" % rc}
    res, table = {}, False
    for line in out.splitlines():
        if line.startswith("Steady-state products after the solves"):
            table = True
            continue
        t = line.split()
        if table and len(t) == 5 and t[0] in ("aijcusparse", "aijpredict"):
            res[t[0]] = {"gpu_us": float(t[1]), "event_us": float(t[2]), "gpu_speedup": float(t[3]), "event_speedup": float(t[4])}
    ok = "aijpredict" in res and res["aijpredict"]["gpu_us"] > 0
    if ok:
        res["analysis_held"] = hold_analysis
    return res if ok else {"error": "no steady-state table with GPU times in aijp_solve_ab's output"}


def reparse(path, sysl):
    """Rebuilds the results from an e2e_log.txt written by an earlier run (no new runs)."""
    chunks = re.split(r"^## ", open(path).read(), flags=re.M)[1:]
    results, pending = {}, {}
    for c in chunks:
        head, _, body = c.partition("\n")
        cmd = head.rsplit(" (rc ", 1)[0]
        rc = int(re.search(r"\(rc (-?\d+)", head).group(1))
        sysm = next((sy for sy in sysl if cmd.startswith(" ".join(shlex.quote(x) for x in sy[2]) + " ")), None)
        if sysm is None:
            continue
        kind = kind_of(cmd)
        row = results.setdefault(sysm[0], {"system": sysm[0], "description": sysm[1], "runs": []})
        if rc != 0:
            row["runs"].append({"type": kind, "error": "exit %d%s" % (rc, " (time limit)" if rc == 124 else "")})
        elif "-log_view_gpu_time" not in cmd:
            pending.setdefault((sysm[0], kind), []).append(body)
        else:
            row["runs"].append(evaluate(kind, pending.pop((sysm[0], kind), []), body))
    for row in results.values():  # failed runs were appended when met: back to the order of TYPES
        row["runs"].sort(key=lambda r: TYPES.index(r["type"]))
    return [results[s[0]] for s in sysl if s[0] in results]


def parse_cpulist(text):
    """'0-7,16-23' -> [0, ..., 7, 16, ..., 23]."""
    cpus = []
    for part in text.strip().split(","):
        if "-" in part:
            lo, hi = part.split("-")
            cpus += range(int(lo), int(hi) + 1)
        elif part:
            cpus.append(int(part))
    return cpus


def gpu_local_cpus():
    """The CPUs of GPU 0's NUMA node (sysfs local_cpulist of its PCI device); [] when unknown."""
    try:
        bus = subprocess.run(["nvidia-smi", "--query-gpu=pci.bus_id", "--format=csv,noheader"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True).stdout.split()[0].lower()
        if bus.count(":") == 2 and len(bus.split(":")[0]) == 8:
            bus = bus[4:]  # 00000000:19:00.0 -> 0000:19:00.0
        with open("/sys/bus/pci/devices/%s/local_cpulist" % bus) as f:
            return parse_cpulist(f.read())
    except (OSError, IndexError, ValueError):
        return []


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output folder (e2e.txt, e2e.json, e2e_log.txt)")
    ap.add_argument("--build", default=os.environ.get("AIJP_HOST_BUILD_DIR", "build"), help="build tree (default $AIJP_HOST_BUILD_DIR or ./build)")
    ap.add_argument("--matrices", default=os.environ.get("AIJP_MATRIX_DIR", "../shared/matrices"), help="shared matrix folder")
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke test, not the benchmark)")
    ap.add_argument("--only", default="", help="comma-separated system names (prefix match)")
    ap.add_argument("--types", default=",".join(DEFAULT_TYPES), help="matrix types to compare, of %s (default %%(default)s)" % ",".join(TYPES))
    ap.add_argument("--control", action="store_true", help="also run the A/A control: aijcusparse with the plugin loaded but unused, as its own type 'control'; its ratios against aijcusparse show the run-to-run spread of the same solve in this run")
    ap.add_argument("--timeout", type=float, default=240, help="seconds per run (default %(default)s)")
    ap.add_argument("--repeat", type=int, default=3, help="timing runs per type, interleaved; the median is reported (default %(default)s)")
    ap.add_argument("--reparse", metavar="LOG", help="rebuild the report from an earlier run's e2e_log.txt (no runs)")
    ap.add_argument("--inprocess", type=int, default=0, metavar="R", help="also compare aijpredict with aijcusparse inside one process (aijp_solve_ab, R rounds) on the systems solved by aijp_ksp_solve (default: off)")
    ap.add_argument("--steady", type=int, default=0, metavar="R", help="also measure the steady-state SpMV time inside one process on the systems solved by aijp_ksp_solve: aijp_solve_ab -solves 1 -mults K -log_view_gpu_time, R rounds; MatMult's GPU time per product after the solve, free of the first products' one-time costs that a single -log_view_gpu_time run of a short solve holds (default: off)")
    ap.add_argument("--steady-mults", type=int, default=500, metavar="K", help="products per type and round for --steady (default %(default)s)")
    ap.add_argument("--bind", default="auto", help="CPUs to bind every run to: numbers (comma-separated), 'auto' (the last CPU this process may use on the GPU's NUMA node, else the last it may use), 'auto:N' (the last N of those) or 'none' (default %(default)s). aijpredict's background analysis (-mat_aijpredict_background) needs two CPUs; on one it analyses inside the product")
    a = ap.parse_args()
    types = [t for t in a.types.split(",") if t]
    bad = [t for t in types if t not in TYPES]
    if bad or not types:
        sys.exit("e2e_petsc.py: --types: unknown type %s (known: %s)" % (",".join(bad) or "(none given)", ",".join(TYPES)))
    if a.control and "control" not in types:
        types.append("control")
    os.makedirs(a.out, exist_ok=True)
    lib = os.path.join(a.build, "petsc_plugin", "libaijpredict.so")
    if not os.path.exists(lib) and not a.reparse:
        sys.exit("e2e_petsc.py: %s not found (build first)" % lib)
    global BIND
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    gpu_local = gpu_local_cpus()
    if a.bind == "none" or not allowed:
        BIND = None
    elif a.bind == "auto" or a.bind.startswith("auto:"):
        try:
            count = int(a.bind[5:]) if a.bind.startswith("auto:") else 1
        except ValueError:
            sys.exit("e2e_petsc.py: --bind auto:N takes a number of CPUs, not '%s'" % a.bind)
        if count < 1:
            sys.exit("e2e_petsc.py: --bind auto:N needs N >= 1")
        local = [c for c in gpu_local if c in allowed]
        BIND = set((local or allowed)[-count:])
    else:
        try:
            BIND = set(parse_cpulist(a.bind))
        except ValueError:
            sys.exit("e2e_petsc.py: --bind takes CPU numbers, 'auto', 'auto:N' or 'none', not '%s'" % a.bind)
        if not BIND or not BIND <= set(allowed):
            sys.exit("e2e_petsc.py: --bind %s: this process may use CPUs %s only" % (a.bind, ",".join(map(str, allowed))))
    only = [s for s in a.only.split(",") if s]
    try:
        dev = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], stdout=subprocess.PIPE, text=True).stdout.strip()
    except OSError:
        dev = "unknown (no nvidia-smi)"
    head = "# date: %s; device: %s\n# command: %s\n# runs bound to CPU %s\n" % (
        datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"), dev, " ".join(sys.argv), "none" if BIND is None else "%s (GPU-local CPUs: %s)" % (",".join(map(str, sorted(BIND))), ",".join(map(str, gpu_local)) or "unknown"))
    results = []
    sysl = [s for s in systems(a.build, a.matrices, a.quick) if not only or any(s[0].startswith(o) for o in only)]
    if a.reparse:
        results = reparse(a.reparse, sysl)
        head = "# re-parsed from %s\n%s" % (a.reparse, open(a.reparse.replace("e2e_log.txt", "e2e.txt")).readline() if os.path.exists(a.reparse.replace("e2e_log.txt", "e2e.txt")) else "")
    with open(os.path.join(a.out, "e2e_log.txt"), "w") if not a.reparse else open(os.devnull, "w") as log:
        for i, (name, desc, argv, how) in enumerate(sysl if not a.reparse else []):
            if not os.path.exists(argv[0]):
                results.append({"system": name, "description": desc, "skipped": "%s not built" % argv[0]})
                continue
            print("[%d/%d] %s (%s) ..." % (i + 1, len(sysl), name, ", ".join(types)), file=sys.stderr, flush=True)
            row = {"system": name, "description": desc, "runs": measure_system(argv, how, types, lib, a.timeout, a.repeat, log)}
            if a.inprocess > 0 and os.path.basename(argv[0]) == "aijp_ksp_solve":
                row["inprocess"] = measure_inprocess(argv, a.build, a.inprocess, a.timeout * 4, log)
            if a.steady > 0 and os.path.basename(argv[0]) == "aijp_ksp_solve":
                pr = next((r for r in row["runs"] if r["type"] == "aijpredict" and "error" not in r), None)
                row["steady"] = measure_steady(argv, a.build, a.steady, a.steady_mults, a.timeout * 4, log,
                                               hold_analysis=pr is not None and not pr.get("choice"))
            results.append(row)
            with open(os.path.join(a.out, "e2e.json"), "w") as f:  # partial results survive an interrupted run
                json.dump({"device": dev, "partial": True, "results": results}, f, indent=1)
    lines = [head, "%-22s %-12s %7s %9s %11s %9s %10s %10s %15s %8s %8s %8s  %s" % ("system", "type", "its", "mults", "SpMV us", "plan us", "setup ms", "solve s", "solve range s", "SpMV x", "solve x", "paired x", "choice")]
    spmv_ratios, solve_ratios, paired_ratios = [], [], []
    for row in results:
        if "skipped" in row:
            lines.append("%-22s skipped: %s" % (row["system"], row["skipped"]))
            continue
        ref = next((r for r in row["runs"] if r["type"] == "aijcusparse" and "error" not in r), None)
        for r in row["runs"]:
            if "error" in r:
                lines.append("%-22s %-12s %s" % (row["system"], r["type"], r["error"]))
                continue
            sx = ref["spmv_us"] / r["spmv_us"] if ref and r.get("spmv_us") and ref.get("spmv_us") else None
            tx = r["solve_s"] / ref["solve_s"] if ref and r.get("solve_s") and ref.get("solve_s") else None
            pairs = [a_ / b_ for a_, b_ in zip(r.get("solve_seq_s") or [], (ref or {}).get("solve_seq_s") or []) if a_ and b_]
            px = median(pairs)
            if r["type"] == "aijpredict":
                if sx:
                    spmv_ratios.append(sx)
                if tx:
                    solve_ratios.append((tx, row["system"]))
                if px:
                    paired_ratios.append((px, row["system"]))
            r["spmv_speedup_vs_aijcusparse"] = sx
            r["solve_ratio_vs_aijcusparse"] = tx
            r["paired_solve_ratio_vs_aijcusparse"] = px
            rs = r.get("solve_runs_s") or []
            lines.append("%-22s %-12s %7s %9s %11s %9s %10s %10s %15s %8s %8s %8s  %s" % (
                row["system"], r["type"], r.get("iterations"), r.get("mults"),
                "%.2f" % r["spmv_us"] if r.get("spmv_us") else "-", "%.2f" % r["plan_us"] if r.get("plan_us") else "",
                "%.3f" % (1e3 * r["setup_s"]) if r.get("setup_s") is not None else "-",
                "%.4f" % r["solve_s"] if r.get("solve_s") else "-", "%.4f-%.4f" % (rs[0], rs[-1]) if rs else "-",
                "%.3f" % sx if sx else "-", "%.3f" % tx if tx else "-", "%.3f" % px if px else "-", r.get("choice", "")[:60]))
    if spmv_ratios:
        g = math.exp(sum(math.log(x) for x in spmv_ratios) / len(spmv_ratios))
        worst = max(solve_ratios) if solve_ratios else (float("nan"), "")
        lines.append("")
        lines.append("aijpredict vs aijcusparse over %d systems: SpMV speed-up geometric mean %.3fx (target >= 1.15x); "
                     "worst solve-time ratio %.3f on %s (target <= 1.02)" % (len(spmv_ratios), g, worst[0], worst[1]))
        if paired_ratios:
            wp = max(paired_ratios)
            lines.append("worst paired solve-time ratio (median over rounds of aijpredict / aijcusparse in the same round) %.3f on %s" % wp)
    control = [(r["solve_ratio_vs_aijcusparse"], r["paired_solve_ratio_vs_aijcusparse"], row["system"]) for row in results if "runs" in row
               for r in row["runs"] if r["type"] == "control" and r.get("solve_ratio_vs_aijcusparse")]
    if control:
        far = max(control, key=lambda c: abs(c[0] - 1))
        lines.append("A/A control (aijcusparse with the plugin loaded, unused, against aijcusparse; the same solve twice): solve-time "
                     "ratios %s; farthest from 1: %.3f on %s (paired %s)" % (
                         ", ".join("%.3f" % c[0] for c in control), far[0], far[2], "%.3f" % far[1] if far[1] else "-"))
    steady = [(row["system"], row["steady"]) for row in results if "steady" in row]
    if steady:
        lines.append("")
        lines.append("Steady-state SpMV in one process (aijp_solve_ab -solves 1 -mults %d -log_view_gpu_time, %d rounds; MatMult's GPU "
                     "and event time per product after the solve, medians over rounds; speed-up = aijcusparse / aijpredict in the same round):" % (a.steady_mults, a.steady))
        lines.append("%-22s %14s %14s %12s %16s %16s" % ("system", "cusparse us", "predict us", "SpMV x", "event cusparse", "event predict"))
        mixed = []
        by_name = {name: r for name, r in steady if "error" not in r}
        for name, r in steady:
            if "error" in r:
                lines.append("%-22s %s" % (name, r["error"]))
                continue
            c, p = r["aijcusparse"], r["aijpredict"]
            lines.append("%-22s %14.2f %14.2f %12.3f %16.2f %16.2f%s" % (name, c["gpu_us"], p["gpu_us"], p["gpu_speedup"], c["event_us"], p["event_us"],
                                                                      "  (analysis held off, as in its solve)" if r.get("analysis_held") else ""))
        for row in results:
            if "skipped" in row:
                continue
            pr = next((r for r in row["runs"] if r["type"] == "aijpredict" and "error" not in r), None)
            if row["system"] in by_name:
                mixed.append(by_name[row["system"]]["aijpredict"]["gpu_speedup"])
            elif pr and pr.get("spmv_speedup_vs_aijcusparse"):
                mixed.append(pr["spmv_speedup_vs_aijcusparse"])
        if mixed:
            g = math.exp(sum(math.log(x) for x in mixed) / len(mixed))
            lines.append("SpMV speed-up geometric mean over %d systems, steady-state in one process where measured (%d), else the "
                         "-log_view_gpu_time run: %.3fx (target >= 1.15x)" % (len(mixed), len(by_name), g))
    inproc = [(row["system"], row["inprocess"]) for row in results if "inprocess" in row]
    if inproc:
        lines.append("")
        lines.append("In one process (aijp_solve_ab, %d rounds of 3 solves per type, paired = median over rounds of aijpredict / aijcusparse):" % a.inprocess)
        lines.append("%-22s %6s %14s %14s %14s %14s %13s %13s" % ("system", "its", "cusparse 1st s", "predict 1st s", "1st paired x", "later paired x", "1st fastest x", "later fast x"))
        worst = None
        for name, r in inproc:
            if "error" in r:
                lines.append("%-22s %s" % (name, r["error"]))
                continue
            p, c = r["aijpredict"], r["aijcusparse"]
            lines.append("%-22s %6s %14.4f %14.4f %14.3f %14.3f %13.3f %13.3f%s" % (
                name, p["its"], c["first_s"], p["first_s"], p["first_paired"], p["later_paired"],
                p["first_fastest_s"] / c["first_fastest_s"], p["later_fastest_s"] / c["later_fastest_s"], "" if r["same_iterations"] else "  (iterations differ)"))
            worst = max(worst or (0, ""), (p["first_paired"], name))
        if worst:
            lines.append("worst in-process paired ratio of the first solve (setup included): %.3f on %s (target <= 1.02)" % worst)
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(a.out, "e2e.txt"), "w") as f:
        f.write(text)
    with open(os.path.join(a.out, "e2e.json"), "w") as f:
        json.dump({"device": dev, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
