"""``fit-routing``: compact, fit, evaluate on held-out, publish the routing table and the case-study stats.

One fit at a time per home (``fits/.fit.lock``). The fit reads the store at the
table version it opened first, so appends and compactions may go on meanwhile; the
table's ``source.version`` says which snapshot it used. Same store, same
options: byte-identical ``fits/routing-table.json`` and ``stats.json`` (every
time comes from the store, floats are rounded to 9 decimals, JSON keys sorted).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from ..defaults import OBJECTIVE
from ..errors import FitError
from ..evaluate.policies import held_out_policies
from ..evaluate.protocol import Evaluation, constants_source, cutoff_text, evaluate, lambda_scale, learning_figures
from ..evaluate.search import SEARCHED, Pins, half_lives_of
from ..evaluate.split import check_split, exact_fraction
from ..fit.aggregate import DuckDBEngine, Engine, Spec
from ..fit.context import FitContext, Part
from ..fit.finite import ids_text, non_finite_paths
from ..fit.learning import LearningOutputs, learning_stage
from ..fit.model import FittedModel, Shipped, load_shipped
from ..fit.shipped import defaults_note, placeholder_note
from ..fit.table_build import build_table
from ..rounding import rounded
from ..routing.summary import summarize
from ..routing.table import ConstantOrigin, Constants, RoutingTable, load
from ..store import open_store
from ..store.views import reading
from ..streams.future import MAX_FUTURE
from ..workspace import StrPath, Workspace
from .options import FitOptions
from .publish import pinned_version, publish_fit
from .sections import Ladders
from .stats import AnyStats, RefitStats, Stats


@dataclass(frozen=True)
class FitResult:
    table: RoutingTable
    stats: AnyStats
    evaluation: Evaluation | None  # the held-out evaluation (its learned fit for the leakage tests); None: not run

    def summary_lines(self) -> list[str]:
        """A readable summary for people (the CLI prints it; ``--json`` prints the stats instead)."""
        s, t = self.stats, self.table
        head = [
            f"published routing table {t.version} (constants: {_source_word(s)}; table version {t.source.version}, "
            f"fitted_at {t.fitted_at})",
            f"objective: {s.objective}" + ("" if s.cost_known else " (no costs in the store: ranked by quality alone)"),
        ]
        if not isinstance(s, Stats):
            return [*head, *s.notes]
        r, cal = s.routing, s.calibration
        lines = [
            *head,
            f"split: {s.split.learned_tasks} learned / {s.split.held_out_tasks} held-out tasks (cutoff "
            f"{s.split.cutoff_at}), {s.split.eligible_held_out} eligible, {s.split.validation_tasks} validation",
            f"held-out hit rate: shipped {_fmt(r.shipped.hit_rate)} {_ci(r.shipped.ci95)}, fitted "
            f"{_fmt(r.fitted.hit_rate)} {_ci(r.fitted.ci95)}, difference {_fmt(r.difference.value)} "
            f"{_ci(r.difference.ci95)}",
            f"prior family (prior source, prior weight, half-life{', lambda' if s.objective == 'utility' else ''}): "
            f"{r.recommendation}: {r.reason}",
        ]
        x = r.exploration
        lines += [
            f"held-out replay (mean of {x.method.seeds} seeds): shipped exploration {x.shipped.exploration:g} "
            f"{_fmt(x.shipped.realized_value)}, fitted {x.fitted.exploration:g} {_fmt(x.fitted.realized_value)}, "
            f"difference {_fmt(x.difference.value)} {_ci(x.difference.ci95)}",
            f"exploration: {x.recommendation}: {x.reason}",
        ]
        provenance = ", ".join(f"{k} {v}" for k, v in sorted(s.constants.provenance.items()))
        lines += [
            f"published constants: {s.constants.published}" + (f" ({provenance})" if provenance else ""),
            f"calibration: {cal.recommendation}: {cal.reason}",
        ]
        lines.append("baselines (eligible held-out): hit rate / mean quality / mean cost")
        for name in ("best_single", "cheapest", "random", "oracle", "shipped", "fitted"):
            b = getattr(s.baselines, name)
            label = f"{name} ({b.config})" if b.config else name
            lines.append(f"  {label}: {_fmt(b.hit_rate)} / {_fmt(b.mean_quality)} / {_fmt(b.mean_cost_usd)}")
        policies = s.policies.policies if s.policies is not None else {}
        if "learning_governed" in policies and "quality_per_dollar" in policies:
            lines.append(
                "default policy learning_governed (evidence gate): held-out hit rate "
                f"{_fmt(policies['learning_governed'].hit_rate)}, quality_per_dollar without the gate "
                f"{_fmt(policies['quality_per_dollar'].hit_rate)}"
            )
        if s.ladders is not None and s.ladders.summary is not None:
            lines.append(_ladder_line(s.ladders))
        lines.extend(s.notes)
        return lines


def _ladder_line(ladders: Ladders) -> str:
    """The published ladders on the held-out tasks, in one line of the summary."""
    lad, rungs = ladders.summary, ladders.regions["*"].ladder
    assert lad is not None
    replaced = sorted(r for r, v in ladders.regions.items() if v.source == "region")
    where = f"; own ladders in {', '.join(replaced)}" if replaced else ""
    rule_of = ladders.rule
    kappa = rule_of.kappa if rule_of is not None else None
    name = rule_of.name if rule_of is not None else None
    rule = f"kappa {kappa:g}" if kappa is not None else "the best single alone" if name == "best-single" else str(name)
    return (
        f"published ladders (global {' > '.join(rungs)}{where}; rule: {rule}): held-out quality "
        f"{_fmt(lad.held_out_quality)} at {_fmt(lad.held_out_cost_usd)} USD/task vs best single "
        f"{lad.best_single_config} {_fmt(lad.best_single_quality)} at {_fmt(lad.best_single_cost_usd)} "
        f"(coverage {_fmt(lad.coverage)})"
    )


@contextmanager
def fit_lock(ws: Workspace, *, wait: bool) -> Iterator[None]:
    """One fit at a time: an exclusive ``flock`` on ``fits/.fit.lock``; without ``wait`` a busy lock is an error."""
    busy = (
        f"another fit is running on {ws.root} (it holds fits/.fit.lock); wait for it to finish or run again with --wait"
    )
    with ws.lock(ws.fit_lock, busy=None if wait else busy):
        yield


def run_fit(
    home: Workspace | StrPath | None,
    options: FitOptions | None = None,
    *,
    progress: bool = False,
    command: str | None = None,
    then: Callable[[Workspace, FitResult], None] | None = None,
    future: timedelta | None = MAX_FUTURE,
) -> FitResult:
    """Compact (unless ``no_compact``), fit, evaluate, publish the table and write the case-study stats.

    ``command`` is recorded as ``stats.source.command`` (default: :meth:`FitOptions.command_line` without
    ``--home``). ``then`` runs after publishing, still under the fit lock (the CLI renders the case-study page
    there, so the page shows this fit's stats: the job itself knows nothing of pages). ``future``: the
    compaction's skew (:func:`pipeline.compact.compact`); the fit itself measures every age from the data, never
    from the clock.
    """
    ws = Workspace.of(home)
    options = options or FitOptions()
    say = _Progress(progress)
    with fit_lock(ws, wait=options.wait):
        if not options.no_compact:
            say("compacting")
            from ..compact import compact

            compact(ws, progress=progress, future=future)
        result = _fit(ws, options, say, command or options.command_line())
        if then is not None:
            then(ws, result)
    return result


def _fit(ws: Workspace, options: FitOptions, say: _Progress, command: str) -> FitResult:
    shipped = load_shipped(options.shipped if options.shipped is not None else ws.shipped)
    objective = options.objective or shipped.constants.objective or OBJECTIVE
    overrides: dict[str, Any] = {"cost_floor_usd": options.cost_floor_usd}
    if options.min_samples is not None:
        overrides["min_samples"] = options.min_samples
    if options.min_quality is not None:
        overrides["min_quality"] = options.min_quality
    shipped_constants = shipped.to_constants(**overrides)
    current = None if options.evaluate else current_constants(ws, shipped_constants, options)
    say("loading the store")
    version, events, inputs_sha, ctx, notes = _read(ws, options, shipped, objective, shipped_constants, current)
    if ctx.values(Part.FULL).height == 0:
        raise FitError(f"no ratings in the store (table version {version}); append task.rated events and compact first")
    if not shipped.found:
        notes.append(defaults_note(shipped_constants))
    placeholders = placeholder_note(shipped, options.shipped or "fits/shipped.json")
    notes += [placeholders] if placeholders else []
    source = {"version": version, "events": events, "sha256": inputs_sha}
    if current is None:
        say("evaluating on the held-out split (validation search included)")
        return _evaluated(ws, ctx, options, say, command, shipped_constants, source, notes)
    say("refitting on all tasks with the current constants (no held-out evaluation)")
    return _refit(ws, ctx, options, command, current, source, notes)


def _evaluated(
    ws: Workspace,
    ctx: FitContext,
    options: FitOptions,
    say: _Progress,
    command: str,
    shipped_constants: Constants,
    source: dict[str, Any],
    notes: list[str],
) -> FitResult:
    """The nightly job's fit: the held-out evaluation, then the table refit on all tasks with what it publishes."""
    if ctx.objective == "utility" and shipped_constants.lambda_ is None:
        check_split(ctx)
        scale, problem = lambda_scale(ctx.values(Part.LEARNED))
        notes += [problem] if problem else []
        # With no costs at all the objective degrades to quality (docs/design.md, Cost): no lambda is needed then.
        if options.lambda_ or scale is not None:
            shipped_constants = shipped_constants.model_copy(update={"lambda_": options.lambda_ or scale})
    ev = evaluate(
        ctx,
        shipped_constants=shipped_constants,
        pins=Pins(options.pins()),
        seed=options.seed,
        min_exploration=options.min_exploration,
    )
    published = ev.published
    say("refitting on all tasks and publishing")
    model = ctx.model(Part.FULL, published, ev.objective)
    summary = _evaluation_summary(ev, cutoff_text(ev.split["cutoff_at"]), options, ws)
    say("learning signals, escalation ladders and the cost-quality frontier")
    learning = learning_stage(
        ctx, model, constants=published, seed=options.seed, ladder=options.ladders(), writeback=options.writeback
    )
    table = _table(model, ctx, learning, source, ev.routing["published"]["constants_source"], ev.provenance, summary)
    say("evaluating every routing policy on the held-out tasks")
    policies = held_out_policies(ctx, published, ev.objective, learning.ladders, seed=options.seed)
    decisions = ctx.decisions if options.writeback else ctx.decisions.clear()
    stats = _stats(
        ev,
        ctx,
        options,
        {**source, "command": command, **({"credit": options.credit} if options.credit else {})},
        published_source=ev.routing["published"]["constants_source"],
        sections={
            "routing_table": summarize(table).model_dump(mode="json"),
            "signals": learning.signals,
            **learning_figures(learning, ctx, decisions=decisions),
            "policies": policies,
            **({"backtest": _backtest(options.backtest)} if options.backtest else {}),
        },
        cutoff=cutoff_text(ev.split["cutoff_at"]),
        notes=notes,
        table_version=table.version,
    )
    return _publish(ws, options, table, stats, ev)


def _table(
    model: FittedModel,
    ctx: FitContext,
    learning: LearningOutputs,
    source: dict[str, Any],
    constants_source: Any,
    provenance: dict[str, ConstantOrigin],
    evaluation: dict[str, Any],
) -> RoutingTable:
    """The published table: the model refit on all tasks with its learning signals, gate tests and ladders."""
    return build_table(
        model,
        constants_source=constants_source,
        provenance=provenance,
        static=ctx.shipped.static,
        signals=learning.member_signals,
        gate=learning.gate,
        ladders=learning.ladders,
        source=source,
        fitted_at=ctx.newest_of(Part.FULL),
        evaluation=rounded(evaluation),
    ).with_version()


def _publish(
    ws: Workspace, options: FitOptions, table: RoutingTable, stats: AnyStats, ev: Evaluation | None
) -> FitResult:
    pinned = pinned_version(ws)
    if pinned is not None:  # `ratings pin` holds the live table: keep it, record this fit in the history only
        stats = stats.model_copy(
            update={
                "notes": [
                    *stats.notes,
                    (
                        f"fits/routing-table.json is pinned to {pinned} (ratings pin); this fit ({table.version}) "
                        "was written to fits/history/ only. Run `ratings pin --latest` to publish it."
                    ),
                ]
            }
        )
    publish_fit(ws, table, stats, ws.stats(options.case_study), live=pinned is None)
    return FitResult(table=table, stats=stats, evaluation=ev)


def _read(
    ws: Workspace,
    options: FitOptions,
    shipped: Shipped,
    objective: str,
    shipped_constants: Constants,
    current: Current | None,
) -> tuple[int | None, dict[str, int], str | None, FitContext, list[str]]:
    """The store's table version, event counts, inputs hash, its aggregation and the notes on what it left out,
    all at one version. A file of the store that is missing or unreadable is
    :class:`~pipeline.errors.StoreCorrupt` (exit 1) on one line that says how to recover
    (pipeline.store.views.reading).

    The aggregation sums the recency weights of every half-life the fit may use: the grid's, the shipped one and a
    pinned one (the current constants' alone without an evaluation)."""
    if current is None:
        lives, fraction = half_lives_of(shipped_constants, Pins(options.pins())), exact_fraction(options.split)
    else:
        h = current.constants.half_life_days
        lives, fraction = ((float(h),) if h is not None else ()), None
    spec = Spec(thread=options.thread, since=options.since, prm=options.prm, half_lives=lives, fraction=fraction)
    with open_store(ws) as store, reading(store):
        if options.engine == "spark":
            from ..fit.spark import spark_engine

            engine: Engine = spark_engine(store, options.spark_master, ws.spark_scratch)
        else:
            engine = DuckDBEngine(store)
        ctx = FitContext.build(engine, spec, shipped=shipped, objective=objective)
        notes = list(ctx.notes)
        unknown = store.unknown_retractions()
        if unknown:  # said, not silent: a retraction of an id the store does not hold retracts nothing
            shown = ", ".join(unknown[:5]) + (" ..." if len(unknown) > 5 else "")
            notes.append(
                f"{len(unknown)} retraction(s) name an id no rating or rejection holds, and retract nothing: {shown}"
            )
        return store.version, store.event_counts(), store.inputs_sha256(), ctx, notes


@dataclass(frozen=True)
class Current:
    """The constants a refit without evaluation uses (``fit-routing --no-evaluate``) and where they come from."""

    constants: Constants
    provenance: dict[str, ConstantOrigin]
    source: str  # "the live table <version>", or the shipped file
    shipped: Constants  # the shipped constants (the stats report them beside the current ones)


#: FitOptions field -> the Constants field it pins.
_PINS = {
    "prior_source": "prior_source",
    "prior_weight": "prior_weight",
    "exploration": "exploration",
    "half_life_days": "half_life_days",
    "lambda_": "lambda_",
    "min_samples": "min_samples",
    "min_quality": "min_quality",
}


def current_constants(ws: Workspace, shipped_constants: Constants, options: FitOptions) -> Current:
    """The current constants (docs/design.md, Refit without evaluation): those of the live table
    (``fits/routing-table.json``: what the last evaluated fit adopted, or a pinned table's) when there is one, else
    the shipped ones (``shipped.json``, else the code defaults); a constant given on the command line wins, and the
    cost floor is always the option's. The provenance of each searched constant is kept from the table (its verdict
    chose it) or ``shipped``; a pinned one is ``pinned``."""
    table = load(ws.table) if ws.table.exists() else None
    base = table.constants if table is not None else shipped_constants
    provenance: dict[str, ConstantOrigin] = dict(table.constants_provenance) if table is not None else {}
    update: dict[str, Any] = {"cost_floor_usd": options.cost_floor_usd}
    for option, field in _PINS.items():
        value = getattr(options, option)
        if value is None:
            continue
        update[field] = None if value == "inf" else value
        name = "lambda" if field == "lambda_" else field
        if name in SEARCHED:
            provenance[name] = "pinned"
    constants = base.model_copy(update=update)
    for name in SEARCHED:
        provenance.setdefault(name, "shipped")
    if table is not None:
        where = f"the live table {table.version}"
    else:
        where = "fits/shipped.json" if options.shipped is None else options.shipped
    return Current(constants, provenance, where, shipped_constants)


def _refit(
    ws: Workspace,
    ctx: FitContext,
    options: FitOptions,
    command: str,
    current: Current,
    source: dict[str, Any],
    notes: list[str],
) -> FitResult:
    """``fit-routing --no-evaluate``: the table refit on every task with the current constants, its ladders chosen
    on every task by their cross-validated rule; no held-out evaluation, and the stats say so."""
    constants = current.constants
    if ctx.objective == "utility" and constants.lambda_ is None:
        scale, problem = lambda_scale(ctx.values(Part.FULL))
        notes += [problem] if problem else []
        if scale is not None:
            constants = constants.model_copy(update={"lambda_": scale})
    model = ctx.model(Part.FULL, constants)
    learning = learning_stage(
        ctx, model, constants=constants, seed=options.seed, ladder=options.ladders(), writeback=options.writeback,
        evaluated=False,
    )  # fmt: skip
    provenance = {
        k: v for k, v in current.provenance.items() if k != "lambda" or model.effective_objective == "utility"
    }
    evaluation = {
        "case_study": options.case_study,
        "stats": ws.relative(ws.stats(options.case_study)),
        "protocol": f"refit on every task with the current constants (from {current.source}); no held-out evaluation",
    }
    table = _table(model, ctx, learning, source, constants_source(provenance), provenance, evaluation)
    notes.append(
        f"No held-out evaluation ran (fit-routing --no-evaluate): the table was refit on every task with the "
        f"constants of {current.source}, and its ladders were chosen on every task by their cross-validated rule."
    )
    if not model.cost_known:
        notes.append(
            f"No attempt in the store carries a cost, so the ranking used quality alone (the "
            f"{ctx.objective} objective degrades to quality) and every cost figure is null."
        )
    c = _constant_set(constants, model.effective_objective)
    shipped = _constant_set(current.shipped, model.effective_objective)
    data = {
        "name": options.case_study,
        "table_version": table.version,
        "source": {**source, "command": command, **({"credit": options.credit} if options.credit else {})},
        "objective": model.effective_objective,
        "objective_requested": ctx.objective,
        "cost_known": model.cost_known,
        "ratings": rating_counts(ctx),
        "constants": {
            "shipped": shipped,
            "fitted": c,
            "values": c,
            "selected_on": {},
            "published": table.constants_source,
            "provenance": provenance,
            "shipped_from": "file" if ctx.shipped.found else "code defaults",
        },
        "routing_table": summarize(table).model_dump(mode="json"),
        "signals": learning.signals,
        "options": options.model_dump(mode="json", by_alias=True),
        "notes": notes,
        "evaluated": False,
    }
    return _publish(ws, options, table, RefitStats.model_validate(_validated(data, notes)), None)


def _backtest(path: str) -> dict[str, Any]:
    """The ``ratings backtest`` report at ``path`` (its ``backtest.json``), for the stats' ``backtest`` section."""
    from ..jsonfile import read_json, validate
    from .backtest import BacktestReport

    missing = "no such file; run `ratings backtest ... --out DIR` and give DIR/backtest.json"
    data = read_json(Path(path), FitError, missing=missing)
    return validate(BacktestReport, data, Path(path), FitError).to_json_dict()


def _constant_set(c: Constants, objective: str) -> dict[str, Any]:
    data = c.model_dump(by_alias=True)
    if objective != "utility":
        data.pop("lambda")
    if data["min_quality"] is None:  # no floor: the constant sets read as before it existed
        data.pop("min_quality")
    return data


def _evaluation_summary(ev: Evaluation, cutoff: str | None, options: FitOptions, ws: Workspace) -> dict[str, Any]:
    """The ``evaluation`` of the published table: how the constants were chosen and how they did, and the
    case study whose ``stats.json`` (path relative to the home) holds the intervals (``ratings compare``)."""
    r = ev.routing
    return {
        "case_study": options.case_study,
        "stats": ws.relative(ws.stats(options.case_study)),
        "protocol": (
            f"chronological split {options.split} by task time (seed {options.seed}); constants chosen "
            "on the last part of the learned tasks, refit on all learned tasks, scored once on the "
            "held-out tasks; this table is refit on all tasks"
        ),
        "cutoff_at": cutoff,
        "learned_tasks": ev.split["learned_tasks"],
        "held_out_tasks": ev.split["held_out_tasks"],
        "eligible_held_out": ev.split["eligible_held_out"],
        "fitted_constants": _constant_set(ev.fitted, ev.objective),
        "selected_on": ev.selected_on,
        "hit_rate": {"shipped": r["shipped"]["hit_rate"], "fitted": r["fitted"]["hit_rate"]},
        "difference": r["difference"],
        "recommendation": r["recommendation"],
        "reason": r["reason"],
        "exploration": {
            "shipped": r["exploration"]["shipped"]["exploration"],
            "fitted": r["exploration"]["fitted"]["exploration"],
            "difference": r["exploration"]["difference"],
            "recommendation": r["exploration"]["recommendation"],
        },
        "calibration": ev.calibration.recommendation,
    }


def rating_counts(ctx: FitContext) -> dict[str, Any]:
    """The ``ratings`` object of the stats: real ratings (not retracted, within the bounds) in all and by rater
    kind, and the retracted ones."""
    kinds: dict[Any, int] = {}
    for row in ctx.counts:
        if row["live"]:
            kinds[row["rater_kind"]] = kinds.get(row["rater_kind"], 0) + int(row["live"])
    return {
        "total": sum(kinds.values()),
        "by_rater_kind": kinds,
        "retracted": sum(int(row["retracted"]) for row in ctx.counts),
    }


def _stats(
    ev: Evaluation,
    ctx: FitContext,
    options: FitOptions,
    source: dict[str, Any],
    *,
    published_source: str,
    cutoff: str | None,
    sections: dict[str, Any] | None = None,
    notes: list[str] | None = None,
    table_version: str | None = None,
) -> Stats:
    """``sections``: the ``signals``, ``ladders``, ``frontier`` and ``policies`` objects of ``stats.json``;
    ``notes``: what the fit left out or could not compute (first in the stats' notes)."""
    notes = list(notes or [])
    if not ev.cost_known:
        notes.append(
            f"No attempt in the store carries a cost, so the ranking used quality alone (the "
            f"{ctx.objective} objective degrades to quality) and every cost figure is null."
        )
    data = {
        "name": options.case_study,
        "table_version": table_version,
        "source": source,
        "objective": ev.objective,
        "objective_requested": ctx.objective,
        "cost_known": ev.cost_known,
        "ratings": rating_counts(ctx),
        "split": {**ev.split, "cutoff_at": cutoff},
        "constants": {
            "shipped": _constant_set(ev.shipped, ev.objective),
            "fitted": _constant_set(ev.fitted, ev.objective),
            "selected_on": ev.selected_on,
            "published": published_source,
            "provenance": ev.provenance,
            "values": _constant_set(ev.published, ev.objective),
            "shipped_from": "file" if ctx.shipped.found else "code defaults",
        },
        "routing": ev.routing,
        "replay": ev.replay,
        "calibration": ev.calibration.model_dump(),
        "baselines": ev.baselines,
        "priors": ev.priors,
        "grid": ev.grid,
        "options": options.model_dump(mode="json", by_alias=True, exclude={"evaluate"}),
        "notes": notes,
        **(sections or {}),
    }
    ladder_summary = ((sections or {}).get("ladders") or {}).get("summary") or {}
    if ladder_summary.get("gate_is_target"):
        notes.append(
            "The ladder gates are the same ratings that measure quality (as in an imported benchmark "
            "table): the ladder figures are an upper bound, reached only with a perfect verifier."
        )
    return Stats.model_validate(_validated(data, notes))


def _validated(data: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """``data`` rounded as written, with a note naming every figure that was not finite."""
    undefined = non_finite_paths(data)
    if undefined:
        notes.append(f"{len(undefined)} figure(s) could not be computed finitely and are null: {ids_text(undefined)}.")
    return rounded(data)


def _source_word(stats: AnyStats) -> str:
    """``fitted``, ``mixed``, ``shipped``, or ``code defaults`` when there was no shipped.json to ship."""
    c = stats.constants
    return "code defaults" if c.published == "shipped" and c.shipped_from == "code defaults" else c.published


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4g}"


def _ci(ci: tuple[float, float] | None) -> str:
    return "" if ci is None else f"[{ci[0]:.4g}, {ci[1]:.4g}]"


class _Progress:
    """Stage lines on stderr when asked (the CLI asks on a terminal unless --quiet)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, stage: str) -> None:
        if self.enabled:
            print(f"fit: {stage}...", file=sys.stderr, flush=True)
