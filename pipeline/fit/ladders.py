"""Escalation ladders: try a cheap configuration first, escalate only when its gate fails.

The run rule, the matrices and the search live in :mod:`pipeline.fit.ladder_search`, which runs a ladder on a
dispatcher's logs as well as on a full-information table: rung 1 from first runs only, each later rung from the
outcomes its earlier rungs' failures imply, a needed rung not seen completed from the tasks that saw it. A task
whose ladder cannot be estimated is left out of the means and lowers ``coverage`` = observed tasks / tasks.

Choosing the ladder (:func:`fit_ladders`, docs/design.md, Ladders) on the learned tasks, by a rule that survives
the noise of one validation split, on the objective's :class:`~pipeline.fit.ladder_search.Measure` (a value per
task and the spend it leaves out: quality and money under quality per dollar, utility and configs run under
utility, quality and configs run under quality):

- **The best single**: the config of the highest mean value over its first runs (at least ``MIN_PAIRED`` of
  them when any config has that many); an escalation outcome never counts for it.
- **The rule, with a confidence level kappa.** Search ladders on some tasks (dominance pruning + Pareto beam,
  :func:`pipeline.fit.ladder_search.search_ladders`); among the candidates, take the one of least spend whose
  gain in value over the best single clears kappa standard errors, ``gain >= kappa * se``; ``gain`` is the
  difference of the two means, each over the tasks where it is observed (at least ``MIN_PAIRED`` each), and
  ``se`` its standard error counting the tasks both observed as paired (:func:`gain`: on a full-information
  table, the paired difference); the best single itself always qualifies (gain 0) where the spend is money;
  where it is configs run (a single always spends least) only a candidate with a gain above 0 does.
- **kappa by repeated chronological cross-validation.** The learned tasks, in time order, are cut into ``FOLDS``
  blocks; fold k fits on blocks 1..k-1 (its own best single, its own search) and validates on block k. For each
  kappa of :data:`KAPPAS` the rule's choices are scored on the validation blocks against each fold's best
  single, pooled over the folds. kappa is the smallest whose pooled gain has a one-sided 95% lower bound
  ``gain - 1.645 se`` of at least 0 (and whose choices are not the best single in every fold); none: the best
  single alone. On a small or sparse table the bound is wide, so the rule asks for more or falls back to the
  best single; on a large one it may take a cheap ladder with confidence.
- **Then** the rule with that kappa on all learned tasks gives the published global ladder. ``validated_*``
  figures are the rule's pooled cross-validated figures: what it promises.

Per region (enough learned tasks): the rule on the region's tasks, aiming at the region's and the global best
single; its ladder replaces the global one only when, pooled over the same folds, it beats the global rule's
choice on the region's validation tasks by more than two standard errors (in value without spending more
beyond the noise, or in spend while reaching the best singles and losing no value).
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
from .ladder_search import (
    QUALITY,
    LadderRun,
    Measure,
    TaskMatrix,
    mean_or_none,
    run_ladder,
    score,
    search_ladders,
    task_matrix,
)

#: A region gets its own search with at least this many learned tasks.
MIN_REGION_TASKS = 30
#: "Better by more than its noise": a mean difference beyond this many standard errors.
NOISE_SE = 2.0
#: ... each side observed on at least this many tasks (fewer: not judged; the global ladder stays).
MIN_PAIRED = 10
#: Chronological blocks of the learned tasks; folds 2..FOLDS validate, each fitted on the blocks before it.
FOLDS = 5
#: The rule's confidence levels tried by the cross-validation (in standard errors of the gain).
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


def ladder_measure(objective: str, lambda_: float | None) -> Measure:
    """The :class:`~pipeline.fit.ladder_search.Measure` of a fit's objective (utility needs its lambda)."""
    if objective != "utility":
        return Measure(objective)
    if lambda_ is None:
        raise ValueError("the utility objective needs lambda to judge ladders")
    return Measure(objective, float(lambda_))


@dataclass(frozen=True)
class Gain:
    """Mean value of ``a`` minus that of ``b``, each over the tasks where it is observed, with its standard error.

    ``var = var_a / n_a + var_b / n_b - 2 cov_ab n_ab / (n_a n_b)`` (cov over the n_ab tasks both observed,
    about each side's own mean): the variance of a difference of two means over overlapping samples of tasks.
    Where both are observed on the same tasks it is the paired ``var(a - b) / n``."""

    difference: float
    se: float
    n_a: int
    n_b: int

    @property
    def judged(self) -> bool:
        return min(self.n_a, self.n_b) >= MIN_PAIRED

    @property
    def lower(self) -> float:
        """The one-sided 95% lower bound."""
        return self.difference - Z95_ONE_SIDED * self.se


def gain(a: np.ndarray, seen_a: np.ndarray, b: np.ndarray, seen_b: np.ndarray) -> Gain:
    """:class:`Gain` of the per-task values ``a`` over ``b`` (NaN where unobserved never read)."""
    na, nb = int(seen_a.sum()), int(seen_b.sum())
    if not na or not nb:
        return Gain(math.nan, math.inf, na, nb)
    if np.array_equal(seen_a, seen_b):  # the same tasks: the paired difference (the formula below, exactly)
        d = a[seen_a] - b[seen_b]
        return Gain(float(d.mean()), float(np.std(d, ddof=1) / math.sqrt(na)) if na > 1 else math.inf, na, nb)
    xa, xb = a[seen_a], b[seen_b]
    ma, mb = float(xa.mean()), float(xb.mean())
    if na < 2 or nb < 2:
        return Gain(ma - mb, math.inf, na, nb)
    both = seen_a & seen_b
    nab = int(both.sum())
    cov = float(((a[both] - ma) * (b[both] - mb)).sum() / (nab - 1)) if nab > 1 else 0.0
    var = float(np.var(xa, ddof=1)) / na + float(np.var(xb, ddof=1)) / nb - 2.0 * cov * nab / (na * nb)
    return Gain(ma - mb, math.sqrt(max(var, 0.0)), na, nb)


def _best_single(m: TaskMatrix, rows: np.ndarray, measure: Measure, pass_threshold: float) -> int | None:
    """Highest mean value over first runs on ``rows`` among the configs with at least ``MIN_PAIRED`` of them (none:
    among those with any); ties: lower spend, then key order."""
    scored = []
    for j in range(len(m.configs)):
        s = score(run_ladder(m, (j,), pass_threshold, rows), rows, m.cost_known, measure)
        if s.n_observed and s.value is not None:
            scored.append((s.n_observed >= MIN_PAIRED, s.value, s.spend, j))
    if not scored:
        return None
    enough = max(x[0] for x in scored)
    return min((x for x in scored if x[0] == enough), key=lambda x: (-x[1], x[2], m.configs[x[3]]))[3]


@dataclass(frozen=True)
class _Candidate:
    """A searched ladder's figures on the fitting rows, with its gain over the best single(s) it must reach."""

    rungs: tuple[int, ...]
    spend: float
    value: float
    gains: tuple[Gain, ...]  # one per single

    def clears(self, kappa: float) -> bool:
        """The gain over every single is at least ``kappa`` standard errors."""
        return all(g.difference >= kappa * g.se - _EPS for g in self.gains)


@dataclass(frozen=True)
class _Judge:
    """What one fit judges ladders with: the matrix, the gate's pass mark, the measure and the search strategy."""

    m: TaskMatrix
    pass_threshold: float
    measure: Measure
    strategy: str

    def run(self, rungs: tuple[int, ...], rows: np.ndarray) -> LadderRun:
        return run_ladder(self.m, rungs, self.pass_threshold, rows)

    @property
    def gain_only(self) -> bool:
        """The spend is configs run: a ladder is adopted for a gain alone (:func:`_pick`)."""
        return self.measure.spends_calls(self.m.cost_known)

    def value(self, run: LadderRun) -> np.ndarray:
        return self.measure.value(run, self.m.cost_known)

    def spend(self, run: LadderRun) -> np.ndarray:
        return self.measure.spend(run, self.m.cost_known)

    def gain(self, a: LadderRun, b: LadderRun) -> Gain:
        return gain(self.value(a), a.observed, self.value(b), b.observed)

    def best_single(self, rows: np.ndarray) -> int | None:
        return _best_single(self.m, rows, self.measure, self.pass_threshold)

    def candidates(self, rows: np.ndarray, singles: list[int]) -> tuple[list[_Candidate], Any]:
        """The search's candidates on ``rows`` with their gains over each of ``singles`` (the worst counts)."""
        found = search_ladders(self.m, rows, self.pass_threshold, strategy=self.strategy, measure=self.measure)
        bases = [self.run((j,), rows) for j in dict.fromkeys(singles)]
        out = []
        for lad, s in found.candidates:
            run = self.run(lad, rows)
            gains = tuple(self.gain(run, base) for base in bases)
            if s.value is not None and all(g.judged for g in gains):  # judged on enough tasks
                out.append(_Candidate(lad, s.spend, s.value, gains))
        return out, found


def _pick(
    cands: list[_Candidate], kappa: float, fallback: int, configs: tuple[str, ...], gain_only: bool
) -> tuple[int, ...]:
    """The rule: the candidate of least spend whose gain clears ``kappa`` standard errors (ties: higher value,
    fewer rungs, key order); the best single ``fallback`` when none does or kappa is infinite. ``gain_only`` (the
    spend is configs run, where the best single always spends least): only a candidate whose gain is above 0."""
    if math.isinf(kappa):
        return (fallback,)
    ok = [c for c in cands if c.clears(kappa) and (not gain_only or min(g.difference for g in c.gains) > _EPS)]
    best = min(ok, key=lambda c: (c.spend, -c.value, len(c.rungs), [configs[j] for j in c.rungs]), default=None)
    return best.rungs if best is not None else (fallback,)


def _pick_budget(cands: list[_Candidate], budget: float, fallback: int) -> tuple[int, ...]:
    """Best quality among candidates whose mean cost is within ``budget`` (ties: lower cost, fewer rungs); the
    cheapest candidate when none is."""
    ok = [c for c in cands if c.spend <= budget + _EPS]
    best = max(ok, key=lambda c: (c.value, -c.spend, -len(c.rungs)), default=None)
    if best is None:
        best = min(cands, key=lambda c: (c.spend, -c.value, len(c.rungs)), default=None)
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


def _folds(judge: _Judge, blocks: np.ndarray) -> list[_Fold]:
    """Fold k (1..FOLDS-1): fit on the blocks before k (its best single, its search), validate on block k."""
    out = []
    for k in range(1, FOLDS):
        fit, val = blocks < k, blocks == k
        single = judge.best_single(fit)
        if single is None or not val.any():
            continue
        cands, _ = judge.candidates(fit, [single])
        out.append(_Fold(fit, val, single, cands))
    return out


def _stacked(runs: list[LadderRun]) -> LadderRun:
    """Runs on disjoint validation blocks, one after the other (a pooled sample of tasks; none: no task)."""

    def cat(xs: list[np.ndarray], dtype: type = float) -> np.ndarray:
        return np.concatenate(xs) if xs else np.empty(0, dtype=dtype)

    return LadderRun(
        quality=cat([r.quality for r in runs]),
        cost=cat([r.cost for r in runs]),
        calls=cat([r.calls for r in runs]),
        stop=cat([r.stop for r in runs], np.int64),
        observed=cat([r.observed for r in runs], bool),
    )


def _pooled(judge: _Judge, folds: list[_Fold], choices: list[tuple[int, ...]]) -> dict[str, Any]:
    """The choices (one ladder per fold, in the folds' order) run on each validation block (its own tasks alone)
    against the fold's best single, pooled: the gain in value, the spend difference and the figures of both."""
    runs = _stacked([judge.run(rungs, f.val) for f, rungs in zip(folds, choices, strict=True)])
    base = _stacked([judge.run((f.single,), f.val) for f in folds])
    g = judge.gain(runs, base)
    spent = gain(judge.spend(runs), runs.observed, judge.spend(base), base.observed)
    total = sum(int(f.val.sum()) for f in folds)
    seen = runs.observed
    return {
        "tasks": g.n_a,
        "difference": None if math.isnan(g.difference) else g.difference,
        "lower": g.lower if g.n_a > 1 and g.n_b > 1 else None,
        "spend_difference": None if math.isnan(spent.difference) else spent.difference,
        "ladders": sum(rungs != (f.single,) for f, rungs in zip(folds, choices, strict=True)),
        "quality": mean_or_none(runs.quality[seen]),
        "cost": mean_or_none(runs.cost[seen]) if judge.m.cost_known else None,
        "calls": mean_or_none(runs.calls[seen]),
        "coverage": int(seen.sum()) / total if total else 0.0,
        "target": mean_or_none(base.quality[base.observed]),
    }


def _choice(
    judge: _Judge,
    region: str,
    rows: np.ndarray,
    rungs: tuple[int, ...],
    validated: dict[str, Any],
    source: Literal["global", "region"],
    reason: str,
) -> LadderChoice:
    learned = score(judge.run(rungs, rows), rows, judge.m.cost_known)
    return LadderChoice(
        region=region,
        rungs=[judge.m.configs[j] for j in rungs],
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


def _kappa_row(judge: _Judge, folds: list[_Fold], kappa: float) -> KappaRow:
    """The rule at ``kappa``, cross-validated: its choices in the folds against each fold's best single."""
    pooled = _pooled(judge, folds, [_pick(f.cands, kappa, f.single, judge.m.configs, judge.gain_only) for f in folds])
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
    judge: _Judge,
    folds: list[_Fold],
    cands: list[_Candidate],
    single: int,
    *,
    target: Target,
    budget_usd: float | None,
) -> _Rule:
    """The budget rule (best quality within the budget) or the best-single rule with its kappa cross-validated."""
    if target == "budget":
        budget = float(budget_usd or 0.0)

        def within(cs: list[_Candidate], fallback: int) -> tuple[int, ...]:
            return _pick_budget(cs, budget, fallback)

        validated = _pooled(judge, folds, [within(f.cands, f.single) for f in folds])
        reason = f"best quality within {budget_usd} USD per task on the learned tasks"
        return _Rule(None, [], within(cands, single), validated, reason, within)
    rows = [_kappa_row(judge, folds, k) for k in KAPPAS]
    kappa = _kappa(rows)

    def pick(cs: list[_Candidate], fallback: int) -> tuple[int, ...]:
        return _pick(cs, kappa, fallback, judge.m.configs, judge.gain_only)

    validated = _pooled(judge, folds, [pick(f.cands, f.single) for f in folds])
    reason = _rule_reason(kappa, rows, judge.m.configs[single], judge.measure, judge.m.cost_known)
    return _Rule(kappa, rows, pick(cands, single), validated, reason, pick)


def fit_ladders(
    task_values_learned: pl.DataFrame,
    *,
    target: Target = "best-single",
    budget_usd: float | None = None,
    pass_threshold: float = PASS_THRESHOLD,
    strategy: str = "beam",
    best_single: str | None = None,
    gate_is_target_override: bool | None = None,
    measure: Measure = QUALITY,
) -> LadderFit:
    """Fit the global ladder and the per-region ladders (see the module docstring).

    ``task_values_learned``: :meth:`pipeline.fit.context.FitContext.values` of the learned tasks (costed), with
    ``first_at`` for the chronological folds (else task ids give the order) and ``after`` where outcomes came after
    failures (:func:`pipeline.fit.ladder_search.task_matrix`). ``best_single``: the configuration the ladders must
    reach; None: the best single of the module docstring. ``target='budget'`` needs ``budget_usd`` (mean cost per
    task) and judges by quality whatever ``measure`` says. ``measure``: :func:`ladder_measure` of the objective.
    """
    if target == "budget" and budget_usd is None:
        raise ValueError("the budget ladder target needs budget_usd (mean cost per task)")
    configs = tuple(sorted(task_values_learned["config_key"].unique().to_list()))
    m = task_matrix(task_values_learned, configs)
    cost_known = m.cost_known
    if target == "budget" and not cost_known:
        raise ValueError("the budget ladder target needs costs, and these task values have none")
    judge = _Judge(m, pass_threshold, QUALITY if target == "budget" else measure, strategy)
    git = gate_is_target(task_values_learned) if gate_is_target_override is None else gate_is_target_override
    blocks = _time_blocks(m, _task_order(task_values_learned))
    every = np.ones(len(m.tasks), dtype=bool)
    single = configs.index(best_single) if best_single in configs else judge.best_single(every)
    search_info: dict[str, Any] = {"strategy": strategy, "configs": len(configs)}
    fit = LadderFit(
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
        return fit
    folds = _folds(judge, blocks)
    cands, found = judge.candidates(every, [single])
    search_info.update(pruned=list(found.pruned), evaluated=found.evaluated, candidates=len(found.candidates))
    r = _rule(judge, folds, cands, single, target=target, budget_usd=budget_usd)
    ladders = {"*": _choice(judge, "*", every, r.rungs, r.validated, "global", r.reason)}
    for region in sorted(set(m.regions.tolist())):
        region_rows = m.regions == region
        if region_rows.sum() >= MIN_REGION_TASKS:
            ladders[region] = _region_choice(judge, region, region_rows, single, r.rungs, folds, r.pick, target)
    rule = {"name": target, "measure": judge.measure.name if target != "budget" else "budget", "folds": len(folds)}
    rule.update(
        kappa=None if r.kappa is None or math.isinf(r.kappa) else r.kappa,
        kappas=[row.model_dump() for row in r.rows],
        reason=r.reason,
    )
    return fit.model_copy(
        update={"best_single": configs[single], "ladders": ladders, "search": search_info, "rule": rule}
    )


def _rule_reason(kappa: float, rows: list[KappaRow], single: str, measure: Measure, cost_known: bool) -> str:
    folds = f"{FOLDS - 1}-fold chronological cross-validation over the learned tasks"
    value = "utility" if measure.name == "utility" and cost_known else "quality"
    if math.isinf(kappa):
        return (
            f"the best single {single} alone: at no confidence level did the rule's ladders beat it in {value} on "
            f"the validation blocks of {folds} with a one-sided 95% lower bound of at least 0"
        )
    row = next(r for r in rows if r.kappa == kappa)
    spend = "cost" if cost_known and measure.name not in ("utility", "quality") else "configs run"
    return (
        f"the ladder of least {spend} whose {value} gain over the best single {single} on the learned tasks is at "
        f"least {kappa:g} standard errors; {kappa:g} is the smallest level at which the rule's ladders beat the "
        f"best single on the validation blocks of {folds}: difference {row.difference:+.4g}, one-sided 95% lower "
        f"bound {row.lower:+.4g} >= 0 on {row.tasks} tasks"
    )


def _region_choice(
    judge: _Judge,
    region: str,
    region_rows: np.ndarray,
    single: int,
    global_rungs: tuple[int, ...],
    folds: list[_Fold],
    rule: Callable[[list[_Candidate], int], tuple[int, ...]],
    target: Target,
) -> LadderChoice:
    """The region's own ladder when, pooled over the folds, the rule on the region's tasks beats the global
    rule's choice on the region's validation tasks beyond the noise (module docstring); else the global ladder,
    with the comparison in its reason. ``validated_*``: the winning rule's fold choices on the region's
    validation tasks."""

    def regional(fit: np.ndarray, fold_single: int) -> tuple[int, ...]:
        own_single = judge.best_single(fit)
        singles = [fold_single] if own_single is None else [own_single, fold_single]
        cands, _ = judge.candidates(fit, singles)
        return rule(cands, own_single if own_single is not None else fold_single)

    own = regional(region_rows, single)
    local = [
        _Fold(f.fit & region_rows, f.val & region_rows, f.single, f.cands)
        for f in folds
        if (f.fit & region_rows).sum() >= MIN_PAIRED and (f.val & region_rows).any()
    ]
    # The two rules' choices per fold, in the folds' order, run on each fold's validation tasks of the region.
    mine = [regional(f.fit, f.single) for f in local]
    theirs = [rule(f.cands, f.single) for f in local]
    q = c = Gain(math.nan, math.inf, 0, 0)
    if local:
        a = _stacked([judge.run(rungs, f.val) for f, rungs in zip(local, mine, strict=True)])
        b = _stacked([judge.run(rungs, f.val) for f, rungs in zip(local, theirs, strict=True)])
        q, c = judge.gain(a, b), gain(judge.spend(a), a.observed, judge.spend(b), b.observed)
    mq, mc = (0.0 if math.isnan(x) else x for x in (q.difference, c.difference))
    validated_own = _pooled(judge, local, mine)
    better_q = q.judged and mq > NOISE_SE * q.se
    if target == "budget":
        better = better_q
    else:
        reaches = (validated_own["difference"] or 0.0) >= 0.0
        cheaper = c.judged and mc < -NOISE_SE * c.se and mq >= 0.0 and reaches
        better = (better_q and mc <= NOISE_SE * c.se) or cheaper
    value = "utility" if judge.measure.name == "utility" and judge.m.cost_known else "quality"
    spend = "calls" if not judge.m.cost_known or judge.measure.name in ("utility", "quality") else "cost"
    compared = (
        f"pooled over {len(local)} folds on {q.n_a} validation tasks: {value} {mq:+.4g} (se {q.se:.4g}), "
        f"{spend} {mc:+.6g} (se {c.se:.4g})"
    )
    if better and own != global_rungs:
        why = f"its own ladder beats the global one beyond {NOISE_SE:g} se, {compared}"
        return _choice(judge, region, region_rows, own, validated_own, "region", why)
    validated = _pooled(judge, local, theirs)
    names = [judge.m.configs[j] for j in own]
    why = f"the region's own ladder {names} is not better beyond its noise ({compared})"
    return _choice(judge, region, region_rows, global_rungs, validated, "global", why)


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
