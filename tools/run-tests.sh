#!/usr/bin/env bash
# Runs `swift test` with the given arguments, keeps its whole output in a log, and when the run
# fails ends with the failing tests and their recorded issues, so that the last lines of a long CI
# log name what broke rather than only "failed with 1 issue".
#   tools/run-tests.sh LOG [swift test arguments...]
set -uo pipefail
log=$1; shift
mkdir -p "$(dirname "$log")"
"${SWIFT:-swift}" test "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
  echo
  echo "run-tests: swift test exited $status; what failed (whole log: $log):"
  grep -E -A4 "✘ Test .* recorded an issue|error: |Fatal error|unexpected signal" "$log" | head -80
  grep -E "✘ (Test|Suite) .* failed" "$log"
fi
exit "$status"
