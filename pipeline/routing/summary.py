"""The routing table in words (``ratings table``, and the first section of a case-study page).

Per region, what a dispatcher with the default policy does for a task of no particular role: the choice with its
quality, cost and number of ratings, the runner-up in the table's order, the ladder a failure escalates along,
and why (the evidence gate's reason, with its numbers). Every figure is read from the table or decided by the
router itself, so the words cannot disagree with what ``ratings route`` does.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from .router import DEFAULT_POLICY, Router
from .table import RoutingTable
from .view import GLOBAL, RegionView

_MODEL = ConfigDict(frozen=True, extra="forbid")


class Pick(BaseModel):
    """One config of a region as the table knows it."""

    model_config = _MODEL

    config: str
    quality: float
    cost_usd: float | None
    value: float
    n_ratings: int


class LadderWords(BaseModel):
    model_config = _MODEL

    rungs: list[str]
    source: str  # "region" (its own) or "global" (the '*' ladder)
    pass_threshold: float


class RegionSummary(BaseModel):
    model_config = _MODEL

    region: str
    choice: Pick
    runner_up: Pick | None
    ladder: LadderWords | None
    why: str


class TableSummary(BaseModel):
    """``ratings table --json``; the ``routing_table`` section of ``stats.json``."""

    model_config = _MODEL

    version: str
    schema_version: str
    fitted_at: str | None
    objective: str
    policy: str
    constants: dict[str, Any]
    constants_source: str
    static: dict[str, Any]
    configs: list[str]  # every config the table knows (the reasons name them)
    regions: list[RegionSummary]


def _pick(view: RegionView, config: str) -> Pick:
    row = view.row(config)
    return Pick(config=config, quality=row.quality, cost_usd=row.cost_usd, value=row.value, n_ratings=row.n_ratings)


def summarize(table: RoutingTable) -> TableSummary:
    """The summary of the module docstring: regions in key order, the global pool ``*`` last."""
    router = Router(table)
    regions = sorted(table.regions, key=lambda r: (r == GLOBAL, r))
    out = []
    for name in regions:
        view = router.view(name)
        if not view.members:
            continue
        decision = router.route(name)
        others = [c for c in view.members if c != decision.config]
        ladder = view.ladder or router.star.ladder
        out.append(
            RegionSummary(
                region=name,
                choice=_pick(view, decision.config),
                runner_up=_pick(view, others[0]) if others else None,
                ladder=LadderWords(
                    rungs=list(ladder.rungs),
                    source="region" if view.ladder is not None and name != GLOBAL else "global",
                    pass_threshold=ladder.pass_threshold,
                )
                if ladder is not None
                else None,
                why=decision.reason,
            )
        )
    return TableSummary(
        version=table.version,
        schema_version=table.schema_,
        fitted_at=table.fitted_at,
        objective=table.objective,
        policy=DEFAULT_POLICY,
        constants=table.constants.model_dump(mode="json", by_alias=True),
        constants_source=table.constants_source,
        static=table.static.model_dump(mode="json"),
        configs=sorted({m.config for r in table.regions.values() for m in r.members}),
        regions=out,
    )
