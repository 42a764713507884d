"""evaluate_policies on a hand-made held-out frame: every number worked out in the comments."""

from __future__ import annotations

import polars as pl
import pytest
from fixtures_routing import A, B, C, build_table, member

from pipeline.evaluate.policies import evaluate_policies
from pipeline.routing import Router

# Table: A frontier (q .9, cost 1.0), C cheap (q .6, cost .1, value 6 -> greedy by quality per dollar), ladder C -> A.
TABLE = build_table(
    {
        "r": [member(A, 0.9, 1.0), member(C, 0.6, 0.1)],
        "*": [member(A, 0.9, 1.0), member(C, 0.6, 0.1), member(B, 0.5, 0.5)],
    },
    static={"cheap_config": C, "frontier_config": A, "default_config": A},
    ladders={"*": [C, A]},
)


def frame(rows):
    return pl.DataFrame(
        rows,
        schema={
            "task": pl.String,
            "region": pl.String,
            "config_key": pl.String,
            "value": pl.Float64,
            "cost_usd": pl.Float64,
            "unknown_cost": pl.Int64,
            "gate": pl.Float64,
        },
        orient="row",
    )


# t1: C fails (gate 0) with value 0.0, A 1.0 -> best per dollar A (10/2 = 5 > 0); the ladder escalates to A.
# t2: C passes (1.0, cost .1 -> 10), A 1.0 at cost 1 -> 1; best C.
# t3: only one config: not eligible. t4: C unknown cost -> estimated .1 from the table; C 0.8 (8) beats A 0.9 (0.9).
HELD_OUT = frame(
    [
        ("t1", "r", C, 0.0, 0.1, 0, 0.0),
        ("t1", "r", A, 1.0, 2.0, 0, 1.0),
        ("t2", "r", C, 1.0, 0.1, 0, 1.0),
        ("t2", "r", A, 1.0, 1.0, 0, 1.0),
        ("t3", "r", A, 1.0, 1.0, 0, 1.0),
        ("t4", "r", C, 0.8, None, 1, None),
        ("t4", "r", A, 0.9, 1.0, 0, None),
    ]
)


def test_policies_on_held_out_tasks():
    out = evaluate_policies(
        TABLE, HELD_OUT, policies=["quality_per_dollar", "frontier_only", "ladder", "learning_governed"]
    )
    # quality_per_dollar picks C everywhere: hits t2, t4 (2 of 3); quality (0 + 1 + .8)/3 = .6; cost (.1+.1+.1)/3
    assert out["quality_per_dollar"] == {
        "hit_rate": pytest.approx(2 / 3),
        "hits": 2,
        "n": 3,
        "mean_quality": pytest.approx(0.6),
        "mean_cost_usd": pytest.approx(0.1),
        "mean_configs_run": 1.0,
    }
    # frontier_only picks A: hit on t1 only; quality (1 + 1 + .9)/3; cost (2 + 1 + 1)/3
    assert out["frontier_only"]["hits"] == 1
    assert out["frontier_only"]["mean_quality"] == pytest.approx(2.9 / 3)
    assert out["frontier_only"]["mean_cost_usd"] == pytest.approx(4 / 3)
    # ladder: t1 C fails (gate 0 < .5) -> A (cost .1 + 2); t2 C passes; t4 C (no gate, value .8 passes)
    assert out["ladder"]["hits"] == 3
    assert out["ladder"]["mean_quality"] == pytest.approx(2.8 / 3)
    assert out["ladder"]["mean_cost_usd"] == pytest.approx((2.1 + 0.1 + 0.1) / 3)
    assert out["ladder"]["mean_configs_run"] == pytest.approx(4 / 3)
    # learning_governed: C has n 10 and advantage .5 in r -> same as quality_per_dollar
    assert out["learning_governed"] == out["quality_per_dollar"]


def test_accepts_a_router_and_reports_nulls_without_eligible_tasks():
    out = evaluate_policies(Router(TABLE), HELD_OUT.filter(pl.col("task") == "t3"), policies=["cheap_only"])
    assert out == {
        "cheap_only": {
            "hit_rate": None,
            "hits": 0,
            "n": 0,
            "mean_quality": None,
            "mean_cost_usd": None,
            "mean_configs_run": None,
        }
    }


def test_every_builtin_policy_is_evaluated_by_default():
    from pipeline.routing import BUILTIN_POLICIES

    assert set(BUILTIN_POLICIES) <= set(evaluate_policies(TABLE, HELD_OUT))
