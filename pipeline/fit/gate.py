"""The evidence gate's tests, computed at fit time and published per member (docs/design.md, Evidence gate).

The learned choice c overrides the static choice s in region r only when the evidence says c beats s on the
objective. The test, for every member c of every region r (the global pool ``'*'`` included) against every
static choice s of the table (:func:`references`):

- the **shared tasks**: tasks of r on which both c and s have a task value from real ratings (PRM fill-ins are
  estimates, not evidence), leaving out every task on which either was run only because another config had
  already failed there (the aggregation marks those pairs: :mod:`pipeline.fit.aggregate`): an escalated attempt
  is not a draw from c's routing;
- the **paired difference** on those tasks, objective of c minus objective of s:

  - quality per dollar: a ratio of sums, ``sum q_c / max(sum cost_c, floor) - sum q_s / max(sum cost_s, floor)``
    (a mean of per-task ratios is heavy-tailed, a ratio of sums is not);
  - utility: ``mean(lambda * (q_c - q_s) - (cost_c - cost_s))``; quality (or no costs): ``mean(q_c - q_s)``;

- its **lower bound**: the 5% quantile of the paired bootstrap (tasks of r resampled, each with a Poisson(1)
  count, the statistic recomputed on the shared tasks of each resample), i.e. the lower end of a one-sided 95%
  interval;
- **passes** when there are at least ``min_samples`` shared tasks and the lower bound is above 0.

The router applies the tests without the data (:mod:`pipeline.routing.policies`): first in the region, then
in ``'*'``, else the static choice. The bootstrap is vectorised: per region one matrix of resample counts,
and every pair's resampled sums are one matrix product with it; the global pool's resamples are the regions'
put together (stratified by region).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import polars as pl

from ..routing.table import Constants, Static
from .context import FitContext, Part
from .model import GLOBAL, FittedModel, static_choice

#: Resamples of the gate's bootstrap (the evaluation's paired bootstrap uses as many).
RESAMPLES = 1000
#: The one-sided level: the lower bound is this quantile of the resampled differences.
LOWER_QUANTILE = 0.05
#: Resamples drawn per block (bounds the memory of the count matrix on large regions).
_BLOCK_CELLS = 5_000_000
#: Above this many tasks the bootstrap resamples a subsample of this many (:func:`_fraction`).
SUBSAMPLE = 20_000

EVIDENCE_SCHEMA = {
    "region": pl.String,
    "config_key": pl.String,
    "against": pl.String,
    "shared_tasks": pl.Int64,
    "difference": pl.Float64,
    "lower": pl.Float64,
    "passes": pl.Boolean,
}


def references(static: Static, model: FittedModel) -> list[str]:
    """The static choices the router may fall back to: cheap, frontier and default configs (when named) and the
    config with the most fitted ratings (the last fallback), each once, in that order. Pinned roles take no gate."""
    named = [static.cheap_config, static.frontier_config, static.default_config, static_choice(Static(), None, model)]
    return list(dict.fromkeys(c for c in named if c))


def gate_evidence(
    values: pl.DataFrame,
    *,
    against: Iterable[str],
    objective: str,
    constants: Constants,
    escalated: pl.DataFrame | None = None,
    seed: int = 0,
) -> pl.DataFrame:
    """The gate's test of every member against every config of ``against``, per region and in ``'*'``.

    ``values``: one row per (task, config) with ``task, region, config_key, value`` (q_t,c) and ``cost``
    (cost_t,c with unknown attempts estimated; null everywhere when no cost is known, and then the objective is
    quality). ``escalated``: ``task, config_key`` of the escalated pairs. Rows :data:`EVIDENCE_SCHEMA`, sorted by
    (region, config_key, against); no row for a config against itself or against a config the region lacks.

    For each static choice s, each region's tasks that s shares with another config are resampled on their own
    (the other tasks add nothing to any pair's sums); the global pool's resample b is the union of the regions'
    resamples b (a bootstrap stratified by region), so its sums are the regions' sums added up and cost nothing
    more.
    """
    rows = values.filter(pl.col("value").is_not_null())
    if escalated is not None and escalated.height:
        rows = rows.join(escalated.with_columns(_esc=pl.lit(True)), on=["task", "config_key"], how="left")
    else:
        rows = rows.with_columns(_esc=pl.lit(False))
    rows = rows.with_columns(pl.col("_esc").fill_null(False))
    cost_known = "cost" in rows.columns and rows["cost"].null_count() < rows.height
    effective = objective if cost_known else "quality"
    configs = sorted(rows["config_key"].cast(pl.String).unique().to_list())
    refs = [r for r in dict.fromkeys(against) if r in configs]
    if not refs:
        return pl.DataFrame(schema=EVIDENCE_SCHEMA)
    rows = rows.with_columns(pl.col("config_key").cast(pl.String), pl.col("region").cast(pl.String))
    parts = sorted(rows.group_by("region"), key=lambda g: str(g[0][0]))

    def summed(part: pl.DataFrame, region: str, fraction: float) -> _Sums:
        return _region_sums(part, configs, refs, effective, constants, cost_known, seed, region, fraction)

    sums = {str(r): summed(part, str(r), _fraction(part["task"].n_unique())) for (r,), part in parts}
    # '*': the regions' resamples put together (stratified by region), each of the same fraction of its tasks.
    fraction = _fraction(rows["task"].n_unique())
    strata = list(sums.values()) if fraction == 1.0 else [summed(part, str(r), fraction) for (r,), part in parts]
    sums[GLOBAL] = _Sums(
        point=np.sum([x.point for x in strata], axis=0),
        boot=np.sum([x.boot for x in strata], axis=0),
        members=set().union(*(x.members for x in strata)),
        scale=math.sqrt(fraction),
    )
    out = []
    for region in sorted(sums):
        out += _tests(sums[region], region, configs, refs, effective, constants)
    return pl.DataFrame(out, schema=EVIDENCE_SCHEMA).sort("region", "config_key", "against")


@dataclass(frozen=True)
class _Sums:
    """A region's sums per (static choice, column, config): on its own tasks (``point``, shape K) and on each
    bootstrap resample (``boot``, RESAMPLES x K); ``members``: the configs rated there; ``scale``: the square root
    of the fraction of its tasks the bootstrap resampled (1: all of them; :func:`_fraction`)."""

    point: np.ndarray
    boot: np.ndarray
    members: set[str]
    scale: float = 1.0


def _fraction(tasks: int) -> float:
    """The share of tasks a bootstrap resamples: all of them up to :data:`SUBSAMPLE` tasks, else that many (a
    subsample each task enters with this probability, then the Poisson bootstrap on it; the spread of its
    statistic is scaled by ``sqrt(fraction)``: docs/design.md, Evidence gate)."""
    return 1.0 if tasks <= SUBSAMPLE else SUBSAMPLE / tasks


def _columns(objective: str) -> int:
    """Columns per (static choice, config): the sums a statistic needs (:func:`_statistic`)."""
    return 5 if objective == "quality_per_dollar" else 2


def _region_sums(
    part: pl.DataFrame,
    configs: list[str],
    refs: list[str],
    objective: str,
    constants: Constants,
    cost_known: bool,
    seed: int,
    region: str,
    fraction: float = 1.0,
) -> _Sums:
    """The per-task columns of every (static choice s, config c) pair, summed over the tasks s shares with
    another config in the region and over each resample of them (of a ``fraction`` of them: :func:`_fraction`).
    Columns, with m = [both usable on the task]: quality per dollar
    ``m*q_c, m*cost_c, m*q_s, m*cost_s, m``; utility ``m*(lambda (q_c - q_s) - (cost_c - cost_s)), m``; quality
    ``m*(q_c - q_s), m``."""
    _, ti = np.unique(part["task"].to_numpy(), return_inverse=True)  # tasks in id order
    c_index = {c: j for j, c in enumerate(configs)}
    ci = part["config_key"].replace_strict(c_index, return_dtype=pl.Int64).to_numpy()
    shape = (int(ti.max()) + 1 if len(ti) else 0, len(configs))
    q, cost, usable = np.zeros(shape), np.zeros(shape), np.zeros(shape, dtype=bool)
    q[ti, ci] = part["value"].to_numpy()
    if cost_known:
        cost[ti, ci] = part["cost"].fill_null(0.0).to_numpy()
    usable[ti, ci] = ~part["_esc"].to_numpy()
    ref_cols = [c_index[s] for s in refs]
    # the bootstrap's tasks: those a static choice shares with some other config (the others add to no sum)
    union = (usable.sum(axis=1) >= 2) & usable[:, ref_cols].any(axis=1)
    q, cost, usable = q[union], cost[union], usable[union]
    rows, matrices = [], []
    for j in ref_cols:
        sel = usable[:, j]
        qk, ck = q[sel], cost[sel]
        m = usable[sel].astype(float)
        m[:, j] = 0.0
        if objective == "quality_per_dollar":
            matrices.append(np.hstack([m * qk, m * ck, m * qk[:, [j]], m * ck[:, [j]], m]))
        else:
            per_task = qk - qk[:, [j]]
            if objective == "utility":
                assert constants.lambda_ is not None  # a utility fit always has lambda (pipeline.routing.greedy)
                per_task = float(constants.lambda_) * per_task - (ck - ck[:, [j]])
            matrices.append(np.hstack([m * per_task, m]))
        rows.append(sel)
    boots = [np.zeros((RESAMPLES, x.shape[1])) for x in matrices]
    rng = np.random.default_rng([seed, zlib.crc32(region.encode())])
    kept = np.ones(len(q), dtype=bool) if fraction == 1.0 else rng.random(len(q)) < fraction
    for start, weights in _resample_weights(int(kept.sum()), rng):
        for sel, matrix, boot in zip(rows, matrices, boots, strict=True):
            boot[start : start + len(weights)] = weights[:, sel[kept]] @ matrix[kept[sel]]
    return _Sums(
        point=np.concatenate([x.sum(axis=0) for x in matrices]),
        boot=np.hstack(boots),
        members=set(part["config_key"].unique().to_list()),
        scale=math.sqrt(fraction),
    )


def _poisson_table() -> np.ndarray:
    """Poisson(1) counts for the 2^16 values of a uniform 16-bit draw: value u gives the k whose cumulative
    probability first exceeds (u + 1/2) / 2^16 (probabilities exact to 2^-16)."""
    cdf = np.cumsum([math.exp(-1.0) / math.factorial(k) for k in range(20)])
    return np.searchsorted(cdf * 65536.0, np.arange(65536) + 0.5).astype(np.float64)


_POISSON = _poisson_table()


def _resample_weights(n_tasks: int, rng: np.random.Generator) -> Iterator[tuple[int, np.ndarray]]:
    """Blocks of the bootstrap's weights (resamples x tasks), as (first resample, block): each task's count in a
    resample is an independent Poisson(1) draw (the Poisson bootstrap, the large-sample form of drawing the tasks
    with replacement, drawn in one vector operation). ``rng`` is seeded by the fit's seed and the region's name, so
    the same data give the same bounds whatever the other regions hold."""
    if n_tasks == 0:
        return
    per_block = max(1, min(RESAMPLES, _BLOCK_CELLS // n_tasks))
    for start in range(0, RESAMPLES, per_block):
        size = min(per_block, RESAMPLES - start)
        yield start, _POISSON[rng.integers(0, 65536, size=(size, n_tasks), dtype=np.uint16)]


def _tests(
    sums: _Sums, region: str, configs: list[str], refs: list[str], objective: str, constants: Constants
) -> list[dict]:
    """The test of every member of the region against every static choice rated there, from its sums."""
    width = _columns(objective) * len(configs)
    out = []
    for r, s in enumerate(refs):
        if s not in sums.members:
            continue
        point = _statistic(sums.point[None, r * width : (r + 1) * width], len(configs), objective, constants)[0]
        boot = _statistic(sums.boot[:, r * width : (r + 1) * width], len(configs), objective, constants)
        n = sums.point[r * width : (r + 1) * width][-len(configs) :]
        for j, c in enumerate(configs):
            if c == s or c not in sums.members:
                continue
            shared = int(n[j])
            column = boot[:, j]
            finite = column[np.isfinite(column)]
            lower = _lower(finite, float(point[j]), sums.scale) if shared >= 2 and finite.size else None
            out.append(
                {
                    "region": region,
                    "config_key": c,
                    "against": s,
                    "shared_tasks": shared,
                    "difference": float(point[j]) if shared else None,
                    "lower": lower,
                    "passes": shared >= int(constants.min_samples) and lower is not None and lower > 0.0,
                }
            )
    return out


def _lower(resampled: np.ndarray, estimate: float, scale: float) -> float:
    """The one-sided 95% lower bound: the 5% quantile of the resampled differences; from a subsample (``scale`` < 1)
    the estimate plus ``scale`` times that quantile's distance from the resamples' median."""
    low = float(np.quantile(resampled, LOWER_QUANTILE))
    if scale == 1.0:
        return low
    return estimate + scale * (low - float(np.median(resampled)))


def _statistic(sums: np.ndarray, n_configs: int, objective: str, constants: Constants) -> np.ndarray:
    """The paired difference of each config against the static choice from its summed columns (rows: resamples;
    columns laid out as :func:`_region_sums` makes them): NaN where a resample holds no shared task.

    quality per dollar: ``sum q_c / max(sum cost_c, floor) - sum q_s / max(sum cost_s, floor)``; utility and
    quality: ``sum(per-task difference) / n``."""
    col = lambda k: sums[:, k * n_configs : (k + 1) * n_configs]  # noqa: E731 - the k-th column of every config
    with np.errstate(invalid="ignore", divide="ignore"):
        if objective == "quality_per_dollar":
            floor = float(constants.cost_floor_usd)
            n = col(4)
            diff = col(0) / np.maximum(col(1), floor) - col(2) / np.maximum(col(3), floor)
        else:
            n = col(1)
            diff = col(0) / n
    return np.where(n > 0, diff, np.nan)


def member_gate(ctx: FitContext, part: Part, model: FittedModel, *, seed: int) -> pl.DataFrame:
    """The gate's tests of the table fitted as ``model`` on ``part``: :func:`gate_evidence` of the part's task values
    of real ratings (under the model's half-life, costed by ``model``) against :func:`references`, leaving out
    the escalated pairs (the aggregation marks them from every attempt of the task)."""
    values = model.task_costs(ctx.values(part, model.constants.half_life_days, real=True))
    escalated = values.filter(pl.col("escalated")).select("task", "config_key")
    return gate_evidence(
        values.rename({"cost_t": "cost"}),
        against=references(ctx.shipped.static, model),
        objective=model.effective_objective,
        constants=model.constants,
        escalated=escalated,
        seed=seed,
    )
