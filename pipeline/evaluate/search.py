"""Choosing the routing constants on validation (docs/design.md, Grids and the search).

Prior source, prior weight, half-life and (utility only) lambda are chosen on
the full grid by the greedy hit rate on the validation tasks, each set fitted
on the inner learned part alone. Exploration is then chosen, with those
constants, by sequential replay over the validation tasks averaged over the
replay seeds (exploring always lowers the immediate hit, so the hit rate cannot
choose it), among the grid that starts at the exploration floor
(``min_exploration``, default 0.05; 0 only when the floor is 0 or pinned). A
pinned constant is not searched; with everything pinned nothing is.

Tie-break (deterministic): the higher validation score; then the set with fewer
constants that differ from the shipped ones; then the smaller prior weight; then
prior source ``shipped`` before ``measured``; then the longer half-life (no
recency first); then the smaller lambda. For exploration: the higher realized
value, then the shipped exploration, then the smaller epsilon.

Every evaluated set is also scored on the held-out tasks, fitted on all learned
tasks, and listed in the grid rows labelled ``diagnostic``: those numbers never
choose anything.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import product
from typing import Any

import polars as pl

from ..defaults import EXPLORATIONS, HALF_LIVES, MIN_EXPLORATION, PRIOR_SOURCES, PRIOR_WEIGHTS, lambda_grid
from ..fit.context import Part
from ..routing.table import Constants
from .exploration import Arm, replay_value
from .logged import LoggedParts
from .metrics import BestIndex, expected_hit, hit_summary
from .replay import ReplayStart

#: The exploration modes the search replays (docs/design.md, Exploration).
MODES = ("epsilon", "thompson")

SEARCHED = ("prior_source", "prior_weight", "exploration", "half_life_days", "lambda")


class Pins(dict):
    """The constants given on the command line (``prior_source``, ``prior_weight``, ``exploration``,
    ``half_life_days`` (None = infinity), ``lambda``): present keys are pinned, absent ones searched."""


@dataclass(frozen=True)
class Scored:
    """One scored part of the evaluation: the part a model is fitted on and the tasks it is scored on.

    ``best``: :func:`pipeline.evaluate.metrics.mark_best` of the eligible scored tasks (``task, region,
    config_key, value, cost, score, best``); ``tasks`` and ``outcomes`` feed the sequential replay.
    """

    fit_part: Part
    best: pl.DataFrame
    tasks: pl.DataFrame
    outcomes: pl.DataFrame
    index: BestIndex

    @classmethod
    def of(cls, fit_part: Part, best: pl.DataFrame, tasks: pl.DataFrame, outcomes: pl.DataFrame) -> Scored:
        return cls(fit_part=fit_part, best=best, tasks=tasks, outcomes=outcomes, index=BestIndex.of(best))


FitFn = Callable[[Part, Constants], Any]
"""``(part, constants) -> FittedModel`` (:meth:`pipeline.fit.context.FitContext.model`, objective bound)."""
StartFn = Callable[[Any, Scored], ReplayStart]
"""``(model, scored) -> ReplayStart``: a replay of ``scored``'s tasks starting from that fit."""


@dataclass
class ConstantSearch:
    constants: Constants
    selected_on: dict[str, str]
    rows: list[dict] = field(default_factory=list)
    validation_hits: pl.DataFrame | None = None  # per-task hits of the chosen set on validation
    # (mode, exploration) -> its validation value (the replay's mean over the replay seeds, or the logged SNIPS
    # value where the search scores on logged decisions), for the grid and the shipped arm
    validation_replay: dict[Arm, float | None] = field(default_factory=dict)


def greedy_hits(model: Any, part: Scored) -> pl.DataFrame:
    """Route every scored task greedily among the configs that did it (the greedy rule of
    :mod:`pipeline.routing.greedy`, by :meth:`pipeline.fit.model.FittedModel.ranking`); the per-task hit frame of
    :func:`pipeline.evaluate.metrics.route_hits`."""
    return part.index.route(model.ranking(part.index.pairs.select("region", "config_key")))


def half_lives_of(shipped: Constants, pins: Pins) -> tuple[float, ...]:
    """Every finite half-life a search may fit (the grid's, the shipped one, a pinned one), longest first: the
    recency sums the aggregation must hold (:class:`pipeline.fit.aggregate.Spec`)."""
    lives = [*HALF_LIVES, shipped.half_life_days, pins.get("half_life_days")]
    return tuple(sorted({float(h) for h in lives if h is not None}, reverse=True))


def exploration_grid(min_exploration: float) -> tuple[float, ...]:
    """The searched explorations: the floor, then every grid value above it (0 only when the floor is 0)."""
    return (min_exploration, *(e for e in EXPLORATIONS if e > min_exploration))


def candidate_sets(
    shipped: Constants, pins: Pins, *, objective: str, lambda_scale: float | None, has_shipped_priors: bool
) -> list[Constants]:
    """The grid of non-exploration constants, pinned ones fixed, in a fixed order.

    Without any shipped prior, source ``shipped`` falls back to the measured prior everywhere (docs/design.md, Priors),
    so only ``shipped`` is evaluated.
    """
    sources = (
        [pins["prior_source"]]
        if "prior_source" in pins
        else (list(PRIOR_SOURCES) if has_shipped_priors else ["shipped"])
    )
    weights = [float(pins["prior_weight"])] if "prior_weight" in pins else list(PRIOR_WEIGHTS)
    lives = [pins["half_life_days"]] if "half_life_days" in pins else list(HALF_LIVES)
    if objective != "utility":
        lambdas: list[float | None] = [None]
    elif "lambda" in pins:
        lambdas = [pins["lambda"]]
    else:
        lambdas = [*lambda_grid(lambda_scale or 1.0)]
    exploration = pins.get("exploration", shipped.exploration)
    return [
        shipped.model_copy(
            update={
                "prior_source": s,
                "prior_weight": k,
                "half_life_days": h,
                "lambda_": lam,
                "exploration": exploration,
            }
        )
        for s, k, h, lam in product(sources, weights, lives, lambdas)
    ]


def _tie_key(c: Constants, shipped: Constants) -> tuple:
    differ = sum(
        [
            c.prior_source != shipped.prior_source,
            c.prior_weight != shipped.prior_weight,
            c.half_life_days != shipped.half_life_days,
            c.lambda_ != shipped.lambda_,
        ]
    )
    life = math.inf if c.half_life_days is None else c.half_life_days
    return (differ, c.prior_weight, c.prior_source != "shipped", -life, c.lambda_ or 0.0)


def search(
    validation: Scored,
    held_out: Scored,
    *,
    fit: FitFn,
    start: StartFn,
    shipped: Constants,
    pins: Pins,
    objective: str,
    lambda_scale: float | None,
    has_shipped_priors: bool,
    seed: int,
    min_exploration: float = MIN_EXPLORATION,
    logged: LoggedParts | None = None,
) -> ConstantSearch:
    """Choose the constants on ``validation``; score each evaluated set on ``held_out`` as a diagnostic.

    Exploration is chosen on the validation replay averaged over the replay seeds
    (:func:`pipeline.evaluate.exploration.replay_value`) among :data:`MODES` x :func:`exploration_grid`. With
    ``logged`` (validation has too few eligible tasks for a hit rate) both are chosen by the SNIPS value on the
    logged validation decisions instead (:mod:`pipeline.evaluate.logged`)."""
    candidates = candidate_sets(
        shipped, pins, objective=objective, lambda_scale=lambda_scale, has_shipped_priors=has_shipped_priors
    )
    selected_on = {name: ("pinned" if name in pins else "validation") for name in SEARCHED}
    if objective != "utility":
        selected_on.pop("lambda")
    rows, chosen, chosen_hits = _prior_search(candidates, validation, held_out, fit=fit, shipped=shipped, logged=logged)
    grid = exploration_grid(min_exploration)
    chosen, replayed = _exploration_search(
        chosen,
        validation,
        held_out,
        rows,
        fit=fit,
        start=start,
        shipped=shipped,
        pins=pins,
        grid=grid,
        seed=seed,
        logged=logged,
    )
    rows.extend(_heat_map(validation, held_out, fit, chosen, pins, grid))
    return ConstantSearch(
        constants=chosen,
        selected_on=selected_on,
        rows=rows,
        validation_hits=chosen_hits,
        validation_replay=replayed,
    )


def _prior_search(
    candidates: list[Constants],
    validation: Scored,
    held_out: Scored,
    *,
    fit: FitFn,
    shipped: Constants,
    logged: LoggedParts | None = None,
) -> tuple[list[dict], Constants, pl.DataFrame]:
    """Every candidate set's greedy hit rate on validation (held-out beside it, a diagnostic), and with ``logged``
    its SNIPS value on the logged decisions (a row of kind ``logged_value``); the best one, by the validation score
    (the SNIPS value with ``logged``, else the hit rate) then the tie-break, with its per-task validation hits."""
    rows: list[dict] = []
    # The best set so far (only its per-task hits are kept: a grid of per-task frames would hold every
    # candidate's).
    best: tuple[tuple[float, tuple], Constants, pl.DataFrame] | None = None
    for constants in candidates:
        val_model, held_model = fit(validation.fit_part, constants), fit(held_out.fit_part, constants)
        val_hits = greedy_hits(val_model, validation)
        held_hits = greedy_hits(held_model, held_out)
        val = hit_summary(val_hits)["hit_rate"]
        rows.append(
            _row(
                constants,
                kind="greedy_hit_rate",
                validation=val,
                held_out=hit_summary(held_hits)["hit_rate"],
                exploration=None,
            )
        )
        if logged is not None:
            val = logged.value(False, val_model)
            rows.append(
                _row(
                    constants,
                    kind="logged_value",
                    validation=val,
                    held_out=logged.value(True, held_model),
                    exploration=None,
                )
            )
        score = -math.inf if val is None else val
        key = (-score, _tie_key(constants, shipped))
        if best is None or key < best[0]:
            best = (key, constants, val_hits)
    if best is None:
        raise ValueError("the grid of constants is empty")
    return rows, best[1], best[2]


def _exploration_search(
    chosen: Constants,
    validation: Scored,
    held_out: Scored,
    rows: list[dict],
    *,
    fit: FitFn,
    start: StartFn,
    shipped: Constants,
    pins: Pins,
    grid: tuple[float, ...],
    seed: int,
    logged: LoggedParts | None = None,
) -> tuple[Constants, dict[Arm, float | None]]:
    """Exploration (mode and share) chosen by the validation replay of every arm of :data:`MODES` x the grid (and
    the shipped and pinned arms, which the verdict compares), or with ``logged`` by their SNIPS values on the logged
    validation decisions; the held-out figures of the grid beside them in ``rows``, a diagnostic. A pinned share
    keeps the shipped mode. Ties: the higher value, then the shipped arm, then the smaller share, then epsilon."""
    shipped_arm: Arm = (shipped.exploration_mode, float(shipped.exploration))
    pinned: list[Arm] = [(shipped.exploration_mode, float(pins["exploration"]))] if "exploration" in pins else []
    searched = [(mode, eps) for mode in MODES for eps in grid]
    arms = sorted({*searched, shipped_arm, *pinned})
    model = fit(validation.fit_part, chosen)
    replayed = dict(zip(arms, _values(arms, model, validation, start, logged, seed=seed), strict=True))
    if pinned:
        return chosen.model_copy(update={"exploration": pinned[0][1], "exploration_mode": pinned[0][0]}), replayed
    held_values = _values(searched, fit(held_out.fit_part, chosen), held_out, start, logged, seed=seed)
    kind = "replay" if logged is None else "logged_value"
    for arm, held in zip(searched, held_values, strict=True):
        rows.append(_row(chosen, kind=kind, validation=replayed[arm], held_out=held, exploration=arm[1], mode=arm[0]))

    def arm_key(arm: Arm) -> tuple[float, bool, float, str]:
        value = replayed[arm]
        return (-(-math.inf if value is None else value), arm != shipped_arm, arm[1], arm[0])

    mode, eps = min(searched, key=arm_key)
    return chosen.model_copy(update={"exploration": eps, "exploration_mode": mode}), replayed


def _values(
    arms: list[Arm], model: Any, part: Scored, start: StartFn, logged: LoggedParts | None, *, seed: int
) -> list[float | None]:
    """Each arm's value on ``part``: its replay (mean over the replay seeds), or with ``logged`` its SNIPS value on
    the part's logged decisions (the held-out part when ``part`` is fitted on the learned tasks)."""
    if logged is None:
        runs = replay_value(start(model, part), part.tasks, part.outcomes, arms, seed=seed)
        return [r["realized_value"] for r in runs]
    held = part.fit_part == Part.LEARNED
    return [logged.value(held, model, eps, mode) for mode, eps in arms]


def _heat_map(
    validation: Scored, held_out: Scored, fit: FitFn, chosen: Constants, pins: Pins, grid: tuple[float, ...]
) -> list[dict]:
    """Rows prior weight x exploration: expected hit rate under exploration, validation and held-out (diagnostic).

    Expected hit = ``(1 - eps) * hit(greedy) + eps * share of best among the other members`` (docs/design.md,
    Grids and the search), with the other chosen constants fixed; the case-study page draws it as a heat map.
    """
    weights = [chosen.prior_weight] if "prior_weight" in pins else list(PRIOR_WEIGHTS)
    rows = []
    for k in weights:
        constants = chosen.model_copy(update={"prior_weight": k})
        val_hits = greedy_hits(fit(validation.fit_part, constants), validation)
        held_hits = greedy_hits(fit(held_out.fit_part, constants), held_out)
        for eps in grid:
            rows.append(
                _row(
                    constants,
                    kind="expected_hit_rate",
                    validation=expected_hit(val_hits, eps),
                    held_out=expected_hit(held_hits, eps),
                    exploration=eps,
                )
            )
    return rows


def _row(
    c: Constants,
    *,
    kind: str,
    validation: float | None,
    held_out: float | None,
    exploration: float | None,
    mode: str | None = None,
) -> dict:
    return {
        "kind": kind,
        **({} if mode is None else {"exploration_mode": mode}),
        "prior_source": c.prior_source,
        "prior_weight": c.prior_weight,
        "exploration": exploration,
        "half_life_days": c.half_life_days,
        "lambda": c.lambda_,
        "validation": validation,
        "held_out_diagnostic": held_out,
    }
