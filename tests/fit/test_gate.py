"""The evidence gate's tests at fit time (pipeline.fit.gate), on hand-made task values worked out in comments."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.fit.gate import gate_evidence
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
    # Region r, five tasks both did. CHEAP: quality 1, 1, 0, 1, 1 at $0.10 each -> 4 / 0.5 = 8 per dollar.
    # STATIC: quality 1 on every task at $1 -> 5 / 5 = 1 per dollar. Difference 8 - 1 = +7.
    # A bootstrap resample loses only when it draws CHEAP's failed task t3 alone (0 per dollar), far below 5%.
    rows = [(f"t{i}", "r", CHEAP, 0.0 if i == 3 else 1.0, 0.1) for i in range(1, 6)]
    rows += [(f"t{i}", "r", STATIC, 1.0, 1.0) for i in range(1, 6)]
    out = gate_evidence(values(rows), against=[STATIC], objective="quality_per_dollar", constants=Constants())
    test = out.filter((pl.col("region") == "r") & (pl.col("config_key") == CHEAP)).row(0, named=True)
    assert test["against"] == STATIC and test["shared_tasks"] == 5
    assert test["difference"] == pytest.approx(7.0)
    assert 0 < test["lower"] < 7.0 and test["passes"]
    # STATIC has no test against itself; the global pool '*' repeats the test over every region.
    assert out.filter(pl.col("config_key") == STATIC).is_empty()
    assert out.filter(pl.col("region") == "*")["difference"].to_list() == pytest.approx([7.0])


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
    # No cost is known: the objective degrades to quality, a mean per task: 1.0 - 0.5 = +0.5 on both tasks.
    assert (test["shared_tasks"], test["difference"], test["lower"], test["passes"]) == (2, 0.5, 0.5, False)
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
