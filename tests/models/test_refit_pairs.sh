#!/usr/bin/env bash
# bench/refit_pairs.sh on the committed H100 gated pairs: every pair since 2026-12-07 is refitted and listed, and the
# model as committed keeps what session 46 measured offline (12 of 14 formats meeting on session 45's call 2 and on
# session 46's second table, regret 1.000 there): a model change that loses a format on those pairs fails here.
# --help answers with its usage; an unknown argument exits with status 2, a GPU kind without pairs with 1.
# Usage: test_refit_pairs.sh SOURCE_DIR BUILD_DIR
set -u
src="${1:?usage: test_refit_pairs.sh SOURCE_DIR BUILD_DIR}"; build="${2:?}"
script="$src/bench/refit_pairs.sh"
fail=0
bash "$script" --help | grep -q '^Usage: bash bench/refit_pairs.sh' || { echo "FAIL: --help"; fail=1; }
out=$(bash "$script" --build "$build" --since 2026-12-07) || { echo "FAIL: exit status $?"; fail=1; }
[ "$(printf '%s\n' "$out" | grep -c ' meet ')" -ge 12 ] || { echo "FAIL: fewer than 12 pairs listed:"; printf '%s\n' "$out"; fail=1; }
for pair in 2026-12-07_h100_session45_call2 2026-12-07_h100_session46_call1_run2; do
  line=$(printf '%s\n' "$out" | grep "^$pair ")
  printf '%s\n' "$line" | grep -Eq ' meet 1[2-4]  regret 1\.000 ' || { echo "FAIL: $pair: $line"; fail=1; }
done
bash "$script" --build "$build" --bogus > /dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || { echo "FAIL: unknown argument: exit status $rc, not 2"; fail=1; }
bash "$script" --build "$build" --gpu nosuch > /dev/null 2>&1; rc=$?
[ $rc -eq 1 ] || { echo "FAIL: no pairs: exit status $rc, not 1"; fail=1; }
[ $fail = 0 ] && echo "refit_pairs.sh: the pairs listed, 12 of 14 formats kept on the two reference pairs, bad arguments refused"
exit $fail
