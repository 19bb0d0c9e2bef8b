#!/usr/bin/env bash
# Runs `swift test` with the given arguments as `make test` does:
#   tools/run-tests.sh LOG [swift test arguments...]
# - keeps the whole output in LOG, and when the run fails ends with the failing tests and their
#   recorded issues, so that the last lines of a long CI log name what broke;
# - lets Swift Testing run at most cores + 1 test cases at once (its admission comes before a
#   test's time limit starts). Unbounded, every end-to-end test starts its cluster at once and the
#   timing checks of a two-core machine fail. Each test runs on a thread of its own (.ownThread,
#   Tests/Support/TestLanes.swift), so this bound is the only one.
set -uo pipefail
log=$1; shift
mkdir -p "$(dirname "$log")"
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-$(( $(nproc) + 1 ))}
"${SWIFT:-swift}" test "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
  echo
  echo "run-tests: swift test exited $status (at most $SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH tests at once); what failed (whole log: $log):"
  grep -E -A4 "✘ Test .* recorded an issue|error: |Fatal error|unexpected signal" "$log" | head -80
  grep -E "✘ (Test|Suite) .* failed" "$log"
fi
exit "$status"
