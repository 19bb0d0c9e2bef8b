#!/usr/bin/env bash
# Runs `swift test` with the given arguments as `make test` does:
#   tools/run-tests.sh LOG [swift test arguments...]
# - keeps the whole output in LOG, and when the run fails ends with the failing tests and their
#   recorded issues, so that the last lines of a long CI log name what broke;
# - lets Swift Testing run at most cores + 1 test cases at once (its admission comes before a
#   test's time limit starts). Unbounded, every end-to-end test starts its cluster at once and the
#   timing checks of a two-core machine fail. Each test runs on a thread of its own (.ownThread,
#   Tests/Support/TestLanes.swift), so this bound is the only one;
# - marks everything the run starts (the test process, the services, supervisors, RetroArch and
#   namespace helpers it launches, which all inherit the environment) with RUN_TESTS_MARK
#   and, when the run ends (passed, failed, crashed or interrupted), kills what still carries the
#   mark and names it. A test process that crashes cannot stop its clusters itself, and a cluster
#   left running holds ports and data the next run needs;
# - gives the run a temporary directory of its own (TMPDIR, which Foundation, mktemp and Python
#   all use) and removes it when the run passes: the tests' data directories, replays, keys and
#   logs go there, so a passing run leaves nothing behind in /tmp; a failing one keeps them (its
#   failures name the logs there) and says where.
set -uo pipefail
log=$1; shift
mkdir -p "$(dirname "$log")"
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-$(( $(nproc) + 1 ))}
mark="run-tests-$$-$(date +%s%N)"
run_tmp=$(mktemp -d "${TMPDIR:-/tmp}/netplay-tests.XXXXXX") || { echo "run-tests: cannot make a temporary directory" >&2; exit 1; }

# Kills the processes that carry this run's mark (this shell and tee do not: only swift test's
# environment has it) and prints what it killed.
reap() {
  local pids=() pid names
  for pid in $(grep -lsxz "RUN_TESTS_MARK=$mark" /proc/[0-9]*/environ | cut -d/ -f3); do
    [ "$pid" != "$$" ] && pids+=("$pid")
  done
  [ ${#pids[@]} -eq 0 ] && return 0
  names=$(for pid in "${pids[@]}"; do cat "/proc/$pid/comm" 2>/dev/null; done | sort | uniq -c | awk '{printf "%s%s x%s", sep, $2, $1; sep=", "}')
  kill -9 "${pids[@]}" 2>/dev/null
  echo "run-tests: killed ${#pids[@]} process(es) the run left behind: $names" | tee -a "$log"
}
trap 'reap; rm -rf "$run_tmp"; exit 130' INT TERM

RUN_TESTS_MARK=$mark TMPDIR=$run_tmp "${SWIFT:-swift}" test "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
reap
# A failed run keeps them: the logs its failures point to are there.
if [ "$status" -eq 0 ]; then rm -rf "$run_tmp"; else echo "run-tests: the run's temporary files are kept in $run_tmp" | tee -a "$log"; fi
if [ "$status" -ne 0 ]; then
  echo
  echo "run-tests: swift test exited $status (at most $SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH tests at once); what failed (whole log: $log):"
  grep -E -A4 "✘ Test .* recorded an issue|error: |Fatal error|unexpected signal" "$log" | head -80
  grep -E "✘ (Test|Suite) .* failed" "$log"
fi
exit "$status"
