"""The fit's context: weights, rejections, retractions, regions, task time, the parts of the split, task values.

docs/design.md, Inputs; Fit, The aggregation. Task codes are ranks by task id (``named`` turns them back).
"""

from __future__ import annotations

import math
from datetime import UTC
from fractions import Fraction

import pytest
from fixtures_fit import (
    A,
    B,
    C,
    at,
    attempted,
    closed,
    context,
    named,
    opened,
    rated,
    rejected,
    retracted,
    worked_events,
)

from pipeline.fit.context import Part


def rows(ctx, events, part=Part.FULL, **kw):
    """(task id, config) -> its task-value row."""
    frame = named(ctx.values(part, **kw), events)
    return {(r["task"], r["config_key"]): r for r in frame.iter_rows(named=True)}


def test_weight_is_precision_times_confidence_times_importance_and_a_rejection_is_score_zero():
    events = [
        opened("t1", "implement"),
        rated("r1", "t1", A, 0.9, precision=0.5, confidence=0.8, importance=2.0),
        rejected("j1", "t1", B, weight=2.5),
    ]
    got = rows(context(*events), events)
    # w = 0.5 * 0.8 * 2.0 = 0.8
    a = got[("t1", A)]
    assert (a["weight"], a["value"], a["region"], a["n_rej"]) == (pytest.approx(0.8), 0.9, "implement", 0)
    # a rejection: score 0 with w = its weight
    b = got[("t1", B)]
    assert (b["weight"], b["value"], b["n_rej"], b["w_rej"]) == (2.5, 0.0, 1, 2.5)


def test_a_retraction_removes_a_rating_or_a_rejection_and_is_counted():
    events = [
        rated("r1", "t1", A, 0.9),
        rated("r2", "t1", A, 0.1),
        rejected("j1", "t1", B),
        retracted("x1", "r2", 5),
        retracted("x2", "j1", 6),
        retracted("x3", "no-such-rating", 7),
    ]
    ctx = context(*events)
    assert list(rows(ctx, events)) == [("t1", A)]  # B's only rating is retracted
    assert rows(ctx, events)[("t1", A)]["n"] == 1
    assert sum(r["retracted"] for r in ctx.counts) == 2


def test_region_comes_from_task_opened_and_defaults_to_general():
    events = [opened("t1", "review", 0, thread="main"), rated("r1", "t1", A, 1.0), rated("r2", "t2", A, 1.0)]
    regions = {task: r["region"] for (task, _), r in rows(context(*events), events).items()}
    assert regions == {"t1": "review", "t2": "general"}  # t2 has ratings but no task.opened


def test_task_time_is_its_first_event_of_any_kind_and_the_newest_time_the_last_event():
    # the attempt (hour 0.5) comes before the task.opened (hour 3) and the rating (hour 4)
    events = [attempted("x1", "t1", A, 0.5, 0.1), opened("t1", "implement", 3), rated("r1", "t1", A, 1.0, 4)]
    ctx = context(*events, closed("c1", "t1", 9))
    assert ctx.tasks["first_at"].to_list() == [at(0.5)]
    assert ctx.newest_of(Part.FULL) == at(9)  # the closure is the newest event


def test_thread_and_since_keep_some_tasks():
    events = [
        opened("t1", thread="x", hours=0),
        opened("t2", thread="y", hours=10),
        rated("r1", "t1", A, 1.0, 1),
        rated("r2", "t2", A, 0.0, 11),
        rated("r3", "t3", A, 0.5, 20),
    ]
    assert context(*events, thread="x").values(Part.FULL)["wscore"].to_list() == [1.0]
    # since: tasks whose first event is at or after it (a zoned time is converted to UTC)
    since = at(10).replace(tzinfo=UTC)
    assert context(*events, since=since).values(Part.FULL)["wscore"].to_list() == [0.0, 0.5]
    assert context(*events, thread="y", since=since).tasks.height == 1


def test_the_learned_part_is_cut_at_the_cutoff_and_honours_only_earlier_retractions():
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
    # Task order by first event: t1 (0), t3 (2), t2 (3). Split 2/3: t1, t3 learned, t2 held out; cutoff = hour 3.
    # Inner split 2/3 of the 2 learned: t1 inner learned (cut at t3's time, hour 2), t3 validation.
    ctx = context(*events, fraction=Fraction(2, 3))
    assert (ctx.split.learned, ctx.split.cutoff, ctx.split.inner_cutoff) == (2, at(3), at(2))
    full = rows(ctx, events)
    assert full[("t1", A)]["n"] == 2 and ("t1", B) not in full  # r3 is retracted at hour 6
    learned = rows(ctx, events, Part.LEARNED)
    # r2 is after the cutoff; r3's retraction (hour 6) is after it too, so r3 counts; t3's task.opened (hour 7) is
    # after it: its region falls back to general
    assert {k: (r["n"], r["region"]) for k, r in learned.items()} == {
        ("t1", A): (1, "implement"),
        ("t1", B): (1, "implement"),
        ("t3", A): (1, "general"),
    }
    assert ctx.newest_of(Part.LEARNED) == at(2)
    assert list(rows(ctx, events, Part.HELD_OUT)) == [("t2", A)]  # every event of a held-out task
    assert list(rows(ctx, events, Part.VALIDATION)) == [("t3", A)]
    # An event at the cut ties with it and is kept (concurrent, not later): r3 at hour 2 is in the inner part
    assert set(rows(ctx, events, Part.INNER)) == {("t1", A), ("t1", B)}
    assert [ctx.count(p) for p in Part] == [3, 2, 1, 1, 1]


def test_task_values_aggregate_weights_costs_and_gates():
    events = worked_events()
    got = rows(context(*events), events)
    t1a = got[("t1", A)]
    # q = (1*1.0 + 1*0.5) / 2 = 0.75; cost 0.10 + 0.30 = 0.40 fully known; gate = the gate rating alone = 1.0
    assert (t1a["value"], t1a["weight"], t1a["n"], t1a["wscore"]) == (0.75, 2.0, 2, 1.5)
    assert (t1a["cost_usd"], t1a["attempts"], t1a["unknown_cost"], t1a["gate"]) == (pytest.approx(0.4), 2, 0, 1.0)
    t1b = got[("t1", B)]  # the rejection: value 0 with weight 2, no gate rating
    assert (t1b["value"], t1b["weight"], t1b["gate"]) == (0.0, 2.0, None)
    t2a = got[("t2", A)]  # its only attempt has no cost
    assert (t2a["value"], t2a["weight"], t2a["cost_usd"], t2a["unknown_cost"]) == (0.8, 0.5, None, 1)
    t3b = got[("t3", B)]  # rated without any attempt: one attempt of unknown cost
    assert (t3b["attempts"], t3b["unknown_cost"], t3b["cost_usd"]) == (0, 1, None)
    assert list(got) == [("t1", A), ("t1", B), ("t2", A), ("t2", B), ("t3", A), ("t3", B)]


def test_recency_weight_halves_per_half_life_from_the_newest_event():
    # scores 1.0 at hour 0 and 0.0 at hour 240 (10 days later, the newest event).
    ctx = context(rated("r1", "t1", A, 1.0, 0), rated("r2", "t1", A, 0.0, 240), half_lives=(10.0,))
    row = ctx.values(Part.FULL, 10).row(0, named=True)
    # w1 = exp(-ln2 * 10 / 10) = 0.5, w2 = 1: value = 0.5 / 1.5 = 1/3
    assert row["weight"] == pytest.approx(1.5) and row["value"] == pytest.approx(1 / 3)
    assert ctx.values(Part.FULL, math.inf).row(0, named=True)["value"] == pytest.approx(0.5)
    # computed once per (part, half-life)
    assert ctx.values(Part.FULL, 10) is ctx.values(Part.FULL, 10.0)


def test_recency_is_measured_from_each_part_s_newest_event():
    # t1 rated at hours 0 and 240; t2 (held out) rated at hour 480: the learned part's newest event is hour 240.
    events = [rated("r1", "t1", A, 1.0, 0), rated("r2", "t2", A, 0.0, 480), opened("t2", hours=300)]
    ctx = context(*events, half_lives=(10.0,), fraction=Fraction(1, 2))
    learned = ctx.values(Part.LEARNED, 10).row(0, named=True)
    full = ctx.values(Part.FULL, 10).filter(ctx.values(Part.FULL, 10)["task"] == 0).row(0, named=True)
    # learned: age 0 days from hour 0 (t1's only rating is the part's newest event): w 1; full: age 20 days: w 1/4
    assert (learned["weight"], full["weight"]) == (pytest.approx(1.0), pytest.approx(0.25))


def test_prm_fills_in_only_where_no_other_rating_exists_and_each_cut_makes_its_own():
    events = [
        opened("t1", "implement", 0),
        attempted("x1", "t1", A, 0.5, 0.1, tool_calls=2, duration_ms=5000),
        attempted("x2", "t1", B, 0.5, 0.1, tool_calls=2),
        rated("r1", "t1", A, 0.3, 4),
        opened("t2", "implement", 2),
        rated("r2", "t2", A, 1.0, 3),
    ]
    ctx = context(*events, prm=True, fraction=Fraction(1, 2))  # t1 learned, cut at t2's time (hour 2)
    full = rows(ctx, events)
    # only B (A has a real rating): success 0.40 + activity 0.15 + cost 0.05 = 0.60, weight 1
    assert [(k, r["wscore"], r["weight"]) for k, r in full.items() if r["prm"]] == [(("t1", B), 0.6, 1.0)]
    # before hour 4 A's real rating is not there yet: both get a PRM fill-in in the learned part
    assert sorted(k for k, r in rows(ctx, events, Part.LEARNED).items() if r["prm"]) == [("t1", A), ("t1", B)]
    # real values leave fill-ins out; without PRM there are none
    assert list(rows(ctx, events, real=True)) == [("t1", A), ("t2", A)]
    assert not context(*events, prm=False).values(Part.FULL)["prm"].any()


def test_an_empty_store_gives_empty_frames_and_no_newest_time():
    ctx = context(prm=True)
    assert ctx.tasks.height == ctx.values(Part.FULL).height == 0
    assert ctx.newest_of(Part.FULL) is None


def test_a_compacted_store_gives_the_same_context_as_the_hand_made_tables(home):
    from fixtures_fit import as_event

    from pipeline.compact import compact
    from pipeline.fit.aggregate import DuckDBEngine, Spec
    from pipeline.fit.context import FitContext
    from pipeline.fit.shipped import Shipped
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
    spec = Spec(prm=True, half_lives=(14.0,), fraction=Fraction(1, 2))
    with open_store(home) as store:
        stored = FitContext.build(DuckDBEngine(store), spec, shipped=Shipped(found=False))
    by_hand = context(*events, prm=True, half_lives=(14.0,), fraction=Fraction(1, 2))
    for part in Part:
        assert stored.values(part, 14).equals(by_hand.values(part, 14)), part
    assert stored.newest == by_hand.newest and stored.newest_of(Part.FULL) == at(31)
    assert stored.decisions.equals(by_hand.decisions) and stored.closures.equals(by_hand.closures)
    assert stored.counts == by_hand.counts
