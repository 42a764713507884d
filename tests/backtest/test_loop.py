"""The dispatcher of a backtest on hand-made tables and routers: what each run reveals, escalation, costs, and the
events it logs (no fit involved: the router reads a hand-built table)."""

from __future__ import annotations

import random
from datetime import datetime

import pytest
from fixtures_routing import build_table, member

from pipeline.backtest.data import build
from pipeline.backtest.loop import Dispatcher, Plan, full_information_events
from pipeline.routing.router import Router
from pipeline.streams.batch import prepare

CHEAP, STRONG = "cli/r/cheap/-", "cli/r/strong/-"
T0 = datetime(2026, 1, 1)


def two_task_table(cheap: list[tuple[float, float | None]], strong: list[tuple[float, float | None]]):
    """Task t0 (one row each, both pass) and task t1 with the given rows of cheap and strong."""
    return build(
        "hand-made",
        tasks=["t0", "t1"],
        regions=["general", "general"],
        at=[T0, T0.replace(hour=1)],
        configs=[CHEAP, STRONG],
        cells=[[[(1.0, 1.0)], [(1.0, 5.0)]], [cheap, strong]],
    )


def trace_router(exploration: float = 0.0) -> Router:
    """trace_governed: cheap first, frontier after a failure (both named in the static roles)."""
    table = build_table(
        {"*": [member(CHEAP, 0.5, 1.0), member(STRONG, 0.9, 5.0)]},
        static={"cheap_config": CHEAP, "frontier_config": STRONG},
        exploration=exploration,
    )
    return Router(table)


def test_each_run_reveals_the_next_row_and_costs_add_up() -> None:
    # t1: cheap's rows (0, $1), (1, $1); strong's rows (0, $5), (1, $5).
    # trace_governed, at most 3 runs: cheap row 1 fails -> strong row 1 fails -> every config has failed, the router
    # chooses among them again: strong, whose next unrevealed row (row 2) passes. Quality 1 (the last run's score),
    # cost 1 + 5 + 5 = 11, 3 configs run.
    table = two_task_table([(0.0, 1.0), (1.0, 1.0)], [(0.0, 5.0), (1.0, 5.0)])
    d = Dispatcher(table, Plan("trace_governed", CHEAP, seed=0, max_runs=3))
    events = d.night(1, 2, trace_router())
    assert (d.stream.quality[1], d.stream.cost[1], d.stream.runs[1]) == (1.0, 11.0, 3)
    attempts = [(e["config"]["model"], e["status"], e["cost_usd"]) for e in events if e["type"] == "task.attempted"]
    assert attempts == [("cheap", "failure", 1.0), ("strong", "failure", 5.0), ("strong", "success", 5.0)]
    assert [e["score"] for e in events if e["type"] == "task.rated"] == [0.0, 0.0, 1.0]
    decided = [e for e in events if e["type"] == "route.decided"]
    assert [e["chosen"] for e in decided] == [CHEAP, STRONG, STRONG]
    assert all(e["propensity"] == 1.0 for e in decided)  # nothing explored after a failure, exploration 0 anyway
    assert events[-1]["type"] == "task.closed" and events[-1]["outcome"] == "done"
    prepare(events, source="test")  # valid v1 events, as a dispatcher appends them


def test_max_runs_stops_the_escalation() -> None:
    # The same task with at most 2 runs: cheap fails, strong fails: stop. Quality 0 (strong's row 1), cost 6.
    table = two_task_table([(0.0, 1.0)], [(0.0, 5.0), (1.0, 5.0)])
    d = Dispatcher(table, Plan("trace_governed", CHEAP, seed=0, max_runs=2))
    events = d.night(1, 2, trace_router())
    assert (d.stream.quality[1], d.stream.cost[1], d.stream.runs[1]) == (0.0, 6.0, 2)
    assert events[-1]["outcome"] == "abandoned"


def test_a_policy_that_does_not_escalate_runs_once() -> None:
    # learning_governed keeps the static choice (no evidence): cheap only, although it fails.
    table = two_task_table([(0.0, 1.0)], [(1.0, 5.0)])
    d = Dispatcher(table, Plan("learning_governed", CHEAP, seed=0))
    d.night(1, 2, trace_router())
    assert (d.stream.quality[1], d.stream.cost[1], d.stream.runs[1]) == (0.0, 1.0, 1)


def test_before_the_first_table_the_start_runs_once() -> None:
    table = two_task_table([(0.0, 1.0)], [(1.0, 5.0)])
    d = Dispatcher(table, Plan("trace_governed", STRONG, seed=0))
    events = d.night(0, 2, None)
    # t0 and t1 both run strong once (escalation needs a table); no route.decided without a table
    assert d.stream.runs.tolist() == [1, 1]
    assert d.stream.cost.tolist() == [5.0, 5.0]
    assert [e["type"] for e in events].count("route.decided") == 0


def test_gate_noise_flips_the_verdict_and_the_logged_rating_not_the_outcome() -> None:
    # Noise 1: every verdict is wrong. cheap's row passes (score 1) but is read as a failure (logged rating 0), so
    # trace_governed escalates to strong, whose failed row (score 0) is read as a pass (logged 1): the task's
    # quality is strong's true score 0, its cost 1 + 5.
    table = two_task_table([(1.0, 1.0)], [(0.0, 5.0)])
    d = Dispatcher(table, Plan("trace_governed", CHEAP, seed=0, gate_noise=1.0))
    events = d.night(1, 2, trace_router())
    assert (d.stream.quality[1], d.stream.cost[1], d.stream.runs[1]) == (0.0, 6.0, 2)
    assert [e["score"] for e in events if e["type"] == "task.rated"] == [0.0, 1.0]
    assert [e["status"] for e in events if e["type"] == "task.attempted"] == ["failure", "success"]


def test_exploration_is_drawn_from_the_task_seed_and_logged_with_its_propensity() -> None:
    # learning_governed with exploration 0.5 and two candidates: the other one with probability 0.5, propensity
    # 0.5 / 1 either way. The draw is task 1's own generator "seed/route/1": the router's first uniform < 0.5
    # explores.
    table = two_task_table([(1.0, 1.0)], [(1.0, 5.0)])
    router = trace_router(exploration=0.5)
    for seed in range(6):
        d = Dispatcher(table, Plan("learning_governed", CHEAP, seed=seed))
        events = d.night(1, 2, router)
        decided = next(e for e in events if e["type"] == "route.decided")
        explores = random.Random(f"{seed}/route/1").random() < 0.5
        assert decided["chosen"] == (STRONG if explores else CHEAP)
        assert decided["explored"] is explores
        assert decided["propensity"] == pytest.approx(0.5)


def test_full_information_reveals_every_config_once() -> None:
    table = two_task_table([(0.0, None), (1.0, None)], [(1.0, 5.0)])
    events = full_information_events(table, 1, 2, pass_threshold=0.5)
    rated = [(e["config"]["model"], e["score"]) for e in events if e["type"] == "task.rated"]
    assert rated == [("cheap", 0.0), ("strong", 1.0)]  # cheap's first row only
    # cheap's rows of t1 carry no cost: logged as unknown, realized at cheap's mean known cost ($1, its row of t0)
    assert [e["cost_usd"] for e in events if e["type"] == "task.attempted"] == [None, 5.0]
    assert table.rows[1][0][0].cost_usd == pytest.approx(1.0)
    assert table.filled_costs == 2
    prepare(events, source="test")
