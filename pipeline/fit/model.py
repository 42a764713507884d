"""The fitted model (docs/design.md, Fit): priors, quality, cost, objective, greedy choice, static fallback.

Notation (docs/design.md, Fit): for configuration c in region r over the fitted tasks, ``W = sum w``,
``S = sum w*s``, ``n`` = number of ratings; the global pool ``'*'`` is every region at once. The task values of a
part (:meth:`pipeline.fit.context.FitContext.values`) are summed once to (config, region) sums here, in task
order (``numpy.bincount``, one term after the other: the same floats on every run); every formula below is then
one polars expression over those few rows. The greedy choice is the router's (:mod:`pipeline.routing.greedy`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from ..defaults import OBJECTIVES, Objective
from ..errors import FitError
from ..prices import Price, implied_tokens, price_for, prior_cost, tokens_in
from ..routing.greedy import greedy_key
from ..routing.table import Constants, Static
from ..routing.view import GLOBAL
from .shipped import Prior, Shipped, load_shipped, priors_frame, shipped_prior

__all__ = [
    "GLOBAL",
    "OBJECTIVES",
    "FittedModel",
    "Objective",
    "Prior",
    "Shipped",
    "fit_values",
    "load_shipped",
    "static_choice",
    "with_constants",
]


#: Columns of :attr:`FittedModel.members` (and of :meth:`FittedModel.lookup`), in order.
MEMBER_COLUMNS = ("region", "config_key", "prior", "quality", "cost_usd", "value", "weight", "n_ratings")


@dataclass(frozen=True)
class FittedModel:
    """What a fit believes of every (config, region), and the greedy choice it implies.

    ``members``: one row per (region, config) that has fitted ratings in that region, plus region
    ``'*'`` (the global pool: every config over all its ratings), sorted by (region, config_key);
    columns :data:`MEMBER_COLUMNS`. ``cost_known`` is False when no fitted task has a known cost:
    then every cost is null and ``value`` is the quality (the objective degrades to quality).
    Pairs that are not members (a config never rated in r, an unknown region) are still answered
    by :meth:`lookup` and the scalar methods through the fallbacks of docs/design.md, Cost.

    ``pairs``: the (config, region) sums: ``weight, wscore, n_ratings``, ``cost_sum``/``cost_n`` (the known task
    costs) and ``cost_mean``; ``configs``: per config its measured prior and cost over every region. These few rows
    hold config keys and regions as text; :meth:`lookup` answers in the types of the frame it is asked about (the
    context's ``Enum`` columns), so its rows join back to it.
    """

    members: pl.DataFrame
    objective: Objective
    cost_known: bool
    constants: Constants
    global_quality: float | None  # S / W over every fitted rating (None without weighted ratings)
    global_cost: float | None  # mean known cost_t,c over every fitted (task, config), unfloored
    pairs: pl.DataFrame
    configs: pl.DataFrame  # config_key, measured (c's weighted mean), cost_config, config_weight, config_wscore
    priors: pl.DataFrame  # selector, prior_region, prior_quality, segments, order (shipped priors)
    prices: tuple[Price, ...] = ()  # shipped prices: the cost prior (docs/design.md, Cost prior)
    mean_tokens: dict[str, float] = dataclasses.field(default_factory=dict)  # region -> implied_tokens

    @property
    def effective_objective(self) -> Objective:
        """The objective actually ranked by: ``quality`` when no cost is known."""
        return self.objective if self.cost_known else "quality"

    @staticmethod
    def keys(configs: Sequence[str], regions: Sequence[str]) -> pl.DataFrame:
        """``config_key, region`` rows of these names."""
        return pl.DataFrame(
            {"config_key": list(configs), "region": list(regions)},
            schema={"config_key": pl.String, "region": pl.String},
        )

    def lookup(self, pairs: pl.DataFrame) -> pl.DataFrame:
        """Prior, quality, cost, value, weight and n for any (config_key, region) rows.

        One row per distinct input pair, in :data:`MEMBER_COLUMNS`, sorted by (region, config_key), with the input's
        types of ``config_key`` and ``region``.
        """
        keys = pairs.select("config_key", "region").unique()
        types = keys.schema
        named = keys.select(pl.col("config_key").cast(pl.String), pl.col("region").cast(pl.String))
        out = self._evaluate(named.sort("region", "config_key"))
        return out.with_columns(pl.col("config_key").cast(types["config_key"]), pl.col("region").cast(types["region"]))

    def _row(self, config_key: str, region: str) -> dict:
        return self._evaluate(self.keys([config_key], [region])).row(0, named=True)

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
        """n(c, r), the number of fitted ratings."""
        return int(self._row(config_key, region)["n_ratings"])

    def ranking(self, pairs: pl.DataFrame) -> pl.DataFrame:
        """``region, config_key, rank``: the distinct (config, region) pairs of ``pairs``, each region's ranked in
        the greedy order (:func:`pipeline.routing.greedy.greedy_key`, the router's), rank 0 first; the regions in
        key order one after the other (a task is ranked within its region only)."""
        rows = self.lookup(pairs)
        floor = self.constants.min_quality
        order = sorted(
            range(rows.height),
            key=lambda i: (
                rows["region"][i],
                greedy_key(rows["config_key"][i], rows["quality"][i], rows["cost_usd"][i], rows["value"][i], floor),
            ),
        )
        ranked = rows.select("region", "config_key")[order]
        return ranked.with_row_index("rank")

    def choose(self, region: str, pool: Sequence[str]) -> str:
        """The greedy choice for a task of ``region`` among ``pool`` (docs/design.md, Greedy choice and ties)."""
        if not pool:
            raise ValueError("the pool is empty: there is nothing to choose from")
        frame = self.keys(list(pool), [region] * len(pool)).with_columns(task=pl.lit(0))
        return str(self.choose_frame(frame)["chosen"][0])

    def choose_frame(self, candidates: pl.DataFrame) -> pl.DataFrame:
        """Greedy choice per task: rows (task, region, config_key) -> one row per task (task, chosen), by task."""
        scored = candidates.select("task", "region", "config_key").join(
            self.ranking(candidates), on=["region", "config_key"]
        )
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
        return str(pool["config_key"][0]) if pool.height else None

    def most_rated(self) -> str | None:
        """The config with the most fitted ratings (ties: key order); None without ratings."""
        pool = self.members.filter(pl.col("region") == GLOBAL).sort(
            ["n_ratings", "config_key"], descending=[True, False]
        )
        return str(pool["config_key"][0]) if pool.height else None

    def _evaluate(self, keys: pl.DataFrame) -> pl.DataFrame:
        c = self.constants
        k = float(c.prior_weight)
        frame = (
            keys.join(self.pairs, on=["config_key", "region"], how="left")
            .join(self.configs, on="config_key", how="left")
            .with_columns(
                pl.col("weight", "wscore", "config_weight", "config_wscore").fill_null(0.0),
                n_ratings=pl.col("n_ratings").fill_null(0).cast(pl.Int64),
            )
        )
        # Prior p(c, r): the most specific matching shipped prior (source 'shipped'), else measured: in a region,
        # c's quality over all regions shrunk to the global weighted mean g, (k * g + S(c, *)) / (k + W(c, *));
        # in '*', g itself (g for a config never rated).
        g = pl.lit(self.global_quality, pl.Float64)
        pooled = (
            pl.when(k + pl.col("config_weight") > 0)
            .then((k * g + pl.col("config_wscore")) / (k + pl.col("config_weight")))
            .otherwise(g)
        )
        frame = frame.with_columns(measured=pl.when(pl.col("region") == GLOBAL).then(g).otherwise(pooled))
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
        # Cost cost(c, r): mean known cost_t,c of c in r, else c's price (docs/design.md, Cost prior), else c's mean
        # over all regions, else the global mean; floored at cost_floor_usd. Null everywhere when no cost is known.
        if self.cost_known:
            frame = frame.with_columns(price_usd=self._price_costs(frame))
            cost = pl.max_horizontal(
                pl.coalesce("cost_mean", "price_usd", "cost_config", pl.lit(self.global_cost)),
                pl.lit(float(c.cost_floor_usd)),
            )
        else:
            cost = pl.lit(None, pl.Float64)
        frame = frame.with_columns(cost_usd=cost)
        return frame.with_columns(value=_objective(self.effective_objective, c)).select(MEMBER_COLUMNS)

    def _price_costs(self, frame: pl.DataFrame) -> pl.Series:
        """Per row of ``frame`` (config_key, region) the cost prior of :func:`pipeline.prices.prior_cost`, token
        prices read at the region's mean tokens (the global pool's where the region has none); null without a
        price."""
        if not self.prices:
            return pl.Series("price_usd", [None] * frame.height, dtype=pl.Float64)
        costs = [
            prior_cost(key, self.prices, tokens_in(self.mean_tokens, region))
            for key, region in zip(frame["config_key"], frame["region"], strict=True)
        ]
        return pl.Series("price_usd", costs, dtype=pl.Float64)


def region_tokens(pairs: pl.DataFrame, prices: Sequence[Price]) -> dict[str, float]:
    """Per region (the global pool too) its :func:`pipeline.prices.implied_tokens` over the (config, region) pairs
    with a known mean cost and a token price; regions without one are absent."""
    if not prices:
        return {}
    known: dict[str, list[tuple[float, Price]]] = {}
    for key, region, cost in (
        pairs.filter(pl.col("cost_mean").is_not_null()).select("config_key", "region", "cost_mean").iter_rows()
    ):
        price = price_for(key, prices)
        if price is not None:
            known.setdefault(region, []).append((cost, price))
    implied = {region: implied_tokens(rows) for region, rows in known.items()}
    return {region: m for region, m in implied.items() if m is not None}


def as_objective(name: str) -> Objective:
    """``name`` as one of :data:`OBJECTIVES`; FitError for any other name."""
    for objective in OBJECTIVES:
        if objective == name:
            return objective
    raise FitError(f"unknown objective {name!r}; expected one of {', '.join(OBJECTIVES)}")


def _objective(objective: Objective, constants: Constants) -> pl.Expr:
    """quality_per_dollar = q / cost (cost floored already); utility = lambda * q - cost; quality = q."""
    if objective == "quality_per_dollar":
        return pl.col("quality") / pl.col("cost_usd")
    if objective == "utility":
        if constants.lambda_ is None:
            raise FitError("the utility objective needs lambda (--lambda X, or let the search fit it)")
        return float(constants.lambda_) * pl.col("quality") - pl.col("cost_usd")
    return pl.col("quality")


def enum_coded(values: pl.DataFrame) -> pl.DataFrame:
    """``values`` with ``config_key`` and ``region`` as ``Enum`` columns (the context's already are; a frame made by
    hand gets the sorted names it holds, the global pool among the regions)."""
    out = values
    if not isinstance(out.schema["config_key"], pl.Enum):
        keys = sorted(set(out["config_key"].cast(pl.String).drop_nulls().to_list()))
        out = out.with_columns(pl.col("config_key").cast(pl.Enum(keys)))
    if not isinstance(out.schema["region"], pl.Enum) or GLOBAL not in out.schema["region"].categories:
        names = sorted({GLOBAL, *out["region"].cast(pl.String).drop_nulls().to_list()})
        out = out.with_columns(pl.col("region").cast(pl.String).cast(pl.Enum(names)))
    return out


def _sums(values: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, float | None]]:
    """Per (config, region) and per (config, ``'*'``): ``weight, wscore, n_ratings, cost_sum, cost_n, cost_mean``
    (the cost over the priced pairs: every attempt with a cost, ``unknown_cost = 0``), summed in row order; and the
    totals ``W``, ``S`` and the mean priced cost."""
    config_dtype, region_dtype = values.schema["config_key"], values.schema["region"]
    n_configs = len(config_dtype.categories)  # type: ignore[attr-defined]
    regions = list(region_dtype.categories)  # type: ignore[attr-defined]
    star = regions.index(GLOBAL)
    config = values["config_key"].to_physical().to_numpy().astype(np.int64)
    region = values["region"].to_physical().to_numpy().astype(np.int64)
    priced = ((values["unknown_cost"] == 0) & values["cost_usd"].is_not_null()).to_numpy()
    columns = {
        "weight": values["weight"].fill_null(0.0).to_numpy(),
        "wscore": values["wscore"].fill_null(0.0).to_numpy(),
        "n_ratings": values["n"].to_numpy().astype(np.float64),
        "cost_sum": np.where(priced, values["cost_usd"].fill_null(0.0).to_numpy(), 0.0),
        "cost_n": priced.astype(np.float64),
        "rows": np.ones(values.height),
    }
    size = len(regions) * n_configs
    by_region = region * n_configs + config
    by_star = star * n_configs + config
    out = {
        name: np.bincount(by_region, weights=x, minlength=size) + np.bincount(by_star, weights=x, minlength=size)
        for name, x in columns.items()
    }
    cells = np.flatnonzero(out["rows"] > 0)
    pairs = pl.DataFrame(
        {
            "config_key": pl.Series((cells % n_configs).astype(np.uint32)).cat.to(config_dtype).cast(pl.String),
            "region": pl.Series((cells // n_configs).astype(np.uint32)).cat.to(region_dtype).cast(pl.String),
            "weight": out["weight"][cells],
            "wscore": out["wscore"][cells],
            "n_ratings": out["n_ratings"][cells].astype(np.int64),
            "cost_sum": out["cost_sum"][cells],
            "cost_n": out["cost_n"][cells].astype(np.int64),
        }
    ).with_columns(cost_mean=pl.when(pl.col("cost_n") > 0).then(pl.col("cost_sum") / pl.col("cost_n")))
    cost_n = int(columns["cost_n"].sum())
    totals: dict[str, float | None] = {
        "W": float(columns["weight"].sum()),
        "S": float(columns["wscore"].sum()),
        "cost": float(columns["cost_sum"].sum()) / cost_n if cost_n else None,
    }
    return pairs.sort("region", "config_key"), totals


def fit_values(
    values: pl.DataFrame, constants: Constants, shipped: Shipped, objective: str = "quality_per_dollar"
) -> FittedModel:
    """The model (docs/design.md, Fit) of task values (:meth:`pipeline.fit.context.FitContext.values` rows).

    Costs come from the rated (task, config) rows: cost_t,c counts as known when every attempt of c on t has a cost
    (``unknown_cost == 0``). Only those enter the cost means, which is what keeps the estimate for unknown attempts
    (cost_t,c = known + unknown * cost(c, r)) free of circularity.
    """
    checked = as_objective(objective)
    _objective(checked, constants)  # refuse a bad objective or a missing lambda up front
    pairs, totals = _sums(enum_coded(values))
    total_w, total_s = totals["W"], totals["S"]
    global_quality = total_s / total_w if total_w and total_s is not None else None
    # c's weighted mean S_c / W_c over all regions (the calibration's plain mean; null when W_c = 0) and its sums.
    configs = pairs.filter(pl.col("region") == GLOBAL).select(
        "config_key",
        measured=pl.when(pl.col("weight") > 0).then(pl.col("wscore") / pl.col("weight")),
        cost_config="cost_mean",
        config_weight="weight",
        config_wscore="wscore",
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
        prices=tuple(shipped.prices),
        mean_tokens=region_tokens(pairs, shipped.prices),
    )
    return dataclasses.replace(model, members=model._evaluate(pairs.select("config_key", "region")))


def with_constants(model: FittedModel, constants: Constants) -> FittedModel:
    """The same sums under other constants of equal half-life (members evaluated again)."""
    if constants == model.constants:
        return model
    _objective(model.objective, constants)
    changed = dataclasses.replace(model, constants=constants)
    return dataclasses.replace(changed, members=changed._evaluate(model.pairs.select("config_key", "region")))


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
