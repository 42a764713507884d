"""Fitting escalation ladders: dominance, both search strategies (one contract), the cross-validated rule,
the target rules and the region-vs-global noise rule. Ladder scoring on held-out tasks is tested in
tests/evaluate/test_ladders.py."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from fixtures_ladders import frame, logged, synthetic

from pipeline.evaluate.ladders import evaluate_ladder
from pipeline.fit.ladder_search import Measure, dominated_configs, search_ladders, task_matrix
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
        fit = fit_ladders(tv, strategy=self.strategy)
        chosen = fit.ladders["*"]
        assert fit.best_single == "c5"
        assert len(chosen.rungs) >= 2
        # the rule's cross-validated choices beat the best single on the validation blocks, at a lower cost
        assert fit.rule["kappa"] is not None
        assert chosen.validated_quality >= chosen.target_quality
        single = evaluate_ladder(["c5"], tv)
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
    fit = fit_ladders(tv, target="budget", budget_usd=0.004)
    assert fit.ladders["*"].learned_cost_usd <= 0.004
    tight = fit_ladders(tv, target="budget", budget_usd=0.0015)
    assert tight.ladders["*"].learned_cost_usd <= 0.0015
    assert tight.ladders["*"].learned_quality <= fit.ladders["*"].learned_quality
    with pytest.raises(ValueError, match="budget_usd"):
        fit_ladders(tv, target="budget")


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
    learned = region_frame(500, 0)
    fit = fit_ladders(learned)
    assert fit.ladders["*"].rungs == ["xs", "ys", "big"]
    # x: its own best ladder is 'xs' alone, which costs and scores exactly what the global one does there
    assert fit.ladders["x"].source == "global" and fit.ladders["x"].rungs == ["xs", "ys", "big"]
    assert "not better beyond its noise" in fit.ladders["x"].reason
    # y: opening with 'ys' saves the wasted 'xs' call on nine tasks in ten, far beyond the noise
    assert fit.ladders["y"].source == "region" and fit.ladders["y"].rungs[0] == "ys"
    global_on_y = evaluate_ladder(fit.ladders["*"].rungs, learned.filter(pl.col("region") == "y"))
    assert fit.ladders["y"].learned_cost_usd < global_on_y["cost_usd"].mean() - 0.002
    assert "beats the global one beyond 2 se" in fit.ladders["y"].reason
    assert fit.published() == {"*": ["xs", "ys", "big"], "y": fit.ladders["y"].rungs}
    assert set(table_ladders(fit)) == {"*", "y"}


def test_region_ladder_not_adopted_on_noise_alone():
    # Both regions drawn from one law (a cheap config solving half the tasks, a dear one nine in ten, independent):
    # the only difference between the regions is noise, and every region keeps the global ladder.
    rng = np.random.default_rng(3)
    rows = []
    for i in range(600):
        cheap, dear = float(rng.random() < 0.5), float(rng.random() < 0.9)
        rows += [
            (f"t{i:04d}", "ab"[i % 2], "cheap", cheap, cheap, 0.01),
            (f"t{i:04d}", "ab"[i % 2], "dear", dear, dear, 1.0),
        ]
    fit = fit_ladders(frame(rows))
    assert fit.ladders["*"].rungs == ["cheap", "dear"]
    assert {r: c.source for r, c in fit.ladders.items()} == {"*": "global", "a": "global", "b": "global"}


def test_the_rule_falls_back_to_the_best_single_when_no_ladder_validates():
    # A cheap config that never solves what the dear one cannot: no ladder beats the dear one on any fold.
    rows = []
    for i in range(200):
        dear = float(i % 10 != 0)
        rows += [(f"t{i:04d}", "g", "cheap", 0.0, 0.0, 0.01), (f"t{i:04d}", "g", "dear", dear, dear, 1.0)]
    fit = fit_ladders(frame(rows))
    assert fit.ladders["*"].rungs == ["dear"] and fit.rule["kappa"] is None
    assert fit.ladders["*"].reason.startswith("the best single dear alone: at no confidence level")
    assert [r["ladders"] for r in fit.rule["kappas"]] == [0] * len(fit.rule["kappas"])


# ------------------------------------------------------------------------------- from a dispatcher's logs
def ladder_logs() -> pl.DataFrame:
    """200 tasks, in id order. cheap ($1) runs first on every task and passes (value 1) where i % 5 < 3, fails
    (value 0) on the other 80. After cheap failed, mid ($2) ran on the 40 failed tasks with (i // 5) even and
    solves those with i % 5 == 3 (20 of 40: E[q_mid | cheap failed] = 0.5); dear ($10) ran on the other 40 and
    fails only where i % 5 == 4 and (i // 5) % 4 == 3 (10 of 40: E[q_dear | cheap failed] = 0.75). Neither mid
    nor dear ever ran first: the second rung is seen only where the first failed."""
    rows = []
    for i in range(200):
        t = f"t{i:03d}"
        passed = i % 5 < 3
        rows.append((t, "g", "cheap", float(passed), float(passed), 1.0, ()))
        if passed:
            continue
        if (i // 5) % 2 == 0:
            q = float(i % 5 == 3)
            rows.append((t, "g", "mid", q, q, 2.0, ("cheap",)))
        else:
            q = float(not (i % 5 == 4 and (i // 5) % 4 == 3))
            rows.append((t, "g", "dear", q, q, 10.0, ("cheap",)))
    return logged(rows)


def test_ladder_fitted_from_logs_where_the_second_rung_follows_failures():
    # Utility with lambda 20 (value 20 q - cost per task), spend = configs run. From the logs (P(cheap passes) 0.6):
    #   cheap alone        q 0.6                      cost 1                    utility 11.0   1 config
    #   (cheap, mid)       q 0.6 + 0.4 * 0.5  = 0.8   cost 1 + 0.4 * 2  = 1.8   utility 14.2   1.4 configs
    #   (cheap, dear)      q 0.6 + 0.4 * 0.75 = 0.9   cost 1 + 0.4 * 10 = 5.0   utility 13.0   1.4 configs
    # The 40 cheap failures where mid was not run take mid's mean over the 40 where it was (its donors), and so on.
    # Three rungs cannot be estimated (dear never ran after mid failed, nor mid after dear), and mid or dear alone
    # have no first run: neither is a single. The best single is cheap (the only config that ran first); both
    # ladders gain over it at the same configs run, so the rule takes the higher utility: (cheap, mid).
    tv = ladder_logs()
    m = task_matrix(tv)
    one = np.ones(len(m.tasks), dtype=bool)
    for rungs, quality, cost in ((["cheap", "mid"], 0.8, 1.8), (["cheap", "dear"], 0.9, 5.0)):
        run = evaluate_ladder(rungs, tv)
        assert run["observed"].all()
        assert (run["quality"].mean(), run["cost_usd"].mean(), run["calls"].mean()) == pytest.approx(
            (quality, cost, 1.4)
        )
    for rungs in (["mid"], ["dear"], ["cheap", "mid", "dear"], ["cheap", "dear", "mid"]):
        assert not evaluate_ladder(rungs, tv)["observed"].any(), rungs
    assert search_ladders(m, one, 0.5, strategy="exhaustive").candidates  # searched without dominance pruning
    fit = fit_ladders(tv, measure=Measure("utility", 20.0))
    assert fit.best_single == "cheap"
    assert fit.ladders["*"].rungs == ["cheap", "mid"]
    assert fit.ladders["*"].learned_quality == pytest.approx(0.8)
    assert fit.rule["measure"] == "utility" and "utility gain" in fit.rule["reason"]


def test_escalation_outcomes_never_stand_for_a_first_run():
    # star solves every task it ran, but it only ran after base had failed (base: value 1 on even tasks, 0 on odd):
    # that is evidence about base's failed tasks only. Counted as a single it would be the best single with 1.0;
    # from first runs, the best single is base (0.5) and star is not a single (nor a first rung) at all, while the
    # ladder (base, star) that produced these logs is estimated exactly: 0.5 * 1 + 0.5 * 1 = 1.0.
    rows = []
    for i in range(100):
        ok = float(i % 2 == 0)
        rows.append((f"t{i:03d}", "g", "base", ok, ok, 1.0, ()))
        if not ok:
            rows.append((f"t{i:03d}", "g", "star", 1.0, 1.0, 5.0, ("base",)))
    tv = logged(rows)
    assert not evaluate_ladder(["star"], tv)["observed"].any()
    assert not evaluate_ladder(["star", "base"], tv)["observed"].any()
    assert evaluate_ladder(["base", "star"], tv)["quality"].mean() == pytest.approx(1.0)
    fit = fit_ladders(tv)
    assert fit.best_single == "base"
    assert all(c.rungs[0] == "base" for c in fit.ladders.values())
    # the same outcomes read as a full-information table (no after): star is a single of quality 1.0 on its 50
    # tasks, the old reading, which the logs' conditions rule out
    assert fit_ladders(tv.drop("after")).best_single == "star"


def test_an_escalation_after_configs_unknown_is_left_out():
    # after null: run after a failure of configs no longer known; it can be neither a first run nor a continuation
    rows = [("t1", "g", "a", 0.0, 0.0, 1.0, ()), ("t1", "g", "b", 1.0, 1.0, 1.0, ())]
    tv = logged(rows).with_columns(after=pl.when(pl.col("config_key") == "b").then(None).otherwise(pl.col("after")))
    m = task_matrix(tv)
    assert m.configs == ("a",)
