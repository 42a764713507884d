"""Calibration against the plain mean (docs/design.md, Calibration), worked out by hand."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.evaluate.calibration import calibrate
from pipeline.fit.model import fit_values
from pipeline.fit.shipped import Shipped
from pipeline.routing.table import Constants


def values(rows) -> pl.DataFrame:
    frame = pl.DataFrame(rows, schema=["task", "region", "config_key", "value", "weight"], orient="row")
    return frame.with_columns(
        wscore=pl.col("value") * pl.col("weight"),
        n=pl.lit(2, pl.Int64),
        cost_usd=pl.lit(None, pl.Float64),
        unknown_cost=pl.lit(1, pl.Int64),
    )


def held_out(n_tasks: int) -> pl.DataFrame:
    # half the tasks in region a scoring 1, half in b scoring 0, one rating each (the real ratings by (task, config,
    # score) as the aggregation counts them: a PRM fill-in is never one)
    rows = [(i, "a" if i % 2 == 0 else "b", "x", 1.0 if i % 2 == 0 else 0.0, 1) for i in range(n_tasks)]
    return pl.DataFrame(rows, schema=["task", "region", "config_key", "score", "k"], orient="row")


def model(a: float, b: float):
    # learned: x scores a in region a and b in region b (weight 2 each); k = 0 so q(x, r) is the region mean,
    # and the plain mean is (2a + 2b)/4.
    fit = values([("L1", "a", "x", a, 2.0), ("L2", "b", "x", b, 2.0)])
    return fit_values(fit, Constants(prior_weight=0.0, prior_source="measured"), Shipped(), "quality")


def test_regions_that_carry_a_signal_are_adopted():
    # q(x, a) = 1, q(x, b) = 0: every prediction exact -> MSE 0, MAE 0.
    # plain mean 0.5: every squared error 0.25, absolute error 0.5.
    # Every bootstrap resample gives 0 - 0.25 -> interval (-0.25, -0.25), below 0.
    result = calibrate(held_out(12), model(1.0, 0.0), seed=0)
    assert (result.regions_mse, result.plain_mean_mse) == (0.0, 0.25)
    assert (result.regions_mae, result.plain_mean_mae) == (0.0, 0.5)
    assert result.difference_ci95 == pytest.approx((-0.25, -0.25))
    assert (result.n, result.tasks) == (12, 12)
    assert result.recommendation == "adopt"
    assert "regions MSE 0.0000 vs plain mean MSE 0.2500 on 12 held-out ratings of 12 tasks" in result.reason


def test_regions_without_signal_are_not_adopted():
    # both regions learned 0.5: regions and plain predict the same -> difference exactly 0 in every resample
    result = calibrate(held_out(12), model(0.5, 0.5), seed=0)
    assert result.regions_mse == result.plain_mean_mse == 0.25
    assert result.recommendation == "insufficient-evidence"
    assert "contains 0" in result.reason


def test_regions_that_point_the_wrong_way_are_kept_out():
    # q(x, a) = 0, q(x, b) = 1: every squared error 1 against the plain mean's 0.25
    result = calibrate(held_out(12), model(0.0, 1.0), seed=0)
    assert result.recommendation == "keep" and result.regions_mse == 1.0


def test_fewer_than_ten_tasks_give_no_verdict():
    result = calibrate(held_out(8), model(1.0, 0.0), seed=0)
    assert result.recommendation == "insufficient-evidence" and "fewer than 10" in result.reason


def test_nothing_to_predict():
    result = calibrate(held_out(0), model(1.0, 0.0), seed=0)
    assert result.regions_mse is None and result.recommendation == "insufficient-evidence"
