"""The exploration verdict's interval, worked out by hand on a replay whose every path is known.

Two configs in one region. The start believes x perfect and y worthless under a prior weight of a million, so
no outcome moves the greedy choice off x: with epsilon 0 every task goes to x, with epsilon 1 every task goes
to the other member, y, whatever the seed.

Eight held-out tasks alternate two kinds (costs per task):

    kind A (T1, T3, T5, T7):  x quality 1 cost 1,  y quality 0 cost 1
    kind B (T2, T4, T6, T8):  x quality 0 cost 1,  y quality 1 cost 3

Shipped epsilon 0 (x everywhere): total quality 4, total cost 8 -> 4 / 8 = 0.5.
Fitted epsilon 1 (y everywhere): total quality 4, total cost 4 * 1 + 4 * 3 = 16 -> 4 / 16 = 0.25.
Difference fitted minus shipped: 0.25 - 0.5 = -0.25, on every seed.

Moving-block bootstrap: n = 8, block length round(8 ** (1/3)) = 2, ceil(8 / 2) = 4 blocks a resample. Any two
consecutive tasks are one of kind A and one of kind B, so every resample holds 4 of each: the same totals, the
same -0.25. The interval is exactly [-0.25, -0.25]: it excludes 0, and the fitted exploration is kept.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import polars as pl
import pytest

from pipeline.evaluate.exploration import block_length, block_orders, compare_explorations
from pipeline.evaluate.replay import start_from
from pipeline.evaluate.verdict import recommend
from pipeline.fit.model import fit_values
from pipeline.fit.shipped import Shipped
from pipeline.routing.table import Constants

T0 = datetime(2026, 1, 1)


def _values(rows: list[tuple[str, str, float, float]]) -> pl.DataFrame:
    frame = pl.DataFrame(rows, schema=["task", "config_key", "value", "cost_usd"], orient="row")
    return frame.with_columns(
        region=pl.lit("r"),
        weight=pl.lit(1.0),
        wscore=pl.col("value"),
        n=pl.lit(1, pl.Int64),
        unknown_cost=pl.lit(0, pl.Int64),
        cost_t=pl.col("cost_usd"),
    )


FIT = _values([("L1", "x", 1.0, 1.0), ("L2", "y", 0.0, 1.0)])
HELD = _values(
    [
        row
        for i in range(1, 9)
        for row in (
            [(f"T{i}", "x", 1.0, 1.0), (f"T{i}", "y", 0.0, 1.0)]
            if i % 2
            else [(f"T{i}", "x", 0.0, 1.0), (f"T{i}", "y", 1.0, 3.0)]
        )
    ]
)
TASKS = pl.DataFrame(
    {
        "task": [f"T{i}" for i in range(1, 9)],
        "region": ["r"] * 8,
        "first_at": [T0 + timedelta(days=i) for i in range(8)],
    }
)


def test_the_hand_worked_interval():
    model = fit_values(FIT, Constants(prior_source="measured", prior_weight=1e6), Shipped(), "quality_per_dollar")
    start = start_from(model, ["r"])
    found = compare_explorations(start, TASKS, HELD, shipped=0.0, fitted=1.0, seed=3, seeds=4, resamples=50)
    assert found["shipped"]["realized_value"] == pytest.approx(0.5)
    assert found["fitted"]["realized_value"] == pytest.approx(0.25)
    assert found["difference"]["value"] == pytest.approx(-0.25)
    assert found["difference"]["ci95"] == pytest.approx((-0.25, -0.25))
    assert found["method"] == {
        "seeds": 4,
        "bootstrap_seeds": 4,
        "resamples": 50,
        "block_length": 2,
        "tasks": 8,
        "dropped_resamples": 0,
    }
    verdict, reason = recommend(-0.25, (-0.25, -0.25), 8, {"shipped": 1.0, "fitted": 0.9}, same=False)
    assert verdict == "insufficient-evidence" and "at least 10" in reason  # 8 tasks: too few to decide
    verdict, _ = recommend(-0.25, (-0.25, -0.25), 10, {"shipped": 1.0, "fitted": 0.9}, same=False)
    assert verdict == "keep"


def test_blocks_are_consecutive_tasks_cut_to_n():
    assert [block_length(n) for n in (1, 7, 8, 27, 300, 1000)] == [1, 2, 2, 3, 7, 10]
    orders = block_orders(10, resamples=100, seed=0)  # L = 2, 5 blocks
    assert orders.shape == (100, 10) and orders.min() >= 0 and orders.max() <= 9
    pairs = orders.reshape(100, 5, 2)
    assert np.all(pairs[:, :, 1] == pairs[:, :, 0] + 1)  # each block is two consecutive tasks
    assert np.array_equal(orders, block_orders(10, resamples=100, seed=0))  # seeded


def test_recentred_interval():
    from pipeline.evaluate.exploration import recentred_interval

    stats = np.arange(1, 100) / 100  # 0.01 .. 0.99, B = 99, median 0.5
    # quantiles 0.025 and 0.975 of 0.01..0.99 (linear): 0.01 + 0.025 * 0.98 = 0.0345 and 0.01 + 0.975 * 0.98 = 0.9655
    # estimate 0.5 = the median: the plain percentile interval
    assert recentred_interval(stats, 0.5) == pytest.approx((0.0345, 0.9655))
    # estimate 0.9: the same spread around it, 0.9 + (0.0345 - 0.5) = 0.4345 and 0.9 + (0.9655 - 0.5) = 1.3655
    assert recentred_interval(stats, 0.9) == pytest.approx((0.4345, 1.3655))
    # every resample below the estimate (the case a bias-corrected interval collapsed on): still around it,
    # 3.0 + (0.0345 - 0.5) = 2.5345 and 3.0 + (0.9655 - 0.5) = 3.4655
    assert recentred_interval(stats, 3.0) == pytest.approx((2.5345, 3.4655))


def test_a_thompson_arm_is_replayed_by_its_own_draws():
    """The same start as above, its posteriors all but certain (k = 1e6: x at 1, y at 0): a Thompson draw then
    picks x, the greedy choice, so Thompson 1.0 realizes the greedy 0.5 where epsilon 1.0 (always the other
    member) realized 0.25; the difference is exactly 0 against greedy, on every resample."""
    model = fit_values(FIT, Constants(prior_source="measured", prior_weight=1e6), Shipped(), "quality_per_dollar")
    start = start_from(model, ["r"])
    arms = {"shipped": ("epsilon", 0.0), "fitted": ("thompson", 1.0)}
    found = compare_explorations(start, TASKS, HELD, **arms, seed=3, seeds=4, resamples=50)
    assert found["fitted"]["realized_value"] == pytest.approx(0.5) and found["fitted"]["explored"] == 0
    assert found["fitted"]["exploration_mode"] == "thompson"
    assert found["difference"] == {"value": 0.0, "ci95": (0.0, 0.0)}
