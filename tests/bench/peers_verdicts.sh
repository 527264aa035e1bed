# shellcheck shell=bash
# The verdicts of bench-peers (tests/bench/peers.sh, which sources this):
# from a goal's ratios, one per repetition, to met, NOT met or undecided.
# Functions only, no side effects: tests/tools/peers_verdicts_test.py runs
# them on made-up figures.

# "rep dividend divisor" lines on stdin to the ratio of each, one a line.
# A repetition where either figure is not above 0 gives none: an added time
# of 0 or less is the host's noise outweighing the tracer, and a ratio of it
# (below any goal when only the dividend is negative) would say nothing.
positive_ratios() {
  awk '$2 > 0 && $3 > 0 { printf "%.4f\n", $2 / $3 }'
}

# The median of the values on stdin (one a line) and a confidence interval
# for it from the order statistics (no assumption about the spread): the
# k-th smallest to the k-th largest, k the largest with P(Bin(n, 1/2) < k)
# <= 5%, so at least 90% (min-max for up to 5 values). Prints "median lo
# hi confidence n", or nothing for no values.
median_ci() {
  sort -g | awk 'NF { v[++n] = $1 } END {
    if (n == 0) exit
    m = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
    k = 1; below = 0; p = 1 / 2 ^ n; c = 1  # below: P(X < k); c: C(n, k - 1)
    below = p
    while (k + 1 <= (n + 1) / 2) {
      c = c * (n - k + 1) / k
      if (below + c * p > 0.05) break
      below += c * p; k++
    }
    if (below > 0.05) k = 1
    printf "%s %s %s %.0f %d\n", m, v[k], v[n + 1 - k], 100 * (1 - 2 * (k == 1 ? p : below)), n }'
}

# One goal: label $1, the per-repetition ratios on stdin against the goal
# $2 (at most), of $3 repetitions run: met when the median's confidence
# interval is within it, NOT met when it is all beyond, undecided when it
# straddles it, and undecided too when the interval is below 90%: too few
# repetitions gave a ratio (positive_ratios leaves out those with a figure
# not above 0, an added cost below the run's noise), and one or two values
# prove nothing.
goal_line() {
  local ci
  ci=$(median_ci)
  awk -v label="$1" -v g="$2" -v ci="$ci" -v reps="$3" 'BEGIN {
    if (ci == "") { printf "  %s: no figure\n", label; exit }
    split(ci, c, " ")
    verdict = (c[3] <= g) ? "met" : (c[2] > g) ? "NOT met" : "undecided: the interval straddles the goal"
    if (c[4] < 90) {
      verdict = sprintf("undecided: %d of %d repetitions gave a ratio (both figures above 0), too few for a 90%% interval", c[5], reps)
    }
    printf "  %s: %.2f (%.2f-%.2f, %d%% CI of %d), goal <= %s: %s\n",
      label, c[1], c[2], c[3], c[4], c[5], g, verdict }'
}

