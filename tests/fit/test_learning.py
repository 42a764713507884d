"""learning_stage end to end: a small imported long table -> store -> context -> signals and ladders for the table,
then their held-out figures (ladders, frontier) by pipeline.evaluate.protocol.learning_figures."""

from __future__ import annotations

import gzip
from datetime import datetime, timedelta
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

from pipeline.compact import compact
from pipeline.evaluate.protocol import learning_figures
from pipeline.fit.aggregate import DuckDBEngine, Spec
from pipeline.fit.context import FitContext, Part
from pipeline.fit.learning import LadderOptions, learning_stage, with_after
from pipeline.fit.model import load_shipped
from pipeline.fit.table_build import build_table
from pipeline.routing.table import Static
from pipeline.store import open_store
from pipeline.streams.imports import import_table

CONFIGS = {"small": (0.001, 0.55), "mid": (0.004, 0.7), "large": (0.05, 0.85)}


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    home = tmp_path_factory.mktemp("learning")
    rng = np.random.default_rng(3)
    t0 = datetime(2026, 1, 1)
    lines = ["task_id,config,score,cost_usd,region,at"]
    for i in range(240):
        easy = rng.random()
        at = (t0 + timedelta(hours=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        for name, (cost, p) in CONFIGS.items():
            score = float(rng.random() < p * (0.6 + 0.6 * easy))
            lines.append(f"t{i:04d},{name},{score},{cost},{'ab'[i % 2]},{at}")
    table = home / "sample.csv.gz"
    table.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    import_table(home, table)
    compact(home)
    shipped = load_shipped(None)
    with open_store(home) as store:
        ctx = FitContext.build(DuckDBEngine(store), Spec(fraction=Fraction(7, 10)), shipped=shipped)
    constants = shipped.to_constants(cost_floor_usd=1e-6)
    model = ctx.model(Part.FULL, constants)
    out = learning_stage(ctx, model, constants=constants)
    return model, out, learning_figures(out, ctx)


def test_stats_sections_and_summary(fitted):
    _model, out, figures = fitted
    assert set(figures) == {"ladders", "frontier"}
    summary = figures["ladders"]["summary"]
    assert summary["best_single_config"] == "import/-/large/-"
    assert summary["gate_is_target"] is True and summary["coverage"] == 1.0
    assert summary["held_out_cost_usd"] < summary["best_single_cost_usd"]
    assert len(figures["frontier"]["router"]) == 13
    assert figures["frontier"]["aiq"]["router"] is not None
    assert out.signals["counts"]["tasks_compared"] == 240


def test_table_takes_the_signals_and_ladders(fitted):
    model, out, figures = fitted
    table = build_table(
        model,
        constants_source="shipped",
        static=Static(),
        source={"version": 1},
        fitted_at=datetime(2026, 1, 11),
        signals=out.member_signals,
        ladders=out.ladders,
        gate=out.gate,
    )
    star = table.regions["*"]
    assert star.ladder is not None and star.ladder.rungs == figures["ladders"]["regions"]["*"]["ladder"]
    assert all(m.relative_advantage is not None and m.win_rate is not None for m in star.members)
    # no shipped static config: the gate tests every member against the most-rated one (a tie: key order)
    reference = min(m.config for m in star.members)
    assert all(set(m.gate or {}) == ({reference} - {m.config}) for m in star.members)


def test_budget_option_needs_a_budget():
    with pytest.raises(ValueError):
        LadderOptions(target="budget")
    with pytest.raises(ValueError):
        LadderOptions(budget_usd=0.01)
    assert LadderOptions(target="budget", budget_usd=0.01).budget_usd == 0.01


def test_with_after_reads_the_decisions_then_timing():
    # t1: a ran first (its decision names no after), b after a failed (its decision: after [a]; timing says so too).
    # t2: no decisions; c ran, then d after c's failed attempt (the aggregation marks d escalated): d's after is c,
    # the config on the task whose gate failed. t3: e escalated by timing, but no config on the task failed its
    # gate: left out (null). t4: h's decision says it ran after g failed, though both were logged at one time (no
    # timing): only the decision tells, and without it h reads as a first run.
    values = pl.DataFrame(
        {
            "task": [1, 1, 2, 2, 3, 3, 4, 4],
            "config_key": ["a", "b", "c", "d", "e", "f", "g", "h"],
            "gate": [0.0, 1.0, 0.2, 0.9, 1.0, 0.8, 0.0, 1.0],
            "escalated": [False, True, False, True, True, False, False, False],
        }
    )
    decisions = pl.DataFrame(
        {
            "task": [1, 1, 4],
            "at": [1, 2, 1],
            "id": ["d1", "d2", "d3"],
            "chosen": ["a", "b", "h"],
            "after_failed": [None, ["a"], ["g"]],
        },
        schema_overrides={"after_failed": pl.List(pl.String)},
    )
    assert with_after(values, decisions, 0.5)["after"].to_list() == [[], ["a"], [], ["c"], None, [], [], ["g"]]
    assert with_after(values, None, 0.5)["after"].to_list() == [[], ["a"], [], ["c"], None, [], [], []]
