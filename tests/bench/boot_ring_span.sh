#!/bin/bash
# How many seconds of the boot ring's events a persistent ftrace instance of
# a given size holds on this machine (docs/flight-recorder.md): the events
# BootRecorder::Events() enables (agent/sources/boot_recorder.cc), on the
# boot clock, in an instance of SIZE_KB over all CPUs (12288: reserve_mem=
# 12M), for RUN_S seconds each: idle; with processes coming and going (a
# shell starting `true` 100 times a second: a busy server's churn); and
# beside hackbench (scheduling as fast as the CPUs go: the worst case).
#
#   sudo tests/bench/boot_ring_span.sh            # SIZE_KB=12288 RUN_S=30
#
# Per CPU it prints the span the buffer held at the end (now - its oldest
# event) once it had wrapped, or, if it had not, the span RUN_S extrapolated
# to a full buffer (RUN_S x size / bytes used), marked "~". The instance is
# its own (instances/rs-ring-span-PID, in a private mount of tracefs) and is
# removed at the end; nothing else of tracefs is touched.
set -euo pipefail
SIZE_KB=${SIZE_KB:-12288}
RUN_S=${RUN_S:-30}
EVENTS="sched/sched_switch sched/sched_waking sched/sched_wakeup_new sched/sched_process_fork
  sched/sched_process_exec sched/sched_process_exit task/task_newtask task/task_rename
  oom/mark_victim signal/signal_deliver printk/console sched/sched_process_hang mce/mce_record"

if [ "${1:-}" != --inside ]; then
  exec unshare -m --propagation private bash "$0" --inside
fi
mnt=$(mktemp -d)
mount -t tracefs tracefs "$mnt"
inst=$mnt/instances/rs-ring-span-$$
cleanup() {
  echo 0 > "$inst/tracing_on" 2> /dev/null || true
  [ -n "${hb:-}" ] && kill "$hb" 2> /dev/null && wait "$hb" 2> /dev/null
  rmdir "$inst" 2> /dev/null || true
  umount "$mnt" && rmdir "$mnt"
}
trap cleanup EXIT
mkdir "$inst"
cpus=$(nproc)
echo $((SIZE_KB / cpus)) > "$inst/buffer_size_kb"
echo boot > "$inst/trace_clock"
for e in $EVENTS; do
  [ -e "$inst/events/$e/enable" ] && echo 1 > "$inst/events/$e/enable"
done
per_cpu_kb=$(cat "$inst/buffer_size_kb")

# span MODE: per CPU, what the buffer holds after RUN_S seconds of MODE.
span() {
  local cpu stats oldest now bytes overrun
  echo > "$inst/trace"
  echo 1 > "$inst/tracing_on"
  sleep "$RUN_S"
  echo 0 > "$inst/tracing_on"
  for ((cpu = 0; cpu < cpus; cpu++)); do
    stats=$(cat "$inst/per_cpu/cpu$cpu/stats")
    oldest=$(awk '/oldest event ts/ { print $4 }' <<< "$stats")
    now=$(awk '/now ts/ { print $3 }' <<< "$stats")
    bytes=$(awk '/^bytes/ { print $2 }' <<< "$stats")
    overrun=$(awk '/^overrun/ { print $2 }' <<< "$stats")
    if [ "$overrun" -gt 0 ]; then
      awk -v m="$1" -v c="$cpu" -v o="$oldest" -v n="$now" \
        'BEGIN { printf "%s cpu%d: %.1f s held (wrapped)\n", m, c, n - o }'
    else
      awk -v m="$1" -v c="$cpu" -v b="$bytes" -v kb="$per_cpu_kb" -v r="$RUN_S" \
        'BEGIN { if (b == 0) printf "%s cpu%d: no events in %d s\n", m, c, r;
                 else printf "%s cpu%d: ~%.0f s (%d KiB in %d s, of %d KiB)\n", m, c,
                      r * kb * 1024 / b, b / 1024, r, kb }'
    fi
  done
}

echo "boot ring: $((per_cpu_kb * cpus)) KiB over $cpus CPUs ($per_cpu_kb KiB each), $RUN_S s a run"
span idle
bash -c 'while :; do /bin/true; sleep 0.01; done' &
hb=$!
span churn
kill "$hb"
wait "$hb" 2> /dev/null || true
hackbench -g 2 -l 100000000 > /dev/null 2>&1 &
hb=$!
span busy
