#!/usr/bin/env python3
"""bench-peers' verdicts (tests/bench/peers_verdicts.sh) on made-up figures.

A goal is met or NOT met only on an interval of 90% or more that lies wholly
on one side of it; a repetition where either figure is not above 0 gives no
ratio. Each test runs the functions in bash, as tests/bench/peers.sh sources
them. Run by `make check-tools` (so by `make test`); standard library only.
"""

import os
import subprocess
import sys
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LIB = os.path.join(REPO, "tests", "bench", "peers_verdicts.sh")
sys.dont_write_bytecode = True  # The source tree is never written to (Makefile).


def shell(command, stdin):
    """The stdout of `command` in bash with the verdicts sourced, `stdin` on its input."""
    done = subprocess.run(
        ["bash", "-c", f'set -euo pipefail; . "$0"; {command}', LIB],
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def values(*vs):
    return "".join(f"{v}\n" for v in vs)


class PositiveRatiosTest(unittest.TestCase):
    def test_a_repetition_with_a_figure_not_above_zero_gives_no_ratio(self):
        lines = "1 200 400\n2 -50 400\n3 200 -10\n4 0 400\n5 300 0\n6 90 100\n"
        self.assertEqual(shell("positive_ratios", lines), "0.5000\n0.9000\n")


class MedianCiTest(unittest.TestCase):
    def median_ci(self, *vs):
        out = shell("median_ci", values(*vs)).split()
        return [float(out[0]), float(out[1]), float(out[2]), int(out[3]), int(out[4])]

    def test_five_values_give_their_range_at_94_percent(self):
        self.assertEqual(self.median_ci(0.4, 0.2, 0.5, 0.3, 0.1), [0.3, 0.1, 0.5, 94, 5])

    def test_four_values_are_below_90_percent(self):
        self.assertEqual(self.median_ci(1, 2, 3, 4), [2.5, 1, 4, 88, 4])

    def test_more_values_leave_the_extremes_out(self):
        # 12 values: P(Bin(12, 1/2) < 3) = 1.9%, so the 3rd smallest to the
        # 3rd largest, at 96%.
        self.assertEqual(self.median_ci(*range(1, 13)), [6.5, 3, 10, 96, 12])

    def test_no_value_gives_nothing(self):
        self.assertEqual(shell("median_ci", ""), "")


class GoalLineTest(unittest.TestCase):
    def verdict(self, goal, reps, *vs):
        return shell(f'goal_line "g" {goal} {reps}', values(*vs)).strip()

    def test_met_when_the_whole_interval_is_within_the_goal(self):
        self.assertEqual(
            self.verdict(0.5, 5, 0.40, 0.37, 0.42, 0.38, 0.41),
            "g: 0.40 (0.37-0.42, 94% CI of 5), goal <= 0.5: met",
        )

    def test_not_met_when_the_whole_interval_is_beyond_it(self):
        self.assertTrue(self.verdict(1, 5, 1.66, 1.57, 2.13, 1.7, 1.6).endswith(": NOT met"))

    def test_undecided_when_the_interval_straddles_the_goal(self):
        self.assertTrue(
            self.verdict(0.5, 5, 0.43, 0.43, 0.54, 0.45, 0.44).endswith(
                "undecided: the interval straddles the goal"
            )
        )

    def test_undecided_on_too_few_ratios_however_far_from_the_goal(self):
        line = self.verdict(0.5, 5, 0.25)
        self.assertTrue(
            line.endswith(
                "undecided: 1 of 5 repetitions gave a ratio (both figures above 0), "
                "too few for a 90% interval"
            ),
            line,
        )
        self.assertIn("undecided: 4 of 5", self.verdict(2, 5, 5.9, 4.4, 6.2, 6.0))

    def test_no_ratio_gives_no_figure(self):
        self.assertEqual(self.verdict(0.5, 5), "g: no figure")


if __name__ == "__main__":
    unittest.main()
