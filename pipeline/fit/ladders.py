"""Escalation ladders: try a cheap configuration first, escalate only when its gate fails.

A ladder is an ordered list of up to 3 configurations (rungs). On a task it runs the first rung; when that
rung's **gate** (``task_values.gate``: the weighted mean of rater-kind ``gate`` ratings, PRM fill-ins
excluded) is below ``pass_threshold`` it runs the next, and so on; the last rung always stops. Then::

    quality_t = q_t,stop            (the task value of the rung it stopped at)
    cost_t    = sum of cost_t,c over every rung it ran
    observed_t = every rung it ran has a task value (and, except the last, a gate) on t

A task with an unobserved needed rung is never counted as a success: it is left out of the quality and
cost means and lowers ``coverage`` = observed tasks / tasks.

Fitting (:func:`fit_ladders`) searches ladders on the learn frame (dominance pruning + Pareto beam, see
:func:`search_ladders`), then chooses among the learn-Pareto candidates on the validation frame by the
target rule, first for all tasks (``'*'``) and then per region, where a region ladder replaces the global
one only when validation shows it better by more than two standard errors. :func:`ladders_section`
reports the chosen ladders on held-out tasks for ``stats.json``.

Task values are pivoted once into task x config matrices (numpy); a ladder's run over all tasks is a few
vector operations per rung. No Python loop over tasks or ratings.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict

MAX_RUNGS = 3
DEFAULT_PASS_THRESHOLD = 0.5
#: Pareto ladders kept per search level (the beam width).
BEAM = 24
#: A ladder of 2+ rungs must be observed on this share of the learn tasks to be a candidate.
MIN_COVERAGE = 0.5
#: A region gets its own search with at least this many learn and validation tasks.
MIN_REGION_TASKS = 30
#: "Better by more than its noise": a paired mean difference beyond this many standard errors.
NOISE_SE = 2.0
#: ... on at least this many validation tasks both ladders observed (fewer: the global ladder stays).
MIN_PAIRED = 10
_ROUND = 9
_EPS = 1e-12

Target = Literal["best-single", "budget"]


# ------------------------------------------------------------------------------------------ matrices
@dataclass(frozen=True)
class TaskMatrix:
    """Task values as aligned arrays: rows = tasks (sorted), columns = configs (sorted).

    ``value``/``gate``/``cost`` are NaN where the (task, config) is unobserved (gate also where no gate
    rating exists). ``cost`` is ``cost_usd + unknown_cost * cost(c)``: an attempt with unknown cost takes the
    config's mean known cost (``cost_estimates`` when given), never 0 (DESIGN 5); ``cost_known`` is False
    when no cost is known at all, and then every cost is NaN.
    """

    tasks: np.ndarray
    regions: np.ndarray
    configs: tuple[str, ...]
    value: np.ndarray
    gate: np.ndarray
    cost: np.ndarray
    cost_known: bool

    @property
    def observed(self) -> np.ndarray:
        return ~np.isnan(self.value)


def _filled_costs(tv: pl.DataFrame, cost_estimates: dict[str, float] | None) -> tuple[pl.DataFrame, bool]:
    """Add ``cost`` = known cost + (attempts of unknown cost) x the config's estimate (see :class:`TaskMatrix`)."""
    unknown = (pl.col("unknown_cost") if "unknown_cost" in tv.columns
               else pl.col("cost_usd").is_null().cast(pl.Int64))
    tv = tv.with_columns(_unknown=unknown.fill_null(1))
    known = tv.filter((pl.col("_unknown") == 0) & pl.col("cost_usd").is_not_null())
    if known.is_empty() and not cost_estimates:
        return tv.with_columns(cost=pl.lit(None, pl.Float64)), False
    global_mean = known["cost_usd"].mean() if not known.is_empty() else float(np.mean(list(cost_estimates.values())))
    if cost_estimates:
        est = pl.DataFrame({"config_key": list(cost_estimates), "_est": list(cost_estimates.values())},
                           schema={"config_key": pl.String, "_est": pl.Float64})
    else:
        est = known.group_by("config_key").agg(_est=pl.col("cost_usd").mean())
    tv = tv.join(est, on="config_key", how="left").with_columns(
        cost=pl.col("cost_usd").fill_null(0.0) + pl.col("_unknown") * pl.col("_est").fill_null(global_mean))
    return tv, True


def task_matrix(task_values: pl.DataFrame, configs: tuple[str, ...] | None = None,
                cost_estimates: dict[str, float] | None = None) -> TaskMatrix:
    """Pivot ``task_values`` (task, region, config_key, value, gate, cost_usd[, unknown_cost]) to a :class:`TaskMatrix`."""
    tv = task_values.filter(pl.col("value").is_not_null())
    tv, cost_known = _filled_costs(tv, cost_estimates)
    if configs is None:
        configs = tuple(sorted(tv["config_key"].unique().to_list()))
    tasks = tv.group_by("task").agg(pl.col("region").first()).sort("task")
    t_index = tasks.with_row_index("_ti")
    c_index = pl.DataFrame({"config_key": list(configs)}, schema={"config_key": pl.String}).with_row_index("_ci")
    cells = tv.join(t_index.select("task", "_ti"), on="task").join(c_index, on="config_key")
    shape = (tasks.height, len(configs))
    ti, ci = cells["_ti"].to_numpy(), cells["_ci"].to_numpy()

    def grid(column: str) -> np.ndarray:
        out = np.full(shape, np.nan)
        out[ti, ci] = cells[column].cast(pl.Float64).fill_null(np.nan).to_numpy()
        return out

    return TaskMatrix(tasks=tasks["task"].to_numpy(), regions=tasks["region"].to_numpy(), configs=tuple(configs),
                      value=grid("value"), gate=grid("gate"), cost=grid("cost"), cost_known=cost_known)


@dataclass(frozen=True)
class Run:
    """A ladder run over every task of a matrix (arrays of length T)."""

    quality: np.ndarray   # task value at the stopping rung (NaN where not observed)
    cost: np.ndarray      # summed cost of the rungs run (NaN where unknown)
    calls: np.ndarray     # rungs run
    stop: np.ndarray      # index into the ladder of the stopping rung
    observed: np.ndarray  # every rung run was observed


def run_ladder(m: TaskMatrix, rungs: tuple[int, ...], pass_threshold: float) -> Run:
    """Run a ladder (column indexes of ``m``) on every task: the escalation rule of the module docstring."""
    n = len(m.tasks)
    active = np.ones(n, dtype=bool)
    observed = np.ones(n, dtype=bool)
    quality = np.full(n, np.nan)
    cost = np.zeros(n)
    calls = np.zeros(n, dtype=np.int64)
    stop = np.zeros(n, dtype=np.int64)
    for k, j in enumerate(rungs):
        last = k == len(rungs) - 1
        seen = ~np.isnan(m.value[:, j]) & (last | ~np.isnan(m.gate[:, j]))
        observed &= ~active | seen
        cost = cost + np.where(active, m.cost[:, j], 0.0)
        calls = calls + active
        passed = np.full(n, True) if last else (m.gate[:, j] >= pass_threshold)
        stopping = active & passed
        quality = np.where(stopping, m.value[:, j], quality)
        stop = np.where(stopping, k, stop)
        active = active & ~passed
    return Run(quality=np.where(observed, quality, np.nan), cost=np.where(observed, cost, np.nan), calls=calls,
               stop=stop, observed=observed)


@dataclass(frozen=True)
class Score:
    """Means of a run over the observed rows of a mask. ``spend`` is cost when known, else calls."""

    quality: float | None
    cost: float | None
    calls: float | None
    coverage: float
    n: int
    n_observed: int

    @property
    def spend(self) -> float:
        value = self.cost if self.cost is not None else self.calls
        return math.inf if value is None else value


def _mean(x: np.ndarray) -> float | None:
    return float(np.mean(x)) if x.size else None


def score(run: Run, rows: np.ndarray, cost_known: bool) -> Score:
    ok = rows & run.observed
    n = int(rows.sum())
    return Score(quality=_mean(run.quality[ok]), cost=_mean(run.cost[ok]) if cost_known else None,
                 calls=_mean(run.calls[ok].astype(float)), coverage=(int(ok.sum()) / n) if n else 0.0, n=n,
                 n_observed=int(ok.sum()))


# -------------------------------------------------------------------------------------------- search
def dominated_configs(m: TaskMatrix, rows: np.ndarray) -> np.ndarray:
    """Configs pruned from the rungs: ``b`` is dominated by ``a`` when ``a`` was observed on every task
    ``b`` was, and on each of them ``a``'s value, gate and (inverse) cost are at least as good
    (``value_a >= value_b``, ``gate_a >= gate_b``, ``cost_a <= cost_b``), strictly better somewhere
    (identical columns: the later key is pruned).

    Why this prune is safe: put ``a`` where ``b`` stood in any ladder; on every task the gate passes at
    ``a`` wherever it passed at ``b`` (same or better value, no more cost), and where only ``a`` passes
    the ladder stops earlier, cheaper, on a result its own gate accepts. We deliberately do NOT prune on
    mean quality and mean cost: ladders live on complementarity, and a config that is costlier and worse
    on average is often the best first rung (on RouterBench, WizardLM-13B is worse and dearer than
    Mistral-7B on average, yet opens the cheapest ladder that matches GPT-4). Mean dominance is used one
    level up instead, on partial ladders (the Pareto beam of :func:`search_ladders`).
    The check is vectorised over tasks (T x n x n booleans, in blocks of tasks).
    """
    n = len(m.configs)
    spend = m.cost if m.cost_known else np.zeros_like(m.value)
    gate = np.where(np.isnan(m.gate), -np.inf, m.gate)
    covers = np.ones((n, n), dtype=bool)   # covers[a, b]: a at least as good as b on every task of b
    strict = np.zeros((n, n), dtype=bool)
    idx = np.flatnonzero(rows)
    for start in range(0, idx.size, 4096):  # blocks of tasks bound the memory, not a loop over ratings
        r = idx[start:start + 4096]
        v, g, c = m.value[r], gate[r], spend[r]
        seen_b = ~np.isnan(v)[:, None, :]
        seen_a = ~np.isnan(v)[:, :, None]
        ge = (v[:, :, None] >= v[:, None, :]) & (g[:, :, None] >= g[:, None, :]) & (c[:, :, None] <= c[:, None, :])
        covers &= np.all(~seen_b | (seen_a & ge), axis=0)
        gt = (v[:, :, None] > v[:, None, :]) | (g[:, :, None] > g[:, None, :]) | (c[:, :, None] < c[:, None, :])
        strict |= np.any(seen_b & seen_a & gt, axis=0)
    tie = covers & covers.T & ~strict & ~strict.T
    dom = covers & (strict | np.triu(tie, k=1))   # among identical columns the first key survives
    np.fill_diagonal(dom, False)
    return dom.any(axis=0)


def _pareto(items: list[tuple[tuple[int, ...], Score]]) -> list[tuple[tuple[int, ...], Score]]:
    """Ladders no other ladder beats in both spend and quality; sorted by spend (ties: fewer rungs, order)."""
    ranked = sorted((it for it in items if it[1].quality is not None),
                    key=lambda it: (it[1].spend, -it[1].quality, len(it[0]), it[0]))
    front, best = [], -math.inf
    for item in ranked:
        if item[1].quality > best + _EPS:
            front.append(item)
            best = item[1].quality
    return front


def _thin(front: list, width: int) -> list:
    """At most ``width`` evenly spaced members of a spend-sorted front (both ends kept)."""
    if len(front) <= width:
        return front
    picks = sorted({round(i * (len(front) - 1) / (width - 1)) for i in range(width)})
    return [front[i] for i in picks]


@dataclass(frozen=True)
class SearchResult:
    candidates: list[tuple[tuple[int, ...], Score]]  # learn-Pareto ladders (plus every single)
    pruned: tuple[str, ...]
    evaluated: int


def search_ladders(m: TaskMatrix, rows: np.ndarray, pass_threshold: float, *, strategy: str = "beam",
                   max_rungs: int = MAX_RUNGS, beam: int = BEAM) -> SearchResult:
    """Candidate ladders on the learn rows of ``m``.

    ``beam`` (the default): dominated configs (:func:`dominated_configs`) are pruned from the rungs;
    every surviving single is extended by every other surviving config (n^2 two-rung ladders: the first
    rung's value is complementarity, which no single-config score shows); from then on only the Pareto
    front of the previous level in (mean spend, mean quality), thinned to ``beam``, is extended by one
    more rung: a partial ladder that is both costlier and no better than another is not extended.
    Cost: about n^2 + beam * n ladder runs instead of n^3 (30 configs: ~1,600 instead of 24,360). ``exhaustive``: every ordered ladder of distinct configs up to ``max_rungs`` (the reference the
    tests compare the beam with; refused above 12 configs). Returns the Pareto front over everything
    scored (ladders of 2+ rungs need coverage >= MIN_COVERAGE) plus every single config.
    """
    n = len(m.configs)
    scored: dict[tuple[int, ...], Score] = {}

    def evaluate(ladders: list[tuple[int, ...]]) -> None:
        for lad in ladders:
            if lad not in scored:
                scored[lad] = score(run_ladder(m, lad, pass_threshold), rows, m.cost_known)

    singles = [(j,) for j in range(n)]
    evaluate(singles)
    pruned: tuple[str, ...] = ()
    if strategy == "exhaustive":
        if n > 12:
            raise ValueError(f"exhaustive ladder search refused for {n} configs (more than 12); use the beam")
        evaluate([p for k in range(2, max_rungs + 1) for p in itertools.permutations(range(n), k)])
    elif strategy == "beam":
        dominated = dominated_configs(m, rows)
        keep = [j for j in range(n) if not dominated[j]]
        pruned = tuple(m.configs[j] for j in range(n) if dominated[j])
        level = [(j,) for j in keep]
        for depth in range(2, max_rungs + 1):
            parents = ([(lad, scored[lad]) for lad in level] if depth == 2
                       else _thin(_pareto([(lad, scored[lad]) for lad in level]), beam))
            level = [lad + (j,) for lad, _s in parents for j in keep if j not in lad]
            evaluate(level)
    else:
        raise ValueError(f"unknown ladder search strategy {strategy!r}")
    eligible = [(lad, s) for lad, s in scored.items() if len(lad) == 1 or s.coverage >= MIN_COVERAGE]
    front = _pareto(eligible)
    in_front = {lad for lad, _ in front}
    candidates = front + [(lad, scored[lad]) for lad in singles if lad not in in_front]
    return SearchResult(candidates=candidates, pruned=pruned, evaluated=len(scored))


# ------------------------------------------------------------------------------------------- fitting
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
    """Everything :func:`fit_ladders` decided; :func:`ladders_section` turns it into stats."""

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

    return {"n": n, "qa": _mean(a.quality[ok]), "qb": _mean(b.quality[ok]), "dq": _mean(dq) or 0.0,
            "dc": _mean(dc) or 0.0, "se_q": se(dq), "se_c": se(dc)}


def _choose(m_val: TaskMatrix, rows: np.ndarray, candidates: list[tuple[int, ...]], singles: list[int],
            target: Target, budget: float | None, pass_threshold: float) -> tuple[tuple[int, ...], dict[str, Any], str]:
    """Apply the target rule on validation rows.

    ``best-single``: the cheapest candidate whose validated quality reaches, on the same tasks, the
    validated quality of every config in ``singles`` (the best single; in a region also the global best
    single, so a region ladder never aims lower than the figure the summary compares with). Ties: higher
    quality, fewer rungs, key order; the best single itself qualifies when it is the only one.
    ``budget``: the best validated quality among candidates whose validated mean cost per task is within
    the budget (ties: lower cost, fewer rungs); the cheapest candidate when none is.
    """
    bases = [run_ladder(m_val, (j,), pass_threshold) for j in dict.fromkeys(singles)]
    rows_out = []
    for lad in candidates:
        run = run_ladder(m_val, lad, pass_threshold)
        pairs = [_paired(run, base, rows, m_val.cost_known) for base in bases]
        s = score(run, rows, m_val.cost_known)
        if min(p["n"] for p in pairs) == 0 or s.quality is None:
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
        return (singles[0],), {"target_quality": None, "score": score(bases[0], rows, m_val.cost_known)}, \
            "no candidate observed on validation: the best single"
    return pick[0], {"target_quality": pick[2]["qb"], "score": pick[1]}, why


def _choice(region: str, m_learn: TaskMatrix, m_val: TaskMatrix, learn_rows: np.ndarray, lad: tuple[int, ...],
            info: dict[str, Any], source: str, reason: str, pass_threshold: float) -> LadderChoice:
    learned = score(run_ladder(m_learn, lad, pass_threshold), learn_rows, m_learn.cost_known)
    s: Score = info["score"]
    return LadderChoice(
        region=region, rungs=[m_learn.configs[j] for j in lad], source=source, learned_quality=_r(learned.quality),
        learned_cost_usd=_r(learned.cost), validated_quality=_r(s.quality), validated_cost_usd=_r(s.cost),
        validated_calls=_r(s.calls), validated_coverage=_r(s.coverage) or 0.0, validated_tasks=s.n_observed,
        target_quality=_r(info["target_quality"]), reason=reason)


def _r(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), _ROUND)


def fit_ladders(task_values_learn: pl.DataFrame, task_values_validation: pl.DataFrame, *,
                target: Target = "best-single", budget_usd: float | None = None,
                pass_threshold: float = DEFAULT_PASS_THRESHOLD, strategy: str = "beam",
                gate_is_target_override: bool | None = None) -> LadderFit:
    """Fit the global ladder and the per-region ladders (see the module docstring).

    ``task_values_learn`` / ``task_values_validation``: :func:`pipeline.fit.inputs.task_values` of the inner
    learn and validation parts of the learned tasks (DESIGN 6). ``target='budget'`` needs ``budget_usd``
    (mean cost per task). A region ladder replaces the global one only when, on the region's validation
    tasks both observed (at least ``MIN_PAIRED``), it is better by more than ``NOISE_SE`` standard errors of the paired difference:
    for ``budget``, in quality; for ``best-single``, in quality without costing more beyond the noise, or
    in cost while its quality reaches the region's and the global best single and is no lower than the
    global ladder's there (a cheaper ladder that loses quality is a different trade, not a better one).
    """
    if target == "budget" and budget_usd is None:
        raise ValueError("the budget ladder target needs budget_usd (mean cost per task)")
    configs = tuple(sorted(set(task_values_learn["config_key"].unique().to_list())
                           | set(task_values_validation["config_key"].unique().to_list())))
    m_learn = task_matrix(task_values_learn, configs)
    m_val = task_matrix(task_values_validation, configs)
    cost_known = m_learn.cost_known
    if not cost_known:  # spend is then the number of calls, on both sides
        m_val = TaskMatrix(m_val.tasks, m_val.regions, m_val.configs, m_val.value, m_val.gate,
                           np.full_like(m_val.value, np.nan), False)
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
        lad, info, why = _choose(m_val, val_rows, [c for c, _ in found.candidates], [single, *also], target,
                                 budget_usd, pass_threshold)
        return single, found, lad, info, why

    all_learn = np.ones(len(m_learn.tasks), dtype=bool)
    all_val = np.ones(len(m_val.tasks), dtype=bool)
    fitted = fit_rows("*", all_learn, all_val, [])
    if fitted is None:
        return LadderFit(target=target, budget_usd=budget_usd, pass_threshold=pass_threshold, cost_known=cost_known,
                         gate_is_target=git, best_single=None, ladders={}, search=search_info)
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
            reaches = rinfo["target_quality"] is not None and (rinfo["score"].quality or 0.0) >= rinfo["target_quality"] - _EPS
            better = (better_q and p["dc"] <= NOISE_SE * p["se_c"]) or (
                p["n"] >= MIN_PAIRED and p["dc"] < -NOISE_SE * p["se_c"] and p["dq"] >= 0.0 and reaches)
        paired = (f"paired on {p['n']} validation tasks: quality {p['dq']:+.4f} (se {p['se_q']:.4f}), "
                  f"{'cost' if cost_known else 'calls'} {p['dc']:+.6g} (se {p['se_c']:.4g})")
        if better and tuple(lad) != tuple(global_lad):
            ladders[region] = _choice(region, m_learn, m_val, learn_rows, lad, rinfo, "region",
                                      f"{rwhy}; beats the global ladder beyond 2 se, {paired}", pass_threshold)
        else:
            ginfo = {"target_quality": rinfo["target_quality"], "score": score(global_val, val_rows, cost_known)}
            ladders[region] = _choice(region, m_learn, m_val, learn_rows, global_lad, ginfo, "global",
                                      f"the region's own ladder {[configs[j] for j in lad]} is not better "
                                      f"beyond its noise ({paired})", pass_threshold)
    return LadderFit(target=target, budget_usd=budget_usd, pass_threshold=pass_threshold, cost_known=cost_known,
                     gate_is_target=git, best_single=configs[single], ladders=ladders, search=search_info)


# --------------------------------------------------------------------------------------- evaluation
def evaluate_ladder(rungs: list[str], task_values: pl.DataFrame, *, pass_threshold: float = DEFAULT_PASS_THRESHOLD,
                    cost_estimates: dict[str, float] | None = None) -> pl.DataFrame:
    """Per task: ``task, region, stopped_at, calls, quality, cost_usd, observed`` of one ladder.

    ``quality``/``cost_usd`` are null where a needed rung was not observed (``observed`` false); a
    rung with no task value anywhere in the frame leaves every task that needs it unobserved.
    """
    configs = tuple(sorted(set(task_values["config_key"].unique().to_list()) | set(rungs)))
    m = task_matrix(task_values, configs, cost_estimates)
    run = run_ladder(m, tuple(configs.index(c) for c in rungs), pass_threshold)
    return pl.DataFrame({
        "task": m.tasks, "region": m.regions,
        "stopped_at": [rungs[k] for k in run.stop.tolist()],
        "calls": run.calls, "quality": run.quality, "cost_usd": run.cost if m.cost_known else np.full(len(m.tasks),
                                                                                                      np.nan),
        "observed": run.observed,
    }, schema={"task": pl.String, "region": pl.String, "stopped_at": pl.String, "calls": pl.Int64,
               "quality": pl.Float64, "cost_usd": pl.Float64, "observed": pl.Boolean}).with_columns(
        pl.col("quality").fill_nan(None), pl.col("cost_usd").fill_nan(None))


def published_runs(fit: LadderFit, task_values: pl.DataFrame,
                   cost_estimates: dict[str, float] | None = None) -> pl.DataFrame:
    """:func:`evaluate_ladder` per task with the ladder its region publishes (own, else ``'*'``), plus
    ``best_quality``/``best_cost_usd``: the best single config's value and cost on the same task."""
    used = fit.published()
    regions = sorted(task_values["region"].unique().to_list())
    parts = [evaluate_ladder(used.get(r, used["*"]), task_values.filter(pl.col("region") == r),
                             pass_threshold=fit.pass_threshold, cost_estimates=cost_estimates)
             for r in regions]
    runs = pl.concat(parts).sort("task") if parts else evaluate_ladder(used["*"], task_values)
    single = evaluate_ladder([fit.best_single], task_values, cost_estimates=cost_estimates).select(
        "task", best_quality="quality", best_cost_usd="cost_usd", best_observed="observed")
    return runs.join(single, on="task", how="left")


def ladders_section(fit: LadderFit, task_values_heldout: pl.DataFrame,
                    cost_estimates: dict[str, float] | None = None) -> dict[str, Any]:
    """The ``ladders`` object of ``stats.json``.

    ``regions``: per region and ``'*'``, the ladder used, where it comes from, its validated and held-out
    quality and cost and its held-out coverage (held-out means over the fully observed tasks).
    ``summary``: the published ladders on the held-out tasks where every rung they ran was observed (and
    the best single too), next to the best single configuration (highest learned quality) on those same
    tasks. Costs are null when unknown; ``gate_is_target`` true means the gate is the quality measure
    itself, so the figures are an upper bound for a perfect verifier.
    """
    if not fit.ladders or fit.best_single is None or task_values_heldout.is_empty():
        return {"target": fit.target, "pass_threshold": fit.pass_threshold, "regions": {}, "summary": None,
                "reason": "no ladder fitted or no held-out task values"}
    runs = published_runs(fit, task_values_heldout, cost_estimates)
    both = runs.filter(pl.col("observed") & pl.col("best_observed"))
    cost_known = fit.cost_known

    def mean(frame: pl.DataFrame, col: str) -> float | None:
        return _r(frame[col].mean()) if frame.height and (cost_known or "cost" not in col) else None

    def ratio(a: float | None, b: float | None) -> float | None:
        return _r(a / b) if a is not None and b not in (None, 0.0) else None

    regions: dict[str, Any] = {}
    for region, choice in sorted(fit.ladders.items()):
        if region == "*":
            rows = evaluate_ladder(choice.rungs, task_values_heldout, pass_threshold=fit.pass_threshold,
                                   cost_estimates=cost_estimates)
        else:
            rows = runs.filter(pl.col("region") == region)
        seen = rows.filter(pl.col("observed"))
        regions[region] = {
            "ladder": choice.rungs, "source": choice.source, "reason": choice.reason,
            "validated_quality": choice.validated_quality, "validated_cost_usd": choice.validated_cost_usd,
            "held_out_quality": mean(seen, "quality"), "held_out_cost_usd": mean(seen, "cost_usd"),
            "held_out_calls": mean(seen, "calls"),
            "coverage": _r(seen.height / rows.height) if rows.height else None, "held_out_tasks": rows.height,
        }
    quality, cost = mean(both, "quality"), mean(both, "cost_usd")
    best_q, best_c = mean(both, "best_quality"), mean(both, "best_cost_usd")
    summary = {
        "held_out_quality": quality, "held_out_cost_usd": cost, "best_single_config": fit.best_single,
        "best_single_quality": best_q, "best_single_cost_usd": best_c,
        "quality_ratio": ratio(quality, best_q), "cost_ratio": ratio(cost, best_c),
        "coverage": _r(runs["observed"].mean()) if runs.height else None, "gate_is_target": fit.gate_is_target,
    }
    return {"target": fit.target, "budget_usd": fit.budget_usd, "pass_threshold": fit.pass_threshold,
            "cost_known": cost_known, "search": fit.search, "regions": regions, "summary": summary,
            "held_out_tasks_compared": both.height}


def table_ladders(fit: LadderFit) -> dict[str, Any]:
    """``{region: pipeline.routing.table.Ladder}`` for the routing table: ``'*'`` and replaced regions."""
    from ..routing.table import Ladder

    return {r: Ladder(rungs=c.rungs, pass_threshold=fit.pass_threshold, validated_quality=c.validated_quality,
                      validated_cost_usd=c.validated_cost_usd)
            for r, c in sorted(fit.ladders.items()) if r == "*" or c.source == "region"}
