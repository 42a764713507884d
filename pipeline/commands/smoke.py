"""``ratings smoke``: prove on a throwaway home that evidence moves the router.

In a temporary directory (never the user's home): simulate a small backlog,
fit, route one region with the default policy (``learning_governed``) and
note its choice A; append evidence in which another member B of that region
clearly wins (``tasks`` new tasks of the region, each attempted by A and B at
their table costs, a gate rating of 0 for A and 1 for B, timed after
everything else); fit again and route again. The verdict is
``LEARNING OBSERVED`` when the router moved A -> B, else ``NO CHANGE`` with
the gate checks that kept it.

B is the cheapest other member of the region (lowest table cost, then key), so
the evidence wins on quality per dollar as well as on quality. Both fits pin
every constant (no grid search) to stay fast; the learning shown is the
quality, relative advantage and evidence gate (docs/design.md, Fit; docs/design.md, Evidence gate),
not the search.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from pydantic import BaseModel

from ..errors import PipelineError
from ..streams.events import Config
from ..utc import format_timestamp, parse_timestamp
from ..workspace import Workspace

if TYPE_CHECKING:
    from ..nightly.job import FitResult
    from ..routing.table import RoutingTable

DEFAULT_TASKS = 300


class Pinned(TypedDict):
    """The constants both fits pin (keyword arguments of :class:`pipeline.nightly.options.FitOptions`)."""

    prior_source: Literal["shipped", "measured"]
    prior_weight: float
    exploration: float
    half_life_days: float | Literal["inf"]


#: Constants pinned in both fits (the shipped defaults: docs/design.md, Routing table), so no grid search runs.
PINNED: Pinned = {"prior_source": "shipped", "prior_weight": 3.0, "exploration": 0.3, "half_life_days": "inf"}


class SmokeResult(BaseModel):
    learned: bool
    verdict: str  # the VERDICT line
    region: str
    before: dict[str, Any]  # the first decision
    after: dict[str, Any]  # the decision after the evidence (with its gate checks)
    evidence_for: str  # B
    evidence_tasks: int
    steps: list[str]
    home: str | None  # the kept directory, or None when it was removed


def _simulate(ws: Workspace, tasks: int, seed: int) -> None:
    from ..simulate import preset, simulate

    # The backlog's pace (1,000 tasks in 120 days) kept for fewer tasks: fewer days, fewer store partitions.
    scenario = preset("backlog", tasks=tasks)
    simulate(ws, scenario.model_copy(update={"days": max(7.0, scenario.days * tasks / 1000)}), seed=seed)


def _fit(ws: Workspace, seed: int) -> FitResult:
    from ..nightly.job import run_fit
    from ..nightly.options import FitOptions

    return run_fit(ws, FitOptions(seed=seed, case_study="smoke", **PINNED))


def _pick_region(table: RoutingTable) -> str:
    """The region (not '*') with the most fitted rating weight and at least two members; ties by name."""
    candidates = [
        (sum(m.weight for m in r.members), name)
        for name, r in table.regions.items()
        if name != "*" and len(r.members) >= 2
    ]
    if not candidates:
        raise PipelineError("the simulated table has no region with two members; cannot stage evidence")
    return min(candidates, key=lambda x: (-x[0], x[1]))[1]


def _evidence(table: RoutingTable, region: str, a: str, b: str, n: int) -> list[dict[str, Any]]:
    """``n`` tasks of ``region`` where ``a`` fails (gate 0) and ``b`` passes (gate 1), after the newest event."""
    rows = {m.config: m for m in table.regions[region].members}
    start = parse_timestamp(table.fitted_at) if table.fitted_at else datetime(2026, 1, 1, tzinfo=UTC)
    out: list[dict[str, Any]] = []
    for i in range(n):
        at = start + timedelta(minutes=10 * (i + 1))
        task = f"SMOKE-{i:04d}"
        out.append(
            {"id": f"{task}-open", "type": "task.opened", "task": task, "region": region, "at": format_timestamp(at)}
        )
        for config, score in ((a, 0.0), (b, 1.0)):
            cfg = Config.from_key(config).model_dump()
            stamp = format_timestamp(at + timedelta(minutes=1))
            out.append(
                {
                    "id": f"{task}-{config}-attempt",
                    "type": "task.attempted",
                    "task": task,
                    "config": cfg,
                    "status": "success" if score else "failure",
                    "cost_usd": rows[config].cost_usd,
                    "at": stamp,
                }
            )
            out.append(
                {
                    "id": f"{task}-{config}-gate",
                    "type": "task.rated",
                    "task": task,
                    "config": cfg,
                    "rater": {"kind": "gate", "name": "smoke"},
                    "score": score,
                    "at": stamp,
                }
            )
    return out


def smoke(
    *,
    tasks: int = DEFAULT_TASKS,
    evidence_tasks: int | None = None,
    seed: int = 0,
    keep: str | os.PathLike | None = None,
    say: Callable[[str], None] | None = None,
) -> SmokeResult:
    """Run the smoke test in a temporary directory (or in ``keep``, which must be empty or absent)."""
    if keep is not None:
        root = Path(keep).absolute()
        if root.exists() and any(root.iterdir()):
            raise PipelineError(f"{root} is not empty; give an empty or new directory to --keep")
        root.mkdir(parents=True, exist_ok=True)
        return _run(Workspace.resolve(root), tasks, evidence_tasks, seed, say, kept=True)
    with tempfile.TemporaryDirectory(prefix="ratings-smoke-") as tmp:
        return _run(Workspace.resolve(tmp), tasks, evidence_tasks, seed, say, kept=False)


def _run(
    ws: Workspace,
    tasks: int,
    evidence_tasks: int | None,
    seed: int,
    say: Callable[[str], None] | None,
    *,
    kept: bool,
) -> SmokeResult:
    from ..routing import Router
    from ..streams.log import append

    steps: list[str] = []

    def step(text: str) -> None:
        steps.append(text)
        if say:
            say(text)

    _simulate(ws, tasks, seed)
    step(f"simulated {tasks} tasks (seed {seed}) in a temporary home")
    first = _fit(ws, seed).table
    step(f"fitted table {first.version}")
    router = Router(first)
    region = _pick_region(first)
    before = router.route(region)
    a = before.config
    others = sorted(
        (m for m in first.regions[region].members if m.config != a),
        key=lambda m: (m.cost_usd is None, m.cost_usd or 0.0, m.config),
    )
    b = others[0].config
    n = evidence_tasks if evidence_tasks is not None else max(40, tasks // 3)
    step(f"routed {region}: {a} ({before.reason})")
    append(ws, _evidence(first, region, a, b, n), fsync="never")
    step(f"appended {n} tasks of {region} where {b} passes its gate and {a} fails")
    second = _fit(ws, seed).table
    step(f"fitted table {second.version}")
    router = Router(second)
    after = router.route(region)
    explained = router.describe(after, region)
    step(f"routed {region}: {after.config} ({after.reason})")
    learned = after.config == b
    if learned:
        verdict = f"VERDICT: LEARNING OBSERVED — router moved {a} -> {b}"
    elif after.config == a:
        verdict = f"VERDICT: NO CHANGE — router stayed on {a}: {after.reason}"
    else:
        verdict = f"VERDICT: NO CHANGE — router moved {a} -> {after.config}, not to {b} that the evidence favours"
    return SmokeResult(
        learned=learned,
        verdict=verdict,
        region=region,
        before=before.to_dict(),
        after=explained,
        evidence_for=b,
        evidence_tasks=n,
        steps=steps,
        home=str(ws.root) if kept else None,
    )
