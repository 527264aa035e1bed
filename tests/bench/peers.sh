#!/bin/bash
# ringside beside its peers: the same workload with no tracer, under
# `perf record -a`, under a raw ftrace instance read with `cat
# trace_pipe_raw` (the floor: the kernel's cost and a copy), under
# `ringside record` with its embedded default config (BPF, and ftrace for the
# power events), and under `ringside record` of the same events with ftrace
# only (rs-ftrace: issue 21 asks for that configuration's figures too), each
# asked for the same events (those the default records). Repetitions are
# interleaved, in a rotating order, and every figure is a median (min-max) of
# this run with ratios to the no-tracer runs of the same run: the machine may
# be shared and noisy, so absolute times mean little.
#
# Two workloads:
#   mixed  hackbench (HACKBENCH_ARGS) then FORKS fork+exec of /bin/true
#   pipe   perf bench sched pipe -l PIPE_LOOPS: microseconds per round trip
#          (two switches and two wakeups each)
#   idle   IDLE_SECONDS (10) of sleep: each tracer's own CPU while the
#          machine does nothing else (asked for by name: WORKLOADS=idle)
#
# Every tracer runs beside the workload, not as its parent, under GNU time,
# so its CPU seconds (user + system, with its children: the cat readers) and
# peak RSS are its own. One more configuration, `kernel`, runs the workload
# under `perf stat -a` of the same tracepoints: the kernel's own count of the
# events one run makes, the denominator of the per-event figures (perf stat
# is a tracer too, so it runs in repetitions of its own).
#
# The tracers' counts come from themselves and are labelled so: perf's
# samples in perf.data and its lost-sample records; ftrace's per-CPU `read
# events` and `overrun` in the instance's stats (the kernel's counters, exact);
# ringside's closing line (events kept, recorded, lost in the staging rings),
# for both of its configurations.
# A tracer's window is a little longer than the workload (start and stop), so
# it also keeps the machine's other events of those moments.
#
# One run must be able to tell better from worse (issue 57), so:
#  - The workload runs on its own CPUs (WORKLOAD_CPUS, CPU 0) and every
#    tracer, its readers and children on the others (TRACER_CPUS, the rest):
#    the workload's time then holds what its events cost in the kernel (the
#    tracers' hooks run in its context), not the scheduler's luck in
#    sharing two CPUs between the workload and a tracer's reader; the
#    tracer's own CPU is measured apart (in-run CPU). With one CPU, nothing
#    is pinned (PIN=0 asks for that anywhere).
#  - Every comparison is paired: each repetition runs every configuration
#    back to back, and a figure against the baseline (added ns per event) or
#    against a peer (ringside / perf) is computed within the repetition,
#    then given as the median over repetitions and its confidence interval
#    (at least 90%, from the order statistics: with 5 repetitions the
#    min-max, 94%; with 10 the 2nd to 9th, 98%; no assumption of a normal
#    spread). A goal is "met" when the whole interval meets it, "NOT met"
#    when none of it does, and "undecided" when it straddles the goal: the
#    difference is smaller than what this run can tell.
#
# Needs root, hackbench (rt-tests), perf (linux-perf) and GNU time (time).
# tracefs is mounted in a mount namespace of this script's own; the ftrace
# instance (instances/peers-floor-PID) is removed at the end, on Ctrl-C too.
#
#   make bench-peers                 # REPS=10
#   REPS=5 make bench-peers          # shorter
#   WORKLOADS=pipe TRACERS="none kernel perf ringside rs-ftrace" make bench-peers
set -eEuo pipefail

BIN=$(realpath "${RINGSIDE:-build/ringside}")
REPS=${REPS:-10}
HACKBENCH_ARGS=${HACKBENCH_ARGS:--g 4 -l 1000}
FORKS=${FORKS:-500}
PIPE_LOOPS=${PIPE_LOOPS:-200000}
IDLE_SECONDS=${IDLE_SECONDS:-10}
# Debian 12's perf (linux-perf) is 6.1's, installed as /usr/bin/perf itself
# (no per-kernel-version wrapper); it works on newer kernels, as it reads
# the tracepoints' formats from tracefs.
PERF=${PERF:-perf}
# perf record's buffer per CPU: ringside's default BPF ring size, so that
# neither loses events for want of a larger buffer than the other has.
PERF_MMAP=${PERF_MMAP:-4M}
# How the ftrace instance is read: `cat` of each CPU's trace_pipe_raw, as
# issue 21 names the floor; on this kernel a blocking read() of
# trace_pipe_raw returns as soon as one event is there (buffer_percent is
# for splice only), so cat wakes for a few events a page and its own
# switches feed the trace. `poll` drains each CPU every 100 ms with
# non-blocking reads (dd), as ringside's readers do: the kernel's cost
# and a copy, nearer a floor.
FTRACE_READER=${FTRACE_READER:-cat}

# What ringside's embedded default records (agent/config/config_loader.cc,
# kDefaultConfig): the BPF programs of bpf/sched.bpf.c and bpf/process.bpf.c,
# and the ftrace events of its linux.ftrace source. ringside also attaches
# the incident programs (signal_generate, mark_victim), which keep only fatal
# signals and OOM kills: none here, so they are left out of the peers' list
# (ringside still pays for their runs on every signal).
EVENTS=(
  sched:sched_switch sched:sched_waking sched:sched_wakeup_new sched:sched_migrate_task
  sched:sched_process_fork sched:sched_process_exec sched:sched_process_exit
  sched:sched_process_free task:task_rename power:cpu_frequency power:cpu_idle
)
# perf-z and rs-z: perf record -z and ringside record -z (zstd both), for
# the bytes per event a compressed file takes.
# Stacks (issue 54): perf-g is perf record -g (kernel and user stacks, by
# frame pointers, of every event) with a cpu-clock sample at 49 Hz per CPU
# besides, as ringside's default samples; rs-nostk is ringside's default
# config without its `stacks {}`, so that `ringside` against it is what the
# stacks cost; rs-blocked is the default with `stacks { blocked: true }`,
# which on a kernel without kprobes takes both stacks at every block (as
# perf-g does at every switch) and on one with kprobes is the default.
# TRACERS="none kernel perf ringside" or WORKLOADS=pipe run a part only
# (none and kernel are the baselines every ratio needs).
# shellcheck disable=SC2206  # word lists
TRACER_LIST=(${TRACERS:-none kernel perf perf-z ftrace ringside rs-ftrace rs-z})
# Asked for by name only: TRACERS="none kernel perf perf-g ringside rs-nostk rs-blocked".
# shellcheck disable=SC2206
WORKLOAD_LIST=(${WORKLOADS:-mixed pipe})

die() { echo "bench-peers: $*" >&2; exit 1; }
# median_ci, goal_line, positive_ratios: the verdicts, tested on their own.
# shellcheck source=tests/bench/peers_verdicts.sh
. "$(dirname "$0")/peers_verdicts.sh"

NCPUS=$(getconf _NPROCESSORS_ONLN)
PIN=${PIN:-1}
if [ "$NCPUS" -lt 2 ]; then PIN=0; fi
WORKLOAD_CPUS=${WORKLOAD_CPUS:-0}
TRACER_CPUS=${TRACER_CPUS:-1-$((NCPUS - 1))}
ALL_CPUS=0-$((NCPUS - 1))

# --- Preconditions, then a mount namespace of our own ----------------------------

if [ -z "${PEERS_IN_NAMESPACE:-}" ]; then
  [ "$(id -u)" = 0 ] || { echo "bench-peers: needs root (perf -a, ftrace, BPF)" >&2; exit 2; }
  for tool in hackbench "$PERF" /usr/bin/time unshare taskset; do
    command -v "$tool" >/dev/null ||
      { echo "bench-peers: needs $tool (make deps: rt-tests, linux-perf, time)" >&2; exit 2; }
  done
  [ -x "$BIN" ] || { echo "bench-peers: no $BIN (make build/ringside)" >&2; exit 2; }
  # tracefs mounted here would be seen by everyone; perf would even mount it
  # itself. A private namespace keeps both to this script.
  exec env PEERS_IN_NAMESPACE=1 unshare -m --propagation private bash "$0" "$@"
fi

TRACEFS=/sys/kernel/tracing
mountpoint -q "$TRACEFS" || mount -t tracefs nodev "$TRACEFS" || die "cannot mount tracefs"
for e in "${EVENTS[@]}"; do
  [ -d "$TRACEFS/events/${e%%:*}/${e#*:}" ] || die "this kernel has no tracepoint $e"
done
case "$FTRACE_READER" in cat | poll) ;; *) die "FTRACE_READER is cat or poll, not $FTRACE_READER" ;; esac
EVENT_LIST=$(IFS=,; echo "${EVENTS[*]}")

dir=$(mktemp -d /tmp/ringside-peers.XXXXXX)
instance=$TRACEFS/instances/peers-floor-$$
tracer_pid=""  # the GNU time process wrapping the running tracer (a process group)

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if [ -n "$tracer_pid" ]; then
    kill -TERM -- "-$tracer_pid" 2>/dev/null || true
    wait "$tracer_pid" 2>/dev/null || true
  fi
  if [ -d "$instance" ]; then
    echo 0 > "$instance/tracing_on" 2>/dev/null || true
    rmdir "$instance" 2>/dev/null || echo "bench-peers: could not remove $instance" >&2
  fi
  rm -rf "$dir"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# Every failing step ends the run (set -e, in functions too: -E), saying where.
current_run="setup"
trap 'echo "bench-peers: failed during $current_run: line $LINENO: $BASH_COMMAND" >&2' ERR

# rs-ftrace's config: the default's buffers and its ftrace source as they are
# (what the default records with when BPF cannot load), asked for every event
# of EVENTS, and no linux.bpf source, so no BPF program is loaded. No
# duration_ms: a config file's duration would bound the recording, which
# should last as long as its command.
RS_FTRACE_CONFIG=$dir/rs-ftrace.pbtxt
{
  echo 'buffers { size_kb: 65536 fill_policy: RING_BUFFER }'
  echo 'data_sources { config { name: "linux.ftrace" target_buffer: 0 ftrace_config {'
  for e in "${EVENTS[@]}"; do echo "  ftrace_events: \"${e%%:*}/${e#*:}\""; done
  echo '  buffer_size_kb: 4096 drain_period_ms: 250 } } }'
  echo 'flush_period_ms: 1000 durable_buffer_size_kb: 2048'
} > "$RS_FTRACE_CONFIG"

# rs-nostk's and rs-blocked's: the embedded default config as the source has
# it (agent/config/config_loader.cc), without its duration, and with its
# stacks left out or asked for blocked stacks in so many words.
SRC_DIR=$(cd "$(dirname "$0")/../.." && pwd)
default_config() {
  sed -n '/kDefaultConfig\[\] = R"pb(/,/^)pb";/p' "$SRC_DIR/agent/config/config_loader.cc" |
    sed '1d;$d' | grep -v 'duration_ms'
}
RS_NOSTK_CONFIG=$dir/rs-nostk.pbtxt
RS_BLOCKED_CONFIG=$dir/rs-blocked.pbtxt
default_config | grep -v 'stacks {}' > "$RS_NOSTK_CONFIG"
default_config | sed 's/stacks {}/stacks { blocked: true }/' > "$RS_BLOCKED_CONFIG"
grep -q 'stacks { blocked: true }' "$RS_BLOCKED_CONFIG" ||
  die "the embedded default config (agent/config/config_loader.cc) has no 'stacks {}' line"

# --- Workloads ----------------------------------------------------------------

run_mixed() {
  # shellcheck disable=SC2086  # HACKBENCH_ARGS is a list of words
  hackbench $HACKBENCH_ARGS >/dev/null || return 1
  local i
  for ((i = 0; i < FORKS; i++)); do /bin/true; done
}

run_pipe() {
  "$PERF" bench sched pipe -l "$PIPE_LOOPS" > "$dir/pipe.out" 2>&1 || { cat "$dir/pipe.out" >&2; return 1; }
  awk '/usecs\/op/ { print $1; found = 1 } END { exit !found }' "$dir/pipe.out" ||
    { cat "$dir/pipe.out" >&2; return 1; }
}

run_idle() { sleep "$IDLE_SECONDS"; }

now_ns() { date +%s%N; }

# Runs workload $1 and sets wall_s, and usecs_op for pipe. Pinned: this
# shell moves to the workload's CPUs for the workload (its children inherit
# them), and back.
timed_workload() {
  local t0 t1
  if [ "$PIN" = 1 ]; then taskset -pc "$WORKLOAD_CPUS" $$ > /dev/null; fi
  t0=$(now_ns)
  case "$1" in
    pipe) usecs_op=$(run_pipe) || return 1 ;;
    idle) run_idle ;;
    *) run_mixed || return 1 ;;
  esac
  t1=$(now_ns)
  if [ "$PIN" = 1 ]; then taskset -pc "$ALL_CPUS" $$ > /dev/null; fi
  wall_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", (b - a) / 1e9 }')
}

# --- Tracers ------------------------------------------------------------------

# Starts "$@" beside us, in a process group of its own, under GNU time, on
# the tracers' CPUs (setsid and taskset exec: one process, GNU time's).
start_tracer() {
  local pin=()
  if [ "$PIN" = 1 ]; then pin=(taskset -c "$TRACER_CPUS"); fi
  setsid "${pin[@]}" /usr/bin/time -q -f '%U %S %M' -o "$dir/rusage" "$@" &
  tracer_pid=$!
}

# The tracer itself: GNU time's only child.
tracer_child() {
  local i child
  for ((i = 0; i < 100; i++)); do
    child=$(awk '{ print $1 }' "/proc/$tracer_pid/task/$tracer_pid/children" 2>/dev/null)
    [ -n "$child" ] && { echo "$child"; return 0; }
    sleep 0.05
  done
  return 1
}

# Waits for the tracer ($1, for messages) to end; sets cpu_s and rss_kb.
# Fails when it failed (a status other than 0 or $2).
finish_tracer() {
  local status=0
  wait "$tracer_pid" || status=$?
  tracer_pid=""
  [ "$status" = 0 ] || [ "$status" = "${2:-0}" ] ||
    { echo "bench-peers: $1 exited with status $status" >&2; return 1; }
  read -r user sys rss_kb < <(tail -1 "$dir/rusage")
  cpu_s=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.3f", u + s }')
}

# On-CPU nanoseconds so far of every thread of process group $1 (the tracer
# and its children): the scheduler's own count (schedstat), exact where
# GNU time's ticks are 10 ms.
# The children a member waited for (a reader loop's cat or dd that ended)
# count too, from its cutime + cstime, in clock ticks.
group_cpu_ns() {
  local p ticks t v total=0 tick_ns
  tick_ns=$((1000000000 / $(getconf CLK_TCK)))
  while read -r p ticks; do
    total=$((total + ticks * tick_ns))
    for t in /proc/"$p"/task/*/schedstat; do
      read -r v _ 2>/dev/null < "$t" && total=$((total + v))
    done
  done < <({ cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk -v g="$1" '{
    s = $0; sub(/.*\) /, "", s); split(s, f, " ")
    if (f[3] == g) print $1, f[14] + f[15] }')
  echo "$total"
}

# timed_workload, and the tracer's CPU seconds in the workload's window
# (window_cpu_s): its cost per event while recording, without its start
# (loading programs, describing processes) and its end (writing the file).
windowed_workload() {
  local c0 c1
  c0=$(group_cpu_ns "$tracer_pid")
  timed_workload "$1"
  c1=$(group_cpu_ns "$tracer_pid")
  window_cpu_s=$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.4f", (b - a) / 1e9 }')
}

ftrace_stat() {  # the sum over CPUs of one field of per_cpu/cpuN/stats
  cat "$instance"/per_cpu/cpu*/stats | awk -v f="$1:" '$0 ~ "^" f { n += $NF } END { print n + 0 }'
}

# One run of tracer $1 beside workload $2. Sets the figures of record().
run_one() {
  local tracer=$1 workload=$2 child i
  wall_s="" usecs_op="" cpu_s="" rss_kb="" bytes="" kept="" lost="" kernel="" window_cpu_s=""
  rm -rf "${dir:?}"/run && mkdir "$dir/run"
  case "$tracer" in
    none)
      timed_workload "$workload"
      ;;
    kernel)
      # perf stat is the workload's parent here: it counts, all CPUs, over
      # the workload's run.
      local t0 t1
      t0=$(now_ns)
      local pin=()
      if [ "$PIN" = 1 ]; then pin=(taskset -c "$WORKLOAD_CPUS"); fi
      "${pin[@]}" "$PERF" stat -a -x, -e "$EVENT_LIST" -o "$dir/run/stat.csv" -- \
        bash -c "$(declare -f run_mixed run_pipe run_idle); PERF='$PERF' \
          HACKBENCH_ARGS='$HACKBENCH_ARGS' FORKS=$FORKS PIPE_LOOPS=$PIPE_LOOPS \
          IDLE_SECONDS=$IDLE_SECONDS dir='$dir/run' run_$workload >/dev/null" ||
        return 1
      t1=$(now_ns)
      wall_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", (b - a) / 1e9 }')
      kernel=$(awk -F, '$3 ~ /:/ && $1 ~ /^[0-9]+$/ { n += $1 } END { print n + 0 }' \
        "$dir/run/stat.csv")
      ;;
    perf | perf-z | perf-g)
      # Started with its events off (-D -1) and turned on through its
      # control fifo, whose ack says they are on.
      mkfifo "$dir/run/ctl" "$dir/run/ack"
      local compress=() events=$EVENT_LIST
      if [ "$tracer" = perf-z ]; then compress=(-z); fi
      if [ "$tracer" = perf-g ]; then compress=(-g) events+=",cpu-clock/freq=49/"; fi
      start_tracer "$PERF" record -a -m "$PERF_MMAP" "${compress[@]}" -D -1 \
        --control "fifo:$dir/run/ctl,$dir/run/ack" -e "$events" -o "$dir/run/perf.data" \
        2> "$dir/run/perf.log"
      timeout 30 bash -c "echo enable > '$dir/run/ctl' && read -r _ < '$dir/run/ack'" ||
        { cat "$dir/run/perf.log" >&2; die "perf record did not start"; }
      windowed_workload "$workload"
      timeout 30 bash -c "echo disable > '$dir/run/ctl' && read -r _ < '$dir/run/ack'" ||
        { cat "$dir/run/perf.log" >&2; die "perf record does not answer"; }
      child=$(tracer_child) || die "perf record is gone"
      kill -INT "$child"
      # perf record ends with 130 when stopped by SIGINT.
      finish_tracer "perf record" 130 || { cat "$dir/run/perf.log" >&2; false; }
      bytes=$(stat -c %s "$dir/run/perf.data")
      # Kept: the SAMPLE records; lost: the samples each event's LOST_SAMPLES
      # records count (perf's "lost N%" warning), from perf's own stats.
      "$PERF" report --stats -i "$dir/run/perf.data" > "$dir/run/perf.stats" 2>&1 ||
        { cat "$dir/run/perf.stats" >&2; false; }
      kept=$(awk '/ stats:$/ { a = /^Aggregated/ }
        a && /SAMPLE events:/ { print $3; exit }' "$dir/run/perf.stats")
      lost=$(awk '/ stats:$/ { e = !/^Aggregated/ } e && /LOST_SAMPLES events:/ { n += $3 }
        END { print n + 0 }' "$dir/run/perf.stats")
      [ -n "$kept" ] || { cat "$dir/run/perf.stats" >&2; die "no sample count from perf report"; }
      ;;
    ftrace)
      mkdir "$instance"
      echo 0 > "$instance/tracing_on"
      echo 4096 > "$instance/buffer_size_kb"  # ringside's default staging size
      for e in "${EVENTS[@]}"; do echo 1 > "$instance/events/${e%%:*}/${e#*:}/enable"; done
      local readers=""
      for ((i = 0; i < NCPUS; i++)); do
        local pipe=$instance/per_cpu/cpu$i/trace_pipe_raw out=$dir/run/cpu$i.raw
        if [ "$FTRACE_READER" = poll ]; then
          # dd ends at the first read that finds nothing (EAGAIN).
          readers+="while :; do dd if=$pipe iflag=nonblock bs=4096 status=none 2>/dev/null; \
            sleep 0.1; done > $out & "
        else
          # A read can end with nothing (EOF) while tracing is on: this
          # kernel (6.18) wakes a blocked reader and finds the page empty,
          # and cat then exits, within a second of a storm. So cat again at
          # each EOF (the pause keeps a reader from spinning once tracing is
          # off); stopped, the loop takes its cat with it, which would
          # otherwise block for good in its read, holding the instance.
          readers+="(trap 'kill \$c 2>/dev/null; exit' TERM; \
            while :; do cat $pipe & c=\$!; wait \$c; sleep 0.01; done) > $out & "
        fi
      done
      # Stopped, the shell stops its readers and waits for them, so that
      # their CPU time reaches GNU time.
      start_tracer bash -c "trap 'kill \$(jobs -p) 2>/dev/null; wait' TERM; $readers wait"
      sleep 0.2
      echo 1 > "$instance/tracing_on"
      windowed_workload "$workload"
      echo 0 > "$instance/tracing_on"
      # With tracing off, a reader sees the end of its file once it has read
      # everything, or blocks: stopped once the buffers are empty.
      for ((i = 0; i < 50; i++)); do
        [ "$(ftrace_stat entries)" = 0 ] && break
        sleep 0.1
      done
      sleep 0.1
      child=$(awk '{ print $1 }' "/proc/$tracer_pid/task/$tracer_pid/children" 2>/dev/null || true)
      [ -z "$child" ] || kill -TERM "$child" 2>/dev/null || true
      finish_tracer "the ftrace readers" 143
      kept=$(ftrace_stat "read events")
      lost=$(( $(ftrace_stat overrun) + $(ftrace_stat "dropped events") ))
      bytes=$(cat "$dir"/run/cpu*.raw | wc -c)
      rmdir "$instance"
      ;;
    ringside | rs-ftrace | rs-z | rs-nostk | rs-blocked)
      # CMD only says when recording has started (ringside runs it once
      # every source is attached) and waits; the workload runs beside.
      local config=()
      if [ "$tracer" = rs-ftrace ]; then config=(-c "$RS_FTRACE_CONFIG"); fi
      if [ "$tracer" = rs-z ]; then config=(-z); fi
      if [ "$tracer" = rs-nostk ]; then config=(-c "$RS_NOSTK_CONFIG"); fi
      if [ "$tracer" = rs-blocked ]; then config=(-c "$RS_BLOCKED_CONFIG"); fi
      # shellcheck disable=SC2016  # $0 is sh's
      start_tracer "$BIN" record "${config[@]}" -o "$dir/run/out.pftrace" -- \
        sh -c ': > "$0"; exec sleep 100000' "$dir/run/ready" 2> "$dir/run/ringside.log"
      for ((i = 0; i < 600; i++)); do
        [ -e "$dir/run/ready" ] && break
        kill -0 "$tracer_pid" 2>/dev/null || break
        sleep 0.05
      done
      [ -e "$dir/run/ready" ] || { cat "$dir/run/ringside.log" >&2; die "ringside record did not start"; }
      windowed_workload "$workload"
      child=$(tracer_child) || die "ringside record is gone"
      # SIGTERM, which ringside passes on to CMD: a background job ignores
      # SIGINT, so CMD would outlive it and be killed after 10 s. ringside
      # then exits with CMD's fate, 128 + 15.
      kill -TERM "$child"
      finish_tracer "ringside record" 143 || { cat "$dir/run/ringside.log" >&2; false; }
      bytes=$(stat -c %s "$dir/run/out.pftrace")
      # "N events kept[ of M recorded]." and "lost N events in the staging rings"
      kept=$(sed -n 's/.*: \([0-9]*\) events kept.*/\1/p' "$dir/run/ringside.log" | tail -1)
      local seen
      seen=$(sed -n 's/.* events kept of \([0-9]*\) recorded.*/\1/p' "$dir/run/ringside.log" | tail -1)
      lost=$(sed -n 's/.*lost \([0-9]*\) events in the staging.*/\1/p' "$dir/run/ringside.log" | tail -1)
      lost=$(( ${lost:-0} + ${seen:-$kept} - kept ))
      [ -n "$kept" ] || { cat "$dir/run/ringside.log" >&2; die "no events count from ringside"; }
      "$BIN" inspect "$dir/run/out.pftrace" > /dev/null ||
        die "ringside's trace does not read back (ringside inspect)"
      ;;
  esac
}

# --- The runs -------------------------------------------------------------------

results=$dir/results.tsv
: > "$results"
echo "bench-peers: $REPS repetitions of ${#WORKLOAD_LIST[@]} workloads under ${#TRACER_LIST[@]}" \
  "configurations, interleaved (mixed: hackbench $HACKBENCH_ARGS + $FORKS fork/exec;" \
  "pipe: perf bench sched pipe -l $PIPE_LOOPS)" >&2
for ((rep = 0; rep < REPS; rep++)); do
  for workload in "${WORKLOAD_LIST[@]}"; do
    for ((k = 0; k < ${#TRACER_LIST[@]}; k++)); do
      # Each repetition starts one tracer later, so none always runs first.
      tracer=${TRACER_LIST[$(( (k + rep) % ${#TRACER_LIST[@]} ))]}
      current_run="$tracer beside $workload, repetition $((rep + 1))"
      run_one "$tracer" "$workload"
      printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n" "$workload" "$tracer" "$wall_s" \
        "${usecs_op:--}" "${cpu_s:--}" "${rss_kb:--}" "${bytes:--}" "${kept:--}" "${lost:--}" \
        "${kernel:--}" "${window_cpu_s:--}" "$rep" >> "$results"
      printf "  rep %d %-5s %-9s %8ss%s\n" "$((rep + 1))" "$workload" "$tracer" "$wall_s" \
        "${usecs_op:+ ${usecs_op} us/op}" >&2
    done
  done
done

# --- The table ------------------------------------------------------------------

# Column numbers in results.tsv.
C_WALL=3 C_USECS=4 C_CPU=5 C_RSS=6 C_BYTES=7 C_KEPT=8 C_LOST=9 C_KERNEL=10 C_WCPU=11  # and 12, the repetition (per_rep)

# "median min max" of column $3 over the runs of workload $1 under tracer $2;
# a column of "-" gives "- - -". With an expression $4 over the columns
# ($C for column C), of that instead.
stat3() {
  awk -F'\t' -v w="$1" -v t="$2" -v c="$3" '
    $1 == w && $2 == t && $c != "-" { print $c }' "$results" | sort -g |
    awk '{ v[NR] = $1 } END {
      if (NR == 0) { print "- - -"; exit }
      m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      print m, v[1], v[NR] }'
}
median() { stat3 "$@" | awk '{ print $1 }'; }
# Events a tracer saw in one run (kept + lost), per run, then their stats.
events_seen_stat() {
  awk -F'\t' -v w="$1" -v t="$2" '$1 == w && $2 == t && $8 != "-" { print $8 + $9 }' "$results" |
    sort -g | awk '{ v[NR] = $1 } END {
      if (NR == 0) { print "- - -"; exit }
      m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      print m, v[1], v[NR] }'
}

# x.xx (min-max) of a stat3 line divided by $2.
ratio_span() {
  awk -v d="$2" -v f="${3:-%.2f}" '{
    if ($1 == "-" || d == 0) { print "-"; exit }
    printf f " (" f "-" f ")\n", $1 / d, $2 / d, $3 / d }' <<< "$1"
}
fmt_span() {  # stat3 line, scaled by $2, printf format $3
  awk -v s="$2" -v f="$3" '{
    if ($1 == "-") { print "-"; exit }
    printf f " (" f "-" f ")\n", $1 * s, $2 * s, $3 * s }' <<< "$1"
}

# The table's rows: every tracer but `kernel`, whose runs give the count.
SHOWN=()
for t in "${TRACER_LIST[@]}"; do [ "$t" = kernel ] || SHOWN+=("$t"); done

declare -A added_ns cpu_per_m window_per_m
# The idle table: each tracer's CPU while the machine sleeps, as a share of
# one CPU over the workload's window.
print_idle_table() {
  echo
  echo "idle: sleep $IDLE_SECONDS; $REPS runs each, median (min-max)"
  printf "%-10s %-26s %-20s\n" tracer "in-run CPU, % of one CPU" "kept (own count)"
  local tracer
  for tracer in "${SHOWN[@]}"; do
    [ "$tracer" = none ] && continue
    printf "%-10s %-26s %-20s\n" "$tracer" \
      "$(fmt_span "$(stat3 idle "$tracer" $C_WCPU)" "$(awk -v s="$IDLE_SECONDS" 'BEGIN { print 100 / s }')" %.3f)" \
      "$(fmt_span "$(stat3 idle "$tracer" $C_KEPT)" 1 %.0f)"
  done
}

print_table() {
  local workload=$1 none_wall kernel_med
  if [ "$workload" = idle ]; then print_idle_table; return; fi
  none_wall=$(median "$workload" none $C_WALL)
  kernel_med=$(median "$workload" kernel $C_KERNEL)
  echo
  if [ "$workload" = mixed ]; then
    echo "mixed: hackbench $HACKBENCH_ARGS, then $FORKS x fork+exec of /bin/true; $REPS runs each, median (min-max)"
  else
    echo "pipe: perf bench sched pipe -l $PIPE_LOOPS; $REPS runs each, median (min-max)"
  fi
  echo "kernel count of the events in one run (perf stat -a, runs of its own): $(fmt_span \
    "$(stat3 "$workload" kernel $C_KERNEL)" 1 %.0f); none: $(printf %.3f "$none_wall") s"
  if [ "$workload" = pipe ]; then
    local none_us
    none_us=$(median pipe none $C_USECS)
    printf "%-9s %-22s %-19s %s\n" tracer "us/round trip" "x none" "+ns/event (paired)"
    for tracer in "${SHOWN[@]}"; do
      added_ns[pipe,$tracer]=$(per_rep pipe "$tracer" added | span_of 1 %.0f)
      printf "%-9s %-22s %-19s %s\n" "$tracer" \
        "$(fmt_span "$(stat3 pipe "$tracer" $C_USECS)" 1 %.2f)" \
        "$(ratio_span "$(stat3 pipe "$tracer" $C_USECS)" "$none_us")" "${added_ns[pipe,$tracer]}"
    done
    awk -v k="$kernel_med" -v l="$PIPE_LOOPS" \
      'BEGIN { printf "(%.2f events per round trip, from the kernel count)\n", k / l }'
    echo
    echo "tracer    CPU s               CPU s/M events  in-run s/M  peak RSS MiB  output MiB  kept (own count)     lost"
  else
    printf "%-9s %-19s %-20s %-18s %14s %10s %12s %11s  %-20s %-8s %s\n" tracer "time x none" \
      "+ns/event (paired)" "CPU s" "CPU s/M events" "in-run s/M" "peak RSS MiB" "output MiB" \
      "kept (own count)" lost "kept+lost / kernel"
  fi
  for tracer in "${SHOWN[@]}"; do
    local cpu seen
    cpu=$(median "$workload" "$tracer" $C_CPU)
    seen=$(events_seen_stat "$workload" "$tracer" | awk '{ print $1 }')
    cpu_per_m[$workload,$tracer]=$(awk -v c="$cpu" -v e="$seen" \
      'BEGIN { if (c == "-" || e == "-" || e == 0) print "-"; else printf "%.3f", c * 1e6 / e }')
    window_per_m[$workload,$tracer]=$(awk -v c="$(median "$workload" "$tracer" $C_WCPU)" -v e="$seen" \
      'BEGIN { if (c == "-" || e == "-" || e == 0) print "-"; else printf "%.3f", c * 1e6 / e }')
    local rss_mib bytes_mib
    rss_mib=$(median "$workload" "$tracer" $C_RSS | awk '{ if ($1 == "-") print "-"; else printf "%.1f", $1 / 1024 }')
    bytes_mib=$(median "$workload" "$tracer" $C_BYTES | awk '{ if ($1 == "-") print "-"; else printf "%.1f", $1 / 1048576 }')
    local kept_line lost_med coverage
    kept_line=$(fmt_span "$(stat3 "$workload" "$tracer" $C_KEPT)" 1 %.0f)
    lost_med=$(median "$workload" "$tracer" $C_LOST | awk '{ if ($1 == "-") print "-"; else printf "%.0f", $1 }')
    coverage=$(awk -v s="$seen" -v k="$kernel_med" \
      'BEGIN { if (s == "-" || k == 0) print "-"; else printf "%.3f", s / k }')
    if [ "$workload" = pipe ]; then
      [ "$tracer" = none ] && continue
      printf "%-9s %-19s %14s %10s %12s %11s  %-20s %s\n" "$tracer" \
        "$(fmt_span "$(stat3 pipe "$tracer" $C_CPU)" 1 %.2f)" "${cpu_per_m[pipe,$tracer]}" \
        "${window_per_m[pipe,$tracer]}" "$rss_mib" "$bytes_mib" "$kept_line" "$lost_med"
    else
      added_ns[mixed,$tracer]=$(per_rep mixed "$tracer" added | span_of 1 %.0f)
      printf "%-9s %-19s %-20s %-18s %14s %10s %12s %11s  %-20s %-8s %s\n" "$tracer" \
        "$(ratio_span "$(stat3 mixed "$tracer" $C_WALL)" "$none_wall")" "${added_ns[mixed,$tracer]}" \
        "$(fmt_span "$(stat3 mixed "$tracer" $C_CPU)" 1 %.2f)" "${cpu_per_m[mixed,$tracer]}" \
        "${window_per_m[mixed,$tracer]}" "$rss_mib" "$bytes_mib" "$kept_line" "$lost_med" "$coverage"
    fi
  done
}

# Per repetition, one figure of tracer $2 in workload $1, as lines "rep
# value": `added`, the ns per event it added to the workload (its time less
# the no-tracer time of the same repetition, over the median kernel count);
# `inrun`, its CPU s per million events it saw while the workload ran; `bpe`,
# its output bytes per event kept.
per_rep() {
  local kernel_med
  kernel_med=$(median "$1" kernel $C_KERNEL)
  awk -F'\t' -v w="$1" -v t="$2" -v fig="$3" -v k="$kernel_med" -v l="$PIPE_LOOPS" '
    $1 != w { next }
    { time = (w == "pipe") ? $4 : $3 }
    $2 == "none" { none[$12] = time }
    $2 == t { tv[$12] = time; cpu[$12] = $11; seen[$12] = $8 + $9; bytes[$12] = $7; kept[$12] = $8 }
    END {
      for (r in tv) {
        if (fig == "added") {
          if (!(r in none) || k == "-" || k == 0 || tv[r] == "-") continue
          v = (w == "pipe") ? (tv[r] - none[r]) * 1000 * l / k : (tv[r] - none[r]) * 1e9 / k
        } else if (fig == "inrun") {
          if (cpu[r] == "-" || seen[r] == 0) continue
          v = cpu[r] * 1e6 / seen[r]
        } else {
          if (bytes[r] == "-" || kept[r] == 0) continue
          v = bytes[r] / kept[r]
        }
        print r, v
      } }' "$results" | sort -k1,1
}
# Per repetition, the ratio of figure $3 of tracer $2 to that of tracer $4
# (both in workload $1, the same repetition): one value a line
# (positive_ratios: none for a repetition where either is not above 0).
paired_ratio() {
  join <(per_rep "$1" "$2" "$3") <(per_rep "$1" "$4" "$3") | positive_ratios
}
# "median (min-max)" of the values on stdin (the second field when the
# lines are "rep value"), each times $1, in printf format $2; "-" for none.
span_of() {
  awk '{ print $NF }' | sort -g | awk -v s="$1" -v f="$2" '{ v[NR] = $1 * s } END {
    if (NR == 0) { print "-"; exit }
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf f " (" f "-" f ")\n", m, v[1], v[NR] }'
}
{
  echo
  echo "== ringside beside its peers ($(uname -r), $NCPUS CPUs; $("$PERF" --version)) =="
  echo "events: ${EVENTS[*]}"
  echo "perf record -a -m $PERF_MMAP; ftrace: an instance of 4096 KiB a CPU read by $FTRACE_READER; ringside record, its default config"
  echo "(BPF, and ftrace for the power events); rs-ftrace: ringside record of the same events with ftrace only (no BPF);"
  echo "perf-z, rs-z: perf record -z and ringside record -z (zstd); perf-g: perf record -g, and cpu-clock at 49 Hz;"
  echo "rs-nostk: ringside's default without stacks; rs-blocked: with stacks { blocked: true } (all blocks on a kernel without kprobes)"
  if [ "$PIN" = 1 ]; then
    echo "pinned: the workload on CPUs $WORKLOAD_CPUS, each tracer (and its readers) on CPUs $TRACER_CPUS"
  else
    echo "not pinned: the workload and the tracers share all CPUs"
  fi
  for workload in "${WORKLOAD_LIST[@]}"; do print_table "$workload"; done
  echo
  echo "goals (issue 57): each a ratio within each repetition; the median over the repetitions, and its"
  echo "confidence interval (order statistics); met or NOT met only when the whole interval is"
  echo "within the goal or beyond it and it is 90% or more; otherwise undecided: the difference is below"
  echo "what this run can tell (a repetition with either figure not above 0 gives no ratio)"
  for workload in "${WORKLOAD_LIST[@]}"; do
    [ "$workload" = idle ] && continue
    cpu_goal=2
    if [ "$workload" = pipe ]; then cpu_goal=1; fi
    paired_ratio "$workload" ringside added perf |
      goal_line "$workload: added ns per event, default / perf record" 0.5 "$REPS"
    paired_ratio "$workload" rs-ftrace added perf |
      goal_line "$workload: added ns per event, ftrace-only / perf record" 0.5 "$REPS"
    paired_ratio "$workload" ringside added rs-ftrace |
      goal_line "$workload: added ns per event, default / ftrace-only" 1 "$REPS"
    paired_ratio "$workload" ringside inrun perf |
      goal_line "$workload: in-run CPU per million events, default / perf record" "$cpu_goal" "$REPS"
    paired_ratio "$workload" rs-z bpe perf-z |
      goal_line "$workload: bytes per event, ringside -z / perf record -z" 0.5 "$REPS"
  done
  # What stacks add (issue 54), when their configurations ran.
  for workload in "${WORKLOAD_LIST[@]}"; do
    [ "$workload" = idle ] && continue
    awk -v w="$workload" -v d="${added_ns[$workload,ringside]:-}" -v n="${added_ns[$workload,rs-nostk]:-}" \
      -v b="${added_ns[$workload,rs-blocked]:-}" -v p="${added_ns[$workload,perf]:-}" \
      -v g="${added_ns[$workload,perf-g]:-}" 'BEGIN {
      if (n != "" && d != "") printf "  %s: stacks: the default %s ns/event vs without stacks %s ns\n", w, d, n
      if (b != "" && g != "") printf "  %s: stacks at every block/switch: rs-blocked %s ns/event vs perf record -g %s ns (perf %s ns)\n", w, b, g, p }'
  done
  echo
  echo "bytes per event kept (median output bytes / median kept), compressed and not (issue 34):"
  for workload in "${WORKLOAD_LIST[@]}"; do
    line="  $workload:"
    for tracer in perf perf-z ringside rs-z; do
      line+=" $tracer $(awk -v b="$(median "$workload" "$tracer" $C_BYTES)" \
        -v k="$(median "$workload" "$tracer" $C_KEPT)" \
        'BEGIN { if (b == "-" || k == "-" || k == 0) print "-"; else printf "%.2f", b / k }')"
    done
    echo "$line"
  done
  echo
  echo "+ns/event: (time - time with none in the same repetition) / median kernel count: the"
  echo "tracer's cost in the workload's time (its kernel hooks; pinned, its process runs elsewhere)."
  echo "CPU s: the tracer process and its children (user + system), measured by GNU time; per"
  echo "million of the events it saw (kept + lost). in-run: the same, of its CPU while the workload"
  echo "ran only (the scheduler's schedstat of each of its threads, before and after), without its"
  echo "start and its end. Peak RSS: the largest process (ftrace: one cat)."
  echo "kept: perf, its samples in perf.data; ftrace, the instance's 'read events'; ringside and"
  echo "rs-ftrace, ringside's closing line. lost: perf's LOST records, ftrace's overrun + dropped,"
  echo "ringside's staging-ring losses + events overwritten in its ring. A tracer's window is a"
  echo "little wider than the workload's, so kept + lost may exceed the kernel count by the"
  echo "machine's other events."
}
