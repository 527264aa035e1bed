#!/bin/bash
# Soak of `ringside agent`: the embedded default config (BPF scheduling,
# processes and incidents into a 64 MiB ring, durable store on) for
# DURATION seconds under a hackbench sched storm, with a snapshot (SIGUSR1)
# every SNAPSHOT_EVERY seconds. Samples the agent's RSS and CPU time every
# INTERVAL seconds and prints them, then the summary: RSS after the first
# minute against the end (it must not grow: exit 1 when it grew more than
# GROWTH_LIMIT_KIB), and CPU seconds per million events. Needs root and
# hackbench (Debian: rt-tests).
#
#   make soak                         # 10 minutes
#   DURATION=120 make soak            # shorter
set -euo pipefail

BIN=${RINGSIDE:-build/ringside}
DURATION=${DURATION:-600}
INTERVAL=${INTERVAL:-10}
SNAPSHOT_EVERY=${SNAPSHOT_EVERY:-120}

command -v hackbench >/dev/null || { echo "agent_soak: needs hackbench (apt-get install rt-tests)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "agent_soak: needs root (the agent's BPF sources)" >&2; exit 2; }

dir=$(mktemp -d /tmp/ringside-soak.XXXXXX)
agent=""
storm=""
# The storm runs in a process group of its own (setsid), so that stopping
# it ends the hackbench running at that moment too.
stop_storm() {
  [ -n "$storm" ] || return 0
  kill -TERM -- "-$storm" 2>/dev/null || true
  wait "$storm" 2>/dev/null || true
  storm=""
}
cleanup() {
  stop_storm
  [ -n "$agent" ] && kill -TERM "$agent" 2>/dev/null && wait "$agent" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

"$BIN" agent --run-dir "$dir/run" --socket "$dir/control.sock" --output-dir "$dir/snaps" \
  2>"$dir/agent.log" &
agent=$!
for _ in $(seq 600); do [ -S "$dir/control.sock" ] && break; sleep 0.1; done
[ -S "$dir/control.sock" ] || { cat "$dir/agent.log" >&2; echo "agent_soak: the agent did not start" >&2; exit 1; }

setsid bash -c 'while true; do hackbench -g 4 -l 5000 >/dev/null 2>&1 || sleep 1; done' &
storm=$!

hz=$(getconf CLK_TCK)
page_kb=$(( $(getconf PAGESIZE) / 1024 ))
cpu_s() { awk -v hz="$hz" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$agent/stat"; }
rss_kb() { awk -v p="$page_kb" '{ print $2 * p }' "/proc/$agent/statm"; }
ring_wraps() {
  "$BIN" status --json --socket "$dir/control.sock" 2>/dev/null |
    sed -n 's/.*"write_wraps": *\([0-9]*\).*/\1/p' | head -1 | grep . || echo 0
}

printf "%8s %10s %10s\n" "time_s" "rss_kib" "cpu_s"
rss_1min=""
base_t=""
max_after=0
start=$(date +%s)
last_snapshot=$start
while :; do
  sleep "$INTERVAL"
  now=$(date +%s)
  t=$(( now - start ))
  rss=$(rss_kb)
  printf "%8d %10d %10s\n" "$t" "$rss" "$(cpu_s)"
  # The baseline: the first minute, or later, once the ring has wrapped
  # (until then its pages are still being touched for the first time).
  if [ "$t" -ge 60 ]; then
    if [ -z "$rss_1min" ] && [ "$(ring_wraps)" -gt 0 ]; then
      rss_1min=$rss
      base_t=$t
    fi
    [ -n "$rss_1min" ] && [ "$rss" -gt "$max_after" ] && max_after=$rss
  fi
  [ "$t" -ge "$DURATION" ] && break
  if [ $(( now - last_snapshot )) -ge "$SNAPSHOT_EVERY" ]; then
    kill -USR1 "$agent"
    last_snapshot=$now
  fi
done
cpu_total=$(cpu_s)
# A snapshot being written holds a copy of the buffers for a moment: the
# steady state is read once none is.
sleep 5
rss_end=$(rss_kb)
stop_storm
kill -TERM "$agent"; wait "$agent" || true; agent=""

events=$(sed -n 's/.*stopped after [^:]*: \([0-9]*\) events recorded.*/\1/p' "$dir/agent.log" | tail -1)
snapshots=$(ls "$dir/snaps" | wc -l)
echo
echo "duration ${DURATION} s; ${snapshots} snapshots written"
echo "rss: ${rss_1min:-n/a} KiB at ${base_t:-?} s (1 min, ring wrapped), ${max_after} KiB max after it, ${rss_end} KiB at the end"
if [ -n "$events" ] && [ "$events" -gt 0 ]; then
  awk -v c="$cpu_total" -v e="$events" 'BEGIN { printf "cpu: %.1f s for %d events: %.3f s per million events\n", c, e, c * 1e6 / e }'
else
  echo "cpu: ${cpu_total} s (events unknown: see the agent's log)"; cat "$dir/agent.log" | tail -5
fi
grep -E "error|warning" "$dir/agent.log" | head -5 || true

# RSS must not grow after the first minute: the end (no snapshot in
# flight) against the baseline, with GROWTH_LIMIT_KIB of slack for
# allocator noise. No baseline (the ring never wrapped) is a failure too:
# the soak did not reach the steady state it is there to watch.
GROWTH_LIMIT_KIB=${GROWTH_LIMIT_KIB:-4096}
if [ -z "$rss_1min" ]; then
  echo "agent_soak: FAIL: the ring never wrapped; run longer (DURATION)" >&2
  exit 1
fi
if [ $(( rss_end - rss_1min )) -gt "$GROWTH_LIMIT_KIB" ]; then
  echo "agent_soak: FAIL: RSS grew by $(( rss_end - rss_1min )) KiB after the first minute" >&2
  exit 1
fi
