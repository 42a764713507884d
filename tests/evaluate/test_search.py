"""The constants search: grids, pins, tie-break, and the integer-coded greedy routing.

docs/design.md, Grids and the search.
"""

from __future__ import annotations

import itertools

import polars as pl
import pytest

from pipeline.defaults import EXPLORATIONS, PRIOR_WEIGHTS, lambda_grid
from pipeline.evaluate.metrics import BestIndex, eligible, mark_best, route_hits
from pipeline.evaluate.search import Pins, Scored, _tie_key, candidate_sets, greedy_hits
from pipeline.fit.context import Part
from pipeline.fit.model import enum_coded, fit_values
from pipeline.fit.shipped import Shipped
from pipeline.routing.table import Constants

SHIPPED = Constants()  # prior weight 3, exploration 0.3, source shipped, no half-life


def test_lambda_grid_is_geometric_from_a_hundredth_to_a_hundred_times_the_scale():
    grid = lambda_grid(2.0)
    assert len(grid) == 13
    assert grid[0] == pytest.approx(0.02) and grid[6] == pytest.approx(2.0) and grid[-1] == pytest.approx(200.0)
    ratios = [b / a for a, b in itertools.pairwise(grid)]
    assert ratios == pytest.approx([10 ** (1 / 3)] * 12)


@pytest.mark.parametrize(
    "pins, objective, priors, count",
    [
        ({}, "quality_per_dollar", True, 2 * 9 * 4),
        ({}, "quality_per_dollar", False, 9 * 4),  # without shipped priors 'shipped' is 'measured'
        ({}, "utility", True, 2 * 9 * 4 * 13),
        ({"lambda": 5.0}, "utility", True, 2 * 9 * 4),
        ({"prior_weight": 3, "half_life_days": None}, "quality", True, 2),
        (
            {"prior_weight": 3, "half_life_days": None, "prior_source": "measured", "exploration": 0.1},
            "quality",
            True,
            1,
        ),
    ],
)
def test_candidate_sets(pins, objective, priors, count):
    sets = candidate_sets(SHIPPED, Pins(pins), objective=objective, lambda_scale=1.0, has_shipped_priors=priors)
    assert len(sets) == count == len(set(sets))
    for name, value in pins.items():
        field = "lambda_" if name == "lambda" else name
        assert {getattr(c, field) for c in sets} == {value}
    if "exploration" in pins:
        assert {c.exploration for c in sets} == {pins["exploration"]}


def test_tie_break_prefers_shipped_values_then_smaller_k():
    a = SHIPPED.model_copy(update={"prior_weight": 8.0})
    b = SHIPPED.model_copy(update={"prior_weight": 1.0})
    c = SHIPPED.model_copy(update={"prior_weight": 1.0, "half_life_days": 30.0})
    assert min([a, b, c, SHIPPED], key=lambda x: _tie_key(x, SHIPPED)) == SHIPPED
    assert min([a, b, c], key=lambda x: _tie_key(x, SHIPPED)) == b  # one change, smaller k
    assert sorted(PRIOR_WEIGHTS) == list(PRIOR_WEIGHTS) and EXPLORATIONS[0] == 0.0


def values(rows) -> pl.DataFrame:
    frame = pl.DataFrame(rows, schema=["task", "region", "config_key", "value", "cost_usd"], orient="row")
    return frame.with_columns(
        weight=pl.lit(1.0),
        wscore=pl.col("value"),
        n=pl.lit(1, pl.Int64),
        unknown_cost=pl.lit(0, pl.Int64),
        cost_t=pl.col("cost_usd"),
    )


def test_coded_routing_equals_the_models_choose_frame():
    """The hit rates of the search route each task by the model's ranking (the router's greedy rule) through integer
    codes; the model's choice per task is the same."""
    # learned: a is cheap and good in r1, b best in r2, c never seen (falls back to the global mean)
    learned = values(
        [
            ("L1", "r1", "a", 0.9, 0.1),
            ("L1", "r1", "b", 0.6, 0.3),
            ("L2", "r2", "b", 0.9, 0.3),
            ("L2", "r2", "a", 0.2, 0.1),
            ("L3", "r2", "b", 1.0, 0.3),
        ]
    )
    scored = values(
        [
            ("H1", "r1", "a", 1.0, 0.1),
            ("H1", "r1", "b", 1.0, 0.3),
            ("H2", "r2", "a", 0.0, 0.1),
            ("H2", "r2", "b", 1.0, 0.3),
            ("H2", "r2", "c", 1.0, 0.05),
            ("H3", "r1", "c", 0.5, 0.2),
            ("H3", "r1", "b", 0.5, 0.2),
            ("H4", "r3", "a", 1.0, 0.1),
            ("H4", "r3", "b", 0.0, 0.1),
        ]
    )
    learned, scored = enum_coded(pl.concat([learned, scored])).head(5), enum_coded(pl.concat([learned, scored]))[5:]
    best = mark_best(eligible(scored), objective="quality_per_dollar", floor=1e-6, cost="cost_t")
    part = Scored.of(Part.LEARNED, best, scored.select("task", "region").unique(), scored)
    for k in (0.0, 3.0, 34.0):
        for objective in ("quality_per_dollar", "quality"):
            model = fit_values(learned, Constants(prior_weight=k, prior_source="measured"), Shipped(), objective)
            slow = route_hits(best, model.choose_frame(best.select("task", "region", "config_key")))
            assert greedy_hits(model, part).equals(slow)
    assert BestIndex.of(best.head(0)).route(pl.DataFrame({"region": [], "config_key": []})).height == 0
