"""The evidence gate's tests, computed at fit time and published per member (docs/design.md, Evidence gate).

The learned choice c overrides the static choice s in region r only when the evidence says c beats s on the
objective. The test, for every member c of every region r (the global pool ``'*'`` included) against every
static choice s of the table (:func:`references`):

- the **shared tasks**: tasks of r on which both c and s have a task value from real ratings (PRM fill-ins are
  estimates, not evidence), leaving out every task on which either was run only because another config had
  already failed there (:func:`escalated_pairs`): an escalated attempt is not a draw from c's routing;
- the **paired difference** on those tasks, objective of c minus objective of s:

  - quality per dollar: a ratio of sums, ``sum q_c / max(sum cost_c, floor) - sum q_s / max(sum cost_s, floor)``
    (a mean of per-task ratios is heavy-tailed, a ratio of sums is not);
  - utility: ``mean(lambda * (q_c - q_s) - (cost_c - cost_s))``; quality (or no costs): ``mean(q_c - q_s)``;

- its **lower bound**: the 5% quantile of the paired bootstrap (tasks of r resampled with replacement, the
  statistic recomputed on the shared tasks of each resample), i.e. the lower end of a one-sided 95% interval;
- **passes** when there are at least ``min_samples`` shared tasks and the lower bound is above 0.

The router applies the tests without the data (:mod:`pipeline.routing.policies`): first in the region, then
in ``'*'``, else the static choice. The bootstrap is vectorised: per region one matrix of resample counts,
and every member's resampled sums are one matrix product with it.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

import numpy as np
import polars as pl

from ..routing.table import Constants, Static
from .inputs import FitInputs, task_values
from .model import GLOBAL, FittedModel, static_choice

#: Resamples of the gate's bootstrap (the evaluation's paired bootstrap uses as many).
RESAMPLES = 1000
#: The one-sided level: the lower bound is this quantile of the resampled differences.
LOWER_QUANTILE = 0.05
#: Statuses of a failed attempt (``unknown`` is not a failure).
FAILED = ("failure", "vacuous", "blocked", "escalated")
#: Resamples drawn per block (bounds the memory of the count matrix on large regions).
_BLOCK_CELLS = 5_000_000

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


def escalated_pairs(attempts: pl.DataFrame) -> pl.DataFrame:
    """``task, config_key``: configs run on a task only after another config had failed on it.

    c was escalated to on t when c's first attempt on t started (``at - duration_ms``, or ``at`` when the
    duration is unknown) strictly after an attempt of another config on t ended (``at``) with a failed status.
    Attempts logged at one time (imported tables) are never escalations.
    """
    if attempts.is_empty() or "status" not in attempts.columns:
        return pl.DataFrame(schema={"task": pl.String, "config_key": pl.String})
    duration = pl.duration(milliseconds=pl.col("duration_ms").fill_null(0)) if "duration_ms" in attempts.columns else 0
    starts = attempts.group_by("task", "config_key").agg(start=(pl.col("at") - duration).min())
    failed = (
        attempts.filter(pl.col("status").is_in(FAILED))
        .group_by("task", "config_key")
        .agg(failed_at=pl.col("at").min())
        .rename({"config_key": "failed_config"})
    )
    return (
        starts.join(failed, on="task")
        .filter((pl.col("failed_config") != pl.col("config_key")) & (pl.col("failed_at") < pl.col("start")))
        .select("task", "config_key")
        .unique()
        .sort("task", "config_key")
    )


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
    quality). ``escalated``: :func:`escalated_pairs`. Rows :data:`EVIDENCE_SCHEMA`, sorted by
    (region, config_key, against); no row for a config against itself or against a config the region lacks.
    """
    rows = values.filter(pl.col("value").is_not_null())
    if escalated is not None and escalated.height:
        rows = rows.join(escalated.with_columns(_esc=pl.lit(True)), on=["task", "config_key"], how="left")
    else:
        rows = rows.with_columns(_esc=pl.lit(False))
    rows = rows.with_columns(pl.col("_esc").fill_null(False))
    cost_known = "cost" in rows.columns and rows["cost"].null_count() < rows.height
    effective = objective if cost_known else "quality"
    out: list[dict] = []
    refs = list(dict.fromkeys(against))
    regions = sorted(rows["region"].unique().to_list())
    for region in [GLOBAL, *regions]:
        part = rows if region == GLOBAL else rows.filter(pl.col("region") == region)
        out += _region_evidence(part, region, refs, effective, constants, cost_known, seed)
    return pl.DataFrame(out, schema=EVIDENCE_SCHEMA).sort("region", "config_key", "against")


def _region_evidence(
    part: pl.DataFrame,
    region: str,
    refs: list[str],
    objective: str,
    constants: Constants,
    cost_known: bool,
    seed: int,
) -> list[dict]:
    tasks = part["task"].unique().sort()
    configs = sorted(part["config_key"].unique().to_list())
    present = [s for s in refs if s in configs]
    if not present:
        return []
    t_index = {t: i for i, t in enumerate(tasks.to_list())}
    c_index = {c: j for j, c in enumerate(configs)}
    shape = (len(t_index), len(configs))
    q = np.full(shape, np.nan)
    cost = np.zeros(shape)
    esc = np.zeros(shape, dtype=bool)
    ti = np.array([t_index[t] for t in part["task"].to_list()], dtype=np.int64)
    ci = np.array([c_index[c] for c in part["config_key"].to_list()], dtype=np.int64)
    q[ti, ci] = part["value"].to_numpy()
    if cost_known:
        cost[ti, ci] = part["cost"].fill_null(0.0).to_numpy()
    esc[ti, ci] = part["_esc"].to_numpy()
    usable = ~np.isnan(q) & ~esc
    q0 = np.nan_to_num(q)
    counts = _resample_counts(len(t_index), seed, region)
    out = []
    for s in present:
        j = c_index[s]
        shared = usable & usable[:, [j]]  # T x C: tasks both did, neither escalated to
        shared[:, j] = False
        n = shared.sum(axis=0)
        point = _statistic(np.ones((1, shape[0])), shared, q0, cost, j, objective, constants)[0]
        boot = np.concatenate([_statistic(k, shared, q0, cost, j, objective, constants) for k in counts])
        for c, jc in c_index.items():
            if jc == j:
                continue
            n_shared = int(n[jc])
            column = boot[:, jc]
            finite = column[np.isfinite(column)]
            lower = float(np.quantile(finite, LOWER_QUANTILE)) if n_shared >= 2 and finite.size else None
            diff = float(point[jc]) if n_shared else None
            out.append(
                {
                    "region": region,
                    "config_key": c,
                    "against": s,
                    "shared_tasks": n_shared,
                    "difference": diff,
                    "lower": lower,
                    "passes": n_shared >= int(constants.min_samples) and lower is not None and lower > 0.0,
                }
            )
    return out


def _resample_counts(n_tasks: int, seed: int, region: str) -> list[np.ndarray]:
    """Blocks of the bootstrap's count matrix (resamples x tasks): how often each task is drawn in a resample.

    Seeded by the fit's seed and the region's name, so the same data give the same bounds, whatever the other
    regions hold."""
    rng = np.random.default_rng([seed, zlib.crc32(region.encode())])
    if n_tasks == 0:
        return []
    per_block = max(1, min(RESAMPLES, _BLOCK_CELLS // n_tasks))
    blocks = []
    for start in range(0, RESAMPLES, per_block):
        size = min(per_block, RESAMPLES - start)
        blocks.append(rng.multinomial(n_tasks, np.full(n_tasks, 1.0 / n_tasks), size=size).astype(float))
    return blocks


def _statistic(
    weights: np.ndarray,
    shared: np.ndarray,
    q: np.ndarray,
    cost: np.ndarray,
    ref: int,
    objective: str,
    constants: Constants,
) -> np.ndarray:
    """The paired difference of every config against column ``ref`` under task ``weights`` (resamples x tasks):
    one row per resample, one column per config (NaN where a resample holds no shared task)."""
    mask = shared.astype(float)
    n = weights @ mask
    with np.errstate(invalid="ignore", divide="ignore"):
        if objective == "quality_per_dollar":
            floor = float(constants.cost_floor_usd)
            qc, cc = weights @ (mask * q), weights @ (mask * cost)
            qs, cs = weights @ (mask * q[:, [ref]]), weights @ (mask * cost[:, [ref]])
            diff = qc / np.maximum(cc, floor) - qs / np.maximum(cs, floor)
        else:
            per_task = q - q[:, [ref]]
            if objective == "utility":
                per_task = float(constants.lambda_ or 1.0) * per_task - (cost - cost[:, [ref]])
            diff = (weights @ (mask * per_task)) / n
    return np.where(n > 0, diff, np.nan)


def member_gate(
    part: FitInputs, model: FittedModel, static: Static, *, attempts: pl.DataFrame, seed: int
) -> pl.DataFrame:
    """The gate's tests of the table fitted as ``model`` on ``part``: :func:`gate_evidence` of ``part``'s task
    values (real ratings, costed by ``model``) against :func:`references`, with the escalations of ``attempts``
    (the whole store's: ``part`` may have dropped the attempts' statuses)."""
    values = model.task_costs(task_values(part, half_life_days=model.constants.half_life_days, real=True))
    return gate_evidence(
        values.rename({"cost_t": "cost"}),
        against=references(static, model),
        objective=model.effective_objective,
        constants=model.constants,
        escalated=escalated_pairs(attempts),
        seed=seed,
    )
