"""Signals (docs/design.md, Signals): each formula on a hand-worked frame."""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl
import pytest

from pipeline.fit.signals import (
    member_signals,
    prm_ratings,
    rejection_counts,
    relative_advantage,
    signals_section,
    win_rates,
)
from pipeline.fit.writeback import decision_candidates, decision_writeback, off_policy, resolve

T0 = datetime(2026, 1, 1)
RATING_SCHEMA = {
    "id": pl.String,
    "task": pl.String,
    "region": pl.String,
    "config_key": pl.String,
    "at": pl.Datetime("us"),
    "score": pl.Float64,
    "w": pl.Float64,
    "rater_kind": pl.String,
    "rater_name": pl.String,
    "origin": pl.String,
}
ATTEMPT_SCHEMA = {
    "id": pl.String,
    "task": pl.String,
    "region": pl.String,
    "config_key": pl.String,
    "at": pl.Datetime("us"),
    "status": pl.String,
    "cost_usd": pl.Float64,
    "duration_ms": pl.Int64,
    "node": pl.String,
    "prompt_version": pl.String,
    "reviewer_verdict": pl.String,
    "tool_calls": pl.Int64,
    "files_read": pl.Int64,
    "files_written": pl.Int64,
}


def attempts(rows: list[dict]) -> pl.DataFrame:
    full = [{k: r.get(k) for k in ATTEMPT_SCHEMA} for r in rows]
    return pl.DataFrame(full, schema=ATTEMPT_SCHEMA)


def ratings(rows: list[dict]) -> pl.DataFrame:
    full = [{k: r.get(k) for k in RATING_SCHEMA} for r in rows]
    return pl.DataFrame(full, schema=RATING_SCHEMA)


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


def a(id_: str, task: str = "t1", config: str = "c/-/m/-", minutes: int = 0, **kw) -> dict:
    return {
        "id": id_,
        "task": task,
        "region": "general",
        "config_key": config,
        "at": T0 + timedelta(minutes=minutes),
        **kw,
    }


# ----------------------------------------------------------------------------------------------- PRM
@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        # success 0.40 + activity capped 0.15 + approve 0.15 + duration 0.10 + cost 0.05 = 0.85
        (
            {
                "status": "success",
                "tool_calls": 3,
                "files_read": 2,
                "reviewer_verdict": "APPROVED",
                "duration_ms": 5000,
                "cost_usd": 0.1,
            },
            0.85,
        ),
        # tool calls alone: 0.20 capped at 0.15
        ({"status": "failure", "tool_calls": 1}, 0.15),
        # files alone: 0.10
        ({"status": "failure", "tool_calls": 0, "files_written": 1}, 0.10),
        # a verdict counts only with success; duration outside [1000, 600000]; zero cost earns nothing
        ({"status": "failure", "tool_calls": 0, "reviewer_verdict": "ok", "duration_ms": 600001, "cost_usd": 0.0}, 0.0),
        ({"status": "success", "tool_calls": 0, "reviewer_verdict": "reject", "duration_ms": 1000}, 0.50),
    ],
)
def test_prm_score_terms(fields, expected):
    out = prm_ratings(attempts([a("x", **fields)]), ratings([]))
    assert out["score"].to_list() == [pytest.approx(expected)]
    row = out.row(0, named=True)
    assert (row["id"], row["w"], row["rater_kind"], row["rater_name"], row["origin"]) == (
        "prm:x",
        1.0,
        "gate",
        "prm",
        "prm",
    )


def test_prm_only_traced_only_unrated_latest_attempt_wins():
    rows = [
        a("old", status="failure", tool_calls=0, minutes=0),
        a("new", status="success", tool_calls=0, minutes=5),  # latest traced attempt of t1 -> 0.40
        a("untraced", task="t2", status="success"),  # no trace counts: no PRM
        a("rated", task="t3", status="success", tool_calls=4),  # t3 already rated: no PRM
        a("rejected", task="t4", status="success", tool_calls=4),  # a rejection is a rating
    ]
    existing = ratings(
        [
            {
                "id": "r",
                "task": "t3",
                "region": "general",
                "config_key": "c/-/m/-",
                "at": T0,
                "score": 1.0,
                "w": 1.0,
                "rater_kind": "gate",
                "rater_name": "ci",
                "origin": "rating",
            },
            {
                "id": "j",
                "task": "t4",
                "region": "general",
                "config_key": "c/-/m/-",
                "at": T0,
                "score": 0.0,
                "w": 1.0,
                "rater_kind": "reviewer",
                "rater_name": "r",
                "origin": "rejection",
            },
        ]
    )
    out = prm_ratings(attempts(rows), existing)
    assert out.select("id", "task", "score").rows() == [("prm:new", "t1", 0.4)]


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
    att = attempts(
        [
            a("1", "t1", "A", prompt_version="v2"),
            a("2", "t1", "B", prompt_version="v1"),
            a("3", "t2", "A", prompt_version="v2"),
            a("4", "t2", "B", prompt_version="v1"),
            a("5", "t3", "A", prompt_version="v1", minutes=-1),
            a("6", "t3", "A", prompt_version="v2"),  # the latest attempt names the version
            a("7", "t3", "B", prompt_version="v1"),
        ]
    )
    rho = win_rates(frame, att)["prompt_versions"].filter(pl.col("region") == "*")
    got = {r["prompt_version"]: (r["wins"], r["losses"], r["n"], r["win_rate"]) for r in rho.to_dicts()}
    assert got == {"v1": (1, 2, 3, pytest.approx(1 / 3)), "v2": (2, 1, 3, pytest.approx(2 / 3))}


def test_rejection_counts_per_region_and_config():
    rows = ratings(
        [
            {
                "id": "1",
                "task": "t1",
                "region": "x",
                "config_key": "A",
                "at": T0,
                "score": 0.0,
                "w": 2.0,
                "rater_kind": "reviewer",
                "rater_name": "r",
                "origin": "rejection",
            },
            {
                "id": "2",
                "task": "t2",
                "region": "y",
                "config_key": "A",
                "at": T0,
                "score": 0.0,
                "w": 1.0,
                "rater_kind": "reviewer",
                "rater_name": "r",
                "origin": "rejection",
            },
            {
                "id": "3",
                "task": "t2",
                "region": "y",
                "config_key": "B",
                "at": T0,
                "score": 1.0,
                "w": 1.0,
                "rater_kind": "gate",
                "rater_name": "ci",
                "origin": "rating",
            },
        ]
    )
    assert rejection_counts(rows).rows() == [("*", "A", 2, 3.0), ("x", "A", 1, 2.0), ("y", "A", 1, 1.0)]


def test_member_signals_and_section_shape():
    frame = tv([("t1", "g", "A", 0.95), ("t1", "g", "B", 0.70), ("t1", "g", "C", 0.55)])
    members = member_signals(frame, T0)
    assert members.columns == ["region", "config_key", "relative_advantage", "win_rate"]
    assert members.filter(pl.col("region") == "*")["win_rate"].to_list() == [1.0, 0.5, 0.0]
    section = signals_section(task_values=frame, ratings=ratings([]), attempts=None, newest_at=T0, top=1)
    assert section["members"]["*"]["top"][0]["config_key"] == "A"
    assert section["members"]["*"]["bottom"][0]["config_key"] == "C"
    assert section["counts"]["tasks_compared"] == 1


# ------------------------------------------------------------------------------- decision writeback
DEC_SCHEMA = {
    "id": pl.String,
    "task": pl.String,
    "region": pl.String,
    "at": pl.Datetime("us"),
    "policy": pl.String,
    "chosen": pl.String,
    "candidates": pl.List(pl.String),
    "propensity": pl.Float64,
}


def decisions(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame(
        [
            {
                "id": i,
                "task": t,
                "region": "g",
                "at": T0 + timedelta(minutes=m),
                "policy": pol,
                "chosen": ch,
                "candidates": ["A", "B"],
                "propensity": p,
            }
            for i, t, m, pol, ch, p in rows
        ],
        schema=DEC_SCHEMA,
    )


def closures(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame(
        [{"id": f"c{i}", "task": t, "at": T0 + timedelta(minutes=m), "outcome": o} for i, (t, m, o) in enumerate(rows)],
        schema={"id": pl.String, "task": pl.String, "at": pl.Datetime("us"), "outcome": pl.String},
    )


def test_writeback_first_closure_after_decision():
    dec = decisions(
        [
            ("d1", "t1", 0, "learned", "A", 0.5),
            ("d2", "t1", 10, "learned", "B", 0.5),
            ("d3", "t2", 0, "static", "A", 1.0),
            ("d4", "t3", 0, "static", "A", 1.0),
        ]
    )
    clo = closures([("t1", 5, "escalated"), ("t1", 15, "done"), ("t2", 1, "abandoned")])
    assert resolve(dec, clo)["reward"].to_list() == [0.0, 0.0, None, 1.0]
    assert decision_writeback(dec, clo) == [
        {"policy": "learned", "decisions": 2, "resolved": 2, "unresolved": 0, "mean_reward": 0.5},
        {"policy": "static", "decisions": 2, "resolved": 1, "unresolved": 1, "mean_reward": 0.0},
    ]


def test_off_policy_ips_snips_ess_hand_made_log():
    # Logged uniform-ish policy; target always picks A.
    # d1: A p=0.5 r=1 -> w=2; d2: A p=0.25 r=0 -> w=4; d3: B p=0.5 r=1 -> w=0; d4: A p=0.8 r=1 -> w=1.25
    dec = decisions(
        [
            ("d1", "t1", 0, "eps", "A", 0.5),
            ("d2", "t2", 0, "eps", "A", 0.25),
            ("d3", "t3", 0, "eps", "B", 0.5),
            ("d4", "t4", 0, "eps", "A", 0.8),
            ("d5", "t5", 0, "eps", "A", None),
        ]
    )  # no propensity: not used
    clo = closures([("t1", 1, "done"), ("t2", 1, "abandoned"), ("t3", 1, "done"), ("t4", 1, "done"), ("t5", 1, "done")])
    target = decision_candidates(dec).group_by("task").agg(pl.lit("A").alias("chosen")).sort("task")
    out = off_policy(dec, clo, target)
    assert out["n"] == 4 and out["matched"] == 3
    assert out["ips"] == pytest.approx((2 + 0 + 0 + 1.25) / 4)
    assert out["snips"] == pytest.approx(3.25 / 7.25)
    assert out["ess"] == pytest.approx(7.25**2 / (4 + 16 + 1.5625))


def test_off_policy_nothing_usable():
    dec = decisions([("d1", "t1", 0, "eps", "A", None)])
    out = off_policy(dec, closures([("t1", 1, "done")]), pl.DataFrame({"task": ["d1"], "chosen": ["A"]}))
    assert out["ips"] is None and out["ess"] == 0.0 and out["reason"]


def test_off_policy_targets_each_decisions_own_pool():
    """Task t1 routed twice: d1 among {A, B} logged A (closed escalated), d2 among {B, C} logged B (done).
    A target ranking C > A > B picks A for d1 (matched, w = 1/0.5, r = 0) and C for d2 (not matched):
    IPS = 0 / 2, SNIPS = 0 / 2 = 0, one match. Pooling the task's candidates into {A, B, C} would pick C
    for both decisions and match none."""
    dec = pl.DataFrame(
        [
            {
                "id": "d1",
                "task": "t1",
                "region": "g",
                "at": T0,
                "policy": "eps",
                "chosen": "A",
                "candidates": ["A", "B"],
                "propensity": 0.5,
            },
            {
                "id": "d2",
                "task": "t1",
                "region": "g",
                "at": T0 + timedelta(minutes=10),
                "policy": "eps",
                "chosen": "B",
                "candidates": ["B", "C"],
                "propensity": 0.5,
            },
        ],
        schema=DEC_SCHEMA,
    )
    clo = closures([("t1", 5, "escalated"), ("t1", 15, "done")])
    rank = {"C": 0, "A": 1, "B": 2}
    pools = decision_candidates(dec)
    assert sorted(pools["task"].unique().to_list()) == ["d1", "d2"]
    target = (
        pools.with_columns(r=pl.col("config_key").replace_strict(rank, return_dtype=pl.Int64))
        .sort("task", "r")
        .group_by("task", maintain_order=True)
        .agg(chosen=pl.col("config_key").first())
    )
    out = off_policy(dec, clo, target)
    assert out["n"] == 2 and out["matched"] == 1
    assert out["ips"] == 0.0 and out["snips"] == 0.0
