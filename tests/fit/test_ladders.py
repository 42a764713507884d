"""Escalation ladders: the run rule on hand-made frames, both search strategies, the target rules, the
region-vs-global noise rule, the stats section, and the RouterBench result (perfect and noisy gates)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.fit.ladder_search import dominated_configs, search_ladders, task_matrix
from pipeline.fit.ladders import evaluate_ladder, fit_ladders, gate_is_target, ladders_section, table_ladders

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
SCHEMA = {
    "task": pl.String,
    "region": pl.String,
    "config_key": pl.String,
    "value": pl.Float64,
    "gate": pl.Float64,
    "cost_usd": pl.Float64,
}


def frame(rows: list[tuple]) -> pl.DataFrame:
    """(task, region, config, value, gate, cost) rows."""
    return pl.DataFrame([dict(zip(SCHEMA, r)) for r in rows], schema=SCHEMA)


# ------------------------------------------------------------------------------------ the run rule
def test_run_escalates_on_failed_gate_and_sums_costs():
    tv = frame(
        [
            ("t1", "g", "cheap", 1.0, 0.9, 1.0),
            ("t1", "g", "dear", 1.0, 1.0, 10.0),  # passes at cheap
            ("t2", "g", "cheap", 0.2, 0.1, 1.0),
            ("t2", "g", "dear", 0.8, 0.8, 10.0),  # escalates
            ("t3", "g", "cheap", 0.0, 0.4, 1.0),  # needed rung unobserved
            ("t4", "g", "cheap", 0.7, 0.5, 1.0),  # gate == threshold passes
        ]
    )
    out = evaluate_ladder(["cheap", "dear"], tv, pass_threshold=0.5)
    assert out.select("task", "stopped_at", "calls", "quality", "cost_usd", "observed").rows() == [
        ("t1", "cheap", 1, 1.0, 1.0, True),
        ("t2", "dear", 2, 0.8, 11.0, True),
        ("t3", "dear", 2, None, None, False),
        ("t4", "cheap", 1, 0.7, 1.0, True),
    ]


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


def test_gate_is_target_detection():
    tv = frame([("t1", "g", "a", 1.0, 1.0, 1.0), ("t2", "g", "a", 0.0, 0.0, 1.0)])
    assert gate_is_target(tv)
    assert not gate_is_target(tv.with_columns(gate=pl.lit(0.5)))


# ---------------------------------------------------------------------------------------- dominance
def test_dominance_prunes_a_covered_config_but_not_a_complementary_one():
    rng = np.random.default_rng(1)
    rows = []
    for i in range(40):
        s = float(rng.integers(0, 2))
        rows += [
            (f"t{i}", "g", "good", 1.0, 1.0, 1.0),
            (f"t{i}", "g", "copy_dearer", s, s, 2.0),  # never better, dearer: pruned
            (f"t{i}", "g", "weak_other", 1.0 - s, 1.0 - s, 0.5),
        ]  # cheaper, solves other tasks: kept
    m = task_matrix(frame(rows))
    dominated = dict(zip(m.configs, dominated_configs(m, np.ones(len(m.tasks), dtype=bool), 0.5)))
    assert dominated == {"copy_dearer": True, "good": False, "weak_other": False}


def test_a_higher_gate_alone_does_not_dominate():
    """b (gate 0.4, value 0.4) fails its gate, so the ladder (b, x) escalates to x (value 1.0); a (gate 0.6,
    value 0.6, as cheap) passes and (a, x) stops at 0.6. Replacing b by a would lose quality: b is kept."""
    rows = [("t1", "g", "a", 0.6, 0.6, 1.0), ("t1", "g", "b", 0.4, 0.4, 1.0), ("t1", "g", "x", 1.0, 1.0, 5.0)]
    m = task_matrix(frame(rows))
    dominated = dict(zip(m.configs, dominated_configs(m, np.ones(len(m.tasks), dtype=bool), 0.5)))
    assert dominated == {"a": False, "b": False, "x": False}


def test_identical_configs_keep_the_first_key():
    rows = [(f"t{i}", "g", c, float(i % 2), float(i % 2), 1.0) for i in range(10) for c in ("x", "y")]
    m = task_matrix(frame(rows))
    assert dominated_configs(m, np.ones(len(m.tasks), dtype=bool), 0.5).tolist() == [False, True]


# ------------------------------------------------------------------------- search: one contract, two
def synthetic(n_tasks: int = 120, n_configs: int = 6, seed: int = 0) -> pl.DataFrame:
    """Configs of rising skill and cost; 0/1 scores, gate = score."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_tasks):
        hard = rng.random()
        for j in range(n_configs):
            s = float(rng.random() < (0.3 + 0.1 * j) * (1.2 - hard))
            rows.append((f"t{i:04d}", "ab"[i % 2], f"c{j}", s, s, 0.001 * 2**j))
    return frame(rows)


class SearchContract:
    strategy: str

    def test_candidates_are_a_front_with_every_single(self):
        m = task_matrix(synthetic())
        found = search_ladders(m, np.ones(len(m.tasks), dtype=bool), 0.5, strategy=self.strategy)
        ladders = [lad for lad, _ in found.candidates]
        assert {(j,) for j in range(len(m.configs))} <= set(ladders)
        assert all(1 <= len(lad) <= 3 and len(set(lad)) == len(lad) for lad in ladders)
        multi = [s for lad, s in found.candidates if len(lad) > 1]
        assert multi, "a ladder of 2+ rungs belongs on this front"
        spends = [s.spend for lad, s in found.candidates if len(lad) > 1]
        assert spends == sorted(spends)

    def test_chosen_ladder_reaches_the_best_single_on_validation_and_is_cheaper(self):
        tv = synthetic(400)
        learn, val = tv.filter(pl.col("task") < "t0200"), tv.filter(pl.col("task") >= "t0200")
        fit = fit_ladders(learn, val, strategy=self.strategy)
        chosen = fit.ladders["*"]
        assert fit.best_single == "c5"
        assert len(chosen.rungs) >= 2
        assert chosen.validated_quality >= chosen.target_quality
        single = evaluate_ladder(["c5"], val)
        assert chosen.validated_cost_usd < single["cost_usd"].mean()


class TestBeam(SearchContract):
    strategy = "beam"


class TestExhaustive(SearchContract):
    strategy = "exhaustive"


def test_exhaustive_refuses_many_configs():
    m = task_matrix(synthetic(20, 13))
    with pytest.raises(ValueError, match="more than 12"):
        search_ladders(m, np.ones(len(m.tasks), dtype=bool), 0.5, strategy="exhaustive")


def test_beam_scores_far_fewer_ladders_than_the_permutations():
    m = task_matrix(synthetic(60, 12))
    found = search_ladders(m, np.ones(len(m.tasks), dtype=bool), 0.5)
    assert found.evaluated < 12 + 12 * 11 + 24 * 12 + 1 < 12 * 11 * 10


# ------------------------------------------------------------------------------------- target rules
def test_budget_target_best_quality_within_the_mean_cost():
    tv = synthetic(400)
    learn, val = tv.filter(pl.col("task") < "t0200"), tv.filter(pl.col("task") >= "t0200")
    fit = fit_ladders(learn, val, target="budget", budget_usd=0.004)
    assert fit.ladders["*"].validated_cost_usd <= 0.004
    tight = fit_ladders(learn, val, target="budget", budget_usd=0.0015)
    assert tight.ladders["*"].validated_cost_usd <= 0.0015
    assert tight.ladders["*"].validated_quality <= fit.ladders["*"].validated_quality
    with pytest.raises(ValueError, match="budget_usd"):
        fit_ladders(learn, val, target="budget")


def region_frame(n: int, seed: int) -> pl.DataFrame:
    """Region x: 'xs' solves everything for 0.01; region y: 'ys' solves half, 'xs' a tenth, 'big' 90%."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        region = "xy"[i % 2]
        big = float(rng.random() < 0.9)
        xs = 1.0 if region == "x" else float(rng.random() < 0.1)
        ys = float(rng.random() < 0.5)
        rows += [
            (f"t{i:04d}", region, "big", big, big, 1.0),
            (f"t{i:04d}", region, "xs", xs, xs, 0.01),
            (f"t{i:04d}", region, "ys", ys, ys, 0.02),
        ]
    return frame(rows)


def test_region_ladder_replaces_global_only_beyond_noise():
    val = region_frame(200, 1)
    fit = fit_ladders(region_frame(300, 0), val)
    assert fit.ladders["*"].rungs == ["xs", "ys", "big"]
    # x: its own best ladder is 'xs' alone, which costs and scores exactly what the global one does there
    assert fit.ladders["x"].source == "global" and fit.ladders["x"].rungs == ["xs", "ys", "big"]
    assert "not better beyond its noise" in fit.ladders["x"].reason
    # y: opening with 'ys' saves the wasted 'xs' call on nine tasks in ten, far beyond the noise
    assert fit.ladders["y"].source == "region" and fit.ladders["y"].rungs[0] == "ys"
    global_on_y = evaluate_ladder(fit.ladders["*"].rungs, val.filter(pl.col("region") == "y"))
    assert fit.ladders["y"].validated_cost_usd < global_on_y["cost_usd"].mean() - 0.003
    assert "beats the global ladder" in fit.ladders["y"].reason
    assert fit.published() == {"*": ["xs", "ys", "big"], "y": fit.ladders["y"].rungs}
    assert set(table_ladders(fit)) == {"*", "y"}


def test_region_ladder_not_adopted_on_noise_alone():
    # both regions drawn from the same law: any region difference is noise
    tv = synthetic(600)
    fit = fit_ladders(tv.filter(pl.col("task") < "t0300"), tv.filter(pl.col("task") >= "t0300"))
    assert {c.source for c in fit.ladders.values()} == {"global"}


# ---------------------------------------------------------------------------------------- the section
def test_section_summary_keys_coverage_and_unobserved_not_successes():
    tv = synthetic(300)
    middle = pl.col("task").is_between(pl.lit("t0100"), pl.lit("t0199"))
    learn, val, held = (tv.filter(pl.col("task") < "t0100"), tv.filter(middle), tv.filter(pl.col("task") >= "t0200"))
    fit = fit_ladders(learn, val)
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
    middle = pl.col("task").is_between(pl.lit("t0100"), pl.lit("t0199"))
    fit = fit_ladders(tv.filter(pl.col("task") < "t0100"), tv.filter(middle))
    summary = ladders_section(fit, tv.filter(pl.col("task") >= "t0200"))["summary"]
    assert not fit.cost_known
    assert summary["held_out_cost_usd"] is None and summary["best_single_cost_usd"] is None
    assert summary["cost_ratio"] is None and summary["held_out_quality"] is not None
    with pytest.raises(ValueError, match="needs costs"):
        fit_ladders(tv.filter(pl.col("task") < "t0100"), tv, target="budget", budget_usd=1.0)


# ------------------------------------------------------------------------------------ RouterBench
def routerbench(gate_flip: float = 0.0):
    """RouterBench as task values; chronological 70/30 split (and 70/30 inside learned) by (at, task)."""
    df = pl.read_csv(DATA / "routerbench-zero-shot.csv.gz", try_parse_dates=True)
    tv = df.filter(pl.col("score").is_not_null()).select(
        task="task_id",
        region="region",
        config_key=pl.lit("import/-/") + pl.col("config") + pl.lit("/-"),
        value="score",
        gate="score",
        cost_usd="cost_usd",
        at="at",
    )
    if gate_flip:
        flip = pl.Series(np.random.default_rng(0).random(tv.height) < gate_flip)
        tv = tv.with_columns(gate=pl.when(flip).then(1.0 - pl.col("value")).otherwise(pl.col("value")))
    order = tv.group_by("task").agg(pl.col("at").min()).sort("at", "task")["task"]
    k = order.len() * 7 // 10
    kk = k * 7 // 10
    part = lambda s: tv.filter(pl.col("task").is_in(s.implode()))  # noqa: E731
    return part(order[:kk]), part(order[kk:k]), part(order[k:])


@pytest.fixture(scope="module")
def routerbench_sections():
    out = {}
    for flip in (0.0, 0.2):
        learn, val, held = routerbench(flip)
        out[flip] = ladders_section(fit_ladders(learn, val), held)
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
