"""No NaN or infinity reaches the table, the stats or the page, whatever valid values the events carry.

The property test appends events with extreme but valid numbers (the event bounds: weights and costs up to 1e6,
durations and counts up to 1e12; tiny, subnormal and zero values; many of each), compacts and fits, and asserts
a published table and stats that are finite. Rows outside the bounds (a store written before them, or by another
writer) are left out of the fit and named.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from fixtures_fit import A, B, attempted, context, opened, rated
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.evaluate.protocol import lambda_scale
from pipeline.fit.context import Part
from pipeline.fit.finite import ids_text, non_finite_paths
from pipeline.nightly.job import run_fit
from pipeline.nightly.options import FitOptions
from pipeline.routing.table import load as load_table
from pipeline.streams.log import append

SUBNORMAL = 5e-324
#: Extreme but valid magnitudes: zero, subnormal, tiny, ordinary, the bounds.
WEIGHTS = [SUBNORMAL, 1e-310, 1e-300, 1e-12, 0.5, 1.0]
IMPORTANCE = [0.0, SUBNORMAL, 1e-300, 1.0, 1e3, 1e6]
COSTS = [None, 0.0, SUBNORMAL, 1e-300, 1e-9, 0.3, 1e6]
SCORES = [0.0, SUBNORMAL, 1e-300, 0.5, 1.0]
COUNTS = [0, 1, 10**12]


def _config(model: str) -> dict[str, Any]:
    return {"cli": "c", "route": None, "model": model, "effort": None}


@st.composite
def extreme_events(draw: st.DrawFn) -> list[dict[str, Any]]:
    """12 tasks in 2 regions, one a day; each done by 1 to 3 of 3 configs with extreme numbers, some rejected."""
    events: list[dict[str, Any]] = []
    pick = st.sampled_from
    for i in range(12):
        task, moment = f"T{i:02d}", f"2026-01-{i + 1:02d}T00:00:00Z"
        events.append({"type": "task.opened", "task": task, "region": f"r{i % 2}", "at": moment})
        models = draw(st.lists(pick("xyz"), min_size=1, max_size=3, unique=True))
        for m in models:
            cfg = _config(m)
            events.append(
                {"type": "task.attempted", "task": task, "config": cfg, "status": "success", "at": moment,
                 "cost_usd": draw(pick(COSTS)), "duration_ms": draw(pick(COUNTS)), "tool_calls": draw(pick(COUNTS)),
                 "files_read": draw(pick(COUNTS))}
            )  # fmt: skip
            if i == 0:  # one ordinary rating, so that the learned part has some weight to fit (else: nothing to fit)
                events.append(
                    {"type": "task.rated", "task": task, "config": cfg, "rater": {"kind": "human", "name": "h"},
                     "at": moment, "score": 1.0}
                )  # fmt: skip
            for _ in range(draw(st.integers(1, 3))):
                events.append(
                    {"type": "task.rated", "task": task, "config": cfg, "rater": {"kind": "gate", "name": "g"},
                     "at": moment, "score": draw(pick(SCORES)), "precision": draw(pick(WEIGHTS)),
                     "confidence": draw(pick(WEIGHTS)), "importance": draw(pick(IMPORTANCE))}
                )  # fmt: skip
            if draw(st.booleans()):
                events.append(
                    {"type": "task.rejected", "task": task, "config": cfg, "rater": {"kind": "reviewer", "name": "r"},
                     "claim": "broken", "evidence": [], "weight": draw(pick([SUBNORMAL, 1e-300, 1.0, 1e6])),
                     "at": moment}
                )  # fmt: skip
    return events


def _finite_json(path: Path) -> Any:
    """The file's JSON, refusing NaN and infinities (the published form never has them)."""

    def refuse(token: str) -> float:
        raise AssertionError(f"{path.name} holds {token}")

    return json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=extreme_events(), objective=st.sampled_from(["quality_per_dollar", "utility", "quality"]))
def test_extreme_valid_values_give_a_finite_published_table_and_stats(tmp_path_factory, events, objective):
    home = tmp_path_factory.mktemp("extreme")
    (home / "fits").mkdir()
    append(home, events)  # the event boundary accepts every one of them
    result = run_fit(home, FitOptions(objective=objective, prm=True))  # compaction, fit, publish
    table = _finite_json(home / "fits" / "routing-table.json")
    stats = _finite_json(home / "case-studies" / "routing-by-rating" / "stats.json")
    assert table["version"] == result.table.version and load_table(home / "fits" / "routing-table.json")
    assert "*" in table["regions"] and stats["split"]["learned_tasks"] == 8
    for region in table["regions"].values():
        for member in region["members"]:
            assert math.isfinite(member["quality"]) and math.isfinite(member["value"])


def test_rows_outside_the_event_bounds_are_left_out_and_named():
    # A store written before the bounds: a weight of 1e300 twice would overflow W; a cost of 1e300 likewise.
    ctx = context(
        opened("t1", "r", 0),
        rated("ok", "t1", A, 1.0),
        rated("huge-1", "t1", B, 1.0, importance=1e300),
        rated("huge-2", "t1", B, 0.0, importance=1e300),
        attempted("cheap", "t1", A, cost=0.5),
        attempted("dear", "t1", B, cost=1e300),
        attempted("unknown", "t1", A, cost=None),
    )
    row = ctx.values(Part.FULL).row(0, named=True)  # only A's rating is left; B's attempt went with B's ratings
    assert ctx.values(Part.FULL).height == 1 and (row["n"], row["attempts"], row["cost_usd"]) == (1, 2, 0.5)
    assert ctx.notes == (
        "2 rating(s) with a weight outside [0, 1e+06] or a score outside [0, 1] were left out of the fit "
        "(the event bounds): huge-1, huge-2",
        "1 attempt(s) with a cost outside [0, 1e+06] USD were left out of the fit (the event bounds): dear",
    )


def test_a_lambda_unit_that_overflows_is_one_and_said():
    # mean cost 1e6 over a mean quality of 1e-310: 1e316 overflows a float, so the unit is 1 with a note.
    values = pl.DataFrame({"cost_usd": [1e6, 1e6], "value": [2e-310, 0.0]})
    scale, note = lambda_scale(values)
    assert scale == 1.0 and note is not None and "cannot be computed finitely" in note
    assert lambda_scale(pl.DataFrame({"cost_usd": [0.2, 0.4], "value": [0.5, 1.0]})) == (pytest.approx(0.4), None)
    assert lambda_scale(
        pl.DataFrame({"cost_usd": [None], "value": [1.0]}, schema_overrides={"cost_usd": pl.Float64})
    ) == (
        None,
        None,
    )


def test_non_finite_paths_name_where_in_the_stats():
    data = {"a": {"b": math.nan}, "c": [1.0, math.inf], "d": (0.5,), "e": "text"}
    assert non_finite_paths(data) == ["a.b", "c[1]"]
    assert ids_text([f"id{i}" for i in range(7)]) == "id0, id1, id2, id3, id4 and 2 more"
