"""``ratings route``: one decision from a home's published table, optionally logged as ``route.decided``."""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..home import Home
from .router import Router

TABLE_FILE = "routing-table.json"


def table_path(home: str | os.PathLike | Home | None, table: str | os.PathLike | None = None) -> Path:
    """``--table`` if given, else ``<home>/fits/routing-table.json``."""
    return Path(table) if table is not None else Home.resolve(home).fits / TABLE_FILE


def decide(
    home: str | os.PathLike | Home | None,
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
    appended to the home's task stream as a ``route.decided`` event of that task; its id is in ``event_id``.
    """
    router = Router.load(table_path(home, table))
    rng = random.Random(seed) if seed is not None else None
    decision = router.route(region, list(pool) if pool else None, role, tuple(failures), policy, rng)
    out = router.describe(decision, region, role) if explain else decision.to_dict()
    if log_task is not None:
        from ..streams import append

        result = append(home, [decision.to_event(log_task)])
        out["event_id"] = result.ids[0]
    return out
