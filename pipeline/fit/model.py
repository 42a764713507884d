"""The fitted model (docs/design.md, Fit): priors, quality, cost, objective, greedy choice, static fallback.

Notation (docs/design.md, Fit): for configuration c in region r over the fitted tasks, ``W = sum w``,
``S = sum w*s``, ``n`` = number of ratings; the global pool ``'*'`` is every region at once.
Ratings are aggregated once to task values (:func:`pipeline.fit.inputs.task_values`), then to
(config, region) sums here; every formula below is one polars expression over those frames,
evaluated for all members at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import polars as pl

from ..errors import FitError
from ..routing.table import Constants, Static
from .inputs import FitInputs, task_values
from .shipped import Prior, Shipped, load_shipped, priors_frame, shipped_prior

__all__ = [
    "GLOBAL",
    "OBJECTIVES",
    "FittedModel",
    "Objective",
    "Prior",
    "Shipped",
    "fit_model",
    "fit_values",
    "load_shipped",
    "static_choice",
]

Objective = Literal["quality_per_dollar", "utility", "quality"]
OBJECTIVES: tuple[Objective, ...] = ("quality_per_dollar", "utility", "quality")
#: The region name of the global pool.
GLOBAL = "*"

#: Columns of :attr:`FittedModel.members` (and of :meth:`FittedModel.lookup`), in order.
MEMBER_COLUMNS = ("region", "config_key", "prior", "quality", "cost_usd", "value", "weight", "n_ratings")


def greedy_order(min_quality: float | None) -> tuple[list[pl.Expr], list[bool]]:
    """Sort keys (and their descending flags) of the greedy order over member rows (``value, quality, cost_usd,
    config_key``).

    docs/design.md, Fit: best objective, then higher q, then lower cost (unknown last), then key order. With a quality
    floor Q (``constants.min_quality``): members with ``q >= Q`` first, by that order; the others after them by
    quality alone, so the choice is the best objective among members at or above the floor, else the highest
    quality.
    """
    if min_quality is None:
        return [pl.col("value"), pl.col("quality"), pl.col("cost_usd"), pl.col("config_key")], [
            True,
            True,
            False,
            False,
        ]
    below = pl.col("quality") < float(min_quality)
    return (
        [
            below,
            pl.when(below).then(pl.col("quality")).otherwise(pl.col("value")),
            pl.col("quality"),
            pl.col("cost_usd"),
            pl.col("config_key"),
        ],
        [False, True, True, False, False],
    )


@dataclass(frozen=True)
class FittedModel:
    """What a fit believes of every (config, region), and the greedy choice it implies.

    ``members``: one row per (region, config) that has fitted ratings in that region, plus region
    ``'*'`` (the global pool: every config over all its ratings), sorted by (region, config_key);
    columns :data:`MEMBER_COLUMNS`. ``cost_known`` is False when no fitted task has a known cost:
    then every cost is null and ``value`` is the quality (the objective degrades to quality).
    Pairs that are not members (a config never rated in r, an unknown region) are still answered
    by :meth:`lookup` and the scalar methods through the fallbacks of docs/design.md, Cost.

    Beyond what the document says (docs/design.md, Fit): :meth:`lookup` (vectorised scoring of any pairs),
    :meth:`prior`, :meth:`n`, :meth:`task_costs` (cost_t,c with the unknown-cost estimate), :meth:`most_rated`,
    :attr:`effective_objective`; ``quality``/``value`` return None only when nothing at all is known (no weighted
    rating and no matching shipped prior).
    """

    members: pl.DataFrame
    objective: Objective
    cost_known: bool
    constants: Constants
    global_quality: float | None  # S / W over every fitted rating (None without weighted ratings)
    global_cost: float | None  # mean known cost_t,c over every fitted (task, config), unfloored
    pairs: pl.DataFrame  # config_key, region, weight, wscore, n_ratings, cost_mean (region '*' included)
    configs: pl.DataFrame  # config_key, measured (c's weighted mean, else global), cost_config
    priors: pl.DataFrame  # selector, prior_region, prior_quality, segments, order (shipped priors)

    @property
    def effective_objective(self) -> Objective:
        """The objective actually ranked by: ``quality`` when no cost is known."""
        return self.objective if self.cost_known else "quality"

    def lookup(self, pairs: pl.DataFrame) -> pl.DataFrame:
        """Prior, quality, cost, value, weight and n for any (config_key, region) rows.

        One row per distinct input pair, in :data:`MEMBER_COLUMNS`, sorted by (region, config_key).
        """
        keys = pairs.select("config_key", "region").unique().sort("region", "config_key")
        return self._evaluate(keys)

    def _row(self, config_key: str, region: str) -> dict:
        return self._evaluate(pl.DataFrame({"config_key": [config_key], "region": [region]})).row(0, named=True)

    def prior(self, config_key: str, region: str) -> float | None:
        return self._row(config_key, region)["prior"]

    def quality(self, config_key: str, region: str) -> float | None:
        """q(c, r); an unseen pair falls back to p(c, r). None only with no weighted rating and no shipped prior."""
        return self._row(config_key, region)["quality"]

    def cost(self, config_key: str, region: str) -> float | None:
        """cost(c, r) in USD, floored; None when no cost is known at all."""
        return self._row(config_key, region)["cost_usd"]

    def value(self, config_key: str, region: str) -> float | None:
        """The objective of (c, r)."""
        return self._row(config_key, region)["value"]

    def n(self, config_key: str, region: str) -> int:
        """n(c, r), the number of fitted ratings (the evidence gate compares it with min_samples)."""
        return int(self._row(config_key, region)["n_ratings"])

    def choose(self, region: str, pool: Sequence[str]) -> str:
        """The greedy choice for a task of ``region`` among ``pool`` (docs/design.md, Greedy choice and ties)."""
        if not pool:
            raise ValueError("the pool is empty: there is nothing to choose from")
        frame = pl.DataFrame({"task": [""] * len(pool), "region": [region] * len(pool), "config_key": list(pool)})
        return self.choose_frame(frame)["chosen"][0]

    def choose_frame(self, candidates: pl.DataFrame) -> pl.DataFrame:
        """Greedy choice per task: rows (task, region, config_key) -> one row per task (task, chosen), by task.

        The pairs are ranked once in the greedy order; each task then takes its best-ranked row.
        """
        by, descending = greedy_order(self.constants.min_quality)
        ranked = (
            self.lookup(candidates)
            .sort([*by, pl.col("region")], descending=[*descending, False], nulls_last=True)
            .with_row_index("rank")
            .select("region", "config_key", "rank")
        )
        scored = candidates.select("task", "region", "config_key").join(ranked, on=["region", "config_key"])
        return scored.group_by("task").agg(chosen=pl.col("config_key").get(pl.col("rank").arg_min())).sort("task")

    def task_costs(self, values: pl.DataFrame) -> pl.DataFrame:
        """``values`` (task values) with ``cost_t``: cost_t,c = known cost + unknown attempts * cost(c, r).

        An attempt with unknown cost takes the estimate cost(c, r), never 0 (docs/design.md,
        Task value and task cost). Null when no cost is known at all. The estimate comes from this model, so
        held-out tasks are costed from what was learned.
        """
        if not self.cost_known:
            return values.with_columns(cost_t=pl.lit(None, pl.Float64))
        estimate = self.lookup(values).select("region", "config_key", estimate="cost_usd")
        return (
            values.join(estimate, on=["region", "config_key"], how="left", maintain_order="left")
            .with_columns(cost_t=pl.col("cost_usd").fill_null(0.0) + pl.col("unknown_cost") * pl.col("estimate"))
            .drop("estimate")
        )

    def highest_quality(self) -> str | None:
        """The best single configuration: the highest quality in the global pool (ties: key order); None without
        members. The baselines, the ladders and the page compare with this one config."""
        pool = self.members.filter(pl.col("region") == GLOBAL).sort(["quality", "config_key"], descending=[True, False])
        return pool["config_key"][0] if pool.height else None

    def most_rated(self) -> str | None:
        """The config with the most fitted ratings (ties: key order); None without ratings."""
        pool = self.members.filter(pl.col("region") == GLOBAL).sort(
            ["n_ratings", "config_key"], descending=[True, False]
        )
        return pool["config_key"][0] if pool.height else None

    def _evaluate(self, keys: pl.DataFrame) -> pl.DataFrame:
        c = self.constants
        k = float(c.prior_weight)
        frame = (
            keys.join(self.pairs, on=["config_key", "region"], how="left")
            .join(self.configs, on="config_key", how="left")
            .with_columns(
                pl.col("weight", "wscore").fill_null(0.0),
                n_ratings=pl.col("n_ratings").fill_null(0).cast(pl.Int64),
                measured=pl.col("measured").fill_null(pl.lit(self.global_quality, pl.Float64)),
            )
        )
        # Prior p(c, r): the most specific matching shipped prior (source 'shipped'), else measured:
        # c's weighted mean over all regions, or the global weighted mean for a config never rated.
        if c.prior_source == "shipped" and self.priors.height:
            frame = frame.join(shipped_prior(keys, self.priors), on=["config_key", "region"], how="left")
            frame = frame.with_columns(prior=pl.coalesce("shipped_prior", "measured"))
        else:
            frame = frame.with_columns(prior=pl.col("measured"))
        # Quality q(c, r) = (k * p + S) / (k + W); q = p when k + W = 0.
        frame = frame.with_columns(
            quality=pl.when(k + pl.col("weight") > 0)
            .then((k * pl.col("prior") + pl.col("wscore")) / (k + pl.col("weight")))
            .otherwise(pl.col("prior"))
        )
        # Cost cost(c, r): mean known cost_t,c of c in r, else c's mean over all regions, else the
        # global mean; floored at cost_floor_usd. Null everywhere when no cost is known.
        if self.cost_known:
            cost = pl.max_horizontal(
                pl.coalesce("cost_mean", "cost_config", pl.lit(self.global_cost)), pl.lit(float(c.cost_floor_usd))
            )
        else:
            cost = pl.lit(None, pl.Float64)
        frame = frame.with_columns(cost_usd=cost)
        return frame.with_columns(value=_objective(self.effective_objective, c)).select(MEMBER_COLUMNS)


def as_objective(name: str) -> Objective:
    """``name`` as one of :data:`OBJECTIVES`; FitError for any other name."""
    for objective in OBJECTIVES:
        if objective == name:
            return objective
    raise FitError(f"unknown objective {name!r}; expected one of {', '.join(OBJECTIVES)}")


def _objective(objective: Objective, constants: Constants) -> pl.Expr:
    """quality_per_dollar = q / cost; utility = lambda * q - cost; quality = q."""
    if objective == "quality_per_dollar":
        return pl.col("quality") / pl.col("cost_usd")
    if objective == "utility":
        if constants.lambda_ is None:
            raise FitError("the utility objective needs lambda (--lambda X, or let the search fit it)")
        return float(constants.lambda_) * pl.col("quality") - pl.col("cost_usd")
    return pl.col("quality")


def fit_model(
    inputs: FitInputs, constants: Constants, shipped: Shipped, objective: str = "quality_per_dollar"
) -> FittedModel:
    """Fit the model (docs/design.md, Fit) on ``inputs`` (already restricted to the fitted tasks and time).

    Task values are memoised per half-life on ``inputs``, so a grid over the other constants
    aggregates the ratings only once per half-life.
    """
    return fit_values(task_values(inputs, half_life_days=constants.half_life_days), constants, shipped, objective)


def fit_values(
    values: pl.DataFrame, constants: Constants, shipped: Shipped, objective: str = "quality_per_dollar"
) -> FittedModel:
    """:func:`fit_model` from task values (:func:`pipeline.fit.inputs.task_values` rows).

    Costs come from the rated (task, config) rows: cost_t,c counts as known when every attempt of c
    on t has a cost (``unknown_cost == 0``). Only those enter the cost means, which is what keeps
    the estimate for unknown attempts (cost_t,c = known + unknown * cost(c, r)) free of circularity.
    """
    checked = as_objective(objective)
    _objective(checked, constants)  # refuse a bad objective or a missing lambda up front
    known = pl.col("unknown_cost") == 0  # cost_t,c is known when every attempt of c on t has a cost
    sums = [
        pl.col("weight").sum(),
        pl.col("wscore").sum(),
        pl.col("n").sum().cast(pl.Int64).alias("n_ratings"),
        pl.col("cost_usd").filter(known).mean().alias("cost_mean"),
    ]
    by_region = values.group_by("config_key", "region").agg(sums)
    by_config = values.group_by("config_key").agg(sums).with_columns(region=pl.lit(GLOBAL))
    pairs = pl.concat([by_region, by_config.select(by_region.columns)]).sort("region", "config_key")
    totals = values.select(
        W=pl.col("weight").sum(), S=pl.col("wscore").sum(), cost=pl.col("cost_usd").filter(known).mean()
    ).row(0, named=True)
    global_quality = totals["S"] / totals["W"] if totals["W"] else None
    # Measured prior: c's weighted mean S_c / W_c over all regions; the global mean when W_c = 0.
    configs = by_config.select(
        "config_key",
        measured=pl.when(pl.col("weight") > 0).then(pl.col("wscore") / pl.col("weight")),
        cost_config="cost_mean",
    )
    model = FittedModel(
        members=pl.DataFrame(),
        objective=checked,
        cost_known=totals["cost"] is not None,
        constants=constants,
        global_quality=global_quality,
        global_cost=totals["cost"],
        pairs=pairs,
        configs=configs,
        priors=priors_frame(shipped.priors),
    )
    members = model._evaluate(pairs.select("config_key", "region")).sort("region", "config_key")
    return FittedModel(**{**model.__dict__, "members": members})


def static_choice(static: Static, role: str | None = None, model: FittedModel | None = None) -> str | None:
    """The static fallback (docs/design.md, Static fallback) for a task of ``role``.

    A role in ``pinned`` keeps its config. Otherwise static_hybrid's choice when both cheap and
    frontier are named (frontier for ``reviewer``, cheap for every other role, ``implementer`` and
    ``researcher`` included), else ``default_config``, else the config with the most fitted
    ratings (None without a model or ratings).
    """
    if role is not None and role in static.pinned:
        return static.pinned[role]
    if static.cheap_config and static.frontier_config:
        return static.frontier_config if role == "reviewer" else static.cheap_config
    if static.default_config:
        return static.default_config
    return model.most_rated() if model is not None else None
