"""Frontier: lambda grid, utility routing with the fitted table, hull and AIQ by hand."""

from __future__ import annotations

import itertools
import math

import polars as pl
import pytest

from pipeline.evaluate.frontier import aiq, frontier_lambdas, frontier_section, hull, route_by_table

TV = {"task": pl.String, "region": pl.String, "config_key": pl.String, "value": pl.Float64, "cost_usd": pl.Float64}
MEMBERS = {"region": pl.String, "config_key": pl.String, "quality": pl.Float64, "cost_usd": pl.Float64}


def tv(rows):
    return pl.DataFrame([dict(zip(TV, r, strict=True)) for r in rows], schema=TV)


def members(rows):
    return pl.DataFrame([dict(zip(MEMBERS, r, strict=True)) for r in rows], schema=MEMBERS)


def test_lambda_grid_is_13_geometric_values_around_cost_per_quality():
    grid = frontier_lambdas(tv([("t1", "g", "A", 1.0, 2.0), ("t2", "g", "B", 0.0, 4.0)]))  # base = 3 / 0.5 = 6
    assert len(grid) == 13
    assert grid[0] == pytest.approx(0.06) and grid[6] == pytest.approx(6.0) and grid[-1] == pytest.approx(600.0)
    assert all(b / a == pytest.approx(10 ** (1 / 3)) for a, b in itertools.pairwise(grid))
    assert frontier_lambdas(tv([("t1", "g", "A", 1.0, None)])) is None


def test_hull_drops_costlier_worse_points_and_points_under_the_chord():
    assert hull([(1, 0.5), (2, 0.6), (3, 0.9), (4, 0.8)]) == [(1, 0.5), (3, 0.9)]


def test_aiq_hand_worked():
    # singles hull (1,.5)-(3,.9) then flat: area 1.4 + 0.9 = 2.3 over the range 3
    assert aiq([(1, 0.5), (2, 0.6), (3, 0.9), (4, 0.8)], 1, 4) == pytest.approx(2.3 / 3)
    # one router point at cost 2: nothing below its cost, 0.8 from 2 to 4
    assert aiq([(2, 0.8)], 1, 4) == pytest.approx(1.6 / 3)
    assert aiq([], 1, 4) is None


def test_route_by_table_utility_choice_ties_and_fallback():
    table = members(
        [("g", "A", 0.9, 10.0), ("g", "B", 0.6, 1.0), ("*", "A", 0.9, 10.0), ("*", "B", 0.6, 1.0), ("*", "C", 0.6, 1.0)]
    )
    tasks = tv(
        [
            ("t1", "g", "A", 1.0, 10.0),
            ("t1", "g", "B", 0.0, 1.0),
            ("t2", "h", "B", 1.0, 1.0),
            ("t2", "h", "C", 1.0, 1.0),
        ]
    )  # region h: only '*' rows
    assert route_by_table(table, tasks, 1.0).rows() == [("t1", "B"), ("t2", "B")]  # 0.9-10 < 0.6-1; tie: key
    assert route_by_table(table, tasks, 100.0).rows() == [("t1", "A"), ("t2", "B")]  # 90-10 > 60-1


def test_frontier_section_points_oracle_and_aiq():
    held = tv(
        [
            ("t1", "g", "A", 1.0, 10.0),
            ("t1", "g", "B", 0.0, 1.0),
            ("t2", "g", "A", 1.0, 10.0),
            ("t2", "g", "B", 1.0, 1.0),
        ]
    )
    table = members([("*", "A", 0.9, 10.0), ("*", "B", 0.6, 1.0)])
    out = frontier_section(held, [1.0, 100.0], members=table)
    assert out["singles"] == [
        {"config": "A", "quality": 1.0, "cost_usd": 10.0, "tasks": 2, "coverage": 1.0},
        {"config": "B", "quality": 0.5, "cost_usd": 1.0, "tasks": 2, "coverage": 1.0},
    ]
    # the best per dollar: A on t1 (0.1 against 0), B on t2 (1.0 against 0.1)
    assert out["oracle"] == {"quality": 1.0, "cost_usd": 5.5, "tasks": 2}
    assert [(p["quality"], p["cost_usd"]) for p in out["router"]] == [(0.5, 1.0), (1.0, 10.0)]
    assert out["aiq"]["singles"] == pytest.approx(0.75) and out["aiq"]["router"] == pytest.approx(0.75)
    assert out["aiq"]["cost_range_usd"] == [1.0, 10.0]
    assert out["note"] is None
    partial = frontier_section(
        held.filter(~((pl.col("task") == "t2") & (pl.col("config_key") == "A"))), [1.0], members=table
    )
    assert "1 of 2 configurations did only some" in partial["note"]
    assert [s["coverage"] for s in partial["singles"]] == [0.5, 1.0]


def test_singles_carry_their_snips_estimate_where_decisions_log_propensities():
    # Three tasks. Logged: A chosen on t1 with propensity 0.5 and on t2 with 0.25; B on t3 with 0.75.
    # SNIPS of A: (1.0 / 0.5 + 0.0 / 0.25) / (1 / 0.5 + 1 / 0.25) = 2 / 6 = 0.333..., costs (10/.5 + 10/.25) / 6 = 10.
    held = tv(
        [(t, "g", "A", q, 10.0) for t, q in (("t1", 1.0), ("t2", 0.0), ("t3", 1.0))]
        + [(t, "g", "B", 1.0, 1.0) for t in ("t1", "t2", "t3")]
    )
    decisions = pl.DataFrame({"task": ["t1", "t2", "t3"], "chosen": ["A", "A", "B"], "propensity": [0.5, 0.25, 0.75]})
    out = frontier_section(
        held, [1.0], members=members([("*", "A", 0.9, 10.0), ("*", "B", 0.6, 1.0)]), decisions=decisions
    )
    a, b = out["singles"]
    assert (a["snips_quality"], a["snips_cost_usd"], a["logged"], a["decisions"]) == (pytest.approx(1 / 3), 10.0, 2, 3)
    assert (a["quality"], b["snips_quality"], b["logged"]) == (pytest.approx(2 / 3), 1.0, 1)


def test_frontier_choose_callable_and_unknown_costs():
    held = tv([("t1", "g", "A", 1.0, None), ("t1", "g", "B", 0.0, 2.0)])
    out = frontier_section(
        held, [1.0], choose=lambda lam: pl.DataFrame({"task": ["t1"], "config_key": ["A"]}), cost_estimates={"A": 4.0}
    )
    assert out["router"] == [{"lambda": 1.0, "quality": 1.0, "cost_usd": 4.0, "tasks": 1}]
    none = frontier_section(held.with_columns(cost_usd=pl.lit(None, pl.Float64)), None)
    assert none["aiq"] == {"router": None, "singles": None} and none["reason"]
    assert all(s["cost_usd"] is None for s in none["singles"])
    assert not any(isinstance(v, float) and math.isnan(v) for s in none["singles"] for v in s.values())
