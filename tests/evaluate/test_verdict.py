"""The verdicts as decision tables: one row per situation and the verdict it gets."""

from __future__ import annotations

import pytest

from pipeline.evaluate.verdict import MIN_ELIGIBLE, calibration_verdict, contains_zero, more_tasks, recommend

BOTH = {"shipped": 0.50, "fitted": 0.60}


@pytest.mark.parametrize(
    ("diff", "ci", "n", "val", "same", "verdict", "says"),
    [
        (0.10, (0.02, 0.18), MIN_ELIGIBLE - 1, BOTH, False, "insufficient-evidence", "at least 10 are needed"),
        (None, None, 50, BOTH, False, "insufficient-evidence", "only 50 eligible"),
        (0.00, (0.00, 0.00), 50, BOTH, True, "insufficient-evidence", "the fitted constants are the shipped ones"),
        (0.10, (-0.02, 0.18), 50, BOTH, False, "insufficient-evidence", "the interval contains 0"),
        (0.10, (-0.02, 0.18), 50, BOTH, False, "insufficient-evidence", "more such task(s)"),
        (0.0, (-0.02, 0.02), 50, BOTH, False, "insufficient-evidence", "the difference is exactly 0"),
        (0.10, (0.02, 0.18), 50, BOTH, False, "adopt", "fitted beats shipped on validation (0.6000 vs 0.5000)"),
        (0.10, (0.02, 0.18), 50, {"shipped": 0.6, "fitted": 0.5}, False, "keep", "does not beat shipped on validation"),
        (-0.10, (-0.18, -0.02), 50, BOTH, False, "keep", "does not beat shipped on held-out"),
        (0.10, (0.02, 0.18), 50, {"shipped": None, "fitted": 0.5}, False, "keep", "validation undefined"),
    ],
)
def test_recommend(diff, ci, n, val, same, verdict, says):
    got, reason = recommend(diff, ci, n, val, same=same)
    assert got == verdict and says in reason


@pytest.mark.parametrize(
    ("mse_r", "mse_p", "ci", "tasks", "verdict", "says"),
    [
        (0.10, 0.20, (-0.15, -0.05), 9, "insufficient-evidence", "fewer than 10 held-out tasks"),
        (0.10, 0.20, (-0.15, 0.01), 50, "insufficient-evidence", "contains 0"),
        (0.10, 0.20, None, 50, "insufficient-evidence", "undefined"),
        (0.10, 0.20, (-0.15, -0.05), 50, "adopt", "below 0: regions carry a signal"),
        (0.30, 0.20, (0.05, 0.15), 50, "keep", "above 0: regions predict worse"),
    ],
)
def test_calibration_verdict(mse_r, mse_p, ci, tasks, verdict, says):
    got, reason = calibration_verdict(mse_r, mse_p, ci, tasks, n=3 * tasks)
    assert got == verdict and says in reason


def test_contains_zero():
    assert contains_zero(None) and contains_zero((-1.0, 1.0)) and contains_zero((0.0, 0.5))
    assert not contains_zero((0.1, 0.5)) and not contains_zero((-0.5, -0.1))


def test_more_tasks_scales_the_half_width_toward_zero():
    # diff -0.05, interval [-0.15, 0.05]: the half toward 0 is 0.05 - (-0.05) = 0.10; n' = 40 * (0.10/0.05)^2 = 160
    assert more_tasks(-0.05, (-0.15, 0.05), 40).startswith("about 120 more such task(s) (160 in all)")
    # diff 0.2, interval [-0.1, 0.4]: half toward 0 = 0.3; n' = 25 * 1.5^2 = 56.25 -> 57, i.e. 32 more
    assert more_tasks(0.2, (-0.1, 0.4), 25).startswith("about 32 more such task(s) (57 in all)")
    assert "exactly 0" in more_tasks(0.0, (0.0, 0.0), 25)
