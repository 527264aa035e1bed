#!/usr/bin/env bash
# `make flake-check`: runs the given test binaries FLAKE_RUNS times (10) in a
# row, as `make test` runs them (tools/run_tests.sh), while a load keeps
# every CPU busy, and closes on a table of each test that failed in any run.
#
# The load runs beside the tests that run side by side; it is stopped while
# the tests that need the machine to themselves run (tests/serial_tests.txt),
# as CI runs them.
#
# FLAKE_LOAD: the load, a shell command run again whenever it ends (default:
#   hackbench with 2 senders and 2 receivers on pipes, which keeps two CPUs
#   busy with a scheduling storm that the real-kernel tests' own BPF and
#   ftrace readers also see. Its default of 40 tasks a group starves every
#   test of CPU instead: a test then waits for its workload, not for
#   ringside.)
# FLAKE_FILTER: a GoogleTest filter to run only some tests (default: all).
# The load runs in a session of its own and is ended, whole, on exit.
set -u

runs=${FLAKE_RUNS:-10}
load=${FLAKE_LOAD:-hackbench -p -g 1 -f 2 -l 2000000}
here=$(cd "$(dirname "$0")" && pwd)

if [ -n "${FLAKE_FILTER:-}" ]; then export TEST_FILTER=$FLAKE_FILTER; fi

if ! command -v "${load%% *}" >/dev/null; then
  echo "flake-check: ${load%% *} is not installed (make deps installs rt-tests)" >&2
  exit 1
fi

# setsid: the load and everything it starts form one process group, ended
# by its (negated) id whatever state the test run is left in.
setsid bash -c "while :; do $load >/dev/null 2>&1 || sleep 1; done" &
load_pgid=$!
stop_load() {
  kill -CONT -- "-$load_pgid" 2>/dev/null
  kill -TERM -- "-$load_pgid" 2>/dev/null
  wait "$load_pgid" 2>/dev/null
}
trap stop_load EXIT
sleep 1
if ! kill -0 "$load_pgid" 2>/dev/null; then
  echo "flake-check: the load ($load) did not start" >&2
  exit 1
fi
echo "flake-check: $runs runs of $* beside the load: $load"

log=$(mktemp)
TEST_LOAD_PGID=$load_pgid TEST_REPEAT=$runs bash "$here/run_tests.sh" "$@" >"$log" 2>&1
rc=$?
stop_load
trap - EXIT

# The failures' own lines, then the table.
grep -E '^(=== run|\[  FAILED  \] [A-Za-z]|BROKEN:)' "$log" | grep -v ' listed below:' | uniq
echo
echo "flake-check: $runs runs beside \"$load\"; each test that failed:"
if grep -q '^FLAKY: ' "$log"; then
  grep '^FLAKY: ' "$log" | sed 's/^FLAKY: /  /'
else
  echo "  none"
fi
grep '^BROKEN: ' "$log" | sed 's/^/  /'
tail -n1 "$log"
echo "flake-check: the whole log is $log"
exit $rc
