#!/usr/bin/env bash
# aijp_plan (the host planner) with the shipped H100 default: a 27-point stencil stacked on power-law rows is split and
# the split taken; the 2M-row 7-point Laplacian stays one block (its 412K-row blocks fit in the L2 alone, not beside
# the rest of the matrix); --help answers with its usage; bad arguments exit with status 2.
# Usage: test_aijp_plan.sh AIJP_PLAN SOURCE_DIR
set -u
plan="${1:?usage: test_aijp_plan.sh AIJP_PLAN SOURCE_DIR}"; src="${2:?}"
cache="$src/cache/defaults/h100.json"
fail=0
out=$("$plan" --help) && printf '%s' "$out" | grep -q '^Usage: aijp_plan' || { echo "FAIL: --help"; fail=1; }
out=$("$plan" --cache "$cache" gen:stack:lap27:64x64x64+powerlaw:rows=30000,deg=16,exp=2.1) || { echo "FAIL: stack: exit status $?"; fail=1; }
printf '%s\n' "$out" | grep -E '^  plan .*\+.*: taken$' > /dev/null || { echo "FAIL: the stack is not split:"; printf '%s\n' "$out"; fail=1; }
out=$("$plan" --cache "$cache" gen:lap7:128x128x128) || { echo "FAIL: lap7: exit status $?"; fail=1; }
printf '%s\n' "$out" | grep -E '^  plan .*: one block$' > /dev/null || { echo "FAIL: the Laplacian is split:"; printf '%s\n' "$out"; fail=1; }
"$plan" --cache "$cache" --no-such-option gen:lap5:8x8 > /dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || { echo "FAIL: unknown option: exit status $rc, not 2"; fail=1; }
"$plan" gen:lap5:8x8 > /dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || { echo "FAIL: no --cache: exit status $rc, not 2"; fail=1; }
"$plan" --cache "$cache" --candidates nosuch gen:lap5:8x8 > /dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || { echo "FAIL: unknown candidate: exit status $rc, not 2"; fail=1; }
"$plan" --cache "$cache" /no/such/file.mtx > /dev/null 2>&1; rc=$?
[ $rc -eq 1 ] || { echo "FAIL: a missing matrix file: exit status $rc, not 1"; fail=1; }
[ $fail = 0 ] && echo "aijp_plan: the stack split, the Laplacian whole, bad arguments refused"
exit $fail
