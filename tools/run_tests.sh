#!/usr/bin/env bash
# Runs GoogleTest binaries one after another and prints one closing summary line,
# "N passed, N failed, N skipped". Exits non-zero if any test failed or any
# binary ended without a GoogleTest summary (a crash or an abort).
set -u

passed=0 failed=0 skipped=0 broken=()
for bin in "$@"; do
  log=$(mktemp)
  "$bin" --gtest_color=no 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\..*/\1/p' "$log" | tail -n1)
  f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) tests\{0,1\}, listed below:.*/\1/p' "$log" | tail -n1)
  s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\}, listed below:.*/\1/p' "$log" | tail -n1)
  rm -f "$log"
  passed=$((passed + ${p:-0}))
  failed=$((failed + ${f:-0}))
  skipped=$((skipped + ${s:-0}))
  if [ -z "$p" ] && [ -z "$f" ]; then
    broken+=("$bin (exit $rc, no GoogleTest summary)")
  elif [ "$rc" -ne 0 ] && [ -z "$f" ]; then
    broken+=("$bin (exit $rc)")
  fi
done

echo
for b in "${broken[@]+"${broken[@]}"}"; do echo "BROKEN: $b"; done
echo "tests: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ ${#broken[@]} -eq 0 ]
