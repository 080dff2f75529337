#!/usr/bin/env bash
# Every script a user runs answers --help with its usage and exit status 0, without doing anything else, and
# bench/device_suite.sh refuses what it does not know (exit status 2) before touching the GPU or OUTDIR.
# Usage: test_help.sh SOURCE_DIR
set -u
shopt -s nullglob
src="${1:?usage: test_help.sh SOURCE_DIR}"
fail=0
for s in "$src"/scripts/*.sh "$src"/bench/*.sh; do
  [ "$(basename "$s")" = env.sh ] && continue  # sourced by the others, not run
  out=$(bash "$s" --help 2>&1); rc=$?
  if [ $rc -ne 0 ] || ! printf '%s' "$out" | grep -qi 'usage'; then
    echo "FAIL: $s --help: exit status $rc, output: $(printf '%s' "$out" | head -3)"; fail=1
  fi
done
for p in "$src"/bench/*.py; do
  out=$(python3 "$p" --help 2>&1); rc=$?
  if [ $rc -ne 0 ] || ! printf '%s' "$out" | grep -qi 'usage'; then echo "FAIL: $p --help: exit status $rc"; fail=1; fi
done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
bash "$src/bench/device_suite.sh" "$tmp/out" --no-such-option > /dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || { echo "FAIL: device_suite.sh with an unknown option: exit status $rc, not 2"; fail=1; }
bash "$src/bench/device_suite.sh" "$tmp/out" --base "$tmp/none" > /dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || { echo "FAIL: device_suite.sh --base without the tools: exit status $rc, not 2"; fail=1; }
[ ! -e "$tmp/out" ] || { echo "FAIL: device_suite.sh made OUTDIR before refusing its arguments"; fail=1; }
[ $fail = 0 ] && echo "every script answers --help; device_suite.sh refuses bad arguments"
exit $fail
