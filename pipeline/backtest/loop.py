"""One dispatcher's stream of tasks (docs/design.md, Backtest, The loop).

Each task is opened, routed by the product's :class:`~pipeline.routing.Router` with the table of the night
before (none on the first night: then the start config runs, as a dispatcher without a table runs its
default), the decision logged as ``route.decided`` with its propensity, and only the configs run are revealed:
each run of config c on task t reveals the next unrevealed row of (t, c) (the first on the first run; after the
last, the first again). A policy that escalates (:data:`~pipeline.routing.policies.ESCALATES`) runs its next
choice, with the failed configs reported, while the run's gate verdict is a failure, at most ``max_runs`` runs;
every other policy runs once. The gate's verdict is ``score >= pass_threshold``, flipped with probability
``gate_noise`` (a verifier wrong that share of the time): the flipped verdict decides the escalation and is the
gate rating logged (0 for a wrongly failed run, 1 for a wrongly passed one); the task's outcome is always the
table's own score. The task's quality is its last run's score, its cost the sum of its runs' costs. Then the task
is closed (``done`` when the last verdict passed, else ``abandoned``).

Random draws: task i of seed s draws its exploration from ``random.Random("s/route/i")`` and its gate noise from
``random.Random("s/gate/i")`` (one uniform per run whatever ``gate_noise`` is), so two loops over the same tasks
(the bandit loop and the full-information loop, or two noise levels) share their draws task by task.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cache
from typing import Any

import numpy as np

from ..routing.policies import ESCALATES
from ..routing.router import Router
from ..streams.events import Config
from ..utc import format_timestamp
from .data import FullTable

#: The rater every revealed rating is logged under (a gate: the table's grade of the run).
RATER = {"kind": "gate", "name": "backtest"}


@dataclass(frozen=True)
class Plan:
    """What one loop does: the policy and the gate, the start it falls back to, its seed."""

    policy: str
    start_config: str
    seed: int
    pass_threshold: float = 0.5
    max_runs: int = 3
    gate_noise: float = 0.0


@dataclass
class Stream:
    """Per task (in task order) what the loop realized: quality, cost and the configs it ran."""

    quality: np.ndarray
    cost: np.ndarray
    runs: np.ndarray

    @classmethod
    def empty(cls, n: int) -> Stream:
        return cls(np.zeros(n), np.zeros(n), np.zeros(n, dtype=np.int64))


@cache
def _config(key: str) -> dict[str, Any]:
    return Config.from_key(key).model_dump()


def _at(table: FullTable, i: int, micros: int) -> str:
    return format_timestamp(table.at[i] + timedelta(microseconds=micros))


@dataclass
class Dispatcher:
    """Routes one stream of tasks night by night; ``log`` keeps the events a dispatcher appends."""

    table: FullTable
    plan: Plan
    log: bool = True
    stream: Stream = field(init=False)
    _runs_of: dict[tuple[int, int], int] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.stream = Stream.empty(self.table.n)
        self._index = {c: k for k, c in enumerate(self.table.configs)}

    def night(self, first: int, last: int, router: Router | None) -> list[dict[str, Any]]:
        """Route tasks ``first .. last - 1`` with ``router`` (None before the first table); the events logged."""
        events: list[dict[str, Any]] = []
        for i in range(first, last):
            self._task(i, router, events)
        return events

    def _task(self, i: int, router: Router | None, events: list[dict[str, Any]]) -> None:
        table, plan = self.table, self.plan
        task, region = table.tasks[i], table.region_of[i]
        route_rng = random.Random(f"{plan.seed}/route/{i}")
        gate_rng = random.Random(f"{plan.seed}/gate/{i}")
        limit = plan.max_runs if router is not None and plan.policy in ESCALATES else 1
        log = self.log
        if log:
            events.append(
                {"id": f"bt-{i}-o", "type": "task.opened", "task": task, "region": region, "at": _at(table, i, 0)}
            )
        failures: list[str] = []
        cost, passed, score = 0.0, False, 0.0
        for j in range(limit):
            if router is None:
                config, decided = plan.start_config, None
            else:
                d = router.route(region, pool=table.configs, failures=failures, policy=plan.policy, rng=route_rng)
                config, decided = d.config, d
            k = self._index[config]
            cells = table.rows[i][k]
            done = self._runs_of.get((i, k), 0)
            self._runs_of[(i, k)] = done + 1
            outcome = cells[done % len(cells)]
            passed = outcome.score >= plan.pass_threshold
            flipped = gate_rng.random() < plan.gate_noise
            logged = outcome.score
            if flipped:
                logged, passed = (0.0 if passed else 1.0), not passed
            score, cost = outcome.score, cost + outcome.cost_usd
            if log:
                at = _at(table, i, 2 * j + 2)
                if decided is not None:
                    events.append({**decided.to_event(task), "id": f"bt-{i}-{j}-d", "at": _at(table, i, 2 * j + 1)})
                events.append(
                    {
                        "id": f"bt-{i}-{j}-a",
                        "type": "task.attempted",
                        "task": task,
                        "config": _config(config),
                        "status": "success" if passed else "failure",
                        "cost_usd": outcome.logged_cost_usd,
                        "at": at,
                        **({"failure_mode": outcome.failure_mode} if outcome.failure_mode is not None else {}),
                    }
                )
                events.append(
                    {
                        "id": f"bt-{i}-{j}-r",
                        "type": "task.rated",
                        "task": task,
                        "config": _config(config),
                        "rater": RATER,
                        "score": logged,
                        "at": at,
                    }
                )
            if passed:
                break
            failures.append(config)
        runs = j + 1
        self.stream.quality[i], self.stream.cost[i], self.stream.runs[i] = score, cost, runs
        if log:
            events.append(
                {
                    "id": f"bt-{i}-c",
                    "type": "task.closed",
                    "task": task,
                    "outcome": "done" if passed else "abandoned",
                    "at": _at(table, i, 2 * runs + 1),
                }
            )


def full_information_events(table: FullTable, first: int, last: int, pass_threshold: float) -> list[dict[str, Any]]:
    """What the full-information loop's refit sees of tasks ``first .. last - 1``: every config run once on every
    task (each config's first row: its attempt and its gate rating, all at the task's time, never an
    escalation)."""
    events: list[dict[str, Any]] = []
    for i in range(first, last):
        task = table.tasks[i]
        at = _at(table, i, 0)
        events.append({"id": f"fi-{i}-o", "type": "task.opened", "task": task, "region": table.region_of[i], "at": at})
        for k, config in enumerate(table.configs):
            outcome = table.rows[i][k][0]
            common = {"task": task, "config": _config(config), "at": at}
            events.append(
                {
                    "id": f"fi-{i}-{k}-a",
                    "type": "task.attempted",
                    **common,
                    "status": "success" if outcome.score >= pass_threshold else "failure",
                    "cost_usd": outcome.logged_cost_usd,
                    **({"failure_mode": outcome.failure_mode} if outcome.failure_mode is not None else {}),
                }
            )
            events.append(
                {"id": f"fi-{i}-{k}-r", "type": "task.rated", **common, "rater": RATER, "score": outcome.score}
            )
    return events
