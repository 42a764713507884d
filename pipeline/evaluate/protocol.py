"""The evaluation protocol (docs/design.md, Evaluation) over one aggregation: split, validate, search, refit, score.

:func:`evaluate` takes a :class:`~pipeline.fit.context.FitContext` and returns every held-out
figure of the constants the stats file reports; :func:`learning_figures` scores the learning stage's
ladders and the cost-quality frontier on the same held-out tasks. :mod:`pipeline.nightly.job` adds the
I/O (lock, compaction, publishing). Nothing here reads the clock or the disk.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

import polars as pl

from ..defaults import DISAGREE_BY
from ..fit.context import FitContext, Part
from ..fit.gate import logged_decisions
from ..fit.learning import LearningOutputs, costed_targets, with_after
from ..fit.model import FittedModel, Shipped
from ..routing.table import ConstantOrigin, Constants
from ..utc import format_timestamp
from .baselines import baselines
from .calibration import CalibrationResult, calibrate
from .exploration import compare_explorations
from .frontier import frontier_lambdas, frontier_section
from .intervals import paired_bootstrap
from .ladders import ladders_section
from .logged import LoggedParts, Target, unweighted_note
from .metrics import eligible, expected_hit, hit_summary, mark_best
from .replay import ReplayStart, start_from
from .search import MIN_EXPLORATION, SEARCHED, ConstantSearch, Pins, Scored, greedy_hits, search
from .split import check_split, split_rows
from .verdict import ELIGIBLE_TASKS, MIN_ELIGIBLE, recommend


@dataclass(frozen=True)
class Evaluation:
    """Everything the held-out evaluation found (numbers unrounded)."""

    objective: str  # the effective objective (quality when no cost is known)
    cost_known: bool
    split: dict[str, Any]
    shipped: Constants
    fitted: Constants
    published: Constants  # per family: fitted on its own adopt (or pinned), else shipped
    provenance: dict[str, ConstantOrigin]  # per searched constant
    selected_on: dict[str, str]
    routing: dict[str, Any]
    replay: dict[str, Any]
    calibration: CalibrationResult
    baselines: dict[str, dict]
    priors: list[dict]
    grid: list[dict]
    learned_members: pl.DataFrame  # the learned fit of the fitted constants (the leakage tests compare it)


def scored_part(ctx: FitContext, fit_part: Part, scored: Part, reference: FittedModel, *, floor: float) -> Scored:
    """A :class:`Scored`: fit on ``fit_part``, score on ``scored``'s tasks.

    Task costs with unknown attempts take the estimate of ``reference`` (a fit of the fit part: costs do not
    depend on the searched constants), so the best set is fixed before any constant is tried. The targets are
    real ratings only: a PRM fill-in is never a held-out or validation target (docs/design.md, PRM). The best set
    is best per dollar, ``argmax q_t,c / max(cost_t,c, floor)``, whatever the objective (docs/design.md,
    Best per dollar and the hit rate); with no costs it ranks like q.
    """
    values = reference.task_costs(ctx.values(scored, real=True))
    best = mark_best(eligible(values), objective="quality_per_dollar", floor=floor, cost="cost_t")
    return Scored.of(fit_part, best, ctx.tasks_of(scored), values)


def evaluate(
    ctx: FitContext,
    *,
    shipped_constants: Constants,
    pins: Pins,
    seed: int,
    min_exploration: float = MIN_EXPLORATION,
) -> Evaluation:
    """Run the evaluation (docs/design.md, Evaluation) on ``ctx`` (aggregated with a split and every half-life of
    the grid; its ``shipped`` and ``objective`` are the fit's); ``shipped_constants`` carry the cost floor, min
    samples and lambda."""
    check_split(ctx)
    shipped = ctx.shipped
    # Costs are known when some learned (task, config) has every attempt priced: the model's own rule
    # (pipeline.fit.model), taken from the learned part so that held-out data cannot change it.
    learned_values = ctx.values(Part.LEARNED)
    cost_known = bool((learned_values["cost_usd"].is_not_null() & (learned_values["unknown_cost"] == 0)).any())
    effective = ctx.objective if cost_known else "quality"
    floor = float(shipped_constants.cost_floor_usd)

    def fit(part: Part, constants: Constants) -> FittedModel:
        return ctx.model(part, constants, effective)

    val_part = scored_part(ctx, Part.INNER, Part.VALIDATION, fit(Part.INNER, shipped_constants), floor=floor)
    held_part = scored_part(ctx, Part.LEARNED, Part.HELD_OUT, fit(Part.LEARNED, shipped_constants), floor=floor)
    logged, by_logged = _logged_scoring(ctx, lambda part: fit(part, shipped_constants), val_part, held_part)
    found: ConstantSearch = search(
        val_part,
        held_part,
        fit=fit,
        start=_start,
        shipped=shipped_constants,
        pins=pins,
        objective=effective,
        lambda_scale=lambda_scale(learned_values)[0],
        has_shipped_priors=bool(shipped.priors),
        seed=seed,
        min_exploration=min_exploration,
        logged=logged if by_logged["validation"] else None,
    )
    fitted = found.constants
    models = {"shipped": fit(Part.LEARNED, shipped_constants), "fitted": fit(Part.LEARNED, fitted)}
    inner = {"shipped": fit(Part.INNER, shipped_constants), "fitted": fit(Part.INNER, fitted)}
    # The prior family's verdict: greedy hit rates (exploration does not change a greedy choice), or the logged
    # decisions where no hit rate exists.
    routing = _routing(_hits(models, held_part), _val_hits(inner, val_part), shipped_constants, fitted, seed)
    _decide_on_logged(routing, logged, models, inner, found, by_logged, seed=seed)
    published, provenance = _published(
        routing,
        held_part,
        shipped_constants,
        found,
        pins,
        fit=fit,
        start=_start,
        effective=effective,
        seed=seed,
        logged=logged if by_logged["held_out"] else None,
    )
    exploration = routing["exploration"]
    replays = {"shipped": exploration["shipped"], "fitted": exploration["fitted"]}
    cal, base = _held_out_figures(ctx, held_part, models, cost_known=cost_known, seed=seed)
    return Evaluation(
        objective=effective,
        cost_known=cost_known,
        split=split_rows(ctx, held_part.best["task"].n_unique()),
        shipped=shipped_constants,
        fitted=fitted,
        published=published,
        provenance=provenance,
        selected_on=found.selected_on,
        routing=routing,
        replay=replays,
        calibration=cal,
        baselines=base,
        priors=prior_rows(shipped, ctx.values(Part.LEARNED, real=True), min_samples=int(shipped_constants.min_samples)),
        grid=found.rows,
        learned_members=models["fitted"].members,
    )


def _published(
    routing: dict[str, Any],
    held_part: Scored,
    shipped: Constants,
    found: ConstantSearch,
    pins: Pins,
    *,
    fit: Callable[[Part, Constants], FittedModel],
    start: Callable[[FittedModel, Scored], ReplayStart],
    effective: str,
    seed: int,
    logged: LoggedParts | None = None,
) -> tuple[Constants, dict[str, ConstantOrigin]]:
    """The published constants and where each comes from: the prior family as its verdict says, then the
    exploration verdict (the replay on held-out with the priors that will be published; with ``logged``, the
    logged held-out decisions decide); both verdicts and the published combination's figures go into
    ``routing``."""
    fitted = found.constants
    prior_adopted = routing["recommendation"] == "adopt"
    priors = shipped.model_copy(
        update={f: getattr(fitted if prior_adopted or _pin(f) in pins else shipped, f) for f in PRIOR_FAMILY}
    )
    prior_model = fit(Part.LEARNED, priors)
    exploration = _exploration(
        start(prior_model, held_part),
        held_part,
        shipped,
        fitted,
        found.validation_replay,
        seed,
        eligible=_count(held_part),
    )
    if logged is not None:
        exploration = _logged_exploration(exploration, logged, prior_model, shipped, fitted, seed=seed)
    explore_adopted = exploration["recommendation"] == "adopt" or "exploration" in pins
    source = fitted if explore_adopted else shipped
    published = priors.model_copy(
        update={"exploration": source.exploration, "exploration_mode": source.exploration_mode}
    )
    provenance: dict[str, ConstantOrigin] = {
        name: "pinned"
        if name in pins
        else ("fitted" if (explore_adopted if name == "exploration" else prior_adopted) else "shipped")
        for name in SEARCHED
        if name != "lambda" or effective == "utility"
    }
    routing["exploration"] = exploration
    routing["published"] = {
        "constants_source": constants_source(provenance),
        "provenance": provenance,
        **hit_summary(greedy_hits(prior_model, held_part)),
        "exploration": published.exploration,
        "exploration_mode": published.exploration_mode,
        "realized_value": exploration["fitted" if explore_adopted else "shipped"]["realized_value"],
    }
    return published, provenance


def _start(model: FittedModel, part: Scored) -> ReplayStart:
    """A replay of ``part``'s tasks starting from ``model``."""
    return start_from(model, sorted(set(part.tasks["region"].cast(pl.String).to_list())))


def _hits(models: dict[str, FittedModel], part: Scored) -> dict[str, pl.DataFrame]:
    """Per model its per-task greedy hits on ``part``."""
    return {name: greedy_hits(model, part) for name, model in models.items()}


def _val_hits(models: dict[str, FittedModel], part: Scored) -> dict[str, float | None]:
    """Per model its greedy hit rate on ``part`` (validation)."""
    return {name: hit_summary(hits)["hit_rate"] for name, hits in _hits(models, part).items()}


def _count(part: Scored) -> int:
    """The eligible tasks of a scored part (those a hit rate is defined on)."""
    return int(part.best["task"].n_unique())


def _logged_scoring(
    ctx: FitContext, fit: Callable[[Part], FittedModel], val_part: Scored, held_part: Scored
) -> tuple[LoggedParts, dict[str, bool]]:
    """The logged actions of validation and held-out (``fit``: the shipped constants' model of a part), and where
    they decide: a part with fewer than :data:`MIN_ELIGIBLE` eligible tasks (one config per task) and at least as
    many logged tasks (docs/design.md, Verdicts on logged data)."""
    logged = LoggedParts.of(ctx, fit)
    return logged, {
        "validation": _count(val_part) < MIN_ELIGIBLE and logged.validation.tasks >= MIN_ELIGIBLE,
        "held_out": _count(held_part) < MIN_ELIGIBLE and logged.held_out.tasks >= MIN_ELIGIBLE,
    }


def _logged_verdict(
    figures: dict[str, Any], val: dict[str, float | None], *, same: bool, same_text: str, what: str
) -> dict[str, Any]:
    """A verdict on the logged held-out decisions (:mod:`pipeline.evaluate.logged`): by the SNIPS difference and
    its interval, with the doubly robust difference beside it in the reason."""
    diff, dr = figures["snips"], figures["dr"]
    weighting = "weighted" if figures["weighted"] else "unweighted"
    recommendation, reason = recommend(
        diff["value"],
        None if diff["ci95"] is None else tuple(diff["ci95"]),
        figures["tasks"],
        val,
        same=same,
        measure=f"{what} SNIPS value on the logged held-out decisions ({weighting})",
        tasks="logged held-out task(s)",
        fmt="{:+.4g}",
        val_fmt="{:.4g}",
        same_text=same_text,
    )
    if dr["value"] is not None:
        ci = "undefined" if dr["ci95"] is None else "[{:+.4g}, {:+.4g}]".format(*dr["ci95"])
        reason += f"; doubly robust difference {dr['value']:+.4g} (95% CI {ci})"
    return {**figures, "validation": val, "recommendation": recommendation, "reason": reason}


def _decide_on_logged(
    routing: dict[str, Any],
    logged: LoggedParts,
    models: dict[str, FittedModel],
    inner: dict[str, FittedModel],
    found: ConstantSearch,
    by_logged: dict[str, bool],
    *,
    seed: int,
) -> None:
    """The prior family judged on the logged held-out decisions (greedy targets), in ``routing["logged"]`` wherever
    the held-out part logged a task; where the hit rate cannot decide (``by_logged["held_out"]``) this verdict is
    the family's (``decided_by``). ``inner``: the shipped and the fitted constants' fits of the inner part, scored
    on the logged validation decisions (``val`` lists the shipped one first, as the hit rate's)."""
    routing["decided_by"] = "logged" if by_logged["held_out"] else "hit_rate"
    routing["searched_by"] = "logged" if by_logged["validation"] else "hit_rate"
    if logged.held_out.tasks == 0:
        routing["logged"] = None
        return
    fitted = found.constants
    figures = logged.compare(Target(models["fitted"]), Target(models["shipped"]), seed=seed)
    val = {name: logged.value(False, model) for name, model in inner.items()}
    same = all(getattr(models["shipped"].constants, f) == getattr(fitted, f) for f in PRIOR_FAMILY)
    verdict = _logged_verdict(
        figures, val, same=same, same_text="the fitted prior family is the shipped one", what="greedy"
    )
    verdict["reason"] += f"; {unweighted_note(logged.held_out)}"
    routing["logged"] = verdict
    if by_logged["held_out"]:
        routing["recommendation"], routing["reason"] = verdict["recommendation"], verdict["reason"]


def _logged_exploration(
    replayed: dict[str, Any],
    logged: LoggedParts,
    prior_model: FittedModel,
    shipped: Constants,
    fitted: Constants,
    *,
    seed: int,
) -> dict[str, Any]:
    """The exploration verdict on the logged held-out decisions: the table that will be published explored by each
    arm, fitted against shipped, by SNIPS (the replay's figures stay beside it). What it measures is what exploring
    costs at today's table (a stochastic target's value), not what it teaches later."""
    arms = {name: (c.exploration_mode, float(c.exploration)) for name, c in (("shipped", shipped), ("fitted", fitted))}
    targets = {name: Target(prior_model, eps, mode) for name, (mode, eps) in arms.items()}
    figures = logged.compare(targets["fitted"], targets["shipped"], seed=seed)
    val = replayed["validation"]
    verdict = _logged_verdict(
        figures,
        val,
        same=arms["shipped"] == arms["fitted"],
        same_text="the fitted exploration is the shipped one",
        what="exploration",
    )
    verdict["reason"] += f"; {unweighted_note(logged.held_out)}"
    return {
        **replayed,
        "recommendation": verdict["recommendation"],
        "reason": verdict["reason"],
        "decided_by": "logged",
        "logged": verdict,
    }


def _held_out_figures(
    ctx: FitContext, held_part: Scored, models: dict[str, FittedModel], *, cost_known: bool, seed: int
) -> tuple[CalibrationResult, dict[str, dict]]:
    """Calibration of the fitted regions against the plain mean, and the baselines, on the held-out tasks."""
    scores = ctx.scores.join(ctx.tasks.select("task", "region"), on="task", how="left", maintain_order="left")
    cal = calibrate(scores, models["fitted"], seed=seed)
    star = models["fitted"].members.filter(pl.col("region") == "*")
    candidates = held_part.best.select("task", "region", "config_key")
    base = baselines(
        held_part.best,
        learned_quality=list(star.select("config_key", "quality").iter_rows()),
        learned_cost=list(star.select("config_key", "cost_usd").iter_rows()),
        shipped=models["shipped"].choose_frame(candidates),
        fitted=models["fitted"].choose_frame(candidates),
        cost_known=cost_known,
    )
    return cal, base


def learning_figures(
    learning: LearningOutputs, ctx: FitContext, decisions: pl.DataFrame | None = None
) -> dict[str, Any]:
    """The ``ladders`` and ``frontier`` objects of ``stats.json``: the learning stage's ladders reported once on
    the held-out tasks, and the cost-quality frontier of the learned fit there (its lambda grid from the learned
    tasks). Both on the eligible held-out tasks, the baselines' yardstick (:mod:`pipeline.evaluate.yardstick`);
    ``decisions`` (the logged routing decisions) give the singles' SNIPS estimates. Held-out targets exclude PRM
    fill-ins; unknown attempt costs take the learned fit's estimate."""
    model = learning.learned_model
    held_tv = eligible(costed_targets(ctx.values(Part.HELD_OUT, real=True), model))  # one yardstick
    if learning.ladder_fit is not None:
        fit = learning.ladder_fit
        ladders = ladders_section(fit, with_after(held_tv, logged_decisions(ctx, Part.HELD_OUT), fit.pass_threshold))
    else:
        ladders = {"summary": None, "regions": {}, "reason": learning.ladder_reason}
    learned_tv = costed_targets(ctx.values(Part.LEARNED, real=True), model)
    frontier = frontier_section(
        held_tv,
        frontier_lambdas(learned_tv) if model.cost_known else None,
        members=model.members,
        floor=float(model.constants.cost_floor_usd),
        decisions=decisions,
    )
    return {"ladders": ladders, "frontier": frontier}


def lambda_scale(values: pl.DataFrame) -> tuple[float | None, str | None]:
    """Mean learned cost / mean learned quality: the unit of the utility lambda grid (None without costs), and a
    note when it cannot be computed finitely.

    When the mean quality is 0 (every rating scored 0) or the quotient, or the grid's top (100 times it),
    overflows (a subnormal mean quality), the unit is 1: lambda then only multiplies a quality of about 0,
    so the ranking is by cost whatever lambda is.
    """
    costs, qualities = values["cost_usd"].drop_nulls(), values["value"].drop_nulls()
    if costs.is_empty():
        return None, None
    cost = float(cast(float, costs.cast(pl.Float64).mean()))
    quality = float(cast(float, qualities.cast(pl.Float64).mean())) if not qualities.is_empty() else 0.0
    scale = round(cost / quality, 9) if quality else math.inf
    if math.isfinite(scale * 100):
        return scale, None
    return 1.0, (
        f"The utility lambda grid is in units of 1: the learned mean cost {cost:.6g} over the learned mean "
        f"quality {quality:.6g} cannot be computed finitely."
    )


#: The constants the prior family's verdict judges (by greedy hit rate); exploration has its own.
PRIOR_FAMILY = ("prior_source", "prior_weight", "half_life_days", "lambda_")


def _pin(field: str) -> str:
    """The :class:`Pins` name of a :class:`Constants` field."""
    return "lambda" if field == "lambda_" else field


def constants_source(provenance: dict[str, ConstantOrigin]) -> str:
    """``shipped`` when every judged constant is the shipped value, ``fitted`` when none is, else ``mixed``
    (a pinned value is the operator's choice, not the shipped one)."""
    shipped = [p == "shipped" for p in provenance.values()]
    return "shipped" if all(shipped) else "fitted" if not any(shipped) else "mixed"


def _exploration(
    start: ReplayStart,
    part: Scored,
    shipped: Constants,
    fitted: Constants,
    validation: dict[tuple[str, float], float | None],
    seed: int,
    *,
    eligible: int,
) -> dict[str, Any]:
    """The exploration verdict: held-out replay of the fitted against the shipped arm (mode and share; seed-
    averaged, moving-block bootstrap interval: :func:`pipeline.evaluate.exploration.compare_explorations`),
    validated on the validation values that chose it. Like the prior family's, it needs :data:`MIN_ELIGIBLE`
    ``eligible`` held-out tasks: where no task was done by two configurations, no replay can show one exploration
    beating another (the logged decisions then decide: :func:`_logged_exploration`)."""
    arm_s = (shipped.exploration_mode, float(shipped.exploration))
    arm_f = (fitted.exploration_mode, float(fitted.exploration))
    figures = compare_explorations(start, part.tasks, part.outcomes, shipped=arm_s, fitted=arm_f, seed=seed)
    val = {"shipped": validation.get(arm_s), "fitted": validation.get(arm_f)}
    diff = figures["difference"]
    method = figures["method"]
    enough = eligible >= MIN_ELIGIBLE
    recommendation, reason = recommend(
        diff["value"],
        None if diff["ci95"] is None else tuple(diff["ci95"]),
        method["tasks"] if enough else eligible,
        val,
        same=arm_s == arm_f,
        measure=f"held-out replay value (mean of {method['seeds']} replay seeds, moving-block bootstrap)",
        tasks="held-out task(s) to replay" if enough else ELIGIBLE_TASKS,
        fmt="{:+.4g}",
        val_fmt="{:.4g}",
    )
    if arm_s == arm_f:
        reason = reason.replace(
            "the fitted constants are the shipped ones", "the fitted exploration is the shipped one"
        )
    return {
        **figures,
        "validation": val,
        "recommendation": recommendation,
        "reason": reason,
        "decided_by": "replay",
        "logged": None,
    }


def _routing(
    hits: dict[str, pl.DataFrame], val_hits: dict[str, float | None], shipped: Constants, fitted: Constants, seed: int
) -> dict[str, Any]:
    """Greedy hit rates of shipped and fitted on held-out, their paired difference and the recommendation."""
    s, f = hit_summary(hits["shipped"]), hit_summary(hits["fitted"])
    s["expected_hit_rate_with_exploration"] = expected_hit(hits["shipped"], float(shipped.exploration))
    paired = (  # per task: the hit of each (0/1)
        hits["shipped"]
        .select("task", pl.col("hit").cast(pl.Float64).alias("shipped"))
        .join(hits["fitted"].select("task", pl.col("hit").cast(pl.Float64).alias("fitted")), on="task")
        .sort("task")
    )
    ci = paired_bootstrap(paired, "fitted", "shipped", seed=seed)
    diff = None if f["hit_rate"] is None or s["hit_rate"] is None else f["hit_rate"] - s["hit_rate"]
    same = all(getattr(shipped, f) == getattr(fitted, f) for f in PRIOR_FAMILY)
    recommendation, reason = recommend(diff, ci, f["n"], val_hits, same=same)
    if same:
        reason = reason.replace(
            "the fitted constants are the shipped ones", "the fitted prior family is the shipped one"
        )
    return {
        "shipped": s,
        "fitted": f,
        "difference": {"value": diff, "ci95": ci},
        "validation": val_hits,
        "recommendation": recommendation,
        "reason": reason,
    }


def prior_rows(shipped: Shipped, learned: pl.DataFrame, *, min_samples: int) -> list[dict]:
    """One row per shipped prior: its quality against the learned ratings it covers.

    ``learned``: the learned part's task values of real ratings. ``measured`` = ``sum(w*s)/sum(w)`` over the
    (task, config) pairs whose config key starts with the selector's segments and whose region is the prior's
    (every region for ``*``); ``n`` their ratings; ``disagrees`` when measured and shipped differ by more than
    :data:`pipeline.defaults.DISAGREE_BY` with ``n >= min_samples``.
    """
    keys = learned.select(key=pl.col("config_key").cast(pl.String), region=pl.col("region").cast(pl.String))
    weights, wscores, counts = (learned[c].to_numpy() for c in ("weight", "wscore", "n"))
    rows = []
    for prior in shipped.priors:
        matches = (keys["key"] == prior.selector) | keys["key"].str.starts_with(prior.selector + "/")
        if prior.region != "*":
            matches = matches & (keys["region"] == prior.region)
        covered = matches.to_numpy()
        weight = float(weights[covered].sum())
        measured = float(wscores[covered].sum()) / weight if weight > 0 else None
        n = int(counts[covered].sum())
        rows.append(
            {
                "selector": prior.selector,
                "region": prior.region,
                "shipped": prior.quality,
                "measured": measured,
                "weight": weight,
                "n": n,
                "disagrees": measured is not None and n >= min_samples and abs(measured - prior.quality) > DISAGREE_BY,
            }
        )
    return rows


def cutoff_text(moment: datetime | None) -> str | None:
    """A store time (naive UTC) in the one textual form of docs/design.md, Common fields."""
    if moment is None:
        return None
    return format_timestamp(moment)
