"""``ratings route``: one decision from a home's published table, optionally logged as ``route.decided``."""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import RoutingError
from ..workspace import StrPath, Workspace
from .router import Router
from .table import RoutingTable


def table_path(ws: Workspace, table: str | os.PathLike | None = None) -> Path:
    """``--table`` if given, else ``<home>/fits/routing-table.json``."""
    return Path(table) if table is not None else ws.table


def decide(
    home: Workspace | StrPath | None,
    *,
    region: str,
    pool: Sequence[str] | None = None,
    role: str | None = None,
    failures: Sequence[str] = (),
    policy: str | None = None,
    seed: int | None = None,
    explain: bool = False,
    table: str | os.PathLike | None = None,
    log_task: str | None = None,
) -> dict[str, Any]:
    """Route once and return the decision as a dict (with rows and gate checks when ``explain``).

    ``seed`` seeds the exploration draw (no seed: greedy, propensity 1). With ``log_task`` the decision is
    appended to the home's task stream as a ``route.decided`` event of that task; its id is in ``event_id``, and
    ``warnings`` says when the home has never seen that task (no event names it: the decision cannot be
    resolved until its events are appended). A ``pool`` key the table does not know is refused
    (:class:`RoutingError`): the router would return it as the choice with nothing known of it.
    """
    ws = Workspace.of(home)
    router = Router.load(table_path(ws, table))
    unknown = [c for c in dict.fromkeys(pool or ()) if c not in known_configs(router.table)]
    if unknown:
        raise RoutingError(
            f"unknown config {unknown[0]!r} in --pool: the routing table has no row for it "
            f"({len(known_configs(router.table))} configs known; `ratings table` lists them)"
        )
    rng = random.Random(seed) if seed is not None else None
    decision = router.route(region, list(pool) if pool else None, role, tuple(failures), policy, rng)
    out = router.describe(decision, region, role) if explain else decision.to_dict()
    if log_task is not None:
        from ..streams.log import append
        from .seen import task_seen

        seen = task_seen(ws, log_task)
        result = append(ws, [decision.to_event(log_task)])
        out["event_id"] = result.ids[0]
        if not seen:
            out["warnings"] = [
                f"task {log_task!r} has no event in {ws.root} (neither in the streams nor in the store): "
                "the logged decision cannot be resolved until the task's events are appended"
            ]
    return out


def known_configs(table: RoutingTable) -> frozenset[str]:
    """Every config the table has a row for, in any region."""
    return frozenset(m.config for region in table.regions.values() for m in region.members)
