"""The routing table in words (``ratings table``, and the first section of a case-study page).

Per region, what a dispatcher with the default policy does for a task of no particular role: the choice with its
quality, cost and number of ratings, the runner-up in the table's order, the ladder a failure escalates along,
and why (the evidence gate's reason, with its numbers). Every figure is read from the table or decided by the
router itself, so the words cannot disagree with what ``ratings route`` does.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from ..money import usd
from .policies import gate_checks
from .router import DEFAULT_POLICY, Decision, Router
from .table import RoutingTable
from .view import GLOBAL, RegionView, Row

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
    why: str  # the router's reason, with the gate's numbers
    words: str = ""  # why the table chose what it chose, in plain words (:func:`region_words`)


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
                words=region_words(router, view, decision),
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


#: The objective as a reader names it.
OBJECTIVE_NOUN = {"quality_per_dollar": "quality per dollar", "utility": "utility", "quality": "quality"}


def _figures(row: Row, objective: str) -> str:
    """``quality 0.670 at $0.000100 (6,700 per dollar)``: what the table expects of a config."""
    cost = "an unknown cost" if row.cost_usd is None else usd(row.cost_usd)
    per = f", {row.value:,.4g} per dollar" if objective == "quality_per_dollar" and row.cost_usd is not None else ""
    return f"quality {row.quality:.3f} at {cost}{per}"


def region_words(router: Router, view: RegionView, decision: Decision) -> str:
    """Why the default policy routes a task of this region (no role) where it does, in words a team reads: the
    static choice kept or replaced, and the evidence that decided, from the table's own rows and gate tests."""
    if not router.gated:  # a v1 table: its gate is not the paired test; the router's reason says what it is
        return decision.reason
    checks = gate_checks(router, view, decision.candidates, None)
    static = checks["static"]["config"]
    levels = [t for t in (checks["region_test"], checks["global_test"]) if t]
    if decision.config != static:
        return _replaced(router, view, decision, static, levels)
    return _kept(router, view, decision, static, levels)


def _replaced(router: Router, view: RegionView, decision: Decision, static: str, levels: list[dict]) -> str:
    chosen, objective = decision.config, router.objective
    for test in levels:
        for t in test["tests"]:
            ev = t["test"]
            if t["config"] == chosen and ev is not None and ev["passes"]:
                where = "here" if test["region"] == view.name else "in the global pool (too little evidence here)"
                return (
                    f"Replaced the static choice {static} with {chosen} {where}: on the {ev['shared_tasks']:,} "
                    f"tasks both did, {chosen}'s {OBJECTIVE_NOUN[objective]} was higher by {ev['difference']:.4g} "
                    f"(at least {ev['lower']:.4g} with 95% confidence). The table expects "
                    f"{_figures(view.row(chosen), objective)} for {chosen}, against "
                    f"{_figures(view.row(static), objective)} for {static}."
                )
    return f"Routes to {chosen}: {decision.reason}."  # replaced by the quality floor: the router's reason says how


def _kept(router: Router, view: RegionView, decision: Decision, static: str, levels: list[dict]) -> str:
    objective = router.objective
    noun = OBJECTIVE_NOUN[objective]
    first = levels[0]
    if first["learned"] == static or not first["tests"]:
        others = [c for c in view.ranked(decision.candidates) if c != static]
        runner = f"; the runner-up {others[0]} has {_figures(view.row(others[0]), objective)}" if others else ""
        return (
            f"Keeps the static choice {static}, which also has the best {noun} the table expects here: "
            f"{_figures(view.row(static), objective)}{runner}."
        )
    contender, ev = first["tests"][0]["config"], first["tests"][0]["test"]
    if ev is None or ev["shared_tasks"] == 0:
        missing = f"{contender} never ran on a task {static} ran on here, so nothing compares them"
    elif ev["shared_tasks"] < router.min_samples:
        n = ev["shared_tasks"]
        missing = (
            f"the two shared only {n} task{'' if n == 1 else 's'} here, fewer than the {router.min_samples} needed "
            "to trust a difference"
        )
    else:
        lower = "undefined" if ev["lower"] is None else f"{ev['lower']:+.4g}"
        d = ev["difference"]
        if d is not None and d > 0:
            measured = (
                f"higher by {d:.4g}, but not clearly (the 95% lower bound of the difference, {lower}, is not above 0)"
            )
        else:
            measured = "not higher" if d is None else f"lower by {-d:.4g}"
        missing = f"on the {ev['shared_tasks']:,} tasks both did, {contender}'s {noun} was {measured}"
    also = " (nor in the global pool)" if len(levels) > 1 else ""
    return (
        f"Keeps the static choice {static} ({_figures(view.row(static), objective)}) although the table ranks "
        f"{contender} first on its estimates ({_figures(view.row(contender), objective)}), until the evidence says "
        f"otherwise{also}: {missing}."
    )
