"""``fit-routing``: compact, fit, evaluate on held-out, publish the routing table and the case-study stats.

One fit at a time per home (``fits/.fit.lock``). The fit reads the store at the
table version it opened first, so appends and compactions may go on meanwhile; the
table's ``source.version`` says which snapshot it used. Same store, same
options: byte-identical ``fits/routing-table.json`` and ``stats.json`` (every
time comes from the store, floats are rounded to 9 decimals, JSON keys sorted).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import polars as pl

from ..errors import FitError
from ..evaluate.policies import held_out_policies
from ..evaluate.protocol import Evaluation, cutoff_text, evaluate, lambda_scale, learning_figures
from ..evaluate.search import SEARCHED, Pins
from ..evaluate.split import parts
from ..fit.finite import ids_text, non_finite_paths
from ..fit.inputs import FitInputs, load_inputs, task_values
from ..fit.learning import LadderOptions, learning_stage
from ..fit.model import Shipped, fit_model, load_shipped
from ..fit.shipped import defaults_note, placeholder_note
from ..fit.table_build import build_table
from ..rounding import rounded
from ..routing.summary import summarize
from ..routing.table import Constants, RoutingTable
from ..store import open_store
from ..store.views import reading
from ..streams.future import MAX_FUTURE
from ..workspace import StrPath, Workspace
from .options import FitOptions
from .publish import pinned_version, publish_fit, publish_table
from .stats import Stats


@dataclass(frozen=True)
class FitResult:
    table: RoutingTable
    stats: Stats
    evaluation: Evaluation  # the held-out evaluation (its learned fit for the leakage tests)

    def summary_lines(self) -> list[str]:
        """A readable summary for people (the CLI prints it; ``--json`` prints the stats instead)."""
        s, t = self.stats, self.table
        r, cal = s.routing, s.calibration
        lines = [
            f"published routing table {t.version} (constants: {_source_word(s)}; table version {t.source.version}, "
            f"fitted_at {t.fitted_at})",
            f"objective: {s.objective}" + ("" if s.cost_known else " (no costs in the store: ranked by quality alone)"),
            f"split: {s.split.learned_tasks} learned / {s.split.held_out_tasks} held-out tasks (cutoff "
            f"{s.split.cutoff_at}), {s.split.eligible_held_out} eligible, {s.split.validation_tasks} validation",
            f"held-out hit rate: shipped {_fmt(r.shipped.hit_rate)} {_ci(r.shipped.ci95)}, fitted "
            f"{_fmt(r.fitted.hit_rate)} {_ci(r.fitted.ci95)}, difference {_fmt(r.difference.value)} "
            f"{_ci(r.difference.ci95)}",
            f"prior family (prior source, prior weight, half-life{', lambda' if s.objective == 'utility' else ''}): "
            f"{r.recommendation}: {r.reason}",
        ]
        x = r.exploration
        if x is not None:
            lines += [
                f"held-out replay (mean of {x.method['seeds']} seeds): shipped exploration {x.shipped.exploration:g} "
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
        policies = (s.policies or {}).get("policies") or {}
        if "learning_governed" in policies and "quality_per_dollar" in policies:
            lg, qpd = policies["learning_governed"], policies["quality_per_dollar"]
            lines.append(
                f"default policy learning_governed (evidence gate): held-out hit rate {_fmt(lg['hit_rate'])}, "
                f"quality_per_dollar without the gate {_fmt(qpd['hit_rate'])}"
            )
        ladders = s.ladders or {}
        if ladders.get("summary"):
            lad, rungs = ladders["summary"], ladders["regions"]["*"]["ladder"]
            replaced = sorted(r for r, v in ladders["regions"].items() if v["source"] == "region")
            where = f"; own ladders in {', '.join(replaced)}" if replaced else ""
            rule_of = ladders.get("rule") or {}
            kappa = rule_of.get("kappa")
            rule = (
                f"kappa {kappa:g}"
                if kappa is not None
                else "the best single alone"
                if rule_of.get("name") == "best-single"
                else str(rule_of.get("name", "n/a"))
            )
            lines.append(
                f"published ladders (global {' > '.join(rungs)}{where}; rule: {rule}): held-out quality "
                f"{_fmt(lad['held_out_quality'])} at "
                f"{_fmt(lad['held_out_cost_usd'])} USD/task vs best single {lad['best_single_config']} "
                f"{_fmt(lad['best_single_quality'])} at {_fmt(lad['best_single_cost_usd'])} "
                f"(coverage {_fmt(lad['coverage'])})"
            )
        lines.extend(s.notes)
        return lines


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
    say("loading the store")
    version, events, inputs_sha, inputs = _read(ws, options)
    shipped, objective, shipped_constants, notes = _shipped_constants(ws, options, inputs, version)
    say("evaluating on the held-out split (validation search included)")
    ev = evaluate(
        inputs,
        shipped=shipped,
        shipped_constants=shipped_constants,
        pins=Pins(options.pins()),
        objective=objective,
        fraction=options.split,
        seed=options.seed,
        min_exploration=options.min_exploration,
    )
    published = ev.published
    source_word = ev.routing["published"]["constants_source"]
    say("refitting on all tasks and publishing")
    model = fit_model(inputs, published, shipped, ev.objective)
    source = {"version": version, "events": events, "sha256": inputs_sha}
    summary = _evaluation_summary(ev, cutoff_text(ev.split["cutoff_at"]), options, ws)
    say("learning signals, escalation ladders and the cost-quality frontier")
    ladder = _ladder_options(options)
    if not options.writeback:  # the fit ignores logged decisions: no writeback, no off-policy estimates
        inputs = dataclasses.replace(inputs, decisions=inputs.decisions.clear())
    cut = parts(inputs, options.split)
    learning = learning_stage(
        inputs,
        model,
        constants=published,
        shipped=shipped,
        objective=ev.objective,
        learned=cut.learned,
        seed=options.seed,
        ladder=ladder,
    )
    table = build_table(
        model,
        constants_source=source_word,
        provenance=ev.provenance,
        static=shipped.static,
        signals=learning.member_signals,
        gate=learning.gate,
        ladders=learning.ladders,
        source=source,
        fitted_at=inputs.newest_at,
        evaluation=rounded(summary),
    )
    say("evaluating every routing policy on the held-out tasks")
    policies = held_out_policies(
        inputs, published, shipped, ev.objective, options.split, learning.ladders, seed=options.seed
    )
    pinned = pinned_version(ws)
    table = table.with_version()
    stats = _stats(
        ev,
        inputs,
        options,
        objective,
        {**source, "command": command, **({"credit": options.credit} if options.credit else {})},
        published_source=source_word,
        sections={
            "routing_table": summarize(table).model_dump(mode="json"),
            "signals": learning.signals,
            **learning_figures(learning, cut, decisions=inputs.decisions),
            "policies": policies,
            **({"backtest": _backtest(options.backtest)} if options.backtest else {}),
        },
        cutoff=cutoff_text(ev.split["cutoff_at"]),
        notes=notes,
        shipped_found=shipped.found,
        table_version=table.version,
    )
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


def refit_table(home: Workspace | StrPath | None, options: FitOptions | None = None) -> RoutingTable:
    """The table refit on every task with the current constants and no held-out evaluation: the shipped
    constants (code defaults without ``shipped.json``) with the options' pins, signals, gate tests and ladders
    (chosen on every task), published to ``fits/routing-table.json`` (and ``fits/history/``); no stats, no
    page. The store as it is (no compaction). What ``ratings backtest --fit table`` refits each night with."""
    ws = Workspace.of(home)
    options = options or FitOptions()
    with fit_lock(ws, wait=options.wait):
        version, events, inputs_sha, inputs = _read(ws, options)
        shipped, objective, shipped_constants, _ = _shipped_constants(ws, options, inputs, version)
        pins = options.pins()
        constants = shipped_constants.model_copy(
            update={("lambda_" if name == "lambda" else name): value for name, value in pins.items()}
        )
        model = fit_model(inputs, constants, shipped, objective)
        ladder = _ladder_options(options)
        if not options.writeback:
            inputs = dataclasses.replace(inputs, decisions=inputs.decisions.clear())
        learning = learning_stage(
            inputs,
            model,
            constants=constants,
            shipped=shipped,
            objective=model.objective,
            learned=inputs,
            seed=options.seed,
            ladder=ladder,
        )
        searched = [n for n in SEARCHED if n != "lambda" or model.effective_objective == "utility"]
        provenance: dict[str, Any] = {n: "pinned" if n in pins else "shipped" for n in searched}
        table = build_table(
            model,
            constants_source="shipped" if all(v == "shipped" for v in provenance.values()) else "mixed",
            provenance=provenance,
            static=shipped.static,
            signals=learning.member_signals,
            gate=learning.gate,
            ladders=learning.ladders,
            source={"version": version, "events": events, "sha256": inputs_sha},
            fitted_at=inputs.newest_at,
            evaluation={"protocol": "no held-out evaluation: the current constants refit on all tasks"},
        ).with_version()
        publish_table(ws, table, live=pinned_version(ws) is None)
    return table


def _ladder_options(options: FitOptions) -> LadderOptions:
    return LadderOptions(
        pass_threshold=options.pass_threshold,
        budget_usd=options.ladder_budget_usd,
        target="budget" if options.ladder_budget_usd is not None else "best-single",
    )


def _shipped_constants(
    ws: Workspace, options: FitOptions, inputs: FitInputs, version: int | None
) -> tuple[Shipped, str, Constants, list[str]]:
    """The shipped file, the objective, the shipped constants with the options' overrides (and lambda's scale
    for utility when neither shipped nor pinned), and the notes they give."""
    if inputs.ratings.height == 0:
        raise FitError(f"no ratings in the store (table version {version}); append task.rated events and compact first")
    shipped = load_shipped(options.shipped if options.shipped is not None else ws.shipped)
    objective = options.objective or shipped.constants.objective or "quality_per_dollar"
    overrides: dict[str, Any] = {"cost_floor_usd": options.cost_floor_usd}
    if options.min_samples is not None:
        overrides["min_samples"] = options.min_samples
    if options.min_quality is not None:
        overrides["min_quality"] = options.min_quality
    shipped_constants = shipped.to_constants(**overrides)
    notes = list(inputs.notes)
    if not shipped.found:
        notes.append(defaults_note(shipped_constants))
    placeholders = placeholder_note(shipped, options.shipped or "fits/shipped.json")
    notes += [placeholders] if placeholders else []
    if objective == "utility" and shipped_constants.lambda_ is None:
        scale, problem = lambda_scale(task_values(parts(inputs, options.split).learned))
        notes += [problem] if problem else []
        # With no costs at all the objective degrades to quality (docs/design.md, Cost): no lambda is needed then.
        if options.lambda_ or scale is not None:
            shipped_constants = shipped_constants.model_copy(update={"lambda_": options.lambda_ or scale})
    return shipped, objective, shipped_constants, notes


def _read(ws: Workspace, options: FitOptions) -> tuple[int | None, dict[str, int], str | None, FitInputs]:
    """The store's table version, event counts, inputs hash and events as fit inputs, all at one version. A file
    of the store that is missing or unreadable is :class:`~pipeline.errors.StoreCorrupt` (exit 1) on one line
    that says how to recover (pipeline.store.views.reading)."""
    with open_store(ws) as store, reading(store):
        inputs = load_inputs(store, prm=options.prm, thread=options.thread, since=options.since)
        unknown = store.unknown_retractions()
        if unknown:  # said, not silent: a retraction of an id the store does not hold retracts nothing
            shown = ", ".join(unknown[:5]) + (" ..." if len(unknown) > 5 else "")
            note = f"{len(unknown)} retraction(s) name an id no rating or rejection holds, and retract nothing: {shown}"
            inputs = dataclasses.replace(inputs, notes=(*inputs.notes, note))
        return store.version, store.event_counts(), store.inputs_sha256(), inputs


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


def _stats(
    ev: Evaluation,
    inputs: FitInputs,
    options: FitOptions,
    requested: str,
    source: dict[str, Any],
    *,
    published_source: str,
    cutoff: str | None,
    sections: dict[str, Any] | None = None,
    notes: list[str] | None = None,
    table_version: str | None = None,
    shipped_found: bool = True,
) -> Stats:
    """``sections``: the ``signals``, ``ladders``, ``frontier`` and ``policies`` objects of ``stats.json``;
    ``notes``: what the fit left out or could not compute (first in the stats' notes)."""
    real = inputs.ratings.filter(pl.col("origin") != "prm")
    kinds = real.group_by("rater_kind").len().sort("rater_kind")
    notes = list(notes or [])
    if not ev.cost_known:
        notes.append(
            f"No attempt in the store carries a cost, so the ranking used quality alone (the "
            f"{requested} objective degrades to quality) and every cost figure is null."
        )
    data = {
        "name": options.case_study,
        "table_version": table_version,
        "source": source,
        "objective": ev.objective,
        "objective_requested": requested,
        "cost_known": ev.cost_known,
        "ratings": {
            "total": real.height,
            "by_rater_kind": dict(kinds.iter_rows()),
            "retracted": inputs.retracted.height,
        },
        "split": {**ev.split, "cutoff_at": cutoff},
        "constants": {
            "shipped": _constant_set(ev.shipped, ev.objective),
            "fitted": _constant_set(ev.fitted, ev.objective),
            "selected_on": ev.selected_on,
            "published": published_source,
            "provenance": ev.provenance,
            "values": _constant_set(ev.published, ev.objective),
            "shipped_from": "file" if shipped_found else "code defaults",
        },
        "routing": ev.routing,
        "replay": ev.replay,
        "calibration": ev.calibration.model_dump(),
        "baselines": ev.baselines,
        "priors": ev.priors,
        "grid": ev.grid,
        # without a backtest attached, the options read as before the option existed (the same bytes)
        "options": options.model_dump(
            mode="json", by_alias=True, exclude={"backtest"} if not options.backtest else None
        ),
        "notes": notes,
        **(sections or {}),
    }
    ladder_summary = ((sections or {}).get("ladders") or {}).get("summary") or {}
    if ladder_summary.get("gate_is_target"):
        notes.append(
            "The ladder gates are the same ratings that measure quality (as in an imported benchmark "
            "table): the ladder figures are an upper bound, reached only with a perfect verifier."
        )
    undefined = non_finite_paths(data)
    if undefined:
        notes.append(f"{len(undefined)} figure(s) could not be computed finitely and are null: {ids_text(undefined)}.")
    return Stats.model_validate(rounded(data))


def _source_word(stats: Stats) -> str:
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
