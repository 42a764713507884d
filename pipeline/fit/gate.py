"""The evidence gate's tests, computed at fit time and published per member (docs/design.md, Evidence gate).

The learned choice c overrides the static choice s in region r only when the evidence says c beats s on the
objective. A dispatcher runs one config per task, so the evidence is every logged run of either, not only the
tasks both ran. The test, for every member c of every region r (the global pool ``'*'`` included) against every
static choice s of the table (:func:`references`):

- the **tasks**: those of r where both were candidates (:func:`logged_runs`; a task without a decision: the
  configs first rated by its time), and on them the real ratings (PRM fill-ins are estimates, not evidence) of
  runs that were not escalations (a decision's ``after``, or a run after another config failed by timing, as
  the aggregation marks those pairs: :mod:`pipeline.fit.aggregate`; evidence about failed tasks only);
- each run weighted by ``recency / max(propensity, PROPENSITY_CLIP)``, each side's self-normalized mean;
- the **difference** of the objective on those means (quality per dollar ``q_c / max(cost_c, floor) - q_s /
  max(cost_s, floor)``, utility ``lambda (q_c - q_s) - (cost_c - cost_s)``, quality ``q_c - q_s``);
- its **lower bound** at the level 5% / (members tested x (1 + log2 effective samples)): the lower of the Poisson
  bootstrap's quantile (tasks resampled, a task both ran enters both sides with one count: its paired
  difference; above :data:`SUBSAMPLE` tasks an m-out-of-n subsample, its spread scaled: :func:`_fraction`) and a
  normal bound on the means shrunk to the region's mean (:func:`_normal_lower`);
- **passes** when the effective samples, (sum w)^2 / sum w^2 of the smaller side, are at least ``min_samples``
  and the lower bound is above 0.

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
from datetime import datetime
from statistics import NormalDist

import numpy as np
import polars as pl

from ..routing.table import Constants, Static
from .context import FitContext, Part, recency_factor
from .model import GLOBAL, FittedModel, static_choice

#: Resamples of the gate's bootstrap (the evaluation's paired bootstrap uses as many).
RESAMPLES = 1000
#: The one-sided level of the gate: the lower bound is the LOWER_QUANTILE / m quantile of the resampled differences,
#: m the members tested against the same static choice in the region (Bonferroni: the learned choice is the best
#: of several members, so the chance that any of them passes by luck stays below 5% each night).
LOWER_QUANTILE = 0.05
#: Logged propensities are clipped from below at this before weighting: a run weighs at most 1 / 0.05 = 20 times
#: a run its decision was sure of (a propensity is never 0; the clip bounds the variance a rare draw brings).
PROPENSITY_CLIP = 0.05
#: Resamples drawn per block (bounds the memory of the count matrix on large regions).
_BLOCK_CELLS = 5_000_000
#: Above this many tasks the bootstrap resamples a subsample of this many (:func:`_fraction`).
SUBSAMPLE = 20_000

#: The task values :func:`gate_evidence` reads (a caller outside the fit, a study or a test, builds them so).
VALUES_SCHEMA: dict[str, pl.DataType] = {
    "task": pl.String(),
    "region": pl.String(),
    "config_key": pl.String(),
    "value": pl.Float64(),
    "cost": pl.Float64(),
    "first_at": pl.Datetime("us"),
}
#: The decisions :func:`logged_runs` reads (``after_failed`` optional: a store written before it has none).
DECISIONS_SCHEMA: dict[str, pl.DataType] = {
    "id": pl.String(),
    "task": pl.String(),
    "at": pl.Datetime("us"),
    "chosen": pl.String(),
    "candidates": pl.List(pl.String),
    "propensity": pl.Float64(),
    "after_failed": pl.List(pl.String),
}

EVIDENCE_SCHEMA = {
    "region": pl.String,
    "config_key": pl.String,
    "against": pl.String,
    "shared_tasks": pl.Int64,
    "difference": pl.Float64,
    "lower": pl.Float64,
    "passes": pl.Boolean,
    "tasks": pl.Int64,
    "runs": pl.Int64,
    "static_runs": pl.Int64,
    "effective_samples": pl.Float64,
    "weighted": pl.Boolean,
    "escalations": pl.Int64,
    "level": pl.Float64,
}


def references(static: Static, model: FittedModel) -> list[str]:
    """The static choices the router may fall back to: cheap, frontier and default configs (when named) and the
    config with the most fitted ratings (the last fallback), each once, in that order. Pinned roles take no gate."""
    named = [static.cheap_config, static.frontier_config, static.default_config, static_choice(Static(), None, model)]
    return list(dict.fromkeys(c for c in named if c))


def _pairs(task: pl.DataType) -> dict[str, pl.DataType]:
    """The schema of ``task, config_key`` rows, the task of the type the inputs give (ids or codes)."""
    return {"task": task, "config_key": pl.String()}


@dataclass(frozen=True)
class Logged:
    """What the logged decisions say about the runs (:func:`logged_runs`).

    ``runs``: ``task, config_key, propensity, after``: per (task, config chosen by a decision) the first such
    decision's propensity and whether it was decided after another config had failed (its ``after``);
    ``candidates``: ``task, config_key``: the candidates of each task's first decision made before any failure.
    """

    runs: pl.DataFrame
    candidates: pl.DataFrame


def logged_runs(decisions: pl.DataFrame) -> Logged:
    """:class:`Logged` of the store's ``decisions`` (``task, at, id, chosen, candidates, propensity`` and, when the
    store has it, ``after_failed``)."""
    pairs = _pairs(decisions.schema.get("task", pl.String()))
    runs_schema: dict[str, pl.DataType] = {**pairs, "propensity": pl.Float64(), "after": pl.Boolean()}
    if decisions.is_empty():
        return Logged(pl.DataFrame(schema=runs_schema), pl.DataFrame(schema=pairs))
    after = pl.col("after_failed").list.len().fill_null(0) > 0 if "after_failed" in decisions.columns else pl.lit(False)
    d = decisions.sort("at", "id").with_columns(after=after)
    runs = (
        d.group_by("task", "chosen", maintain_order=True)
        .first()
        .select("task", config_key="chosen", propensity=pl.col("propensity").cast(pl.Float64), after="after")
    )
    candidates = (
        d.filter(~pl.col("after"))
        .group_by("task", maintain_order=True)
        .first()
        .select("task", config_key="candidates")
        .explode("config_key")
        .drop_nulls()
        .unique()
        .sort("task", "config_key")
    )
    return Logged(runs.cast(pl.Schema(runs_schema)), candidates.cast(pl.Schema(pairs)))


def gate_evidence(
    values: pl.DataFrame,
    *,
    against: Iterable[str],
    objective: str,
    constants: Constants,
    escalated: pl.DataFrame | None = None,
    logged: Logged | None = None,
    seed: int = 0,
) -> pl.DataFrame:
    """The gate's test of every member against every config of ``against``, per region and in ``'*'``.

    ``values``: one row per (task, config) with ``task, region, config_key, value`` (q_t,c), ``first_at`` (the
    task's time) and ``cost`` (cost_t,c with unknown attempts estimated; null everywhere when no cost is known,
    and then the objective is quality). ``escalated``: ``task, config_key`` of the pairs run after another config
    had failed (by timing: the aggregation's ``escalated``); ``logged``: :func:`logged_runs` (propensities,
    candidates and decisions made after a failure). Rows :data:`EVIDENCE_SCHEMA`, sorted by (region, config_key,
    against); no row for a config against itself or against a config the region lacks.

    The global pool's resample b is the union of the regions' resamples b (a bootstrap stratified by region), so
    its sums are the regions' sums added up and cost nothing more.
    """
    rows = _observations(values, escalated, logged, constants)
    cost_known = "cost" in rows.columns and rows["cost"].null_count() < rows.height
    effective = objective if cost_known else "quality"
    configs = sorted(rows["config_key"].unique().to_list())
    refs = [r for r in dict.fromkeys(against) if r in configs]
    if not refs:
        return pl.DataFrame(schema=EVIDENCE_SCHEMA)
    candidates = _candidates(rows, logged, configs)
    parts = sorted(rows.group_by("region"), key=lambda g: str(g[0][0]))

    def summed(part: pl.DataFrame, region: str, fraction: float) -> _Sums:
        return _region_sums(part, candidates, configs, refs, effective, constants, cost_known, seed, region, fraction)

    sums = {str(r): summed(part, str(r), _fraction(part["task"].n_unique())) for (r,), part in parts}
    # '*': the regions' resamples put together (stratified by region), each of the same fraction of its tasks.
    fraction = _fraction(rows["task"].n_unique())
    strata = list(sums.values()) if fraction == 1.0 else [summed(part, str(r), fraction) for (r,), part in parts]
    sums[GLOBAL] = _Sums(
        point=np.sum([x.point for x in strata], axis=0),
        boot=np.sum([x.boot for x in strata], axis=0),
        extra=np.sum([x.extra for x in strata], axis=0),
        members=set().union(*(x.members for x in strata)),
        moments=np.sum([x.moments for x in strata], axis=0),
        scale=math.sqrt(fraction),
    )
    out = []
    for region in sorted(sums):
        out += _tests(sums[region], region, configs, refs, effective, constants)
    return pl.DataFrame(out, schema=EVIDENCE_SCHEMA).sort("region", "config_key", "against")


def _observations(
    values: pl.DataFrame, escalated: pl.DataFrame | None, logged: Logged | None, constants: Constants
) -> pl.DataFrame:
    """The rated (task, config) rows with their weight inputs: ``_esc`` (run only after another had failed: by
    timing or by its decision's ``after``), ``propensity`` (the logged one of the decision that chose it, null
    when no decision chose it: a side-by-side run or an imported table), ``recency`` (of the task's time under the
    published half-life, the same factor for every config on the task)."""
    rows = values.filter(pl.col("value").is_not_null())
    if "first_at" not in rows.columns:  # no task times: every task equally recent, every config a candidate
        rows = rows.with_columns(first_at=pl.lit(None, pl.Datetime("us")))
    flags = [escalated.select("task", "config_key")] if escalated is not None and escalated.height else []
    if logged is not None and logged.runs.height:
        flags.append(logged.runs.filter("after").select("task", "config_key"))
        rows = rows.join(logged.runs.select("task", "config_key", "propensity"), on=["task", "config_key"], how="left")
    else:
        rows = rows.with_columns(propensity=pl.lit(None, pl.Float64))
    if flags:
        marked = pl.concat(flags).unique().with_columns(_esc=pl.lit(True))
        rows = rows.join(marked, on=["task", "config_key"], how="left").with_columns(pl.col("_esc").fill_null(False))
    else:
        rows = rows.with_columns(_esc=pl.lit(False))
    task_at = pl.col("first_at").min().over("task")
    newest = rows["first_at"].max() if rows.height else None
    assert newest is None or isinstance(newest, datetime)
    h = constants.half_life_days
    if h is None or math.isinf(h) or newest is None:
        return rows.with_columns(recency=pl.lit(1.0))
    age_us = (pl.lit(newest, pl.Datetime("us")) - task_at).dt.total_microseconds()
    return rows.with_columns(recency=recency_factor(age_us, float(h)))


def _candidates(rows: pl.DataFrame, logged: Logged | None, configs: list[str]) -> pl.DataFrame:
    """``task, config_key``: where each config was a candidate. A task with a logged first decision: that
    decision's candidates (and every config run on it before any failure); a task without one: every config first
    rated at or before the task's time (a config added later is no candidate of earlier tasks)."""
    pairs = _pairs(rows.schema["task"])
    decided = (logged.candidates if logged is not None else pl.DataFrame(schema=pairs)).cast(pl.Schema(pairs))
    tasks = rows.group_by("task").agg(at=pl.col("first_at").min())
    first_seen = rows.group_by("config_key").agg(since=pl.col("first_at").min())
    undecided = (
        tasks.filter(~pl.col("task").is_in(decided["task"].unique().implode()))
        .join(first_seen, how="cross")
        .filter(pl.col("since").is_null() | pl.col("at").is_null() | (pl.col("since") <= pl.col("at")))
        .select("task", "config_key")
    )
    ran = rows.filter(~pl.col("_esc")).select("task", "config_key")
    return pl.concat([decided.filter(pl.col("config_key").is_in(configs)), undecided, ran]).unique()


@dataclass(frozen=True)
class _Sums:
    """A region's sums per (static choice, column, config): on its own tasks (``point``, shape K) and on each
    bootstrap resample (``boot``, RESAMPLES x K); ``extra``: the sums only the point estimate needs (shape
    :data:`_EXTRA` x configs per static choice); ``members``: the configs rated there; ``scale``: the square root
    of the fraction of its tasks the bootstrap resampled (1: all of them; :func:`_fraction`)."""

    point: np.ndarray
    boot: np.ndarray
    extra: np.ndarray
    members: set[str]
    moments: np.ndarray  # per config the count, sum and sum of squares of its usable task values (3 x configs)
    scale: float = 1.0


def _fraction(tasks: int) -> float:
    """The share of tasks a bootstrap resamples: all of them up to :data:`SUBSAMPLE` tasks, else that many (a
    subsample each task enters with this probability, then the Poisson bootstrap on it; the spread of its
    statistic is scaled by ``sqrt(fraction)``: docs/design.md, Evidence gate)."""
    return 1.0 if tasks <= SUBSAMPLE else SUBSAMPLE / tasks


#: Columns per (static choice, config) of the resampled sums (:func:`_region_sums`).
_COLUMNS = 6
#: The point-only sums per (static choice, config): sum w_c^2, sum w_s^2, runs of c, runs of s, tasks both ran,
#: tasks either ran, weighted runs (a logged propensity), escalation outcomes of c left out.
_EXTRA = 8


def _region_sums(
    part: pl.DataFrame,
    candidates: pl.DataFrame,
    configs: list[str],
    refs: list[str],
    objective: str,
    constants: Constants,
    cost_known: bool,
    seed: int,
    region: str,
    fraction: float = 1.0,
) -> _Sums:
    """The sums of every (static choice s, config c) pair in the region, on its tasks and on each resample.

    On task t, with A = [both c and s were candidates on t], o_c = A * [c ran on t, not after a failure], and the
    weight w_t,c = recency_t / max(p_t,c, PROPENSITY_CLIP) (p_t,c the logged propensity of the decision that chose
    c on t; 1 for a run no decision chose), the resampled columns are
    ``o_c w_c q_c, o_c w_c cost_c, o_c w_c, o_s w_s q_s, o_s w_s cost_s, o_s w_s``: the self-normalized means of
    each side are their ratios (:func:`_statistic`). A task both ran enters both sides with one resample count:
    its paired difference."""
    tasks = part["task"].unique().sort().to_list()
    t_index = {t: i for i, t in enumerate(tasks)}
    c_index = {c: j for j, c in enumerate(configs)}
    shape = (len(tasks), len(configs))
    q, cost, weight = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    usable, esc, decided, cand = (np.zeros(shape, dtype=bool) for _ in range(4))
    ti = np.array([t_index[t] for t in part["task"].to_list()], dtype=np.int64)
    ci = np.array([c_index[c] for c in part["config_key"].to_list()], dtype=np.int64)
    q[ti, ci] = part["value"].to_numpy()
    if cost_known:
        cost[ti, ci] = part["cost"].fill_null(0.0).to_numpy()
    escalation = part["_esc"].to_numpy()
    usable[ti, ci] = ~escalation
    esc[ti, ci] = escalation
    propensity = part["propensity"].to_numpy()
    decided[ti, ci] = ~np.isnan(propensity)
    # w = recency / max(p, clip): one formula for every run (p = 1 when no decision chose it)
    weight[ti, ci] = part["recency"].to_numpy() / np.maximum(np.nan_to_num(propensity, nan=1.0), PROPENSITY_CLIP)
    mine = candidates.filter(pl.col("task").is_in(tasks))
    cand[
        np.array([t_index[t] for t in mine["task"].to_list()], dtype=np.int64),
        np.array([c_index[c] for c in mine["config_key"].to_list()], dtype=np.int64),
    ] = True
    matrices, extras = [], []
    for j in (c_index[s] for s in refs):
        both = cand & cand[:, [j]]
        oc, os_ = both & usable, both & usable[:, [j]]
        wc, ws = weight * oc, weight[:, [j]] * os_
        matrices.append(np.hstack([wc * q, wc * cost, wc, ws * q[:, [j]], ws * cost[:, [j]], ws]))
        extras.append(
            np.vstack(
                [
                    (wc**2).sum(axis=0),
                    (ws**2).sum(axis=0),
                    oc.sum(axis=0),
                    os_.sum(axis=0),
                    (oc & os_).sum(axis=0),
                    (oc | os_).sum(axis=0),
                    (oc & decided).sum(axis=0) + (os_ & decided[:, [j]]).sum(axis=0),
                    (both & esc).sum(axis=0),
                ]
            )
        )
    matrix = np.hstack(matrices)
    boot = np.zeros((RESAMPLES, matrix.shape[1]))
    rng = np.random.default_rng([seed, zlib.crc32(region.encode())])
    kept = matrix.any(axis=1)  # tasks that add to no sum change no resample
    if fraction < 1.0:  # a subsample of the tasks (:func:`_fraction`)
        kept &= rng.random(len(matrix)) < fraction
    resampled = matrix[kept]
    for start, weights in _resample_weights(len(resampled), rng):
        boot[start : start + len(weights)] = weights @ resampled
    return _Sums(
        point=matrix.sum(axis=0),
        boot=boot,
        extra=np.stack(extras),
        members=set(part["config_key"].unique().to_list()),
        moments=np.vstack([usable.sum(axis=0), (q * usable).sum(axis=0), (q * q * usable).sum(axis=0)]),
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
    k = len(configs)
    width = _COLUMNS * k
    out = []
    for r, s in enumerate(refs):
        if s not in sums.members:
            continue
        tested = max(1, len(sums.members - {s}))
        pooled = _pooled(sums.moments)
        block = slice(r * width, (r + 1) * width)
        point = _statistic(sums.point[None, block], k, objective, constants)[0]
        boot = _statistic(sums.boot[:, block], k, objective, constants)
        w_c, w_s = sums.point[block][2 * k : 3 * k], sums.point[block][5 * k : 6 * k]
        sq_c, sq_s, runs_c, runs_s, paired, tasks, weighted, escalations = sums.extra[r]
        for j, c in enumerate(configs):
            if c == s or c not in sums.members:
                continue
            # effective samples of each side, (sum w)^2 / sum w^2; the pair has the smaller
            ess_c, ess_s = _ess(w_c[j], sq_c[j]), _ess(w_s[j], sq_s[j])
            ess = min(ess_c, ess_s)
            column = boot[:, j]
            finite = column[np.isfinite(column)]
            defined = min(runs_c[j], runs_s[j]) >= 1
            # Bonferroni over the members tested against s, and over the looks at growing evidence that matter
            # (its doublings: the test is retested every night)
            level = LOWER_QUANTILE / (tested * (1.0 + math.log2(max(ess, 1.0))))
            z = NormalDist().inv_cdf(1.0 - level)
            lower = None
            if ess >= 2 and finite.size:
                at = sums.point[block]
                quality = at[j] / w_c[j], at[3 * k + j] / w_s[j]
                cost = at[k + j] / w_c[j], at[4 * k + j] / w_s[j]
                normal = _normal_lower(pooled, (ess_c, ess_s), quality, cost, z, objective, constants)
                lower = min(_lower(finite, float(point[j]), level, sums.scale), normal)
            out.append(
                {
                    "region": region,
                    "config_key": c,
                    "against": s,
                    "shared_tasks": int(paired[j]),
                    "difference": float(point[j]) if defined else None,
                    "lower": lower,
                    "passes": ess >= int(constants.min_samples) - 1e-9 and lower is not None and lower > 0.0,
                    "tasks": int(tasks[j]),
                    "runs": int(runs_c[j]),
                    "static_runs": int(runs_s[j]),
                    "effective_samples": round(ess, 6),
                    "weighted": bool(weighted[j] > 0),
                    "escalations": int(escalations[j]),
                    "level": level,
                }
            )
    return out


def _lower(resampled: np.ndarray, estimate: float, level: float, scale: float) -> float:
    """The bootstrap's one-sided lower bound at ``level``: that quantile of the resampled differences; from a
    subsample (``scale`` < 1) the estimate plus ``scale`` times that quantile's distance from the resamples'
    median."""
    low = float(np.quantile(resampled, level))
    if scale == 1.0:
        return low
    return estimate + scale * (low - float(np.median(resampled)))


def _normal_lower(
    pooled: tuple[float, float],
    ess: tuple[float, float],
    quality: tuple[float, float],
    cost: tuple[float, float],
    z: float,
    objective: str,
    constants: Constants,
) -> float:
    """The normal bound under the bootstrap's (docs/design.md, Evidence gate): each side's mean quality shrunk to the
    region's pooled mean m with prior_weight k pseudo-samples, ``(n q + k m) / (n + k)``, the difference of the
    objective on them, less z times the least spread the estimate can have: the pooled within-config variance v
    over each side's effective samples n (a bootstrap of a few equal values has no spread at all): quality
    ``sqrt(v (1/n_c + 1/n_s))``, utility lambda times it, quality per dollar
    ``sqrt(v (1/(n_c cost_c^2) + 1/(n_s cost_s^2)))`` with each side's mean cost (floored)."""
    mean, variance = pooled
    k = float(constants.prior_weight)
    (n_c, n_s), (q_c, q_s) = ess, quality
    q_c, q_s = (n_c * q_c + k * mean) / (n_c + k), (n_s * q_s + k * mean) / (n_s + k)
    if objective == "quality_per_dollar":
        c_c, c_s = (max(c, float(constants.cost_floor_usd)) for c in cost)
        return q_c / c_c - q_s / c_s - z * math.sqrt(variance * (1 / (n_c * c_c**2) + 1 / (n_s * c_s**2)))
    scale = float(constants.lambda_ or 1.0) if objective == "utility" else 1.0
    diff = scale * (q_c - q_s) - ((cost[0] - cost[1]) if objective == "utility" else 0.0)
    return diff - z * scale * math.sqrt(variance * (1 / n_c + 1 / n_s))


def _pooled(moments: np.ndarray) -> tuple[float, float]:
    """The region's mean task value and its pooled within-config variance,
    sum_c (sum q^2 - (sum q)^2 / n_c) / sum_c (n_c - 1) over the configs with two or more values (0 without any)."""
    count, total, squares = moments
    many = count >= 2
    dof = float((count[many] - 1).sum())
    mean = float(total.sum() / count.sum()) if count.sum() else 0.0
    return mean, (max(float((squares[many] - total[many] ** 2 / count[many]).sum()) / dof, 0.0) if dof else 0.0)


def _ess(total: float, squares: float) -> float:
    """Effective samples of weights w: (sum w)^2 / sum w^2 (0 without any)."""
    return float(total * total / squares) if squares > 0 else 0.0


def _statistic(sums: np.ndarray, n_configs: int, objective: str, constants: Constants) -> np.ndarray:
    """The difference of each config against the static choice from its summed columns (rows: resamples;
    columns laid out as :func:`_region_sums` makes them): NaN where a resample leaves either side without weight.

    With the self-normalized means q_c = sum w_c q_c / sum w_c, cost_c = sum w_c cost_c / sum w_c (and so for s):
    quality per dollar ``q_c / max(cost_c, floor) - q_s / max(cost_s, floor)``; utility
    ``lambda (q_c - q_s) - (cost_c - cost_s)``; quality ``q_c - q_s``."""
    col = lambda k: sums[:, k * n_configs : (k + 1) * n_configs]  # noqa: E731 - the k-th column of every config
    with np.errstate(invalid="ignore", divide="ignore"):
        w_c, w_s = col(2), col(5)
        q_c, cost_c, q_s, cost_s = col(0) / w_c, col(1) / w_c, col(3) / w_s, col(4) / w_s
        if objective == "quality_per_dollar":
            floor = float(constants.cost_floor_usd)
            diff = q_c / np.maximum(cost_c, floor) - q_s / np.maximum(cost_s, floor)
        elif objective == "utility":
            diff = float(constants.lambda_ or 1.0) * (q_c - q_s) - (cost_c - cost_s)
        else:
            diff = q_c - q_s
    return np.where((w_c > 0) & (w_s > 0), diff, np.nan)


def member_gate(ctx: FitContext, part: Part, model: FittedModel, *, seed: int, writeback: bool = True) -> pl.DataFrame:
    """The gate's tests of the table fitted as ``model`` on ``part``: :func:`gate_evidence` of the part's task values
    of real ratings (under the model's half-life, costed by ``model``) against :func:`references`, leaving out
    the escalated pairs (the aggregation marks them from every attempt of the task) and the decisions' ``after``,
    with the part's logged decisions' propensities and candidates (:func:`logged_runs`; ``writeback`` False: the
    logged decisions are ignored, as everywhere in the fit)."""
    values = model.task_costs(ctx.values(part, model.constants.half_life_days, real=True))
    values = values.with_columns(
        pl.col("task").cast(pl.Int64), pl.col("config_key").cast(pl.String), pl.col("region").cast(pl.String)
    )
    escalated = values.filter(pl.col("escalated")).select("task", "config_key")
    return gate_evidence(
        values.rename({"cost_t": "cost"}),
        against=references(ctx.shipped.static, model),
        objective=model.effective_objective,
        constants=model.constants,
        escalated=escalated,
        logged=logged_runs(logged_decisions(ctx, part)) if writeback else None,
        seed=seed,
    )


def logged_decisions(ctx: FitContext, part: Part) -> pl.DataFrame:
    """The part's decisions (:meth:`FitContext.decisions_of`) as :func:`logged_runs` reads them: ``task, at, id,
    chosen, candidates, propensity, after_failed`` (tasks as the context's codes, configs as keys)."""
    candidates = ctx.candidates.group_by("decision").agg(candidates=pl.col("config").cast(pl.String).sort())
    return (
        ctx.decisions_of(part)
        .join(candidates, on="decision", how="left")
        .select(
            pl.col("task").cast(pl.Int64),
            "at",
            id="decision",
            chosen=pl.col("chosen").cast(pl.String),
            candidates="candidates",
            propensity="propensity",
            after_failed="after_failed",
        )
    )
