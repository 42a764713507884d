"""``ratings compare``: shipped against fitted constants, the priors the ratings disagree with, and fit history.

Every figure comes from files the fit wrote: the case study's ``stats.json``
(held-out hit rates with n and Wilson intervals, the measured priors), the
published ``fits/routing-table.json`` (which constants it uses; its
``evaluation`` when there is no stats file) and ``fits/shipped.json`` (the
priors as the owner ships them now). ``previous`` compares the published
table with the fit before it in ``fits/history/``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Container
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ..casestudy import fmt
from ..defaults import DISAGREE_BY
from ..errors import PipelineError
from ..fit.shipped import Shipped, defaults_note, load_shipped
from ..home import Home
from ..jsonfile import first_problem
from ..nightly.publish import stats_path_of
from ..nightly.sections import Calibration, HitRate, Policies, Routing
from ..nightly.stats import Stats, load_stats
from ..routing.table import CONSTANT_NAMES, Constants, RoutingTable, load

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

    def text(self) -> str:
        """The comparison for people: aligned tables and sentences."""
        return _text(self)


# --------------------------------------------------------------------------- building
def compare(
    home: str | os.PathLike | Home | None = None,
    *,
    shipped: str | os.PathLike | None = None,
    table: str | os.PathLike | None = None,
    stats: str | os.PathLike | None = None,
    previous: bool = False,
) -> Comparison:
    """Compare shipped and fitted constants of ``home`` (files default to the home's ``fits/`` and case study)."""
    h = Home.resolve(home)
    table_path = Path(table) if table is not None else h.fits / "routing-table.json"
    routing_table = load(table_path) if table is not None or table_path.exists() else None
    stats_path = Path(stats) if stats is not None else stats_path_of(h, routing_table)
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
    shipped_path = Path(shipped) if shipped is not None else h.fits / "shipped.json"
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
        previous=_previous(h, routing_table, table_path) if previous else None,
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
    """Order of fits: data time, then store version (older tables: manifest), then when the history copy was
    written (refits of one store)."""
    source = table.get("source") or {}
    snapshot = source.get("version", source.get("manifest"))
    return (table.get("fitted_at") or "", -1 if snapshot is None else snapshot, written_ns)


def _previous(home: Home, current: RoutingTable | None, table_path: Path) -> PreviousFit:
    if current is None:
        raise PipelineError(f"{table_path}: no routing table to compare with its previous fit")
    directory = home.fits / "history"
    here = _history_key(current.to_json_dict(), table_path.stat().st_mtime_ns)
    candidates = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
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


# --------------------------------------------------------------------------- text
def _aligned(columns: list[str], rows: list[list[str]], right: Container[int] = frozenset()) -> list[str]:
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(columns)]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return [line(columns), "  ".join("-" * w for w in widths)] + [line(r) for r in rows]


def _hit(h: HitRate) -> list[str]:
    return [fmt.pct(h.hit_rate), f"{fmt.count(h.hits)} of {fmt.count(h.n)}", fmt.interval(h.ci95)]


def _text(c: Comparison) -> str:
    out = [
        f"Constants (the published table uses the {c.published or 'n/a'} constants"
        + (f", from {c.published_from})" if c.published_from else ")")
    ]
    published = ["published"] if c.table_file else []
    out += _aligned(
        ["constant", "shipped", "fitted", *published, "fitted chosen on"],
        [
            [
                r.name,
                fmt.constant(r.name, r.shipped),
                fmt.constant(r.name, r.fitted),
                *([fmt.constant(r.name, r.published)] if published else []),
                r.selected_on,
            ]
            for r in c.constants
        ],
    )
    out += _routing_text(c)
    if c.provenance:
        out.append(f"Published: {c.published} (" + ", ".join(f"{k} {v}" for k, v in sorted(c.provenance.items())) + ")")
    out += _calibration_text(c)
    out += ["", f"Priors: {c.disagreements} of {len(c.priors)} disagree with the ratings"]
    for p in c.priors:
        if p.disagrees:
            out.append(
                f"The ratings disagree with the prior {p.selector} in {p.region}: shipped "
                f"{fmt.num(p.shipped, 2)}, measured {fmt.num(p.measured, 3)}, weight {fmt.num(p.weight, 2)}, "
                f"n {fmt.count(p.n)}."
            )
    if c.priors:
        out += _aligned(
            ["selector", "region", "shipped", "measured", "weight", "n", "disagrees"],
            [
                [
                    p.selector,
                    p.region,
                    fmt.num(p.shipped, 2),
                    fmt.num(p.measured, 3),
                    fmt.num(p.weight, 2),
                    fmt.count(p.n),
                    "yes" if p.disagrees else "no",
                ]
                for p in c.priors
            ],
            right={2, 3, 4, 5},
        )
    if c.policies is not None and c.policies.policies:
        rows = c.policies.policies
        costed = any(x.mean_cost_usd is not None for x in rows.values())
        out += ["", "Routing policies on the held-out tasks (a table fitted on the learned tasks only)"]
        out += _aligned(
            ["policy", "hit rate", "mean quality", *(["mean cost"] if costed else []), "configs run", "n"],
            [
                [
                    name + (" (default)" if name == "learning_governed" else ""),
                    fmt.pct(x.hit_rate),
                    fmt.num(x.mean_quality, 3),
                    *([fmt.usd(x.mean_cost_usd)] if costed else []),
                    fmt.num(x.mean_configs_run, 2),
                    fmt.count(x.n),
                ]
                for name, x in rows.items()
            ],
            right=set(range(1, 6 if costed else 5)),
        )
    if c.notes:
        out += ["", *(f"Note: {n}" for n in c.notes)]
    if c.previous:
        prev = c.previous
        out += [
            "",
            f"Against the previous fit {prev.previous_version} ({prev.previous_fitted_at or 'n/a'}) -> "
            f"{prev.current_version} ({prev.current_fitted_at or 'n/a'}): {prev.changed} region(s) changed",
        ]
        out += _aligned(
            ["region", "choice before", "choice after", "ladder", "value before", "value after", "moved"],
            [
                [
                    x.region,
                    x.choice_before or "",
                    x.choice_after or "",
                    "changed" if x.ladder_before != x.ladder_after else "same",
                    fmt.num(x.value_before),
                    fmt.num(x.value_after),
                    fmt.signed(x.value_delta),
                ]
                for x in prev.regions
            ],
            right={4, 5, 6},
        )
    return "\n".join(out)


def _routing_text(c: Comparison) -> list[str]:
    """The held-out hit rates and the two verdicts: the stats' (with n and intervals), else the table's."""
    out = ["", "Held-out hit rate (greedy, routed to a best configuration)"]
    r = c.routing
    if r is None:  # the table's evaluation: rates and the verdict, no counts or intervals
        ev = c.evaluation or {}
        rates, diff, n = ev.get("hit_rate") or {}, ev.get("difference") or {}, ev.get("eligible_held_out")
        out += _aligned(
            ["constants", "hit rate", "hits", "95% CI"],
            [[k, fmt.pct(rates.get(k)), f"n = {fmt.count(n)}", fmt.interval(None)] for k in ("shipped", "fitted")],
            right={1},
        )
        ci = diff.get("ci95")
        interval = fmt.points_interval((ci[0], ci[1]) if isinstance(ci, list) and len(ci) == 2 else None)
        out.append(f"Fitted minus shipped: {fmt.points(diff.get('value'))} (95% CI {interval})")
        reason = ev.get("reason") or ""
        return [*out, "", f"Prior family (greedy hit rate): {ev.get('recommendation') or 'n/a'}. {reason}".rstrip()]
    out += _aligned(
        ["constants", "hit rate", "hits", "95% CI"],
        [["shipped", *_hit(r.shipped)], ["fitted", *_hit(r.fitted)]],
        right={1},
    )
    out.append(
        f"Fitted minus shipped: {fmt.points(r.difference.value)} (95% CI {fmt.points_interval(r.difference.ci95)})"
    )
    expected = r.shipped.expected_hit_rate_with_exploration
    if expected is not None:
        out.append(f"Shipped under its exploration, expected: {fmt.pct(expected)}")
    out += ["", f"Prior family (greedy hit rate): {r.recommendation}. {r.reason}".rstrip()]
    x = r.exploration
    return [
        *out,
        "",
        f"Exploration (held-out replay, mean of {x.method.seeds} seeds): shipped {x.shipped.exploration:g} realized "
        f"{fmt.num(x.shipped.realized_value)}, fitted {x.fitted.exploration:g} realized "
        f"{fmt.num(x.fitted.realized_value)}; fitted minus shipped {fmt.signed(x.difference.value)} "
        f"(95% CI {_span(x.difference.ci95)})",
        f"Exploration: {x.recommendation}. {x.reason}",
    ]


def _calibration_text(c: Comparison) -> list[str]:
    if c.calibration is not None:
        return [f"Calibration against the plain mean: {c.calibration.recommendation}. {c.calibration.reason}".rstrip()]
    verdict = (c.evaluation or {}).get("calibration")
    return [f"Calibration against the plain mean: {verdict}."] if verdict else []


def _span(ci: tuple[float, float] | None) -> str:
    """A 95% interval of a difference of replay values: ``[-0.0123, +0.2000]``."""
    return fmt.NA if ci is None else f"[{fmt.signed(ci[0])}, {fmt.signed(ci[1])}]"
