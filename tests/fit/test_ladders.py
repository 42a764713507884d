"""Fitting escalation ladders: dominance, both search strategies (one contract), the target rules and the
region-vs-global noise rule. Ladder scoring on held-out tasks is tested in tests/evaluate/test_ladders.py."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from fixtures_ladders import frame, synthetic

from pipeline.evaluate.ladders import evaluate_ladder
from pipeline.fit.ladder_search import dominated_configs, search_ladders, task_matrix
from pipeline.fit.ladders import fit_ladders, gate_is_target, table_ladders


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
    dominated = dict(zip(m.configs, dominated_configs(m, np.ones(len(m.tasks), dtype=bool), 0.5), strict=True))
    assert dominated == {"copy_dearer": True, "good": False, "weak_other": False}


def test_a_higher_gate_alone_does_not_dominate():
    """b (gate 0.4, value 0.4) fails its gate, so the ladder (b, x) escalates to x (value 1.0); a (gate 0.6,
    value 0.6, as cheap) passes and (a, x) stops at 0.6. Replacing b by a would lose quality: b is kept."""
    rows = [("t1", "g", "a", 0.6, 0.6, 1.0), ("t1", "g", "b", 0.4, 0.4, 1.0), ("t1", "g", "x", 1.0, 1.0, 5.0)]
    m = task_matrix(frame(rows))
    dominated = dict(zip(m.configs, dominated_configs(m, np.ones(len(m.tasks), dtype=bool), 0.5), strict=True))
    assert dominated == {"a": False, "b": False, "x": False}


def test_identical_configs_keep_the_first_key():
    rows = [(f"t{i}", "g", c, float(i % 2), float(i % 2), 1.0) for i in range(10) for c in ("x", "y")]
    m = task_matrix(frame(rows))
    assert dominated_configs(m, np.ones(len(m.tasks), dtype=bool), 0.5).tolist() == [False, True]


# ------------------------------------------------------------------------- search: one contract, two
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
