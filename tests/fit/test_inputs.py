"""Fit inputs: weights, rejections, retractions, regions, task time, restrictions, task values.

docs/design.md, Inputs.
"""

from __future__ import annotations

import math
from datetime import UTC

import polars as pl
import pytest
from fixtures_fit import (
    A,
    B,
    C,
    at,
    attempted,
    closed,
    load,
    memory_store,
    opened,
    rated,
    rejected,
    retracted,
    worked_events,
)

from pipeline.fit.inputs import RATING_COLUMNS, load_inputs, restrict, task_values


def by_id(frame: pl.DataFrame) -> dict[str, dict]:
    return {row["id"]: row for row in frame.iter_rows(named=True)}


def test_weight_is_precision_times_confidence_times_importance_and_a_rejection_is_score_zero():
    inputs = load(
        opened("t1", "implement"),
        rated("r1", "t1", A, 0.9, precision=0.5, confidence=0.8, importance=2.0),
        rejected("j1", "t1", B, weight=2.5),
    )
    rows = by_id(inputs.ratings)
    # w = 0.5 * 0.8 * 2.0 = 0.8
    assert rows["r1"]["w"] == pytest.approx(0.8)
    assert (rows["r1"]["score"], rows["r1"]["origin"], rows["r1"]["region"]) == (0.9, "rating", "implement")
    # a rejection: score 0 with w = its weight
    assert (rows["j1"]["score"], rows["j1"]["w"], rows["j1"]["origin"]) == (0.0, 2.5, "rejection")
    assert tuple(inputs.ratings.columns) == RATING_COLUMNS


def test_retraction_removes_a_rating_or_a_rejection_and_keeps_it_aside():
    inputs = load(
        rated("r1", "t1", A, 0.9),
        rated("r2", "t1", A, 0.1),
        rejected("j1", "t1", B),
        retracted("x1", "r2", 5),
        retracted("x2", "j1", 6),
        retracted("x3", "no-such-rating", 7),
    )
    assert inputs.ratings["id"].to_list() == ["r1"]
    assert sorted(inputs.retracted["id"].to_list()) == ["j1", "r2"]
    assert by_id(inputs.retracted)["r2"]["retracted_at"] == at(5)


def test_region_comes_from_task_opened_and_defaults_to_general():
    inputs = load(opened("t1", "review", 0, thread="main"), rated("r1", "t1", A, 1.0), rated("r2", "t2", A, 1.0))
    regions = dict(inputs.tasks.select("task", "region").iter_rows())
    assert regions == {"t1": "review", "t2": "general"}  # t2 has ratings but no task.opened
    assert dict(inputs.ratings.select("id", "region").iter_rows()) == {"r1": "review", "r2": "general"}


def test_task_time_is_its_first_event_of_any_kind():
    # the attempt (hour 0.5) comes before the task.opened (hour 3) and the rating (hour 4)
    inputs = load(
        attempted("x1", "t1", A, 0.5, 0.1),
        opened("t1", "implement", 3),
        rated("r1", "t1", A, 1.0, 4),
        closed("c1", "t1", 9),
    )
    row = inputs.tasks.row(0, named=True)
    assert (row["first_at"], row["opened_at"], row["region"]) == (at(0.5), at(3), "implement")
    assert inputs.newest_at == at(9)  # the closure is the newest event


def test_thread_and_since_restrict_the_tasks():
    events = [
        opened("t1", thread="x", hours=0),
        opened("t2", thread="y", hours=10),
        rated("r1", "t1", A, 1.0, 1),
        rated("r2", "t2", A, 0.0, 11),
        rated("r3", "t3", A, 0.5, 20),
    ]
    assert load(*events, thread="x").ratings["id"].to_list() == ["r1"]
    # since: tasks whose first event is at or after it (a zoned time is converted to UTC)
    since = at(10).replace(tzinfo=UTC)
    assert load(*events, since=since).ratings["id"].to_list() == ["r2", "r3"]
    assert load(*events, thread="y", since=since).tasks["task"].to_list() == ["t2"]


def test_restrict_cuts_tasks_and_time_and_honours_only_earlier_retractions():
    events = [
        opened("t1", "implement", 0),
        rated("r1", "t1", A, 1.0, 1),
        rated("r2", "t1", A, 0.0, 8),
        rated("r3", "t1", B, 0.5, 2),
        retracted("x1", "r3", 6),
        opened("t2", "review", 3),
        rated("r4", "t2", A, 1.0, 4),
        rated("r5", "t3", A, 1.0, 2),
        opened("t3", "review", 7),
    ]
    inputs = load(*events)
    assert sorted(inputs.ratings["id"]) == ["r1", "r2", "r4", "r5"]
    cut = restrict(inputs, ["t1", "t3"], until=at(5))
    # r2 is after the limit; t2 is not kept; r3's retraction (hour 6) is after the limit, so r3 is back
    assert cut.ratings["id"].to_list() == ["r1", "r3", "r5"]
    assert cut.retracted.height == 0
    # t3's task.opened (hour 7) is after the limit: its region falls back to general
    assert dict(cut.tasks.select("task", "region").iter_rows()) == {"t1": "implement", "t3": "general"}
    assert by_id(cut.ratings)["r5"]["region"] == "general"
    assert cut.newest_at == at(2)
    later = restrict(inputs, pl.Series(["t1"]), until=at(7))
    assert later.ratings["id"].to_list() == ["r1"] and later.retracted["id"].to_list() == ["r3"]
    assert restrict(inputs, ["t1", "t2", "t3"], until=None).ratings.equals(inputs.ratings)
    # An event at the limit ties with it and is kept (concurrent, not later): r4 at hour 4, t3 opened at hour 7
    assert restrict(inputs, ["t2"], until=at(4)).ratings["id"].to_list() == ["r4"]
    assert dict(restrict(inputs, ["t3"], until=at(7)).tasks.select("task", "region").iter_rows()) == {"t3": "review"}


def test_task_values_aggregate_weights_costs_and_gates():
    values = task_values(load(*worked_events()))
    rows = {(r["task"], r["config_key"]): r for r in values.iter_rows(named=True)}
    t1a = rows[("t1", A)]
    # q = (1*1.0 + 1*0.5) / 2 = 0.75; cost 0.10 + 0.30 = 0.40 fully known; gate = the gate rating alone = 1.0
    assert (t1a["value"], t1a["weight"], t1a["n"], t1a["wscore"]) == (0.75, 2.0, 2, 1.5)
    assert (t1a["cost_usd"], t1a["attempts"], t1a["unknown_cost"], t1a["gate"]) == (pytest.approx(0.4), 2, 0, 1.0)
    t1b = rows[("t1", B)]  # the rejection: value 0 with weight 2, no gate rating
    assert (t1b["value"], t1b["weight"], t1b["gate"]) == (0.0, 2.0, None)
    t2a = rows[("t2", A)]  # its only attempt has no cost
    assert (t2a["value"], t2a["weight"], t2a["cost_usd"], t2a["unknown_cost"]) == (0.8, 0.5, None, 1)
    t3b = rows[("t3", B)]  # rated without any attempt: one attempt of unknown cost
    assert (t3b["attempts"], t3b["unknown_cost"], t3b["cost_usd"]) == (0, 1, None)
    assert values.select("task", "config_key").rows() == [
        ("t1", A),
        ("t1", B),
        ("t2", A),
        ("t2", B),
        ("t3", A),
        ("t3", B),
    ]


def test_recency_weight_halves_per_half_life_from_the_newest_event():
    # scores 1.0 at hour 0 and 0.0 at hour 240 (10 days later, the newest event).
    inputs = load(rated("r1", "t1", A, 1.0, 0), rated("r2", "t1", A, 0.0, 240))
    row = task_values(inputs, half_life_days=10).row(0, named=True)
    # w1 = exp(-ln2 * 10 / 10) = 0.5, w2 = 1: value = 0.5 / 1.5 = 1/3
    assert row["weight"] == pytest.approx(1.5) and row["value"] == pytest.approx(1 / 3)
    assert task_values(inputs, half_life_days=math.inf).row(0, named=True)["value"] == pytest.approx(0.5)
    # memoised per half-life on the inputs
    assert task_values(inputs, half_life_days=10) is task_values(inputs, half_life_days=10.0)


def test_prm_fills_in_only_where_no_other_rating_exists_and_restrict_rederives_it():
    events = [
        opened("t1", "implement", 0),
        attempted("x1", "t1", A, 0.5, 0.1, tool_calls=2, duration_ms=5000),
        attempted("x2", "t1", B, 0.5, 0.1, tool_calls=2),
        rated("r1", "t1", A, 0.3, 4),
    ]
    inputs = load(*events, prm=True)
    prm = inputs.ratings.filter(pl.col("origin") == "prm")
    # only B (A has a real rating): success 0.40 + activity 0.15 + cost 0.05 = 0.60
    assert prm.select("config_key", "score", "rater_name").rows() == [(B, pytest.approx(0.6), "prm")]
    # before hour 4 A's real rating is not there yet: both get a PRM fill-in
    early = restrict(inputs, ["t1"], until=at(2))
    assert sorted(early.ratings.filter(pl.col("origin") == "prm")["config_key"]) == [A, B]
    assert load(*events, prm=False).ratings["id"].to_list() == ["r1"]


def test_an_empty_store_gives_empty_frames_and_no_newest_time():
    inputs = load_inputs(memory_store(), prm=True)
    assert inputs.tasks.height == inputs.ratings.height == inputs.attempts.height == 0
    assert inputs.newest_at is None
    assert task_values(inputs).height == 0


def test_a_compacted_store_gives_the_same_inputs_as_the_hand_made_tables(home):
    from fixtures_fit import as_event

    from pipeline.compact import compact
    from pipeline.store import open_store
    from pipeline.streams.log import append

    events = [
        *worked_events(),
        retracted("x9", "r2", 30),
        closed("c1", "t1", 31),
        attempted("x7", "t3", C, 20.6, 0.1, tool_calls=1),
    ]
    append(home, [as_event(e) for e in events], fsync="never")
    compact(home)
    with open_store(home) as store:
        stored = load_inputs(store, prm=True)
    by_hand = load(*events, prm=True)
    for name in ("tasks", "ratings", "retracted", "attempts", "closures"):
        assert getattr(stored, name).equals(getattr(by_hand, name)), name
    assert stored.newest_at == by_hand.newest_at == at(31)
    assert stored.ratings.filter(pl.col("origin") == "prm")["config_key"].to_list() == [C]
    assert stored.retracted["id"].to_list() == ["r2"]
    assert task_values(stored).equals(task_values(by_hand))
