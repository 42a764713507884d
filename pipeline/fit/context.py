"""The fit's context (docs/design.md, Fit, The aggregation): one aggregation of one store version, and everything
the later stages derive from it, each computed once.

Build one with :meth:`FitContext.build` from anything that runs the aggregation's SQL
(:class:`pipeline.fit.aggregate.DuckDBEngine` over a store's views, or over a caller's own rows registered under
the views' names), or with :meth:`FitContext.from_aggregate` from the rows an engine returned. Then:

- :meth:`FitContext.values` ``(part, half_life, real)``: the task values of a part of the evaluation, one row per
  (task, config);
- :meth:`FitContext.model` ``(part, constants)``: the model fitted on a part (:mod:`pipeline.fit.model`);
- :meth:`FitContext.tasks_of` ``(part)``: a part's tasks with their region and time, in time order;
- ``decisions``, ``candidates``, ``closures``: the logged routing decisions and closures;
- ``scores``: the held-out real ratings by (task, config, score), for calibration;
- ``counts``, ``notes``, ``split``, ``newest``: what the stats report of the data.

Tasks are integer codes (their rank by task id, so code order is id order); configs and regions are polars
``Enum`` columns over ``configs`` and ``regions`` (key order; ``regions`` holds the global pool ``'*'``).
The context owns its caches explicitly (task values by part and half-life, models by part and constants), keyed
by values, never by object identity; nothing in it is a per-rating row.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import polars as pl

from ..routing.view import GLOBAL
from .aggregate import Aggregate, Engine, Spec, Split, aggregate, micros, rating_sums
from .finite import left_out

if TYPE_CHECKING:
    from ..routing.table import Constants
    from .model import FittedModel
    from .shipped import Shipped

_EPOCH = datetime(1970, 1, 1)
#: ``-ln 2``, as the recency factor is written (docs/design.md, Rating weight).
_MINUS_LN2 = -math.log(2.0)
_DAY_US = 86_400e6


class Part(StrEnum):
    """The parts of a fit's data (docs/design.md, Evaluation): every task, the learned and held-out tasks of the
    split, and the inner learned and validation tasks of the learned part."""

    FULL = "full"
    LEARNED = "learned"
    HELD_OUT = "held_out"
    INNER = "inner"
    VALIDATION = "validation"


#: Per part: the level of its sums (pipeline.fit.aggregate), the tasks it holds, the region column it reads.
_PARTS: dict[Part, tuple[int, str, str]] = {
    Part.FULL: (0, "all", "region"),
    Part.HELD_OUT: (0, "held", "region"),
    Part.LEARNED: (1, "learned", "region1"),
    Part.VALIDATION: (1, "validation", "region1"),
    Part.INNER: (2, "inner", "region2"),
}


def unfix(name: str) -> pl.Expr:
    """The fixed-point sum ``name`` (columns ``<name>_hi``, ``_mid``, ``_lo``: pipeline.fit.aggregate, Exact sums) as
    a float: the carries of the lower parts moved up (integer arithmetic, exact), then
    ``(hi 2^-21 + mid 2^-64) + lo 2^-107``, which gives back every single term exactly; null when nothing was
    summed."""
    unit = 2**43
    lo = pl.col(f"{name}_lo")
    mid = pl.col(f"{name}_mid") + lo // unit
    hi = pl.col(f"{name}_hi") + mid // unit
    return (hi.cast(pl.Float64) * 2.0**-21 + (mid % unit).cast(pl.Float64) * 2.0**-64) + (lo % unit).cast(
        pl.Float64
    ) * 2.0**-107


def _time(us: int | None) -> datetime | None:
    return None if us is None else _EPOCH + timedelta(microseconds=us)


def recency_factor(age_us: pl.Expr, half_life: float) -> pl.Expr:
    """``exp(-ln 2 * age / H)``, the age in days (docs/design.md, Rating weight)."""
    return ((_MINUS_LN2 * (age_us / _DAY_US)) / half_life).exp()


class FitContext:
    """One store version aggregated once, and what the fit derives from it (module docstring).

    ``shipped`` (the shipped priors and roles) and ``objective`` (the one asked for) are what every model fitted
    from this context shares.
    """

    def __init__(self, rows: Aggregate, *, shipped: Shipped, objective: str = "quality_per_dollar"):
        self.shipped = shipped
        self.objective = objective
        self.spec: Spec = rows.spec
        self.split: Split | None = rows.split
        self.half_lives: tuple[float, ...] = rows.spec.half_lives
        self.configs: tuple[str, ...] = tuple(rows.configs["config_key"].to_pylist())
        tasks = pl.from_arrow(rows.tasks)
        assert isinstance(tasks, pl.DataFrame)
        names = {*tasks["region"].to_list(), *tasks["region1"].to_list(), *tasks["region2"].to_list()}
        self.regions: tuple[str, ...] = tuple(sorted({GLOBAL, *(r for r in names if r is not None)}))
        self.config_dtype = pl.Enum(list(self.configs))
        self.region_dtype = pl.Enum(list(self.regions))
        self.tasks = tasks.select(
            pl.col("code").alias("task"),
            "pos",
            pl.col("first_at").cast(pl.Datetime("us")),
            "level",
            "learned",
            "ref",
            "late1",
            "late2",
            *(pl.col(c).cast(self.region_dtype) for c in ("region", "region1", "region2")),
        )
        self.newest: dict[int, datetime | None] = {level: _time(us) for level, us in rows.newest.items()}
        self.pairs = self._pairs(rows)
        self.scores = self._coded(rows.scores).rename({"config": "config_key"})
        self.decisions = self._coded(rows.decisions, config_columns=("chosen",))
        self.candidates = self._coded(rows.candidates)
        closures = pl.from_arrow(rows.closures)
        assert isinstance(closures, pl.DataFrame)
        self.closures = closures
        self.counts = rows.counts
        self.notes = tuple(left_out(what, n, ids) for what, n, ids in rows.bounds)
        self._values: dict[tuple[Part, float | None], pl.DataFrame] = {}
        self._models: dict[tuple[Part, Constants, str], FittedModel] = {}
        self._summed: dict[tuple[Part, float | None, str], FittedModel] = {}  # the first model of each sums

    @classmethod
    def build(
        cls, engine: Engine, spec: Spec, *, shipped: Shipped, objective: str = "quality_per_dollar"
    ) -> FitContext:
        """Aggregate on ``engine`` (:func:`pipeline.fit.aggregate.aggregate`) and build the context."""
        return cls(aggregate(engine, spec), shipped=shipped, objective=objective)

    # ------------------------------------------------------------------------------------ building
    def _coded(self, table: Any, config_columns: tuple[str, ...] = ("config",)) -> pl.DataFrame:
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
        return frame.with_columns(pl.col(c).cast(pl.UInt32).cat.to(self.config_dtype) for c in config_columns)

    def _pairs(self, rows: Aggregate) -> pl.DataFrame:
        """The aggregation's pairs as floats: fixed-point sums put together, PRM fill-ins as the rating they are
        (w 1, s its score, at its attempt's time), costs counted as docs/design.md, Task value and task cost, says."""
        raw = pl.from_arrow(rows.pairs)
        assert isinstance(raw, pl.DataFrame)
        prm = pl.col("prm_score").is_not_null()
        sums = {name: unfix(name).fill_null(0.0) for name in rating_sums(self.spec)}
        one = pl.lit(1.0)
        # A PRM fill-in is one rating: its recency factor relative to its own time is 1.
        relative = {}
        for i in range(len(self.half_lives)):
            relative[f"w{i}"] = pl.when(prm).then(one).otherwise(sums[f"w{i}"])
            relative[f"s{i}"] = pl.when(prm).then(pl.col("prm_score")).otherwise(sums[f"s{i}"])
        attempts = pl.col("attempts").fill_null(0).cast(pl.Int64)
        return raw.select(
            level=pl.col("level").cast(pl.Int8),
            task=pl.col("task").cast(pl.Int32),
            config_key=pl.col("config").cast(pl.UInt32).cat.to(self.config_dtype),
            n=pl.when(prm).then(1).otherwise(pl.col("n")).cast(pl.Int64),
            weight=pl.when(prm).then(one).otherwise(sums["w"]),
            wscore=pl.when(prm).then(pl.col("prm_score")).otherwise(sums["s"]),
            gate_w=sums["gw"],
            gate_ws=sums["gs"],
            cost_usd=pl.when(pl.col("priced") > 0).then(unfix("cost")),
            attempts=attempts,
            unknown_cost=pl.when(attempts == 0)
            .then(1)
            .otherwise(attempts - pl.col("priced").fill_null(0))
            .cast(pl.Int64),
            at_us=pl.when(prm).then(pl.col("prm_at")).otherwise(pl.col("at")),
            prm=prm,
            n_rej=pl.col("n_rej").fill_null(0).cast(pl.Int64),
            w_rej=sums["rej"],
            prompt_version=pl.col("prompt_version"),
            escalated=pl.col("escalated").fill_null(False),
            **relative,
        )

    # ------------------------------------------------------------------------------------ parts
    def _members(self, part: Part) -> pl.Expr:
        _, which, _ = _PARTS[part]
        if which == "all":
            return pl.lit(True)
        if which == "held":
            return ~pl.col("learned")
        if which == "learned":
            return pl.col("level") >= 1
        return pl.col("level") == (1 if which == "validation" else 2)

    def tasks_of(self, part: Part) -> pl.DataFrame:
        """``task, region, first_at`` of the part's tasks (the region as the part sees it), by ``(first_at, task)``."""
        _, _, region = _PARTS[part]
        return (
            self.tasks.filter(self._members(part))
            .select("task", pl.col(region).alias("region"), "first_at")
            .sort("first_at", "task", nulls_last=False)
        )

    def count(self, part: Part) -> int:
        """How many tasks the part holds (the learned count is the split's: every learned task, also one without a
        time that the learned part leaves out)."""
        if part == Part.LEARNED and self.split is not None:
            return self.split.learned
        return int(self.tasks.filter(self._members(part)).height)

    def newest_of(self, part: Part) -> datetime | None:
        """The newest event time of the part's level (every age is measured from it)."""
        return self.newest.get(_PARTS[part][0])

    def decisions_of(self, part: Part) -> pl.DataFrame:
        """The logged decisions (rows of ``decisions``) of the part's tasks made by its cut (a learned part's
        cutoff: a decision after it, or at no known time, is not yet logged there)."""
        level = _PARTS[part][0]
        cut = None if self.split is None or level == 0 else (self.split.cutoff, self.split.inner_cutoff)[level - 1]
        out = self.decisions.filter(pl.col("task").is_in(self.tasks_of(part)["task"].implode()))
        return out if cut is None else out.filter(pl.col("at") <= micros(cut))

    def values(self, part: Part, half_life: float | None = None, *, real: bool = False) -> pl.DataFrame:
        """The task values of ``part`` (docs/design.md, Task value and task cost): one row per (task, config) with a
        rating (PRM fill-ins included unless ``real``), by ``(first_at, task, config_key)``.

        Columns: ``task, region, config_key, first_at``; ``value`` = q_t,c = S / W (null when W = 0), ``weight`` =
        W, ``wscore`` = S (recency-weighted with a finite ``half_life``: one of the context's half-lives), ``n``;
        ``cost_usd`` (the known costs' sum, null when none), ``attempts``, ``unknown_cost`` (attempts without a
        cost; 1 when rated without any); ``gate`` (the weighted mean of the real gate ratings); ``at`` (the latest
        rating); ``prm``, ``escalated``, ``prompt_version``, ``n_rej``, ``w_rej``.
        """
        h = None if half_life is None or math.isinf(half_life) else float(half_life)
        key = (part, h)
        if key not in self._values:
            self._values[key] = self._derive(part, h)
        out = self._values[key]
        return out.filter(~pl.col("prm")) if real else out

    def _rows(self, part: Part) -> pl.DataFrame:
        """The pair rows of the part's tasks: its level's rows for the tasks its cut changes, level 0's for the
        others."""
        level, _, region = _PARTS[part]
        tasks = self.tasks.filter(self._members(part))
        if level == 0:
            chosen = tasks.select("task", region=pl.col(region), late=pl.lit(False))
        else:
            chosen = tasks.select("task", region=pl.col(region), late=pl.col(f"late{level}"))
        joined = self.pairs.join(chosen, on="task", how="inner")
        keep = pl.when(pl.col("late")).then(pl.col("level") == level).otherwise(pl.col("level") == 0)
        return joined.filter(keep).drop("late")

    def _derive(self, part: Part, h: float | None) -> pl.DataFrame:
        rows = self._rows(part).join(self.tasks.select("task", "first_at", "ref"), on="task", how="left")
        if h is None:
            weight, wscore = pl.col("weight"), pl.col("wscore")
            value = pl.when(weight > 0).then(wscore / weight)
        else:
            i = self.half_lives.index(h)
            newest = self.newest_of(part)
            # W = exp(-ln 2 (newest - ref) / H) * W_relative: the part's factor times the sum relative to the task's
            # reference (a PRM fill-in's reference is its own time).
            ref = pl.when(pl.col("prm")).then(pl.col("at_us")).otherwise(pl.col("ref"))
            factor = recency_factor(pl.lit(micros(newest)) - ref, h) if newest is not None else pl.lit(1.0)
            w, s = pl.col(f"w{i}"), pl.col(f"s{i}")
            weight, wscore = factor * w, factor * s
            value = pl.when(w > 0).then(s / w)
        return rows.select(
            "task",
            "region",
            "config_key",
            "first_at",
            value.alias("value"),
            weight.alias("weight"),
            wscore.alias("wscore"),
            "n",
            "cost_usd",
            "attempts",
            "unknown_cost",
            pl.when(pl.col("gate_w") > 0).then(pl.col("gate_ws") / pl.col("gate_w")).alias("gate"),
            pl.col("at_us").cast(pl.Datetime("us")).alias("at"),
            "prm",
            "escalated",
            "prompt_version",
            "n_rej",
            "w_rej",
        ).sort("first_at", "task", "config_key", nulls_last=False)

    # ------------------------------------------------------------------------------------ models
    def model(self, part: Part, constants: Constants, objective: str | None = None) -> FittedModel:
        """The model fitted on ``part`` with ``constants`` (docs/design.md, Fit), once per (part, constants but
        exploration, objective): exploration does not change a fit. The (config, region) sums are taken once per
        (part, half-life); the other constants only evaluate them again."""
        from .model import fit_values, with_constants

        objective = objective or self.objective
        key = (part, constants.model_copy(update={"exploration": 0.0}), objective)
        if key not in self._models:
            h = None if constants.half_life_days is None else float(constants.half_life_days)
            summed = self._summed.get((part, h, objective))
            if summed is None:
                summed = self._summed[(part, h, objective)] = fit_values(
                    self.values(part, h), key[1], self.shipped, objective
                )
            self._models[key] = with_constants(summed, key[1])
        return with_constants(self._models[key], constants)
