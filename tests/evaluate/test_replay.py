"""Sequential replay (docs/design.md, Sequential replay), worked out by hand on three tasks."""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl
import pytest

from pipeline.evaluate.replay import posterior, replay, start_from
from pipeline.fit.model import fit_values
from pipeline.fit.shipped import Shipped
from pipeline.routing.table import Constants

T0 = datetime(2026, 1, 1)


def values(rows) -> pl.DataFrame:
    """(task, region, config, value, weight, cost) -> task-value rows as FitContext.values makes."""
    frame = pl.DataFrame(rows, schema=["task", "region", "config_key", "value", "weight", "cost_usd"], orient="row")
    return frame.with_columns(
        wscore=pl.col("value") * pl.col("weight"),
        n=pl.lit(1, pl.Int64),
        unknown_cost=pl.when(pl.col("cost_usd").is_null()).then(1).otherwise(0).cast(pl.Int64),
        cost_t=pl.col("cost_usd"),
    )


# Fit part: x did L1 with value 1.0, y did L2 with value 0.5, weight 1 each, cost 0.1 each.
# k = 1, measured priors: p(x) = 1.0, p(y) = 0.5 -> q(x, r) = (1*1 + 1)/(1 + 1) = 1.0, q(y, r) = 0.5.
FIT = values([("L1", "r", "x", 1.0, 1.0, 0.1), ("L2", "r", "y", 0.5, 1.0, 0.1)])
# Replayed: T1 (x 0, y 1), T2 (x 1, y 0), T3 (only y did it: 1).
OUT = values(
    [
        ("T1", "r", "x", 0.0, 1.0, 0.1),
        ("T1", "r", "y", 1.0, 1.0, 0.2),
        ("T2", "r", "x", 1.0, 1.0, 0.1),
        ("T2", "r", "y", 0.0, 1.0, 0.2),
        ("T3", "r", "y", 1.0, 1.0, 0.2),
    ]
)
TASKS = pl.DataFrame(
    {"task": ["T1", "T2", "T3"], "region": ["r"] * 3, "first_at": [T0 + timedelta(days=d) for d in (1, 2, 3)]}
)


def start(objective="quality"):
    model = fit_values(FIT, Constants(prior_weight=1.0, prior_source="measured"), Shipped(), objective)
    return start_from(model, ["r"])


def test_posterior_formula():
    assert posterior(2.0, 0.5, 3.0, 4.0) == pytest.approx((2 * 0.5 + 3) / 6)
    assert posterior(0.0, 0.7, 0.0, 0.0) == 0.7


def test_greedy_replay_reveals_only_the_chosen_outcome():
    # T1: q(x) 1.0 > q(y) 0.5 -> x, reveals 0.0: S_x = 1, W_x = 2 -> q(x) = (1 + 1)/(1 + 2) = 0.667
    # T2: 0.667 > 0.5 -> x, reveals 1.0: S_x = 2, W_x = 3 -> q(x) = 3/4 = 0.75
    # T3: x is chosen but did not do T3 -> skipped.  Mean quality over routed = (0 + 1)/2 = 0.5
    result = replay(start(), TASKS, OUT, exploration=0.0, seed=0)
    assert (result.tasks_routed, result.tasks_skipped, result.explored) == (2, 1, 0)
    assert result.realized_value == pytest.approx(0.5)


def test_full_exploration_takes_the_other_member_and_learns_from_it():
    # eps = 1: every task goes to the member other than the greedy one (the pool has two).
    # T1: greedy x -> y, reveals 1.0.  T2: greedy x (1.0 > q(y) = (0.5 + 1.5)/3) -> y, reveals 0.0.
    # T3: greedy x -> y, reveals 1.0.  3 routed, mean quality 2/3.
    result = replay(start(), TASKS, OUT, exploration=1.0, seed=7)
    assert (result.tasks_routed, result.tasks_skipped, result.explored) == (3, 0, 3)
    assert result.realized_value == pytest.approx(2 / 3)


def test_quality_per_dollar_is_total_quality_over_total_cost():
    # Costs: x 0.1 and y 0.1 in the fit: q/cost x 10 > y 5 -> same path as the greedy replay above.
    # Routed T1 (x: q 0, cost 0.1) and T2 (x: q 1, cost 0.1): 1.0 / 0.2 = 5.0
    result = replay(start("quality_per_dollar"), TASKS, OUT, exploration=0.0, seed=0)
    assert result.realized_value == pytest.approx(5.0)


def test_seeded_and_time_ordered():
    shuffled = TASKS.reverse()
    a = replay(start(), TASKS, OUT, exploration=0.5, seed=3)
    assert a == replay(start(), shuffled, OUT, exploration=0.5, seed=3)


def test_nothing_to_route():
    result = replay(start(), TASKS.head(0), OUT, exploration=0.0, seed=0)
    assert result.realized_value is None and result.tasks_routed == 0
