#!/usr/bin/env bash
# The per-GPU cache file is read by one process per file and broadcast to the processes that share it (issue
# 4: "rank 0 reads and broadcasts where MPI is present"), and a corrupt file gives one warning, not one per
# process, and is left as it was. Needs a GPU (exit 77, skipped, without one: then no process makes a context).
# Usage: check_cache_broadcast.sh N PROGRAM LIBAIJPREDICT [program options]
set -euo pipefail
n="$1"; prog="$2"; lib="$3"; shift 3
mpiexec="${MPIEXEC:-$(command -v mpiexec || command -v mpiexec.hydra || true)}"
[ -n "$mpiexec" ] || { echo "FAIL: no mpiexec"; exit 1; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/aijp-bcast-XXXXXX")
trap 'rm -rf "$dir"' EXIT
run() { # np, extra options
  local np="$1"; shift
  "$mpiexec" -n "$np" "$prog" -dll_append "$lib" -mat_type aijpredict -mat_aijpredict_cache_dir "$dir" -info "$@" 2>&1
}
fail() { echo "$out"; echo "FAIL: $*"; exit 1; }

# One process makes the file (calibrates the device and saves).
out=$(run 1 "$@") || fail "the one-process run failed"
if ! grep -q "aijpredict: per-process context" <<<"$out"; then
  echo "SKIP: no process made an aijpredict context (no usable GPU)"; exit 77
fi

# Each process's note names its file and the size of its group; every group must be complete: as many
# processes name a file as the note says share it. Processes on different GPUs (rank modulo the device
# count) have different files, so different groups.
check_groups() {
  local notes
  notes=$(grep -oE "aijpredict: cache file .* read by one process and broadcast \([^)]*\) to the [0-9]+ processes that share it" <<<"$out" || true)
  [ -n "$notes" ] && [ "$(wc -l <<<"$notes")" -eq "$n" ] || fail "expected $n broadcast notes, got: $notes"
  while read -r path; do
    local count k
    count=$(grep -cF "cache file $path read by" <<<"$notes")
    k=$(grep -F "cache file $path read by" <<<"$notes" | head -1 | sed -E 's/.*broadcast \([^)]*\) to the ([0-9]+) processes.*/\1/')
    [ "$count" -eq "$k" ] || fail "$count processes read $path but the note says $k share it"
  done < <(sed -E 's/^aijpredict: cache file (.*) read by one process.*/\1/' <<<"$notes" | sort -u)
}

out=$(run "$n" "$@") || fail "the $n-process run failed"
check_groups
# Processes on a GPU the one-process run did not use find no file yet; the first GPU's file was read.
grep -qE "read by one process and broadcast \([0-9]+ bytes\)" <<<"$out" || fail "no process found the file the first run wrote"

# Corrupt every file: one warning per file (by the process that read it), nothing overwritten, a clean solve.
files=("$dir"/*.json)
for f in "${files[@]}"; do printf 'not a cache file' >"$f"; done
out=$(run "$n" "$@") || fail "the $n-process run with corrupt files failed"
check_groups
warnings=$(grep -c "WARNING: aijpredict: ignoring cache file" <<<"$out" || true)
[ "$warnings" -eq "${#files[@]}" ] || fail "$warnings warnings for ${#files[@]} corrupt files (one each expected)"
for f in "${files[@]}"; do [ "$(cat "$f")" = "not a cache file" ] || fail "$f was overwritten"; done
echo "PASS: $n processes read each cache file once and broadcast it; corrupt files warned once and kept"
