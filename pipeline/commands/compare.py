"""``ratings compare``: shipped against fitted constants, the priors the ratings disagree with, and fit history.

Every figure comes from files the fit wrote: the case study's ``stats.json``
(held-out hit rates with n and Wilson intervals, the measured priors), the
published ``fits/routing-table.json`` (which constants it uses; its
``evaluation`` when there is no stats file) and ``fits/shipped.json`` (the
priors as the owner ships them now). ``previous`` compares the published
table with the fit before it in ``fits/history/``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ..casestudy import fmt
from ..compat import table_v1
from ..defaults import DISAGREE_BY
from ..errors import PipelineError
from ..fit.shipped import Shipped, defaults_note, load_shipped
from ..jsonfile import first_problem, parse_json
from ..nightly.publish import stats_path_of
from ..nightly.sections import Calibration, Policies, Routing
from ..nightly.stats import Stats, load_stats
from ..routing.table import CONSTANT_NAMES, Constants, RoutingTable, load
from ..workspace import StrPath, Workspace

_M = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class ConstantRow(BaseModel):
    model_config = _M

    name: str
    shipped: Any
    fitted: Any
    published: Any  # the value in the published table (null without a table)
    selected_on: str


class PriorCheck(BaseModel):
    """A prior as the owner ships it now (``shipped.json``, else the stats' record of it) against what the fit
    measured for it (the stats' ``priors``): compare's own join, null where the fit did not measure it."""

    model_config = _M

    selector: str
    region: str
    shipped: float
    measured: float | None
    weight: float | None
    n: int | None
    disagrees: bool


class RegionChange(BaseModel):
    model_config = _M

    region: str
    choice_before: str | None
    choice_after: str | None
    ladder_before: list[str] | None
    ladder_after: list[str] | None
    value_before: float | None  # the objective's value of the region's choice in that table
    value_after: float | None
    value_delta: float | None
    changed: bool  # the choice or the ladder changed


class PreviousFit(BaseModel):
    model_config = _M

    previous_file: str
    previous_version: str
    previous_fitted_at: str | None
    current_version: str
    current_fitted_at: str | None
    regions: list[RegionChange]
    changed: int


class Comparison(BaseModel):
    """What ``ratings compare --json`` prints; the key set is stable (absent parts are null or empty). The held-out
    figures are the stats' own sections (``routing``, ``calibration``, ``policies``); without a stats file, the
    published table's ``evaluation`` (hit rates without n or intervals) stands in."""

    model_config = _M

    stats_file: str | None
    table_file: str | None
    shipped_file: str | None
    objective: str | None
    published: Literal["fitted", "shipped", "mixed"] | None
    published_from: Literal["table", "stats"] | None
    provenance: dict[str, str]  # per searched constant: fitted, shipped or pinned (empty for older tables)
    constants: list[ConstantRow]
    routing: Routing | None  # the stats' verdicts: prior family, exploration, the published combination
    calibration: Calibration | None
    evaluation: dict[str, Any] | None  # the table's evaluation, read when there is no stats file
    priors: list[PriorCheck]
    disagreements: int
    policies: Policies | None
    notes: list[str]
    previous: PreviousFit | None

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


# --------------------------------------------------------------------------- building
def compare(
    home: Workspace | StrPath | None = None,
    *,
    shipped: str | os.PathLike | None = None,
    table: str | os.PathLike | None = None,
    stats: str | os.PathLike | None = None,
    previous: bool = False,
) -> Comparison:
    """Compare shipped and fitted constants of ``home`` (files default to the home's ``fits/`` and case study)."""
    ws = Workspace.of(home)
    table_path = Path(table) if table is not None else ws.table
    routing_table = load(table_path) if table is not None or table_path.exists() else None
    stats_path = Path(stats) if stats is not None else stats_path_of(ws, routing_table)
    case = _load_stats(stats_path) if stats is not None or stats_path.exists() else None
    if case is not None:
        objective = case.objective
    elif routing_table is not None:
        objective = routing_table.objective
    else:
        raise PipelineError(
            f"nothing to compare: no stats at {stats_path} and no routing table at {table_path}; "
            "run `fit-routing` first"
        )
    shipped_path = Path(shipped) if shipped is not None else ws.shipped
    if shipped is not None and not shipped_path.exists():
        raise PipelineError(f"{shipped_path}: no such shipped file")
    owner = load_shipped(shipped_path) if shipped_path.exists() else None
    notes: list[str] = []
    evaluation = routing_table.evaluation if routing_table is not None else {}
    if case is None:
        notes.append(
            f"No stats at {stats_path}: hit rates come from the table's evaluation (no n, no intervals) "
            "and the priors cannot be checked against the ratings."
        )
    if owner is None and shipped is None:  # the same sentence as the fit's summary and the page
        notes.append(fmt.sentence(defaults_note(case.constants.shipped if case else Constants())))
    priors, prior_notes = _priors(case, owner)
    notes += prior_notes + _shipped_drift(case, owner)
    published = (
        routing_table.constants_source if routing_table is not None else (case.constants.published if case else None)
    )
    return Comparison(
        stats_file=str(stats_path) if case else None,
        table_file=str(table_path) if routing_table is not None else None,
        shipped_file=str(shipped_path) if owner is not None else None,
        objective=objective,
        published=published,
        published_from="table" if routing_table is not None else "stats",
        provenance=dict(routing_table.constants_provenance)
        if routing_table is not None
        else dict(case.constants.provenance if case else {}),
        constants=_constants(case, routing_table, evaluation, owner),
        routing=case.routing if case else None,
        calibration=case.calibration if case else None,
        evaluation=None if case else dict(evaluation),
        priors=priors,
        disagreements=sum(p.disagrees for p in priors),
        policies=case.policies if case else None,
        notes=notes,
        previous=_previous(ws, routing_table, table_path) if previous else None,
    )


def _load_stats(path: Path) -> Stats | None:
    """The evaluated stats at ``path``; None for a refit's (``fit-routing --no-evaluate``: no held-out figures)."""
    try:
        stats = load_stats(path)
        return stats if isinstance(stats, Stats) else None
    except FileNotFoundError:
        raise PipelineError(f"{path}: no such stats file") from None
    except ValueError as exc:
        raise PipelineError(f"{path}: not a case-study-stats/v1 file: {first_problem(exc)}") from None


def _constants(
    case: Stats | None, table: RoutingTable | None, evaluation: dict[str, Any], owner: Shipped | None
) -> list[ConstantRow]:
    if case is not None:
        shipped = case.constants.shipped.model_dump(by_alias=True)
        fitted = case.constants.fitted.model_dump(by_alias=True)
        selected = case.constants.selected_on
    else:  # the table's evaluation names the fitted constants; the shipped ones are the file's (or defaults)
        shipped = (owner or Shipped()).to_constants().model_dump(by_alias=True)
        fitted = dict(evaluation.get("fitted_constants") or {})
        selected = dict(evaluation.get("selected_on") or {})
    published = table.constants.model_dump(by_alias=True) if table is not None else {}
    return [
        ConstantRow(
            name=n,
            shipped=shipped.get(n),
            fitted=fitted.get(n),
            published=published.get(n),
            selected_on=selected.get(n, "not searched"),
        )
        for n in CONSTANT_NAMES
        if n != "lambda" or any(d.get(n) is not None for d in (shipped, fitted, published))
    ]


def _priors(case: Stats | None, owner: Shipped | None) -> tuple[list[PriorCheck], list[str]]:
    """The priors as the owner ships them now, against what the fit measured for them.

    With a shipped file, its priors are checked (a prior edited after the fit is judged against the same
    measurement); without one, the priors recorded in the stats. A prior disagrees when it is more than
    0.1 apart with ``n >= min_samples``.
    """
    measured = {(p.selector, p.region): p for p in case.priors} if case else {}
    min_samples = case.constants.shipped.min_samples if case else None
    if owner is not None and owner.constants.min_samples is not None:
        min_samples = owner.constants.min_samples
    wanted = (
        [(p.selector, p.region, p.quality) for p in owner.priors]
        if owner is not None
        else [(p.selector, p.region, p.shipped) for p in (case.priors if case else [])]
    )
    rows, notes = [], []
    for selector, region, quality in wanted:
        seen = measured.get((selector, region))
        value = seen.measured if seen else None
        n = seen.n if seen else None
        disagrees = (
            value is not None
            and n is not None
            and min_samples is not None
            and n >= min_samples
            and abs(value - quality) > DISAGREE_BY
        )
        rows.append(
            PriorCheck(
                selector=selector,
                region=region,
                shipped=quality,
                measured=value,
                weight=seen.weight if seen else None,
                n=n,
                disagrees=disagrees,
            )
        )
        if case is not None and seen is None:
            notes.append(
                f"The prior {selector} in {region} is not in the stats (shipped after the fit?): refit to measure it."
            )
    return rows, notes


def _shipped_drift(case: Stats | None, owner: Shipped | None) -> list[str]:
    """Constants set in shipped.json that differ from the shipped constants the fit evaluated."""
    if case is None or owner is None:
        return []
    evaluated = case.constants.shipped.model_dump(by_alias=True)
    given = owner.constants.model_dump(by_alias=True, exclude_none=True, exclude={"objective"})
    return [
        f"shipped.json now sets {k} = {v}, but the fit evaluated {evaluated.get(k)}: refit to compare."
        for k, v in sorted(given.items())
        if k in evaluated and evaluated[k] != v
    ]


# --------------------------------------------------------------------------- previous fit
def _history_key(table: dict[str, Any], written_ns: int) -> tuple:
    """Order of fits: data time, then store version, then when the history copy was written (refits of one
    store)."""
    snapshot = table_v1.store_version(table.get("source") or {})
    return (table.get("fitted_at") or "", -1 if snapshot is None else snapshot, written_ns)


def _previous(ws: Workspace, current: RoutingTable | None, table_path: Path) -> PreviousFit:
    if current is None:
        raise PipelineError(f"{table_path}: no routing table to compare with its previous fit")
    directory = ws.history
    here = _history_key(current.to_json_dict(), table_path.stat().st_mtime_ns)
    candidates = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            data = parse_json(path.read_bytes())
        except ValueError:
            continue
        if isinstance(data, dict) and data.get("version") != current.version:
            key = _history_key(data, path.stat().st_mtime_ns)
            if key <= here:
                candidates.append((key, path.name, path))
    if not candidates:
        raise PipelineError(
            f"no previous fit in {directory}: only the current table "
            f"{current.version or '(unversioned)'} has been published"
        )
    path = max(candidates)[2]
    before = load(path)
    regions = sorted(set(before.regions) | set(current.regions), key=lambda r: (r != "*", r))
    changes = [_region_change(r, before, current) for r in regions]
    return PreviousFit(
        previous_file=str(path),
        previous_version=before.version,
        previous_fitted_at=before.fitted_at,
        current_version=current.version,
        current_fitted_at=current.fitted_at,
        regions=changes,
        changed=sum(c.changed for c in changes),
    )


def _choice_value(table: RoutingTable, region: str) -> tuple[str | None, list[str] | None, float | None]:
    r = table.regions.get(region)
    if r is None:
        return None, None, None
    value = next((m.value for m in r.members if m.config == r.choice), None)
    return r.choice, (list(r.ladder.rungs) if r.ladder else None), value


def _region_change(region: str, before: RoutingTable, after: RoutingTable) -> RegionChange:
    c0, l0, v0 = _choice_value(before, region)
    c1, l1, v1 = _choice_value(after, region)
    delta = round(v1 - v0, 9) if v0 is not None and v1 is not None else None
    return RegionChange(
        region=region,
        choice_before=c0,
        choice_after=c1,
        ladder_before=l0,
        ladder_after=l1,
        value_before=v0,
        value_after=v1,
        value_delta=delta,
        changed=(c0, l0) != (c1, l1),
    )
