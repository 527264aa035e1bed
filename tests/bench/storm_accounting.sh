#!/bin/bash
# The load figures: `ringside record` beside the storm generator (build/storm)
# for STORM_SECONDS (30), with the shipped BPF ring (4 MiB per CPU) and a
# 64 MiB central RING_BUFFER (STORM_RING_KB, STORM_BUFFER_KB, STORM_PAIRS,
# STORM_FORKERS to change them). Prints the storm rate (events/s, from the
# kernel's own per-CPU tracepoint counters), ringside's CPU seconds and peak
# RSS, the events kept, the events lost by stage (BPF ring, chunk pool,
# central ring overwrite) and the difference to the kernel's count, per
# event type and CPU and in total (0 expected everywhere; exits 1 if not).
#
# It is the DISABLED_Figures case of tests/e2e/storm_accounting_test.cc,
# which says how the window is made exact (a cgroup for ringside's BPF filter,
# the storm's comm for perf's, the storm held still at both edges, and
# SCHED_IDLE spinners so that no switch out of idle, which perf counters
# miss, happens). Needs root.
#
#   make storm
#   STORM_SECONDS=10 STORM_RING_KB=64 make storm
set -euo pipefail

BUILD=${BUILD:-build}
[ "$(id -u)" = 0 ] || { echo "storm_accounting: needs root (BPF, perf counters, a cgroup)" >&2; exit 2; }
for f in "$BUILD/ringside" "$BUILD/storm" "$BUILD/tests/e2e_test"; do
  [ -x "$f" ] || { echo "storm_accounting: $f missing (make $f)" >&2; exit 2; }
done
export STORM_SECONDS=${STORM_SECONDS:-30}
exec "$BUILD/tests/e2e_test" --gtest_also_run_disabled_tests \
  --gtest_filter='StormAccountingTest.DISABLED_Figures'
