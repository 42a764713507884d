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

from ..fit.model import greedy_order
from ..routing.table import Constants
from .exploration import replay_value
from .metrics import BestIndex, expected_hit, hit_summary, route_hits
from .replay import ReplayStart

PRIOR_SOURCES = ("shipped", "measured")
PRIOR_WEIGHTS = (0.0, 1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0, 34.0)
EXPLORATIONS = (0.0, 0.05, 0.1, 0.2, 0.3)  # the grid; it starts at the floor (min_exploration, default 0.05)
#: With exploration 0 the loop stops trying non-greedy members and later verdicts starve (docs/design.md, Evaluation).
MIN_EXPLORATION = 0.05
HALF_LIVES: tuple[float | None, ...] = (None, 90.0, 30.0, 14.0)  # None: infinity, no recency weighting
LAMBDA_STEPS = 13  # geometric from 0.01 to 100 times (mean learned cost / mean learned quality)

SEARCHED = ("prior_source", "prior_weight", "exploration", "half_life_days", "lambda")


def lambda_grid(scale: float) -> list[float]:
    """13 values ``scale * 10 ** (-2 + i / 3)``, i = 0..12: 0.01x to 100x of the scale, geometric.

    Rounded to 9 decimals where they are made, so the lambda used, published and reported is one number.
    """
    return [round(scale * 10 ** (-2 + i / 3), 9) for i in range(LAMBDA_STEPS)]


class Pins(dict):
    """The constants given on the command line (``prior_source``, ``prior_weight``, ``exploration``,
    ``half_life_days`` (None = infinity), ``lambda``): present keys are pinned, absent ones searched."""


@dataclass(frozen=True)
class Part:
    """One evaluation part: the inputs a model is fitted on and the tasks it is scored on.

    ``best``: :func:`pipeline.evaluate.metrics.mark_best` of the eligible scored tasks (``task, region,
    config_key, value, cost, score, best``); ``tasks`` and ``outcomes`` feed the sequential replay.
    """

    fit_inputs: Any
    best: pl.DataFrame
    tasks: pl.DataFrame
    outcomes: pl.DataFrame
    index: BestIndex | None = None  # BestIndex.of(best), built by :func:`make_part`


def make_part(fit_inputs: Any, best: pl.DataFrame, tasks: pl.DataFrame, outcomes: pl.DataFrame) -> Part:
    return Part(fit_inputs=fit_inputs, best=best, tasks=tasks, outcomes=outcomes, index=BestIndex.of(best))


FitFn = Callable[[Any, Constants], Any]
"""``(fit_inputs, constants) -> FittedModel`` (objective and shipped file bound by the caller)."""
StartFn = Callable[[Any, "Part", Constants], ReplayStart]
"""``(model, part, constants) -> ReplayStart``: a replay of ``part``'s tasks starting from that fit."""


@dataclass
class ConstantSearch:
    constants: Constants
    selected_on: dict[str, str]
    rows: list[dict] = field(default_factory=list)
    validation_hits: pl.DataFrame | None = None  # per-task hits of the chosen set on validation
    # exploration -> its validation replay value (mean over the replay seeds), for the grid and the shipped one
    validation_replay: dict[float, float | None] = field(default_factory=dict)


def greedy_hits(model: Any, part: Part | pl.DataFrame) -> pl.DataFrame:
    """Route every scored task greedily among the configs that did it; per-task hit frame (:func:`route_hits`)."""
    if isinstance(part, pl.DataFrame) or part.index is None:
        best = part if isinstance(part, pl.DataFrame) else part.best
        return route_hits(best, model.choose_frame(best.select("task", "region", "config_key")))
    # The model's members already hold most pairs; only pairs the fit never saw go through lookup's fallbacks.
    pairs = part.index.pairs.select("region", "config_key")
    cols = ["region", "config_key", "value", "quality", "cost_usd"]
    known = pairs.join(model.members.select(cols), on=["region", "config_key"], how="inner")
    missing = pairs.join(known.select("region", "config_key"), on=["region", "config_key"], how="anti")
    if missing.height:
        known = pl.concat([known, model.lookup(missing).select(cols)])
    by, descending = greedy_order(model.constants.min_quality)  # as FittedModel.choose_frame, region by region
    return part.index.route(known.sort([pl.col("region"), *by], descending=[False, *descending], nulls_last=True))


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
    validation: Part,
    held_out: Part,
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
) -> ConstantSearch:
    """Choose the constants on ``validation``; score each evaluated set on ``held_out`` as a diagnostic.

    Exploration is chosen on the validation replay averaged over the replay seeds
    (:func:`pipeline.evaluate.exploration.replay_value`) among :func:`exploration_grid`."""
    fit = _memo(fit)
    candidates = candidate_sets(
        shipped, pins, objective=objective, lambda_scale=lambda_scale, has_shipped_priors=has_shipped_priors
    )
    selected_on = {name: ("pinned" if name in pins else "validation") for name in SEARCHED}
    if objective != "utility":
        selected_on.pop("lambda")
    rows: list[dict] = []
    # The best set so far: the highest validation score, then the tie-break (only its per-task hits are kept: a
    # grid of per-task frames would hold every candidate's).
    best: tuple[tuple[float, tuple], Constants, pl.DataFrame] | None = None
    for constants in candidates:
        val_hits = greedy_hits(fit(validation.fit_inputs, constants), validation)
        held_hits = greedy_hits(fit(held_out.fit_inputs, constants), held_out)
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
        score = -1.0 if val is None else val
        key = (-score, _tie_key(constants, shipped))
        if best is None or key < best[0]:
            best = (key, constants, val_hits)
    if best is None:
        raise ValueError("the grid of constants is empty")
    _, chosen, chosen_hits = best

    grid = exploration_grid(min_exploration)
    # The replay on validation of every grid value and of the shipped exploration (the verdict compares them).
    explorations = sorted(
        {*grid, float(shipped.exploration), *([float(pins["exploration"])] if "exploration" in pins else [])}
    )
    model = fit(validation.fit_inputs, chosen)
    runs = replay_value(
        start(model, validation, chosen), validation.tasks, validation.outcomes, explorations, seed=seed
    )
    replayed = dict(zip(explorations, (r["realized_value"] for r in runs), strict=True))
    if "exploration" in pins:
        chosen = chosen.model_copy(update={"exploration": float(pins["exploration"])})
    else:
        held_model = fit(held_out.fit_inputs, chosen)
        held_runs = replay_value(
            start(held_model, held_out, chosen), held_out.tasks, held_out.outcomes, list(grid), seed=seed
        )
        for eps, held in zip(grid, held_runs, strict=True):
            rows.append(
                _row(
                    chosen,
                    kind="replay",
                    validation=replayed[eps],
                    held_out=held["realized_value"],
                    exploration=eps,
                )
            )

        def eps_key(eps: float) -> tuple[float, bool, float]:
            value = replayed[eps]
            return (-(-math.inf if value is None else value), eps != shipped.exploration, eps)

        chosen = chosen.model_copy(update={"exploration": min(grid, key=eps_key)})
    rows.extend(_heat_map(validation, held_out, fit, chosen, pins, grid))
    return ConstantSearch(
        constants=chosen,
        selected_on=selected_on,
        rows=rows,
        validation_hits=chosen_hits,
        validation_replay=replayed,
    )


def _memo(fit: FitFn) -> FitFn:
    """The same (inputs, constants but exploration) is fitted once: exploration does not change a fit."""
    cache: dict[tuple[int, Constants], Any] = {}

    def fitted(inputs: Any, constants: Constants) -> Any:
        key = (id(inputs), constants.model_copy(update={"exploration": 0.0}))
        if key not in cache:
            cache[key] = fit(inputs, constants)
        return cache[key]

    return fitted


def _heat_map(
    validation: Part, held_out: Part, fit: FitFn, chosen: Constants, pins: Pins, grid: tuple[float, ...]
) -> list[dict]:
    """Rows prior weight x exploration: expected hit rate under exploration, validation and held-out (diagnostic).

    Expected hit = ``(1 - eps) * hit(greedy) + eps * share of best among the other members`` (docs/design.md,
    Grids and the search), with the other chosen constants fixed; the case-study page draws it as a heat map.
    """
    weights = [chosen.prior_weight] if "prior_weight" in pins else list(PRIOR_WEIGHTS)
    rows = []
    for k in weights:
        constants = chosen.model_copy(update={"prior_weight": k})
        val_hits = greedy_hits(fit(validation.fit_inputs, constants), validation)
        held_hits = greedy_hits(fit(held_out.fit_inputs, constants), held_out)
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
    c: Constants, *, kind: str, validation: float | None, held_out: float | None, exploration: float | None
) -> dict:
    return {
        "kind": kind,
        "prior_source": c.prior_source,
        "prior_weight": c.prior_weight,
        "exploration": exploration,
        "half_life_days": c.half_life_days,
        "lambda": c.lambda_,
        "validation": validation,
        "held_out_diagnostic": held_out,
    }
