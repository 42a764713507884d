"""Escalation ladders: try a cheap configuration first, escalate only when its gate fails.

The run rule, the matrices and the search live in :mod:`pipeline.fit.ladder_search`. A task with an
unobserved needed rung is never counted as a success: it is left out of the quality and cost means and
lowers ``coverage`` = observed tasks / tasks.

Choosing the ladder (:func:`fit_ladders`, docs/design.md, Ladders) on the learned tasks, by a rule that survives
the noise of one validation split:

- **The rule, with a confidence level kappa.** Search ladders on some tasks (dominance pruning + Pareto beam,
  :func:`pipeline.fit.ladder_search.search_ladders`); among the candidates, take the cheapest whose paired
  quality gain over the best single configuration on those tasks clears kappa standard errors,
  ``mean(d) >= kappa * sd(d) / sqrt(n)`` with ``d = q_ladder - q_best`` per task both observed (at least
  ``MIN_PAIRED``); the best single itself always qualifies (d = 0).
- **kappa by repeated chronological cross-validation.** The learned tasks, in time order, are cut into ``FOLDS``
  blocks; fold k fits on blocks 1..k-1 (its own best single, its own search) and validates on block k. For each
  kappa of :data:`KAPPAS` the rule's choices are scored on the validation blocks, paired with each fold's best
  single, pooled over the folds. kappa is the smallest whose pooled difference has a one-sided 95% lower bound
  ``mean - 1.645 sd / sqrt(n)`` of at least 0 (and whose choices are not the best single in every fold); none:
  the best single alone. On a small or sparse table the bound is wide, so the rule asks for more or falls back
  to the best single; on a large one it may take a cheap ladder with confidence.
- **Then** the rule with that kappa on all learned tasks against the best single of the learned fit (the one
  the held-out summary compares with) gives the published global ladder. ``validated_*`` figures are the
  rule's pooled cross-validated figures: what it promises.

Per region (enough learned tasks): the rule on the region's tasks, aiming at the region's and the global best
single; its ladder replaces the global one only when, pooled over the same folds, it beats the global rule's
choice on the region's validation tasks by more than two standard errors (in quality without costing more
beyond the noise, or in cost while reaching the best singles and losing no quality).
The ``budget`` target takes the best quality within the budget (mean cost per task), cross-validated the same
way for its figures. :func:`pipeline.evaluate.ladders.ladders_section` reports the ladders on held-out tasks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict

from ..defaults import PASS_THRESHOLD
from ..routing.table import Ladder
from .kappa import KappaRow
from .ladder_search import LadderRun, TaskMatrix, mean_or_none, run_ladder, score, search_ladders, task_matrix

#: A region gets its own search with at least this many learned tasks.
MIN_REGION_TASKS = 30
#: "Better by more than its noise": a paired mean difference beyond this many standard errors.
NOISE_SE = 2.0
#: ... on at least this many validation tasks both ladders observed (fewer: the global ladder stays).
MIN_PAIRED = 10
#: Chronological blocks of the learned tasks; folds 2..FOLDS validate, each fitted on the blocks before it.
FOLDS = 5
#: The rule's confidence levels tried by the cross-validation (in standard errors of the paired gain).
KAPPAS = (-1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0)
#: z of a one-sided 95% bound.
Z95_ONE_SIDED = 1.6448536269514722
_ROUND = 9
_EPS = 1e-12

Target = Literal["best-single", "budget"]


class LadderChoice(BaseModel):
    """The ladder used in one region (or ``'*'``): its figures on all learned tasks (``learned_*``) and the rule's
    cross-validated figures on the validation blocks (``validated_*``, beside the best single's there,
    ``target_quality``)."""

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
    target_quality: float | None  # the cross-validated quality of the best single on the same tasks
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
    rule: dict[str, Any]  # the choosing rule in words, its kappa and the cross-validation rows (KappaRow)

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


@dataclass(frozen=True)
class _Candidate:
    """A searched ladder's figures on the fitting rows, paired with the best single(s) it must reach."""

    rungs: tuple[int, ...]
    spend: float
    quality: float
    gains: tuple[tuple[float, float], ...]  # per single: (mean paired quality gain, its standard error)

    def clears(self, kappa: float) -> bool:
        """The gain over every single is at least ``kappa`` standard errors."""
        return all(gain >= kappa * se - _EPS for gain, se in self.gains)


def _spend(run: LadderRun, cost_known: bool) -> np.ndarray:
    return run.cost if cost_known else run.calls.astype(float)


def _candidates(
    m: TaskMatrix, rows: np.ndarray, singles: list[int], pass_threshold: float, strategy: str
) -> tuple[list[_Candidate], Any]:
    """The search's candidates on ``rows`` with their paired gains over each of ``singles`` (the worst counts)."""
    found = search_ladders(m, rows, pass_threshold, strategy=strategy)
    bases = [run_ladder(m, (j,), pass_threshold) for j in dict.fromkeys(singles)]
    out = []
    for lad, s in found.candidates:
        run = run_ladder(m, lad, pass_threshold)
        diffs = [run.quality[ok] - base.quality[ok] for base in bases for ok in [rows & run.observed & base.observed]]
        if s.quality is not None and all(d.size >= MIN_PAIRED for d in diffs):  # judged on enough shared tasks
            out.append(_Candidate(lad, s.spend, s.quality, tuple((float(d.mean()), _se(d)) for d in diffs)))
    return out, found


def _pick(cands: list[_Candidate], kappa: float, fallback: int, configs: tuple[str, ...]) -> tuple[int, ...]:
    """The rule: the cheapest candidate whose gain clears ``kappa`` standard errors (ties: higher quality, fewer
    rungs, key order); the best single ``fallback`` when none does or kappa is infinite."""
    if math.isinf(kappa):
        return (fallback,)
    ok = [c for c in cands if c.clears(kappa)]
    best = min(ok, key=lambda c: (c.spend, -c.quality, len(c.rungs), [configs[j] for j in c.rungs]), default=None)
    return best.rungs if best is not None else (fallback,)


def _pick_budget(cands: list[_Candidate], budget: float, fallback: int) -> tuple[int, ...]:
    """Best quality among candidates whose mean cost is within ``budget`` (ties: lower cost, fewer rungs); the
    cheapest candidate when none is."""
    ok = [c for c in cands if c.spend <= budget + _EPS]
    best = max(ok, key=lambda c: (c.quality, -c.spend, -len(c.rungs)), default=None)
    if best is None:
        best = min(cands, key=lambda c: (c.spend, -c.quality, len(c.rungs)), default=None)
    return best.rungs if best is not None else (fallback,)


@dataclass(frozen=True)
class _Fold:
    """One fold of the cross-validation: what its fitting blocks chose, for the validation block to score."""

    fit: np.ndarray
    val: np.ndarray
    single: int
    cands: list[_Candidate]


def _time_blocks(m: TaskMatrix, order: dict[str, int] | None) -> np.ndarray:
    """Each matrix row's chronological block 0..FOLDS-1 (equal counts; by task time, else by task id)."""
    n = len(m.tasks)
    rank = np.arange(n) if order is None else np.argsort(np.argsort([order.get(t, n) for t in m.tasks], kind="stable"))
    return np.minimum((rank * FOLDS) // max(n, 1), FOLDS - 1)


def _folds(m: TaskMatrix, blocks: np.ndarray, pass_threshold: float, strategy: str) -> list[_Fold]:
    """Fold k (1..FOLDS-1): fit on the blocks before k (its best single, its search), validate on block k."""
    out = []
    for k in range(1, FOLDS):
        fit, val = blocks < k, blocks == k
        single = _best_single(m, fit)
        if single is None or not val.any():
            continue
        cands, _ = _candidates(m, fit, [single], pass_threshold, strategy)
        out.append(_Fold(fit, val, single, cands))
    return out


def _pooled(m: TaskMatrix, folds: list[_Fold], choices: list[tuple[int, ...]], pass_threshold: float) -> dict[str, Any]:
    """The choices (one ladder per fold, in the folds' order) scored on each validation block against the fold's
    best single, pooled: per-task quality and spend differences and the figures of both."""
    d, ds, q, sp, calls, qb, seen, total, ladders = [], [], [], [], [], [], 0, 0, 0
    for f, rungs in zip(folds, choices, strict=True):
        ladders += rungs != (f.single,)
        run, base = run_ladder(m, rungs, pass_threshold), run_ladder(m, (f.single,), pass_threshold)
        ok = f.val & run.observed & base.observed
        total += int(f.val.sum())
        seen += int((f.val & run.observed).sum())
        d.append(run.quality[ok] - base.quality[ok])
        ds.append(_spend(run, m.cost_known)[ok] - _spend(base, m.cost_known)[ok])
        q.append(run.quality[ok])
        sp.append(run.cost[ok])
        calls.append(run.calls[ok].astype(float))
        qb.append(base.quality[ok])
    cat = lambda xs: np.concatenate(xs) if xs else np.empty(0)  # noqa: E731 - a local shorthand
    diff = cat(d)
    lower = float(diff.mean() - Z95_ONE_SIDED * np.std(diff, ddof=1) / math.sqrt(diff.size)) if diff.size > 1 else None
    return {
        "tasks": int(diff.size),
        "difference": mean_or_none(diff),
        "lower": lower,
        "spend_difference": mean_or_none(cat(ds)),
        "ladders": ladders,
        "quality": mean_or_none(cat(q)),
        "cost": mean_or_none(cat(sp)) if m.cost_known else None,
        "calls": mean_or_none(cat(calls)),
        "coverage": seen / total if total else 0.0,
        "target": mean_or_none(cat(qb)),
    }


def _choice(
    region: str,
    m: TaskMatrix,
    rows: np.ndarray,
    rungs: tuple[int, ...],
    validated: dict[str, Any],
    source: Literal["global", "region"],
    reason: str,
    pass_threshold: float,
) -> LadderChoice:
    learned = score(run_ladder(m, rungs, pass_threshold), rows, m.cost_known)
    return LadderChoice(
        region=region,
        rungs=[m.configs[j] for j in rungs],
        source=source,
        learned_quality=_r(learned.quality),
        learned_cost_usd=_r(learned.cost),
        validated_quality=_r(validated["quality"]),
        validated_cost_usd=_r(validated["cost"]),
        validated_calls=_r(validated["calls"]),
        validated_coverage=_r(validated["coverage"]) or 0.0,
        validated_tasks=validated["tasks"],
        target_quality=_r(validated["target"]),
        reason=reason,
    )


def _r(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), _ROUND)


def _kappa_row(
    m: TaskMatrix, folds: list[_Fold], kappa: float, configs: tuple[str, ...], pass_threshold: float
) -> KappaRow:
    """The rule at ``kappa``, cross-validated: its choices in the folds against each fold's best single."""

    pooled = _pooled(m, folds, [_pick(f.cands, kappa, f.single, configs) for f in folds], pass_threshold)
    return KappaRow(kappa=kappa, **{k: v for k, v in pooled.items() if k in KappaRow.model_fields})


def _kappa(rows: list[KappaRow]) -> float:
    """The smallest kappa whose cross-validated choices beat the best single (lower bound >= 0) and are not the
    best single in every fold; infinity (the best single alone) when none."""
    return next((r.kappa for r in rows if r.ladders and r.lower is not None and r.lower >= -_EPS), math.inf)


def _task_order(task_values_learned: pl.DataFrame) -> dict[Any, int] | None:
    """Each task's place in time (by its first rating, then id) for the chronological folds; None without times."""
    if "first_at" not in task_values_learned.columns:
        return None
    times = task_values_learned.group_by("task").agg(pl.col("first_at").min()).sort("first_at", "task")
    return {t: i for i, t in enumerate(times["task"].to_list())}


@dataclass(frozen=True)
class _Rule:
    """The rule's choice on all learned tasks and what its choices did on the folds' validation blocks."""

    kappa: float | None  # None: the budget target
    rows: list[KappaRow]  # the cross-validation per confidence level (best-single target)
    rungs: tuple[int, ...]
    validated: dict[str, Any]
    reason: str
    pick: Callable[[list[_Candidate], int], tuple[int, ...]]  # the rule on a candidate list, with its fallback


def _rule(
    m: TaskMatrix,
    folds: list[_Fold],
    cands: list[_Candidate],
    single: int,
    configs: tuple[str, ...],
    *,
    target: Target,
    budget_usd: float | None,
    pass_threshold: float,
) -> _Rule:
    """The budget rule (best quality within the budget) or the best-single rule with its kappa cross-validated."""
    if target == "budget":
        budget = float(budget_usd or 0.0)

        def within(cs: list[_Candidate], fallback: int) -> tuple[int, ...]:
            return _pick_budget(cs, budget, fallback)

        validated = _pooled(m, folds, [within(f.cands, f.single) for f in folds], pass_threshold)
        reason = f"best quality within {budget_usd} USD per task on the learned tasks"
        return _Rule(None, [], within(cands, single), validated, reason, within)
    rows = [_kappa_row(m, folds, k, configs, pass_threshold) for k in KAPPAS]
    kappa = _kappa(rows)

    def pick(cs: list[_Candidate], fallback: int) -> tuple[int, ...]:
        return _pick(cs, kappa, fallback, configs)

    validated = _pooled(m, folds, [pick(f.cands, f.single) for f in folds], pass_threshold)
    return _Rule(kappa, rows, pick(cands, single), validated, _rule_reason(kappa, rows, configs[single]), pick)


def fit_ladders(
    task_values_learned: pl.DataFrame,
    *,
    target: Target = "best-single",
    budget_usd: float | None = None,
    pass_threshold: float = PASS_THRESHOLD,
    strategy: str = "beam",
    best_single: str | None = None,
    gate_is_target_override: bool | None = None,
) -> LadderFit:
    """Fit the global ladder and the per-region ladders (see the module docstring).

    ``task_values_learned``: :meth:`pipeline.fit.context.FitContext.values` of the learned tasks (costed), with
    ``first_at`` for the chronological folds (else task ids give the order). ``best_single``: the configuration
    the ladders must reach (the learned fit's highest quality, which the held-out summary compares with);
    None: the highest mean task value. ``target='budget'`` needs ``budget_usd`` (mean cost per task).
    """
    if target == "budget" and budget_usd is None:
        raise ValueError("the budget ladder target needs budget_usd (mean cost per task)")
    configs = tuple(sorted(task_values_learned["config_key"].unique().to_list()))
    m = task_matrix(task_values_learned, configs)
    cost_known = m.cost_known
    if target == "budget" and not cost_known:
        raise ValueError("the budget ladder target needs costs, and these task values have none")
    git = gate_is_target(task_values_learned) if gate_is_target_override is None else gate_is_target_override
    order = _task_order(task_values_learned)
    blocks = _time_blocks(m, order)
    every = np.ones(len(m.tasks), dtype=bool)
    single = configs.index(best_single) if best_single in configs else _best_single(m, every)
    search_info: dict[str, Any] = {"strategy": strategy, "configs": len(configs)}
    empty = LadderFit(
        target=target,
        budget_usd=budget_usd,
        pass_threshold=pass_threshold,
        cost_known=cost_known,
        gate_is_target=git,
        best_single=None,
        ladders={},
        search=search_info,
        rule={},
    )
    if single is None:
        return empty
    folds = _folds(m, blocks, pass_threshold, strategy)
    cands, found = _candidates(m, every, [single], pass_threshold, strategy)
    search_info.update(pruned=list(found.pruned), evaluated=found.evaluated, candidates=len(found.candidates))
    r = _rule(m, folds, cands, single, configs, target=target, budget_usd=budget_usd, pass_threshold=pass_threshold)
    kappa, rows, rungs, validated, reason, rule = r.kappa, r.rows, r.rungs, r.validated, r.reason, r.pick
    ladders = {"*": _choice("*", m, every, rungs, validated, "global", reason, pass_threshold)}
    for region in sorted(set(m.regions.tolist())):
        region_rows = m.regions == region
        if region_rows.sum() < MIN_REGION_TASKS:
            continue
        ladders[region] = _region_choice(
            region, m, region_rows, single, rungs, folds, rule, pass_threshold, strategy, target
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
        rule={
            "name": target,
            "folds": len(folds),
            "kappa": None if kappa is None or math.isinf(kappa) else kappa,
            "kappas": [r.model_dump() for r in rows],
            "reason": reason,
        },
    )


def _rule_reason(kappa: float, rows: list[KappaRow], single: str) -> str:
    folds = f"{FOLDS - 1}-fold chronological cross-validation over the learned tasks"
    if math.isinf(kappa):
        return (
            f"the best single {single} alone: at no confidence level did the rule's ladders beat it on the "
            f"validation blocks of {folds} with a one-sided 95% lower bound of at least 0"
        )
    row = next(r for r in rows if r.kappa == kappa)
    return (
        f"the cheapest ladder whose paired quality gain over the best single {single} on the learned tasks is at "
        f"least {kappa:g} standard errors; {kappa:g} is the smallest level at which the rule's ladders beat the "
        f"best single on the validation blocks of {folds}: difference {row.difference:+.4f}, one-sided 95% lower "
        f"bound {row.lower:+.4f} >= 0 on {row.tasks} tasks"
    )


def _region_choice(
    region: str,
    m: TaskMatrix,
    region_rows: np.ndarray,
    single: int,
    global_rungs: tuple[int, ...],
    folds: list[_Fold],
    rule: Callable[[list[_Candidate], int], tuple[int, ...]],
    pass_threshold: float,
    strategy: str,
    target: Target,
) -> LadderChoice:
    """The region's own ladder when, pooled over the folds, the rule on the region's tasks beats the global
    rule's choice on the region's validation tasks beyond the noise (module docstring); else the global ladder,
    with the comparison in its reason. ``validated_*``: the winning rule's fold choices on the region's
    validation tasks."""

    def regional(fit: np.ndarray, fold_single: int) -> tuple[int, ...]:
        own_single = _best_single(m, fit)
        singles = [fold_single] if own_single is None else [own_single, fold_single]
        cands, _ = _candidates(m, fit, singles, pass_threshold, strategy)
        return rule(cands, own_single if own_single is not None else fold_single)

    own = regional(region_rows, single)
    local = [
        _Fold(f.fit & region_rows, f.val & region_rows, f.single, f.cands)
        for f in folds
        if (f.fit & region_rows).sum() >= MIN_PAIRED and (f.val & region_rows).any()
    ]
    # The two rules' choices per fold, in the folds' order.
    mine = [regional(f.fit, f.single) for f in local]
    theirs = [rule(f.cands, f.single) for f in local]
    dq, dc = [], []
    for f, own_rungs, global_choice in zip(local, mine, theirs, strict=True):
        a, b = run_ladder(m, own_rungs, pass_threshold), run_ladder(m, global_choice, pass_threshold)
        ok = f.val & a.observed & b.observed
        dq.append(a.quality[ok] - b.quality[ok])
        dc.append(_spend(a, m.cost_known)[ok] - _spend(b, m.cost_known)[ok])
    q = np.concatenate(dq) if dq else np.empty(0)
    c = np.concatenate(dc) if dc else np.empty(0)
    n = q.size
    mq, mc, se_q, se_c = mean_or_none(q) or 0.0, mean_or_none(c) or 0.0, _se(q), _se(c)
    validated_own = _pooled(m, local, mine, pass_threshold)
    better_q = n >= MIN_PAIRED and mq > NOISE_SE * se_q
    if target == "budget":
        better = better_q
    else:
        reaches = (validated_own["difference"] or 0.0) >= 0.0
        cheaper = n >= MIN_PAIRED and mc < -NOISE_SE * se_c and mq >= 0.0 and reaches
        better = (better_q and mc <= NOISE_SE * se_c) or cheaper
    paired = (
        f"pooled over {len(local)} folds on {n} validation tasks: quality {mq:+.4f} (se {se_q:.4f}), "
        f"{'cost' if m.cost_known else 'calls'} {mc:+.6g} (se {se_c:.4g})"
    )
    if better and own != global_rungs:
        why = f"its own ladder beats the global one beyond {NOISE_SE:g} se, {paired}"
        return _choice(region, m, region_rows, own, validated_own, "region", why, pass_threshold)
    validated = _pooled(m, local, theirs, pass_threshold)
    names = [m.configs[j] for j in own]
    why = f"the region's own ladder {names} is not better beyond its noise ({paired})"
    return _choice(region, m, region_rows, global_rungs, validated, "global", why, pass_threshold)


def _se(d: np.ndarray) -> float:
    """Standard error of a mean difference; infinite below two values (never "beyond the noise")."""
    return float(np.std(d, ddof=1) / math.sqrt(d.size)) if d.size > 1 else math.inf


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
