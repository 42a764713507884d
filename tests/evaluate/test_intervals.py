"""The intervals: Wilson for one rate, the one paired bootstrap for every difference."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipeline.evaluate.intervals import paired_bootstrap, wilson
from pipeline.evaluate.verdict import contains_zero


def test_wilson_worked_out():
    # 7 of 10, z = 1.95996: z^2 = 3.84146; denominator 1 + z^2/10 = 1.384146
    # centre (0.7 + 3.84146/20) / 1.384146 = 0.892073 / 1.384146 = 0.644493
    # half 1.95996 * sqrt(0.21/10 + 3.84146/400) / 1.384146 = 1.95996 * 0.174939 / 1.384146 = 0.247715
    # -> (0.396778, 0.892208)
    low, high = wilson(7, 10)
    assert low == pytest.approx(0.396778, abs=1e-5) and high == pytest.approx(0.892208, abs=1e-5)
    assert wilson(0, 0) is None
    low, high = wilson(0, 5)
    assert low == 0.0 and 0 < high < 1
    assert wilson(5, 5)[1] == pytest.approx(1.0)


def test_paired_bootstrap_is_seeded_and_brackets_the_difference():
    rng = np.random.default_rng(1)
    a = rng.random(200) + 0.1
    per_task = pl.DataFrame({"a": a, "b": a - 0.1 + rng.normal(0, 0.01, 200)})
    ci = paired_bootstrap(per_task, "a", "b", seed=0)
    assert ci == paired_bootstrap(per_task, "a", "b", seed=0)
    assert ci != paired_bootstrap(per_task, "a", "b", seed=1)
    assert ci[0] < 0.1 < ci[1] and not contains_zero(ci)
    # identical methods: every resample differs by 0
    assert paired_bootstrap(per_task, "a", "a", seed=0) == (0.0, 0.0) and contains_zero((0.0, 0.0))
    assert paired_bootstrap(per_task.head(0), "a", "b", seed=0) is None


def test_paired_bootstrap_of_a_ratio_of_sums():
    # per-task totals over per-task counts: (2 + 2) / (4 + 4) - 0 in every resample
    per_task = pl.DataFrame({"se_r": [2.0, 2.0], "se_p": [0.0, 0.0], "k": [4, 4]})
    assert paired_bootstrap(per_task, "se_r", "se_p", weight="k", seed=0) == (0.5, 0.5)


def test_paired_bootstrap_keeps_the_draws_of_every_published_interval():
    """Per-task hits of two methods on ten tasks; (0.1, 0.7) was measured with the helper this function replaced
    (same seed, same draws), so the intervals in stats.json did not move."""
    hits = pl.DataFrame({"fitted": [1.0, 0, 1, 1, 0, 1, 1, 1, 0, 1], "shipped": [0.0, 0, 1, 0, 0, 1, 0, 1, 0, 0]})
    assert paired_bootstrap(hits, "fitted", "shipped", seed=0) == (0.1, 0.7)
