"""Held-out scoring: best set, eligibility, hits, expected hit."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.evaluate.metrics import eligible, expected_hit, hit_summary, mark_best, objective_expr, route_hits

FLOOR = 0.000001


def values() -> pl.DataFrame:
    # task  config  q     cost
    # A     x       0.8   0.4   -> 2.0 per dollar
    # A     y       0.5   0.1   -> 5.0 per dollar   (best per dollar; best by quality is x)
    # B     x       1.0   0.5   -> 2.0
    # B     y       0.4   0.2   -> 2.0              (tie: both best per dollar)
    # B     z       0.0   0.0   -> 0 / max(0, floor) = 0
    # C     x       0.0   0.1   (all values 0: not eligible)
    # C     y       0.0   0.1
    # D     x       0.9   0.3   (one config only: not eligible)
    rows = [
        ("A", "x", 0.8, 0.4),
        ("A", "y", 0.5, 0.1),
        ("B", "x", 1.0, 0.5),
        ("B", "y", 0.4, 0.2),
        ("B", "z", 0.0, 0.0),
        ("C", "x", 0.0, 0.1),
        ("C", "y", 0.0, 0.1),
        ("D", "x", 0.9, 0.3),
    ]
    return pl.DataFrame(rows, schema=["task", "config_key", "value", "cost"], orient="row").with_columns(
        region=pl.lit("r")
    )


def test_eligible_needs_two_configs_and_a_positive_value():
    assert sorted(eligible(values())["task"].unique().to_list()) == ["A", "B"]


def test_a_weightless_config_does_not_count_as_done():
    frame = pl.concat(
        [
            values(),
            pl.DataFrame(
                {
                    "task": ["E", "E"],
                    "config_key": ["x", "y"],
                    "value": [1.0, None],
                    "cost": [0.1, 0.1],
                    "region": ["r", "r"],
                }
            ),
        ]
    )
    assert "E" not in eligible(frame)["task"].to_list()


def test_best_set_per_dollar_with_ties_and_by_quality():
    best = mark_best(eligible(values()), objective="quality_per_dollar", floor=FLOOR)
    got = {(t, c): b for t, c, b in best.select("task", "config_key", "best").iter_rows()}
    assert got == {("A", "x"): False, ("A", "y"): True, ("B", "x"): True, ("B", "y"): True, ("B", "z"): False}
    by_q = mark_best(eligible(values()), objective="quality", floor=FLOOR)
    assert by_q.filter("best").select("task", "config_key").rows() == [("A", "x"), ("B", "x")]
    # utility with lambda 1: A: x 0.8-0.4=0.4, y 0.5-0.1=0.4 (tie); B: x 0.5, y 0.2, z 0
    by_u = mark_best(eligible(values()), objective="utility", floor=FLOOR, lam=1.0)
    assert by_u.filter("best").select("task", "config_key").rows() == [("A", "x"), ("A", "y"), ("B", "x")]


def test_objective_floor_and_errors():
    frame = pl.DataFrame({"q": [0.5], "c": [0.0]})
    assert frame.select(objective_expr("quality_per_dollar", quality="q", cost="c", floor=0.01, lam=None)).item() == 50
    with pytest.raises(ValueError, match="lambda"):
        objective_expr("utility", quality="q", cost="c", floor=0.01, lam=None)
    with pytest.raises(ValueError, match="unknown objective"):
        objective_expr("speed", quality="q", cost="c", floor=0.01, lam=None)


def test_hits_and_expected_hit_under_exploration():
    best = mark_best(eligible(values()), objective="quality_per_dollar", floor=FLOOR)
    chosen = pl.DataFrame({"task": ["A", "B"], "chosen": ["x", "z"]})
    per_task = route_hits(best, chosen)
    # A: x is not best (miss); others {y}: 1 of 1 best -> share 1.
    # B: z is not best (miss); others {x, y}: both best -> share 1.
    assert per_task.rows() == [("A", "x", False, 1.0), ("B", "z", False, 1.0)]
    chosen = pl.DataFrame({"task": ["A", "B"], "chosen": ["y", "x"]})
    per_task = route_hits(best, chosen)
    # A: y best (hit), others {x}: share 0.   B: x best (hit), others {y, z}: y best -> share 1/2.
    assert per_task.rows() == [("A", "y", True, 0.0), ("B", "x", True, 0.5)]
    # expected hit with eps 0.2: A (0.8*1 + 0.2*0) = 0.8, B (0.8*1 + 0.2*0.5) = 0.9; mean 0.85
    assert expected_hit(per_task, 0.2) == pytest.approx(0.85)
    assert expected_hit(per_task, 0.0) == 1.0
    assert expected_hit(per_task.head(0), 0.3) is None
    summary = hit_summary(per_task)
    assert summary["hit_rate"] == 1.0 and summary["hits"] == 2 and summary["n"] == 2
