#!/usr/bin/env bash
# Runs GoogleTest binaries and prints one closing summary line,
# "tests: N passed, N failed, N skipped". Exits non-zero if any test failed or
# any run ended without a GoogleTest summary (a crash or an abort).
#
# Two phases:
#  1. Every binary is cut into TEST_JOBS shards (GoogleTest's own sharding,
#     GTEST_TOTAL_SHARDS / GTEST_SHARD_INDEX), and TEST_JOBS shards run side
#     by side. Each test keeps to its own tracefs instance, cgroup, scratch
#     directory and process tree; those that look at what the whole machine
#     does are the exceptions tests/serial_tests.txt names.
#  2. The tests that tests/serial_tests.txt names run alone, one binary after
#     another, each with why there.
# A shard's output is printed whole when it ends, so outputs never interleave;
# a shard still running after TEST_TIMEOUT seconds (1800) is killed and its
# output printed. Before that, a single test that runs past
# RINGSIDE_TEST_HANG_S (300) ends its binary with its name and every
# thread's backtrace (tests/testing/test_main.cc).
#
# TEST_JOBS: shards at a time (default 1: one after another). 2 or more
#   takes about half the time, but end-to-end tests that look at the whole
#   machine without being on tests/serial_tests.txt yet fail now and then
#   beside each other (a dozen were found that way and fixed or listed; CI
#   keeps 1 until `TEST_JOBS=2 make flake-check` runs clean).
# TEST_LOAD_PGID: a process group (flake-check's load) stopped while the
#   serial tests run, as they are meant to have the machine to themselves.
# TEST_REPEAT: runs of everything, one after another (default 1). The closing
#   lines list each test that failed (with more than one run, in how many).
# TEST_FILTER: a GoogleTest filter (POSITIVE[-NEGATIVE]) to run only some
#   tests, in both phases.
set -u

here=$(cd "$(dirname "$0")" && pwd)
serial_list="$here/../tests/serial_tests.txt"
jobs=${TEST_JOBS:-1}
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
timeout_s=${TEST_TIMEOUT:-1800}
repeat=${TEST_REPEAT:-1}

# The serial tests as one GoogleTest filter (patterns joined by ':').
serial_filter=$(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$serial_list" | grep -v '^$' | paste -sd: -)
# TEST_FILTER's positive and negative patterns.
user_filter=${TEST_FILTER:-*}
user_pos=${user_filter%%-*}
user_neg=
[ "$user_pos" = "$user_filter" ] || user_neg=${user_filter#*-}
[ -n "$user_pos" ] || user_pos='*'

# The filter of phase 2 for binary $1: its serial tests that TEST_FILTER
# takes, by full name ("" if none). GoogleTest cannot intersect two filters,
# so the names are listed and matched here (its * and ? are the shell's).
serial_tests_of() {
  local bin=$1 suite="" line name pat keep names=()
  while IFS= read -r line; do
    if [[ $line != " "* ]]; then suite=${line%% *}; continue; fi
    name="$suite${line#  }"
    name=${name%%  #*}
    keep=0
    set -f  # The patterns are split on ':', not expanded as file names.
    for pat in ${user_pos//:/ }; do [[ $name == $pat ]] && keep=1; done
    for pat in ${user_neg//:/ }; do [[ $name == $pat ]] && keep=0; done
    set +f
    [ "$keep" -eq 0 ] || names+=("$name")
  done < <("$bin" --gtest_list_tests "--gtest_filter=$serial_filter" 2>/dev/null)
  (IFS=:; echo "${names[*]}")
}

logs=$(mktemp -d)
# Whatever did not finish (an interrupt, CI's own time limit) is printed.
on_exit() {
  for log in "$logs"/*.log; do
    [ -e "$log" ] || continue
    echo "=== unfinished: $(cat "$log.name" 2>/dev/null)"
    cat "$log"
  done
  rm -rf "$logs"
}
trap on_exit EXIT

passed=0 failed=0 skipped=0 broken=() hangs=()
declare -A failed_runs=()

# Adds one finished run's log to the totals. $1 log, $2 exit status, $3 name.
tally() {
  local log=$1 rc=$2 name=$3 p f s t
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\..*/\1/p' "$log" | tail -n1)
  f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) tests\{0,1\}, listed below:.*/\1/p' "$log" | tail -n1)
  s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\}, listed below:.*/\1/p' "$log" | tail -n1)
  passed=$((passed + ${p:-0}))
  failed=$((failed + ${f:-0}))
  skipped=$((skipped + ${s:-0}))
  if [ -z "$p" ] && [ -z "$f" ]; then
    broken+=("$name (exit $rc, no GoogleTest summary)")
    # A hang's report is long and lands mid-output, where a log cut to its
    # head and tail (CI's) loses it: its gist is printed again at the end.
    hangs+=("$(hang_gist "$log")")
  elif [ "$rc" -ne 0 ] && [ -z "$f" ]; then
    broken+=("$name (exit $rc)")
  fi
  # The failed tests' names, from GoogleTest's list at the end of the log.
  for t in $(sed -n 's/^\[  FAILED  \] \([A-Za-z0-9_/.]*\)\(, where .*\)\{0,1\}\( (.*)\)\{0,1\}$/\1/p' "$log" |
    grep -v '^[0-9]' | sort -u); do
    failed_runs[$t]=$((${failed_runs[$t]:-0} + 1))
  done
}

# The gist of the watchdog's report of a hung test in log $1
# (tests/testing/test_main.cc): the test, each thread of it and of its
# children with where it waits in the kernel, and the innermost frame of
# ringside's own code in each thread's backtrace (by thread id, as the
# thread lines name them). Nothing if none hung.
hang_gist() {
  awk '
    /^\[  HUNG    \]/ { print; next }
    /^  thread [0-9]+ / { print; next }
    /^Thread [0-9]+ / {
      want = 1; label = $2
      if (match($0, /LWP [0-9]+/)) label = substr($0, RSTART + 4, RLENGTH - 4)
      next
    }
    want && /^#[0-9]+ +(0x[0-9a-f]+ in )?ringside::/ {
      print "    thread " label ": " substr($0, 1, 220); want = 0
    }
  ' "$1" | head -n 80
}

# Runs one shard in the background: $1 log, $2 binary, $3 shard, $4 shards,
# $5 filter. Its exit status goes to $1.rc.
start_shard() {
  local log=$1 bin=$2 index=$3 total=$4 filter=$5
  (
    GTEST_TOTAL_SHARDS=$total GTEST_SHARD_INDEX=$index timeout -k 30 "$timeout_s" \
      "$bin" --gtest_color=no "--gtest_filter=$filter" >"$log" 2>&1
    rc=$?
    # 124 is also the watchdog's exit (a test hung), which says so itself.
    if [ "$rc" -eq 137 ] || { [ "$rc" -eq 124 ] && ! grep -q '^\[  HUNG    \]' "$log"; }; then
      echo "run_tests: killed after ${timeout_s} s" >>"$log"
    fi
    # Renamed into place whole: reap() takes the file's presence as the end.
    echo "$rc" >"$log.rc.tmp" && mv "$log.rc.tmp" "$log.rc"
  ) &
}

# Prints and tallies every finished shard; $1: wait for all (1) or one (0).
reap() {
  local all=$1 log name
  while :; do
    for log in "$logs"/*.log; do
      [ -e "$log.rc" ] || continue
      name=$(cat "$log.name")
      cat "$log"
      tally "$log" "$(cat "$log.rc")" "$name"
      rm -f "$log" "$log.rc" "$log.name"
      running=$((running - 1))
      [ "$all" -eq 1 ] || return 0
    done
    [ "$running" -gt 0 ] || return 0
    wait -n 2>/dev/null || sleep 0.2
  done
}

for ((run = 1; run <= repeat; run++)); do
  [ "$repeat" -eq 1 ] || echo "=== run $run of $repeat"
  # Phase 1: shards side by side.
  running=0 n=0
  for bin in "$@"; do
    for ((i = 0; i < jobs; i++)); do
      while [ "$running" -ge "$jobs" ]; do reap 0; done
      n=$((n + 1))
      log="$logs/$(printf '%04d' $n).log"
      echo "$(basename "$bin") shard $((i + 1))/$jobs" >"$log.name"
      start_shard "$log" "$bin" "$i" "$jobs" \
        "$user_pos-$serial_filter${user_neg:+:$user_neg}"
      running=$((running + 1))
    done
  done
  reap 1
  # Phase 2: the serial tests, alone.
  [ -z "${TEST_LOAD_PGID:-}" ] || kill -STOP -- "-$TEST_LOAD_PGID" 2>/dev/null
  for bin in "$@"; do
    filter=$(serial_tests_of "$bin")
    [ -n "$filter" ] || continue
    log="$logs/serial.log"
    echo "$(basename "$bin") (serial tests)" >"$log.name"
    running=1
    start_shard "$log" "$bin" 0 1 "$filter"
    wait
    reap 1
  done
  [ -z "${TEST_LOAD_PGID:-}" ] || kill -CONT -- "-$TEST_LOAD_PGID" 2>/dev/null
done

echo
for h in "${hangs[@]+"${hangs[@]}"}"; do [ -z "$h" ] || printf '%s\n' "$h"; done
for b in "${broken[@]+"${broken[@]}"}"; do echo "BROKEN: $b"; done
# The failed tests again, by name, next to the summary: a log cut to its head
# and tail (CI's) keeps them even when their output fell in the middle.
for t in "${!failed_runs[@]}"; do
  if [ "$repeat" -gt 1 ]; then
    echo "FLAKY: $t failed in ${failed_runs[$t]} of $repeat runs"
  else
    echo "FAILED: $t"
  fi
done | sort
echo "tests: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ ${#broken[@]} -eq 0 ]
