"""Escalation ladders: try a cheap configuration first, escalate only when its gate fails.

The run rule, the matrices and the search live in :mod:`pipeline.fit.ladder_search`. A task with an
unobserved needed rung is never counted as a success: it is left out of the quality and cost means and
lowers ``coverage`` = observed tasks / tasks.

Fitting (:func:`fit_ladders`) searches ladders on the learn frame (dominance pruning + Pareto beam, see
:func:`pipeline.fit.ladder_search.search_ladders`), then chooses among the learn-Pareto candidates on
the validation frame by the target rule, first for all tasks (``'*'``) and then per region, where a
region ladder replaces the global one only when validation shows it better by more than two standard
errors. :func:`pipeline.evaluate.ladders.ladders_section` reports the chosen ladders on held-out tasks for
``stats.json``.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict

from ..routing.table import Ladder
from .ladder_search import Run, Score, TaskMatrix, mean_or_none, run_ladder, score, search_ladders, task_matrix

DEFAULT_PASS_THRESHOLD = 0.5
#: A region gets its own search with at least this many learn and validation tasks.
MIN_REGION_TASKS = 30
#: "Better by more than its noise": a paired mean difference beyond this many standard errors.
NOISE_SE = 2.0
#: ... on at least this many validation tasks both ladders observed (fewer: the global ladder stays).
MIN_PAIRED = 10
_ROUND = 9
_EPS = 1e-12

Target = Literal["best-single", "budget"]


class LadderChoice(BaseModel):
    """The ladder used in one region (or ``'*'``) and its figures on the learn and validation tasks."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    region: str
    rungs: list[str]
    source: Literal["global", "region"]
    learned_quality: float | None
    learned_cost_usd: float | None
    validated_quality: float | None
    validated_cost_usd: float | None
    validated_calls: float | None
    validated_coverage: float
    validated_tasks: int
    target_quality: float | None  # the validated quality of the best single on the same tasks
    reason: str


class LadderFit(BaseModel):
    """Everything :func:`fit_ladders` decided; :func:`pipeline.evaluate.ladders.ladders_section` scores it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    target: Target
    budget_usd: float | None
    pass_threshold: float
    cost_known: bool
    gate_is_target: bool
    best_single: str | None
    ladders: dict[str, LadderChoice]  # '*' and every region searched (source says which one it uses)
    search: dict[str, Any]

    def published(self) -> dict[str, list[str]]:
        """The rungs each region uses: its own where it replaced the global ladder, ``'*'`` otherwise."""
        return {r: c.rungs for r, c in self.ladders.items() if r == "*" or c.source == "region"}


def gate_is_target(task_values: pl.DataFrame) -> bool:
    """True when every task value is its own gate: the gate ratings are the ratings that measure quality
    (imported benchmark tables). Ladder figures are then an upper bound for a perfect verifier."""
    rows = task_values.filter(pl.col("value").is_not_null())
    if rows.is_empty():
        return False
    return bool(rows.select(((pl.col("gate") - pl.col("value")).abs() <= 1e-12).fill_null(False).all()).item())


def _best_single(m: TaskMatrix, rows: np.ndarray) -> int | None:
    """Highest learned quality (mean task value on the learn rows); ties: lower spend, then key order."""
    obs = m.observed & rows[:, None]
    counts = obs.sum(axis=0)
    if not counts.any():
        return None
    with np.errstate(invalid="ignore"):
        q = np.where(obs, m.value, 0.0).sum(axis=0) / counts
        spend = np.where(obs, np.nan_to_num(m.cost, nan=0.0), 0.0).sum(axis=0) / counts
    order = sorted((j for j in range(len(m.configs)) if counts[j]), key=lambda j: (-q[j], spend[j], m.configs[j]))
    return order[0]


def _paired(a: Run, b: Run, rows: np.ndarray, cost_known: bool) -> dict[str, float]:
    """Means and standard errors of the per-task differences a - b on rows both observed."""
    ok = rows & a.observed & b.observed
    n = int(ok.sum())
    spend_a = a.cost if cost_known else a.calls.astype(float)
    spend_b = b.cost if cost_known else b.calls.astype(float)
    dq, dc = a.quality[ok] - b.quality[ok], spend_a[ok] - spend_b[ok]

    def se(d: np.ndarray) -> float:
        return float(np.std(d, ddof=1) / math.sqrt(d.size)) if d.size > 1 else math.inf

    return {
        "n": n,
        "qa": mean_or_none(a.quality[ok]),
        "qb": mean_or_none(b.quality[ok]),
        "dq": mean_or_none(dq) or 0.0,
        "dc": mean_or_none(dc) or 0.0,
        "se_q": se(dq),
        "se_c": se(dc),
    }


def _choose(
    m_val: TaskMatrix,
    rows: np.ndarray,
    candidates: list[tuple[int, ...]],
    singles: list[int],
    target: Target,
    budget: float | None,
    pass_threshold: float,
) -> tuple[tuple[int, ...], dict[str, Any], str]:
    """Apply the target rule on validation rows.

    ``best-single``: the cheapest candidate whose validated quality reaches, on the same tasks, the
    validated quality of every config in ``singles`` (the best single; in a region also the global best
    single, so a region ladder never aims lower than the figure the summary compares with). Ties: higher
    quality, fewer rungs, key order; the best single itself qualifies when it is the only one. A candidate
    shares at least ``MIN_PAIRED`` observed validation tasks with each single, else it is not judged.
    ``budget``: the best validated quality among candidates whose validated mean cost per task is within
    the budget (ties: lower cost, fewer rungs); the cheapest candidate when none is.
    """
    bases = [run_ladder(m_val, (j,), pass_threshold) for j in dict.fromkeys(singles)]
    rows_out = []
    for lad in candidates:
        run = run_ladder(m_val, lad, pass_threshold)
        pairs = [_paired(run, base, rows, m_val.cost_known) for base in bases]
        s = score(run, rows, m_val.cost_known)
        # "Reaches" is judged on at least MIN_PAIRED validation tasks shared with each best single: on a
        # handful of shared tasks a cheap ladder "reaches" by luck and loses on held-out.
        if min(p["n"] for p in pairs) < MIN_PAIRED or s.quality is None:
            continue
        reaches = all(p["qa"] >= p["qb"] - _EPS for p in pairs)
        rows_out.append((lad, s, {"reaches": reaches, "qb": max(p["qb"] for p in pairs)}))
    names = lambda lad: tuple(m_val.configs[j] for j in lad)  # noqa: E731 - a sort key
    if target == "best-single":
        ok = [r for r in rows_out if r[2]["reaches"]]
        pick = min(ok, key=lambda r: (r[1].spend, -r[1].quality, len(r[0]), names(r[0])), default=None)
        why = "cheapest validated ladder reaching the best single's validated quality"
    else:
        ok = [r for r in rows_out if r[1].cost is not None and r[1].cost <= budget + _EPS]
        pick = max(ok, key=lambda r: (r[1].quality, -r[1].spend, -len(r[0])), default=None)
        why = f"best validated quality within {budget} USD per task"
        if pick is None and rows_out:
            pick = min(rows_out, key=lambda r: (r[1].spend, -r[1].quality, len(r[0]), names(r[0])))
            why = f"no candidate within {budget} USD per task on validation: the cheapest one"
    if pick is None:
        return (
            (singles[0],),
            {"target_quality": None, "score": score(bases[0], rows, m_val.cost_known)},
            "no candidate observed on validation: the best single",
        )
    return pick[0], {"target_quality": pick[2]["qb"], "score": pick[1]}, why


def _choice(
    region: str,
    m_learn: TaskMatrix,
    m_val: TaskMatrix,
    learn_rows: np.ndarray,
    lad: tuple[int, ...],
    info: dict[str, Any],
    source: str,
    reason: str,
    pass_threshold: float,
) -> LadderChoice:
    learned = score(run_ladder(m_learn, lad, pass_threshold), learn_rows, m_learn.cost_known)
    s: Score = info["score"]
    return LadderChoice(
        region=region,
        rungs=[m_learn.configs[j] for j in lad],
        source=source,
        learned_quality=_r(learned.quality),
        learned_cost_usd=_r(learned.cost),
        validated_quality=_r(s.quality),
        validated_cost_usd=_r(s.cost),
        validated_calls=_r(s.calls),
        validated_coverage=_r(s.coverage) or 0.0,
        validated_tasks=s.n_observed,
        target_quality=_r(info["target_quality"]),
        reason=reason,
    )


def _r(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), _ROUND)


def fit_ladders(
    task_values_learn: pl.DataFrame,
    task_values_validation: pl.DataFrame,
    *,
    target: Target = "best-single",
    budget_usd: float | None = None,
    pass_threshold: float = DEFAULT_PASS_THRESHOLD,
    strategy: str = "beam",
    gate_is_target_override: bool | None = None,
) -> LadderFit:
    """Fit the global ladder and the per-region ladders (see the module docstring).

    ``task_values_learn`` / ``task_values_validation``: :func:`pipeline.fit.inputs.task_values` of the inner
    learn and validation parts of the learned tasks (DESIGN 6). ``target='budget'`` needs ``budget_usd``
    (mean cost per task). A region ladder replaces the global one only when, on the region's validation
    tasks both observed (at least ``MIN_PAIRED``), it is better by more than ``NOISE_SE`` standard errors
    of the paired difference:
    for ``budget``, in quality; for ``best-single``, in quality without costing more beyond the noise, or
    in cost while its quality reaches the region's and the global best single and is no lower than the
    global ladder's there (a cheaper ladder that loses quality is a different trade, not a better one).
    """
    if target == "budget" and budget_usd is None:
        raise ValueError("the budget ladder target needs budget_usd (mean cost per task)")
    configs = tuple(
        sorted(
            set(task_values_learn["config_key"].unique().to_list())
            | set(task_values_validation["config_key"].unique().to_list())
        )
    )
    m_learn = task_matrix(task_values_learn, configs)
    m_val = task_matrix(task_values_validation, configs)
    cost_known = m_learn.cost_known
    if not cost_known:  # spend is then the number of calls, on both sides
        m_val = TaskMatrix(
            m_val.tasks, m_val.regions, m_val.configs, m_val.value, m_val.gate, np.full_like(m_val.value, np.nan), False
        )
    if target == "budget" and not cost_known:
        raise ValueError("the budget ladder target needs costs, and these task values have none")
    git = gate_is_target(task_values_learn) if gate_is_target_override is None else gate_is_target_override
    ladders: dict[str, LadderChoice] = {}
    search_info: dict[str, Any] = {"strategy": strategy, "configs": len(configs)}

    def fit_rows(region: str, learn_rows: np.ndarray, val_rows: np.ndarray, also: list[int]):
        single = _best_single(m_learn, learn_rows)
        if single is None:
            return None
        found = search_ladders(m_learn, learn_rows, pass_threshold, strategy=strategy)
        lad, info, why = _choose(
            m_val, val_rows, [c for c, _ in found.candidates], [single, *also], target, budget_usd, pass_threshold
        )
        return single, found, lad, info, why

    all_learn = np.ones(len(m_learn.tasks), dtype=bool)
    all_val = np.ones(len(m_val.tasks), dtype=bool)
    fitted = fit_rows("*", all_learn, all_val, [])
    if fitted is None:
        return LadderFit(
            target=target,
            budget_usd=budget_usd,
            pass_threshold=pass_threshold,
            cost_known=cost_known,
            gate_is_target=git,
            best_single=None,
            ladders={},
            search=search_info,
        )
    single, found, global_lad, info, why = fitted
    ladders["*"] = _choice("*", m_learn, m_val, all_learn, global_lad, info, "global", why, pass_threshold)
    search_info.update(pruned=list(found.pruned), evaluated=found.evaluated, candidates=len(found.candidates))
    global_val = run_ladder(m_val, global_lad, pass_threshold)
    for region in sorted(set(m_learn.regions.tolist())):
        learn_rows, val_rows = m_learn.regions == region, m_val.regions == region
        if learn_rows.sum() < MIN_REGION_TASKS or val_rows.sum() < MIN_REGION_TASKS // 3:
            continue
        fitted = fit_rows(region, learn_rows, val_rows, [single])
        if fitted is None:
            continue
        _single, _found, lad, rinfo, rwhy = fitted
        p = _paired(run_ladder(m_val, lad, pass_threshold), global_val, val_rows, cost_known)
        better_q = p["n"] >= MIN_PAIRED and p["dq"] > NOISE_SE * p["se_q"]
        if target == "budget":
            better = better_q
        else:
            reached = rinfo["score"].quality or 0.0
            reaches = rinfo["target_quality"] is not None and reached >= rinfo["target_quality"] - _EPS
            better = (better_q and p["dc"] <= NOISE_SE * p["se_c"]) or (
                p["n"] >= MIN_PAIRED and p["dc"] < -NOISE_SE * p["se_c"] and p["dq"] >= 0.0 and reaches
            )
        paired = (
            f"paired on {p['n']} validation tasks: quality {p['dq']:+.4f} (se {p['se_q']:.4f}), "
            f"{'cost' if cost_known else 'calls'} {p['dc']:+.6g} (se {p['se_c']:.4g})"
        )
        if better and tuple(lad) != tuple(global_lad):
            ladders[region] = _choice(
                region,
                m_learn,
                m_val,
                learn_rows,
                lad,
                rinfo,
                "region",
                f"{rwhy}; beats the global ladder beyond 2 se, {paired}",
                pass_threshold,
            )
        else:
            ginfo = {"target_quality": rinfo["target_quality"], "score": score(global_val, val_rows, cost_known)}
            ladders[region] = _choice(
                region,
                m_learn,
                m_val,
                learn_rows,
                global_lad,
                ginfo,
                "global",
                f"the region's own ladder {[configs[j] for j in lad]} is not better beyond its noise ({paired})",
                pass_threshold,
            )
    return LadderFit(
        target=target,
        budget_usd=budget_usd,
        pass_threshold=pass_threshold,
        cost_known=cost_known,
        gate_is_target=git,
        best_single=configs[single],
        ladders=ladders,
        search=search_info,
    )


def table_ladders(fit: LadderFit) -> dict[str, Ladder]:
    """``{region: pipeline.routing.table.Ladder}`` for the routing table: ``'*'`` and replaced regions."""
    return {
        r: Ladder(
            rungs=c.rungs,
            pass_threshold=fit.pass_threshold,
            validated_quality=c.validated_quality,
            validated_cost_usd=c.validated_cost_usd,
        )
        for r, c in sorted(fit.ladders.items())
        if r == "*" or c.source == "region"
    }
