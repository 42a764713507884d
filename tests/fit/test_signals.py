"""Signals (docs/design.md, Signals): each formula on a hand-worked frame."""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl
import pytest
from fixtures_fit import A, at

from pipeline.fit.context import Part
from pipeline.fit.signals import (
    member_signals,
    rejection_counts,
    relative_advantage,
    signals_section,
    win_rates,
)
from pipeline.fit.writeback import decision_candidates, decision_writeback, off_policy, resolve

T0 = datetime(2026, 1, 1)


def tv(rows: list[tuple], at: datetime = T0) -> pl.DataFrame:
    """task_values rows (task, region, config, value)."""
    return pl.DataFrame(
        [{"task": t, "region": r, "config_key": c, "value": v, "at": at} for t, r, c, v in rows],
        schema={
            "task": pl.String,
            "region": pl.String,
            "config_key": pl.String,
            "value": pl.Float64,
            "at": pl.Datetime("us"),
        },
    )


# ----------------------------------------------------------------------------------------------- PRM
def test_prm_only_traced_only_unrated_latest_attempt_wins():
    # The score terms are tests/fit/test_aggregate.py's; here which attempts make a fill-in.
    from fixtures_fit import attempted, context, named, rated, rejected

    events = [
        attempted("old", "t1", A, 0, status="failure", tool_calls=0),
        attempted("new", "t1", A, 5, status="success", tool_calls=0),  # latest traced attempt of t1 -> 0.40
        attempted("untraced", "t2", A, 0, status="success"),  # no trace counts: no PRM
        attempted("rated", "t3", A, 0, status="success", tool_calls=4),  # t3 already rated: no PRM
        rated("r", "t3", A, 1.0, 0),
        attempted("rejected", "t4", A, 0, status="success", tool_calls=4),  # a rejection is a rating
        rejected("j", "t4", A, 0),
    ]
    values = named(context(*events, prm=True).values(Part.FULL), events)
    assert values.filter(pl.col("prm")).select("task", "wscore", "at").rows() == [("t1", 0.4, at(5))]


# -------------------------------------------------------------------------------- relative advantage
def test_relative_advantage_three_lanes_hand_worked():
    # mean 0.7333, population std 0.1650: z = +1.313, -0.202, -1.111
    frame = tv([("t1", "g", "A", 0.95), ("t1", "g", "B", 0.70), ("t1", "g", "C", 0.55)])
    out = relative_advantage(frame, T0)
    star = dict(out.filter(pl.col("region") == "*").select("config_key", "relative_advantage").rows())
    assert star == pytest.approx({"A": 1.3132, "B": -0.2020, "C": -1.1112}, abs=1e-4)
    assert out.filter(pl.col("region") == "g")["relative_advantage"].to_list() == pytest.approx(
        [1.3132, -0.2020, -1.1112], abs=1e-4
    )
    assert set(out["n_tasks"].to_list()) == {1}


def test_relative_advantage_one_lane_and_equal_scores_give_zero():
    out = relative_advantage(tv([("t1", "g", "A", 0.9), ("t2", "g", "B", 0.5), ("t2", "g", "C", 0.5)]), T0)
    got = {(r, c): (v, n) for r, c, v, n in out.rows()}
    assert got[("*", "A")] == (0.0, 0)  # one lane alone
    assert got[("*", "B")] == (0.0, 1)  # std 0
    assert got[("*", "C")] == (0.0, 1)


def test_relative_advantage_recency_weight_half_life_14_days():
    # A wins t_new (z=+1) today and loses t_old (z=-1) 14 days ago: (1*1 + 0.5*(-1)) / 1.5 = 1/3
    new, old = T0 + timedelta(days=14), T0
    frame = pl.concat(
        [
            tv([("t_new", "g", "A", 1.0), ("t_new", "g", "B", 0.0)], at=new),
            tv([("t_old", "g", "A", 0.0), ("t_old", "g", "B", 1.0)], at=old),
        ]
    )
    out = relative_advantage(frame, new)
    got = dict(out.filter(pl.col("region") == "*").select("config_key", "relative_advantage").rows())
    assert got == pytest.approx({"A": 1 / 3, "B": -1 / 3})


def test_relative_advantage_without_any_time_weighs_every_task_alike():
    # No newest time given and no rating time known: no recency weighting (as recency_weight without a newest
    # time), the advantages of the hand-worked three lanes; the None time once reached `.tzinfo` and crashed.
    frame = tv([("t1", "g", "A", 0.95), ("t1", "g", "B", 0.70), ("t1", "g", "C", 0.55)]).with_columns(
        at=pl.lit(None, pl.Datetime("us"))
    )
    out = relative_advantage(frame, None)
    star = dict(out.filter(pl.col("region") == "*").select("config_key", "relative_advantage").rows())
    assert star == pytest.approx({"A": 1.3132, "B": -0.2020, "C": -1.1112}, abs=1e-4)


def test_relative_advantage_per_region_and_global():
    frame = tv([("t1", "x", "A", 1.0), ("t1", "x", "B", 0.0), ("t2", "y", "A", 0.0), ("t2", "y", "B", 1.0)])
    got = {(r, c): v for r, c, v, _ in relative_advantage(frame, T0).rows()}
    assert got == {
        ("*", "A"): 0.0,
        ("*", "B"): 0.0,
        ("x", "A"): 1.0,
        ("x", "B"): -1.0,
        ("y", "A"): -1.0,
        ("y", "B"): 1.0,
    }


# ---------------------------------------------------------------------------------------- win rates
def test_win_rates_pairwise_ties_excluded():
    frame = tv(
        [
            ("t1", "g", "A", 0.9),
            ("t1", "g", "B", 0.5),
            ("t1", "g", "C", 0.5),
            ("t2", "h", "A", 0.1),
            ("t2", "h", "B", 0.8),
        ]
    )
    out = win_rates(frame)["configs"].filter(pl.col("region") == "*")
    got = {r["config_key"]: (r["wins"], r["losses"], r["ties"], r["win_rate"]) for r in out.to_dicts()}
    assert got == {"A": (2, 1, 0, pytest.approx(2 / 3)), "B": (1, 1, 1, 0.5), "C": (0, 1, 1, 0.0)}
    region_h = win_rates(frame)["configs"].filter(pl.col("region") == "h")
    assert region_h.select("config_key", "win_rate").rows() == [("A", 0.0), ("B", 1.0)]


def test_win_rate_null_when_only_ties():
    out = win_rates(tv([("t1", "g", "A", 0.5), ("t1", "g", "B", 0.5)]))["configs"]
    assert out["win_rate"].null_count() == out.height


def test_prompt_version_win_rates_rho():
    frame = tv(
        [
            ("t1", "g", "A", 1.0),
            ("t1", "g", "B", 0.0),
            ("t2", "g", "A", 0.0),
            ("t2", "g", "B", 1.0),
            ("t3", "g", "A", 1.0),
            ("t3", "g", "B", 0.0),
        ]
    )
    # each (task, config)'s prompt version is its latest attempt's that names one (the aggregation takes it)
    frame = frame.with_columns(prompt_version=pl.Series(["v2", "v1", "v2", "v1", "v2", "v1"]))
    rho = win_rates(frame)["prompt_versions"].filter(pl.col("region") == "*")
    got = {r["prompt_version"]: (r["wins"], r["losses"], r["n"], r["win_rate"]) for r in rho.to_dicts()}
    assert got == {"v1": (1, 2, 3, pytest.approx(1 / 3)), "v2": (2, 1, 3, pytest.approx(2 / 3))}


def test_rejection_counts_per_region_and_config():
    rows = tv([("t1", "x", "A", 0.0), ("t2", "y", "A", 0.0), ("t2", "y", "B", 1.0)]).with_columns(
        n_rej=pl.Series([1, 1, 0]), w_rej=pl.Series([2.0, 1.0, 0.0])
    )
    assert rejection_counts(rows).rows() == [("*", "A", 2, 3.0), ("x", "A", 1, 2.0), ("y", "A", 1, 1.0)]


def test_member_signals_and_section_shape():
    frame = tv([("t1", "g", "A", 0.95), ("t1", "g", "B", 0.70), ("t1", "g", "C", 0.55)])
    members = member_signals(frame, T0)
    assert members.columns == ["region", "config_key", "relative_advantage", "win_rate"]
    assert members.filter(pl.col("region") == "*")["win_rate"].to_list() == [1.0, 0.5, 0.0]
    frame = frame.with_columns(prm=pl.lit(False), prompt_version=pl.lit(None, pl.String), n_rej=0, w_rej=0.0)
    section = signals_section([], task_values=frame, newest_at=T0, top=1)
    assert section["members"]["*"]["top"][0]["config_key"] == "A"
    assert section["members"]["*"]["bottom"][0]["config_key"] == "C"
    assert section["counts"]["tasks_compared"] == 1


# ------------------------------------------------------------------------------- decision writeback
def logged(*events):
    """The context of ``events`` (decisions and closures) and its decision numbers by id."""
    from fixtures_fit import context

    return context(*events)


def test_writeback_first_closure_after_decision():
    from fixtures_fit import closed, decided

    ctx = logged(
        decided("d1", "t1", "A", ["A", "B"], 0, 0.5, "learned"),
        decided("d2", "t1", "B", ["A", "B"], 10 / 60, 0.5, "learned"),
        decided("d3", "t2", "A", ["A", "B"], 0, 1.0, "static"),
        decided("d4", "t3", "A", ["A", "B"], 0, 1.0, "static"),
        closed("c1", "t1", 5 / 60, "escalated"),
        closed("c2", "t1", 15 / 60, "done"),
        closed("c3", "t2", 1 / 60, "abandoned"),
    )
    # in (at, id) order: d1, d3, d4 at hour 0, then d2: d1 -> t1's closure at 0:05 (escalated), d3 -> abandoned,
    # d4 -> none, d2 -> t1's closure at 0:15 (done)
    assert resolve(ctx.decisions, ctx.closures)["reward"].to_list() == [0.0, 0.0, None, 1.0]
    assert decision_writeback(ctx.decisions, ctx.closures) == [
        {"policy": "learned", "decisions": 2, "resolved": 2, "unresolved": 0, "mean_reward": 0.5},
        {"policy": "static", "decisions": 2, "resolved": 1, "unresolved": 1, "mean_reward": 0.0},
    ]


def target(ctx, ranking: dict[str, int]):
    """The choice among each decision's candidates of a target policy ranking configs by ``ranking``."""
    pools = decision_candidates(ctx, ctx.decisions)
    return (
        pools.with_columns(r=pl.col("config_key").cast(pl.String).replace_strict(ranking, return_dtype=pl.Int64))
        .sort("task", "r")
        .group_by("task", maintain_order=True)
        .agg(chosen=pl.col("config_key").first())
    )


def test_off_policy_ips_snips_ess_hand_made_log():
    from fixtures_fit import closed, decided

    # Logged uniform-ish policy; target always picks A.
    # d1: A p=0.5 r=1 -> w=2; d2: A p=0.25 r=0 -> w=4; d3: B p=0.5 r=1 -> w=0; d4: A p=0.8 r=1 -> w=1.25
    ctx = logged(
        decided("d1", "t1", "A", ["A", "B"], 0, 0.5, "eps"),
        decided("d2", "t2", "A", ["A", "B"], 0, 0.25, "eps"),
        decided("d3", "t3", "B", ["A", "B"], 0, 0.5, "eps"),
        decided("d4", "t4", "A", ["A", "B"], 0, 0.8, "eps"),
        decided("d5", "t5", "A", ["A", "B"], 0, None, "eps"),  # no propensity: not used
        *(closed(f"c{i}", f"t{i}", 1 / 60, "abandoned" if i == 2 else "done") for i in range(1, 6)),
    )
    out = off_policy(ctx.decisions, ctx.closures, target(ctx, {"A": 0, "B": 1}))
    assert out["n"] == 4 and out["matched"] == 3
    assert out["ips"] == pytest.approx((2 + 0 + 0 + 1.25) / 4)
    assert out["snips"] == pytest.approx(3.25 / 7.25)
    assert out["ess"] == pytest.approx(7.25**2 / (4 + 16 + 1.5625))


def test_off_policy_nothing_usable():
    from fixtures_fit import closed, decided

    ctx = logged(decided("d1", "t1", "A", ["A", "B"], 0, None, "eps"), closed("c1", "t1", 1 / 60, "done"))
    out = off_policy(ctx.decisions, ctx.closures, target(ctx, {"A": 0, "B": 1}))
    assert out["ips"] is None and out["ess"] == 0.0 and out["reason"]


def test_off_policy_targets_each_decisions_own_pool():
    """Task t1 routed twice: d1 among {A, B} logged A (closed escalated), d2 among {B, C} logged B (done).
    A target ranking C > A > B picks A for d1 (matched, w = 1/0.5, r = 0) and C for d2 (not matched):
    IPS = 0 / 2, SNIPS = 0 / 2 = 0, one match. Pooling the task's candidates into {A, B, C} would pick C
    for both decisions and match none."""
    from fixtures_fit import closed, decided

    ctx = logged(
        decided("d1", "t1", "A", ["A", "B"], 0, 0.5, "eps"),
        decided("d2", "t1", "B", ["B", "C"], 10 / 60, 0.5, "eps"),
        closed("c1", "t1", 5 / 60, "escalated"),
        closed("c2", "t1", 15 / 60, "done"),
    )
    assert sorted(decision_candidates(ctx, ctx.decisions)["task"].unique().to_list()) == [0, 1]
    out = off_policy(ctx.decisions, ctx.closures, target(ctx, {"C": 0, "A": 1, "B": 2}))
    assert out["n"] == 2 and out["matched"] == 1
    assert out["ips"] == 0.0 and out["snips"] == 0.0
