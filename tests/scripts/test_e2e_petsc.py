#!/usr/bin/env python3
"""bench/e2e_petsc.py: every type's options are told apart again in a logged command line (--reparse relies on
it), the A/A control runs aijcusparse with the plugin loaded, and unknown types are refused."""
import importlib.util
import subprocess
import tempfile
import sys

path = sys.argv[1]
spec = importlib.util.spec_from_file_location("e2e_petsc", path)
e2e = importlib.util.module_from_spec(spec)
spec.loader.exec_module(e2e)

failures = []
lib = "build/petsc_plugin/libaijpredict.so"
for how in ("mat", "dm"):
    for kind in e2e.TYPES:
        cmd = " ".join(["build/examples/petsc/aijp_ksp_solve", "-f", "m.mtx.gz"] + e2e.type_args(kind, how, lib) + ["-log_view"])
        got = e2e.kind_of(cmd)
        if got != kind:
            failures.append("%s (%s): read back as %s from '%s'" % (kind, how, got, cmd))
control = e2e.type_args("control", "mat", lib)
if control != ["-dll_append", lib, "-mat_type", "aijcusparse"]:
    failures.append("control options: %s" % control)
if "control" in e2e.DEFAULT_TYPES or set(e2e.DEFAULT_TYPES) - set(e2e.TYPES):
    failures.append("default types: %s" % e2e.DEFAULT_TYPES)
if set(e2e.SETUP_EVENTS) != set(e2e.TYPES):
    failures.append("setup events for %s, types %s" % (sorted(e2e.SETUP_EVENTS), e2e.TYPES))
p = subprocess.run([sys.executable, path, "--out", tempfile.mkdtemp(), "--types", "aijpredict,nope"],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
if p.returncode == 0 or "unknown type nope" not in p.stderr:
    failures.append("--types nope: exit %d, stderr %r" % (p.returncode, p.stderr[-200:]))
for f in failures:
    print("FAIL:", f)
print("%d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
