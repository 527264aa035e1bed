#!/bin/bash
# Where `ringside record` spends its CPU while a workload runs: each of its
# threads' CPU time (the scheduler's schedstat, in microseconds), page
# faults and times on the CPU (oncpu: its wake-ups; on the 2-CPU PVM guest
# of development 50-100 us each, even for a thread that then does nothing)
# over each of RUNS runs of the workload in one recording, so that the first
# run (which pays for warming up: the trace buffer's first pass, the first
# reads of each binary's symbols and of new processes) reads beside the next
# ones (what a running agent pays). bench-peers gives the totals against
# perf; this says which thread and whether it is warm-up.
#
#   WL=pipe   perf bench sched pipe -l LOOPS (200000)
#   WL=mixed  hackbench -g 4 -l 1000, then 500 x fork+exec of /bin/true
#   WL=forks  FORKS (2000) x fork+exec of /bin/true: what a new process costs
#   WL=idle   sleep IDLE_SECONDS (4): what the agent costs with no workload,
#             the part of every run's figure that comes with time, not events
#             (IDLE_SECONDS=9: the length of a mixed run)
# ringside on CPU 1 (TRACER_CPU), the workload on CPU 0 (WORKLOAD_CPU), as
# bench-peers pins them on a 2-CPU machine. Extra arguments go to
# `ringside record`.
#
#   sudo WL=mixed RUNS=2 bash tests/bench/thread_costs.sh
#   sudo BIN=/tmp/ringside.old WL=pipe bash tests/bench/thread_costs.sh -c my.pbtxt
# Needs root; not part of `make test`.
set -euo pipefail

BIN=${BIN:-$(cd "$(dirname "$0")/../.." && pwd)/build/ringside}
WL=${WL:-pipe}
RUNS=${RUNS:-2}
LOOPS=${LOOPS:-200000}
FORKS=${FORKS:-2000}
IDLE_SECONDS=${IDLE_SECONDS:-4}
TRACER_CPU=${TRACER_CPU:-1}
WORKLOAD_CPU=${WORKLOAD_CPU:-0}

die() {
  echo "thread_costs: $*" >&2
  exit 1
}
[ "$(id -u)" = 0 ] || die "needs root (ringside record loads BPF programs)"
[ -x "$BIN" ] || die "no ringside binary at $BIN (make, or BIN=)"
case "$WL" in
  pipe) command -v perf > /dev/null || die "WL=pipe needs perf (linux-perf)" ;;
  mixed) command -v hackbench > /dev/null || die "WL=mixed needs hackbench (rt-tests)" ;;
  forks | idle) ;;
  *) die "WL is pipe, mixed, forks or idle, not '$WL'" ;;
esac

dir=$(mktemp -d)
recorder=
cleanup() {
  if [ -n "$recorder" ] && kill -0 "$recorder" 2> /dev/null; then
    # ringside record stops on SIGTERM, and ends its command.
    kill -TERM "$recorder" 2> /dev/null || true
    wait "$recorder" 2> /dev/null || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT

# The command only says when recording has started, then waits.
# shellcheck disable=SC2016  # $0 is sh's
taskset -c "$TRACER_CPU" "$BIN" record "$@" -o "$dir/out.pftrace" -- \
  sh -c ': > "$0"; exec sleep 100000' "$dir/ready" 2> "$dir/log" &
recorder=$!
for ((i = 0; i < 600; i++)); do
  [ -e "$dir/ready" ] && break
  kill -0 "$recorder" 2> /dev/null || break
  sleep 0.05
done
[ -e "$dir/ready" ] || { cat "$dir/log" >&2; die "ringside record did not start"; }

# One line per thread: tid, name, minor faults, CPU ns, times it got the
# CPU (schedstat's third field: its wake-ups, and its preemptions).
snapshot() {
  local t
  for t in /proc/"$recorder"/task/*; do
    echo "${t##*/} $(cat "$t/comm") $(awk '{print $10}' "$t/stat") $(awk '{print $1, $3}' "$t/schedstat")"
  done 2> /dev/null
}
workload() {
  case "$WL" in
    pipe) taskset -c "$WORKLOAD_CPU" perf bench sched pipe -l "$LOOPS" > /dev/null ;;
    mixed)
      taskset -c "$WORKLOAD_CPU" bash -c \
        'hackbench -g 4 -l 1000 > /dev/null; for ((i = 0; i < 500; i++)); do /bin/true; done'
      ;;
    forks)
      # shellcheck disable=SC2016  # $0 is bash's
      taskset -c "$WORKLOAD_CPU" bash -c 'for ((i = 0; i < $0; i++)); do /bin/true; done' "$FORKS"
      ;;
    idle) sleep "$IDLE_SECONDS" ;;
  esac
}

snapshot > "$dir/s0"
for ((r = 1; r <= RUNS; r++)); do
  workload
  snapshot > "$dir/s$r"
done
pkill -TERM -P "$recorder" sleep || echo "thread_costs: the recording ended before the runs did" >&2
wait "$recorder" || true
recorder=
grep -o '[0-9]* events kept.*' "$dir/log" | head -1 || true

echo "run  thread           cpu_us   faults   oncpu  ($WL, $RUNS runs in one recording)"
for ((r = 1; r <= RUNS; r++)); do
  # Joined on the thread id: a thread that started during the run counts
  # from 0, one that ended is left out (and said so).
  awk -v r="$r" '
    FNR == NR { f0[$1] = $3; c0[$1] = $4; n0[$1] = $5; next }
    { cpu = ($4 - c0[$1]) / 1000; f = $3 - f0[$1]; n = $5 - n0[$1]; seen[$1] = 1
      t += cpu; tf += f; tn += n
      printf "%-4d %-16s %7d  %7d %7d%s\n", r, $2, cpu, f, n, ($1 in c0) ? "" : "  (new)" }
    END { for (tid in c0) if (!(tid in seen)) printf "%-4d thread %s ended during the run\n", r, tid
          printf "%-4d %-16s %7d  %7d %7d\n", r, "total", t, tf, tn }' "$dir/s$((r - 1))" "$dir/s$r"
done
