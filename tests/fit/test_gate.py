"""The evidence gate's tests at fit time (pipeline.fit.gate), on hand-made task values worked out in comments."""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl
import pytest

from pipeline.fit.gate import DECISIONS_SCHEMA, PROPENSITY_CLIP, VALUES_SCHEMA, gate_evidence, logged_runs
from pipeline.routing.table import Constants

CHEAP, STATIC, OTHER = "cheap/-/c/-", "static/-/s/-", "other/-/o/-"


def values(rows: list[tuple[str, str, str, float, float | None]]) -> pl.DataFrame:
    """(task, region, config, q_t,c, cost_t,c) rows."""
    return pl.DataFrame(
        rows,
        schema={
            "task": pl.String,
            "region": pl.String,
            "config_key": pl.String,
            "value": pl.Float64,
            "cost": pl.Float64,
        },
        orient="row",
    )


def test_quality_per_dollar_is_a_ratio_of_sums_on_the_shared_tasks():
    # Region r, eight tasks both did. CHEAP: quality 1 except 0 on t3, at $0.10 each -> 7 / 0.8 = 8.75 per dollar.
    # STATIC: quality 1 on every task at $1 -> 8 / 8 = 1 per dollar. Difference 8.75 - 1 = +7.75. The level: 5% over
    # one member and 1 + log2(8) = 4 looks, 1.25%. A resample loses only when it draws CHEAP's failed t3 alone
    # (about e^-7 * 0.63 = 0.06%), far below it; the variance floor (pooled within-config variance 7/8/14 = 0.0625
    # over 8 effective samples a side) takes z(1.25%) = 2.24 times sqrt(0.0625 (1/(8 * 0.01) + 1/8)) = 0.89 off 7.75.
    rows = [(f"t{i}", "r", CHEAP, 0.0 if i == 3 else 1.0, 0.1) for i in range(1, 9)]
    rows += [(f"t{i}", "r", STATIC, 1.0, 1.0) for i in range(1, 9)]
    out = gate_evidence(values(rows), against=[STATIC], objective="quality_per_dollar", constants=Constants())
    test = out.filter((pl.col("region") == "r") & (pl.col("config_key") == CHEAP)).row(0, named=True)
    assert test["against"] == STATIC and test["shared_tasks"] == 8
    assert test["difference"] == pytest.approx(7.75) and test["level"] == pytest.approx(0.0125)
    assert 0 < test["lower"] <= 7.75 - 2.24 * 0.89 + 0.01 and test["passes"]
    # STATIC has no test against itself; the global pool '*' repeats the test over every region.
    assert out.filter(pl.col("config_key") == STATIC).is_empty()
    assert out.filter(pl.col("region") == "*")["difference"].to_list() == pytest.approx([7.75])


def test_a_heavy_tailed_task_does_not_decide_it():
    # CHEAP on t1 costs $0.0001 for quality 0.2 (2,000 per dollar on that task alone), then 0.5 at $1 on t2, t3.
    # A mean of per-task ratios would say (2000 + 0.5 + 0.5) / 3 = 667 per dollar; the ratio of sums says
    # (0.2 + 0.5 + 0.5) / 2.0001 = 0.59996 per dollar, below STATIC's (0.9 * 3) / 3 = 0.9: a difference of -0.30004.
    rows = [("t1", "r", CHEAP, 0.2, 0.0001), ("t2", "r", CHEAP, 0.5, 1.0), ("t3", "r", CHEAP, 0.5, 1.0)]
    rows += [(t, "r", STATIC, 0.9, 1.0) for t in ("t1", "t2", "t3")]
    out = gate_evidence(values(rows), against=[STATIC], objective="quality_per_dollar", constants=Constants())
    test = out.filter(pl.col("region") == "r").row(0, named=True)
    assert test["difference"] == pytest.approx(1.2 / 2.0001 - 0.9)
    assert not test["passes"]


def test_fewer_shared_tasks_than_min_samples_never_pass():
    # OTHER beats STATIC by 0.5 in quality on both of its 2 shared tasks: a sure difference, but 2 < min_samples 3.
    rows = [(t, "r", OTHER, 1.0, None) for t in ("t1", "t2")] + [
        (t, "r", STATIC, 0.5, None) for t in ("t1", "t2", "t3")
    ]
    out = gate_evidence(values(rows), against=[STATIC], objective="quality_per_dollar", constants=Constants())
    test = out.filter(pl.col("region") == "r").row(0, named=True)
    # No cost is known: the objective degrades to quality, a mean per task: 1.0 - 0.5 = +0.5 on both tasks. Every
    # resample says +0.5; the normal bound shrinks each side to the pooled mean 3.5 / 5 = 0.7 with prior_weight 3
    # pseudo-samples: (2 + 2.1) / 5 - (1.5 + 2.1) / 6 = 0.82 - 0.6 = +0.22 (no within-config spread): lower +0.22.
    assert (test["shared_tasks"], test["difference"], test["passes"]) == (2, 0.5, False)
    assert test["lower"] == pytest.approx(0.22)
    again = gate_evidence(values(rows), against=[STATIC], objective="quality", constants=Constants(min_samples=2))
    assert again.filter(pl.col("region") == "r")["passes"].to_list() == [True]


def test_tasks_where_either_was_run_after_a_failure_are_left_out():
    # Four shared tasks; on t4 OTHER ran only after STATIC had failed there (an escalation): 3 shared tasks remain.
    rows = [(f"t{i}", "r", OTHER, 1.0, None) for i in range(1, 5)] + [
        (f"t{i}", "r", STATIC, 0.0, None) for i in range(1, 5)
    ]
    escalated = pl.DataFrame({"task": ["t4"], "config_key": [OTHER]})
    out = gate_evidence(values(rows), against=[STATIC], objective="quality", constants=Constants(), escalated=escalated)
    assert out.filter(pl.col("region") == "r")["shared_tasks"].to_list() == [3]


def test_an_escalation_is_an_attempt_started_after_another_config_failed():
    from fixtures_fit import attempted, context, named, rated

    from pipeline.fit.context import Part

    # t1: STATIC fails at 0:10, OTHER runs 0:20-0:30: escalated. t2: OTHER started 0:05, before STATIC's failure
    # at 0:10: a second opinion, not an escalation. t3: both at one time (an import): none.
    minute = 1 / 60
    events = [
        attempted("a1", "t1", STATIC, 10 * minute, status="failure", duration_ms=600_000),
        attempted("a2", "t1", OTHER, 30 * minute, status="success", duration_ms=600_000),
        attempted("a3", "t2", STATIC, 10 * minute, status="failure", duration_ms=600_000),
        attempted("a4", "t2", OTHER, 30 * minute, status="success", duration_ms=1_500_000),
        attempted("a5", "t3", STATIC, 0, status="failure"),
        attempted("a6", "t3", OTHER, 0, status="success"),
        *(rated(f"r{t}{c[0]}", t, c, 1.0, 1) for t in ("t1", "t2", "t3") for c in (STATIC, OTHER)),
    ]
    values = named(context(*events).values(Part.FULL), events)
    assert values.filter(pl.col("escalated")).select("task", "config_key").rows() == [("t1", OTHER)]


# Logged single-config runs (issue 23): a dispatcher runs one config per task, logs its decision with the
# candidates and the propensity, and escalates after a failed gate (the decision's ``after``).

DAY0 = datetime(2026, 1, 1)


def timed(rows: list[tuple[str, str, float, float | None]]) -> pl.DataFrame:
    """(task, config, q_t,c, cost_t,c) rows of region r, task ``tN`` at day N."""
    return pl.DataFrame(
        [(t, "r", c, q, cost, DAY0 + timedelta(days=int(t[1:]))) for t, c, q, cost in rows],
        schema=VALUES_SCHEMA,
        orient="row",
    )


def decisions(rows: list[tuple[str, str, list[str], float, list[str] | None]]) -> pl.DataFrame:
    """(task, chosen, candidates, propensity, after) route.decided rows, in time order."""
    return pl.DataFrame(
        [
            (f"d{i}", t, DAY0 + timedelta(days=int(t[1:]), microseconds=i), c, cands, p, after)
            for i, (t, c, cands, p, after) in enumerate(rows)
        ],
        schema=DECISIONS_SCHEMA,
        orient="row",
    )


def test_single_config_runs_decide_without_a_shared_task_unweighted_without_propensities():
    # One config per task, no decisions logged: OTHER ran t1, t3, t5, t7, t9 (quality 0.9), STATIC t2 .. t10
    # (quality 0.3). Without decisions a config is a candidate from its first rated task on: STATIC from t2, so
    # t1 drops out (STATIC did not exist yet). OTHER's mean 0.9 over 4 runs, STATIC's 0.3 over 5: +0.6, every
    # resample too (constant values). The normal bound shrinks both to the region's mean value 6 / 10 = 0.6 (t1
    # included) with 3 pseudo-samples: (3.6 + 1.8) / 7 - (1.5 + 1.8) / 8 = 0.77143 - 0.4125 = +0.35893 (no
    # within-config spread), the lower of the two;
    # effective samples min(4, 5) = 4 >= 3: passes, unweighted.
    rows = [(f"t{i}", OTHER if i % 2 else STATIC, 0.9 if i % 2 else 0.3, None) for i in range(1, 11)]
    out = gate_evidence(timed(rows), against=[STATIC], objective="quality", constants=Constants())
    test = out.filter(pl.col("region") == "r").row(0, named=True)
    assert test["shared_tasks"] == 0 and test["tasks"] == 9 and (test["runs"], test["static_runs"]) == (4, 5)
    assert test["difference"] == pytest.approx(0.6) and test["lower"] == pytest.approx(5.4 / 7 - 3.3 / 8)
    assert test["effective_samples"] == pytest.approx(4.0) and not test["weighted"] and test["passes"]


def test_inverse_propensity_weights_and_effective_samples_decide():
    # Logged decisions, candidates [STATIC, OTHER] on every task. STATIC chosen greedily on t1..t3 (propensity
    # 0.8, quality 0.5); OTHER explored on t4 (propensity 0.1, quality 1.0) and chosen on t5, t6, t7 (propensity
    # 0.5, quality 0.0). Weights 1/p: OTHER 10, 2, 2, 2 -> self-normalized mean (10 * 1.0) / 16 = 0.625 (the plain
    # mean would be 0.25); STATIC 0.5 -> difference +0.125. OTHER's effective samples (sum w)^2 / sum w^2 =
    # 16^2 / (100 + 12) = 2.2857: 4 runs but below min_samples 3, so it does not pass.
    both = [STATIC, OTHER]
    logged = [(f"t{i}", STATIC, both, 0.8, None) for i in (1, 2, 3)] + [("t4", OTHER, both, 0.1, None)]
    logged += [(f"t{i}", OTHER, both, 0.5, None) for i in (5, 6, 7)]
    rows = [(f"t{i}", STATIC, 0.5, None) for i in (1, 2, 3)] + [("t4", OTHER, 1.0, None)]
    rows += [(f"t{i}", OTHER, 0.0, None) for i in (5, 6, 7)]
    out = gate_evidence(
        timed(rows),
        against=[STATIC],
        objective="quality",
        constants=Constants(),
        logged=logged_runs(decisions(logged)),
    )
    test = out.filter(pl.col("region") == "r").row(0, named=True)
    assert test["difference"] == pytest.approx(0.125) and test["weighted"]
    assert test["effective_samples"] == pytest.approx(256 / 112) and not test["passes"]
    # A propensity of 0.01 is clipped at PROPENSITY_CLIP 0.05 (weight 20, not 100): mean 20 / 26 = 0.76923.
    clipped = [(t, c, k, 0.01 if t == "t4" else p, a) for t, c, k, p, a in logged]
    clip = logged_runs(decisions(clipped))
    out = gate_evidence(timed(rows), against=[STATIC], objective="quality", constants=Constants(), logged=clip)
    assert PROPENSITY_CLIP == 0.05
    assert out.filter(pl.col("region") == "r")["difference"].to_list() == pytest.approx([20 / 26 - 0.5])


def test_escalation_only_evidence_does_not_decide():
    # STATIC ran first on t1..t6 and failed (quality 0); OTHER ran only after it (its decisions name
    # after=[STATIC]) and scored 1.0. All rows at one time per task, so timing alone would not mark them: the old
    # paired gate saw 6 shared tasks at +1.0 and passed. These outcomes say how OTHER does on tasks STATIC failed,
    # not on tasks in general: left out, OTHER has no run in the comparison, no difference, no pass.
    logged = [(f"t{i}", STATIC, [STATIC, OTHER], 0.9, None) for i in range(1, 7)]
    logged += [(f"t{i}", OTHER, [OTHER], 1.0, [STATIC]) for i in range(1, 7)]
    rows = [(f"t{i}", STATIC, 0.0, None) for i in range(1, 7)] + [(f"t{i}", OTHER, 1.0, None) for i in range(1, 7)]
    out = gate_evidence(
        timed(rows), against=[STATIC], objective="quality", constants=Constants(), logged=logged_runs(decisions(logged))
    )
    test = out.filter(pl.col("region") == "r").row(0, named=True)
    assert (test["runs"], test["static_runs"], test["escalations"], test["shared_tasks"]) == (0, 6, 6, 0)
    assert test["difference"] is None and test["lower"] is None and not test["passes"]


def test_a_config_added_late_is_compared_on_the_tasks_it_could_have_run():
    # STATIC alone on t1..t6 (candidates [STATIC], quality 0.2: an old, worse history); OTHER added from t7 on:
    # STATIC ran t7..t9 (0.8), OTHER t10..t12 (0.7). On the tasks where both were candidates (t7..t12): 0.7 - 0.8
    # = -0.1, no pass. Against STATIC's whole history (mean (6 * 0.2 + 3 * 0.8) / 9 = 0.4) OTHER would have looked
    # +0.3 better.
    both = [STATIC, OTHER]
    logged = [(f"t{i}", STATIC, [STATIC], 1.0, None) for i in range(1, 7)]
    logged += [(f"t{i}", STATIC, both, 1.0, None) for i in (7, 8, 9)]
    logged += [(f"t{i}", OTHER, both, 1.0, None) for i in (10, 11, 12)]
    rows = [(f"t{i}", STATIC, 0.2 if i < 7 else 0.8, None) for i in range(1, 10)]
    rows += [(f"t{i}", OTHER, 0.7, None) for i in (10, 11, 12)]
    out = gate_evidence(
        timed(rows), against=[STATIC], objective="quality", constants=Constants(), logged=logged_runs(decisions(logged))
    )
    test = out.filter(pl.col("region") == "r").row(0, named=True)
    assert (test["tasks"], test["runs"], test["static_runs"]) == (6, 3, 3)
    assert test["difference"] == pytest.approx(-0.1) and not test["passes"]
