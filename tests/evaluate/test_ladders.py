"""Ladder scoring: the run rule on hand-made frames, the held-out ``ladders`` section, and the RouterBench result
(perfect and noisy gates)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from fixtures_ladders import frame, synthetic

from pipeline.evaluate.ladders import evaluate_ladder, ladders_section
from pipeline.fit.ladder_search import MIN_DONORS
from pipeline.fit.ladders import fit_ladders

DATA = Path(__file__).resolve().parents[2] / "data"
SUMMARY_KEYS = {
    "held_out_quality",
    "held_out_cost_usd",
    "best_single_config",
    "best_single_quality",
    "best_single_cost_usd",
    "quality_ratio",
    "cost_ratio",
    "coverage",
    "gate_is_target",
}


# ------------------------------------------------------------------------------------ the run rule
def test_run_escalates_on_failed_gate_and_sums_costs():
    tv = frame(
        [
            ("t1", "g", "cheap", 1.0, 0.9, 1.0),
            ("t1", "g", "dear", 1.0, 1.0, 10.0),  # passes at cheap
            ("t2", "g", "cheap", 0.2, 0.1, 1.0),
            ("t2", "g", "dear", 0.8, 0.8, 10.0),  # escalates
            ("t3", "g", "dear", 0.9, 0.9, 10.0),  # no first rung: not estimated there
            ("t4", "g", "cheap", 0.7, 0.5, 1.0),  # gate == threshold passes
        ]
    )
    out = evaluate_ladder(["cheap", "dear"], tv, pass_threshold=0.5)
    assert out.select("task", "stopped_at", "calls", "quality", "cost_usd", "observed").rows() == [
        ("t1", "cheap", 1, 1.0, 1.0, True),
        ("t2", "dear", 2, 0.8, 11.0, True),
        ("t3", None, None, None, None, False),
        ("t4", "cheap", 1, 0.7, 1.0, True),
    ]


def test_a_needed_rung_not_seen_is_completed_from_its_donors_or_not_estimated():
    # cheap fails its gate on t0..t6; dear is seen on t0..t4 (the donors, MIN_DONORS of them: 1 on t0..t2, 0 on t3,
    # t4, cost 10) and missing on t5, t6; cheap passes (value 1, cost 1) on p0..p2. E[q | cheap failed] = 3/5 = 0.6,
    # so t5 and t6 take quality 0.6, cost 1 + 10 and 2 configs run: the ladder's mean quality
    # (3 + 3 + 2 * 0.6) / 10 = 0.72, which is P(pass) E[q | pass] + P(fail) E[q_dear | cheap failed]
    # = 3/10 * 1 + 7/10 * 0.6.
    assert MIN_DONORS == 5
    rows = [(f"p{i}", "g", "cheap", 1.0, 1.0, 1.0) for i in range(3)]
    for i in range(7):
        rows.append((f"t{i}", "g", "cheap", 0.0, 0.0, 1.0))
        if i < 5:
            rows.append((f"t{i}", "g", "dear", float(i < 3), float(i < 3), 10.0))
    out = evaluate_ladder(["cheap", "dear"], frame(rows))
    assert out["observed"].all()
    missing = out.filter(pl.col("task").is_in(["t5", "t6"]))
    assert missing.select("stopped_at", "calls", "quality", "cost_usd").rows() == [(None, 2.0, 0.6, 11.0)] * 2
    assert out["quality"].mean() == pytest.approx(0.72)
    # with four donors (fewer than MIN_DONORS) the ladder is estimated nowhere: a mean over the tasks that stopped
    # early (or whose dear was seen) alone would lean towards passing
    four = frame([r for r in rows if r[0] != "t4"])
    assert not evaluate_ladder(["cheap", "dear"], four)["observed"].any()


def test_quality_is_the_task_value_not_the_gate_and_missing_gate_is_unobserved():
    tv = frame(
        [
            ("t1", "g", "a", 0.0, 0.9, 1.0),
            ("t1", "g", "b", 1.0, 1.0, 1.0),  # gate lies: stops at a, q 0
            ("t2", "g", "a", 1.0, None, 1.0),
            ("t2", "g", "b", 1.0, 1.0, 1.0),
        ]
    )  # no gate on a non-last rung
    out = evaluate_ladder(["a", "b"], tv)
    assert out["quality"].to_list() == [0.0, None]
    assert out["observed"].to_list() == [True, False]
    # as the last rung, a needs no gate
    assert evaluate_ladder(["a"], tv)["observed"].to_list() == [True, True]


def test_unknown_cost_takes_the_config_estimate_never_zero():
    tv = frame([("t1", "g", "a", 1.0, 1.0, 2.0), ("t2", "g", "a", 1.0, 1.0, None), ("t3", "g", "a", 1.0, 1.0, 4.0)])
    assert evaluate_ladder(["a"], tv)["cost_usd"].to_list() == [2.0, 3.0, 4.0]
    no_costs = tv.with_columns(cost_usd=pl.lit(None, pl.Float64))
    assert evaluate_ladder(["a"], no_costs)["cost_usd"].null_count() == 3


# ---------------------------------------------------------------------------------------- the section
def test_section_summary_keys_coverage_and_unobserved_not_successes():
    tv = synthetic(300)
    learned, held = tv.filter(pl.col("task") < "t0200"), tv.filter(pl.col("task") >= "t0200")
    fit = fit_ladders(learned)
    rungs = fit.ladders["*"].rungs
    # remove the first rung's result on 10 held-out tasks: they become unobserved, not successes
    gone = [f"t{i:04d}" for i in range(200, 210)]
    holey = held.filter(~(pl.col("task").is_in(gone) & (pl.col("config_key") == rungs[0])))
    section = ladders_section(fit, holey)
    assert set(section["summary"]) == SUMMARY_KEYS
    assert section["summary"]["coverage"] == pytest.approx(90 / 100)
    assert section["held_out_tasks_compared"] == 90
    full = ladders_section(fit, held.filter(~pl.col("task").is_in(gone)))
    assert section["summary"]["held_out_quality"] == full["summary"]["held_out_quality"]


def test_section_costs_null_when_unknown():
    tv = synthetic(300).with_columns(cost_usd=pl.lit(None, pl.Float64))
    fit = fit_ladders(tv.filter(pl.col("task") < "t0200"))
    summary = ladders_section(fit, tv.filter(pl.col("task") >= "t0200"))["summary"]
    assert not fit.cost_known
    assert summary["held_out_cost_usd"] is None and summary["best_single_cost_usd"] is None
    assert summary["cost_ratio"] is None and summary["held_out_quality"] is not None
    with pytest.raises(ValueError, match="needs costs"):
        fit_ladders(tv, target="budget", budget_usd=1.0)


# ------------------------------------------------------------------------------------ RouterBench
def routerbench(gate_flip: float = 0.0):
    """RouterBench as task values; chronological 70/30 split by (at, task): learned (``first_at`` for the rule's
    folds) and held-out."""
    df = pl.read_csv(DATA / "routerbench-zero-shot.csv.gz", try_parse_dates=True)
    tv = df.filter(pl.col("score").is_not_null()).select(
        task="task_id",
        region="region",
        config_key=pl.lit("import/-/") + pl.col("config") + pl.lit("/-"),
        value="score",
        gate="score",
        cost_usd="cost_usd",
        first_at="at",
    )
    if gate_flip:
        flip = pl.Series(np.random.default_rng(0).random(tv.height) < gate_flip)
        tv = tv.with_columns(gate=pl.when(flip).then(1.0 - pl.col("value")).otherwise(pl.col("value")))
    order = tv.group_by("task").agg(pl.col("first_at").min()).sort("first_at", "task")["task"]
    k = order.len() * 7 // 10
    part = lambda s: tv.filter(pl.col("task").is_in(s.implode()))  # noqa: E731
    return part(order[:k]), part(order[k:])


@pytest.fixture(scope="module")
def routerbench_sections():
    out = {}
    for flip in (0.0, 0.2):
        learned, held = routerbench(flip)
        out[flip] = ladders_section(fit_ladders(learned), held)
    return out


def test_routerbench_ladder_matches_best_single_at_a_tenth_of_its_cost(routerbench_sections):
    summary = routerbench_sections[0.0]["summary"]
    assert summary["best_single_config"] == "import/-/gpt-4-1106-preview/-"
    assert summary["held_out_quality"] >= summary["best_single_quality"]
    assert summary["cost_ratio"] <= 0.10
    assert summary["coverage"] > 0.99 and summary["gate_is_target"] is True
    assert "import/-/gpt-4-1106-preview/-" not in routerbench_sections[0.0]["regions"]["*"]["ladder"]


def test_routerbench_noisy_gates_lower_the_reported_value(routerbench_sections):
    clean, noisy = routerbench_sections[0.0]["summary"], routerbench_sections[0.2]["summary"]
    assert noisy["gate_is_target"] is False
    # a gate wrong 20% of the time stops on failures and escalates on successes: less quality per dollar
    assert noisy["held_out_quality"] < clean["held_out_quality"] - 0.02
    assert noisy["held_out_cost_usd"] > clean["held_out_cost_usd"]
