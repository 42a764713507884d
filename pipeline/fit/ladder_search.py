"""Ladder runs and the ladder search: task values as matrices, the escalation rule, dominance, Pareto beam.

A ladder is an ordered list of up to 3 configurations (rungs). On a task it runs the first rung; when that
rung's **gate** (``task_values.gate``: the weighted mean of rater-kind ``gate`` ratings, PRM fill-ins
excluded) is below ``pass_threshold`` it runs the next, and so on; the last rung always stops. Then::

    quality_t  = q_t,stop            (the task value of the rung it stopped at)
    cost_t     = sum of cost_t,c over every rung it ran

**From logs, not a full-information table** (docs/design.md, Ladders, A ladder's run). A dispatcher's logs hold
each config's outcome under a condition: a **first run** (no config had failed on the task before it), or a run
after the configs named in its ``after`` had failed (an escalation). A ladder's rung j is **seen** on t when its
config's outcome there was a first run or came after configs that are all among rungs 1..j-1: the ladder's own
path implies that condition, so the outcome is what rung j would have given. Rung 1 needs a first run; an
escalation outcome never stands for a first run (it is evidence about failed tasks only). Then, on the tasks
where rung 1 is seen, the run is the estimator

    E[q] = P(r1 passes) E[q_r1 | r1 passes] + P(r1 fails) E[q_rest | r1 failed]      (and so on down the rungs)

computed per task: where a later rung j is needed (every rung before it failed) but not seen, the task takes
the mean continuation from rung j (quality, cost and rungs run from j to the stop) of the tasks that needed
rung j and saw it (its **donors**). So the means over the observed tasks are the estimator above, and no task
is left out for its path (which would lean the means towards the paths that stop early): where a needed rung has
fewer than ``MIN_DONORS`` donors the ladder is not estimated at all on those tasks. On a full-information table
every outcome is a first run and every needed rung is seen: the run is the plain one.

Task values are pivoted once into task x config matrices (numpy); a ladder's run over all tasks is a few
vector operations per rung. No Python loop over tasks or ratings. Fitting, choosing and reporting
ladders is :mod:`pipeline.fit.ladders`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import polars as pl

from ..scalars import mean_of

MAX_RUNGS = 3
#: Pareto ladders kept per search level (the beam width).
BEAM = 24
#: A ladder of 2+ rungs must be observed on this share of the learn tasks to be a candidate.
MIN_COVERAGE = 0.5
#: A needed rung not seen on a task takes the mean continuation of at least this many tasks that saw it.
MIN_DONORS = 5
_EPS = 1e-12


# ------------------------------------------------------------------------------------------ matrices
@dataclass(frozen=True)
class TaskMatrix:
    """Task values as aligned arrays: rows = tasks (sorted), columns = configs (sorted).

    ``value``/``gate``/``cost`` are NaN where the (task, config) is unobserved (gate also where no gate
    rating exists). ``cost`` is ``cost_usd + unknown_cost * cost(c)``: an attempt with unknown cost takes the
    config's mean known cost (``cost_estimates`` when given), never 0 (docs/design.md, Task value and task cost);
    ``cost_known`` is False when no cost is known at all, and then every cost is NaN.
    ``cond`` is each outcome's condition, an index into ``conditions`` (the sets of column indexes of the configs
    that had failed on the task before it); condition 0 is the empty set, a first run (and every unobserved cell).
    """

    tasks: np.ndarray
    regions: np.ndarray
    configs: tuple[str, ...]
    value: np.ndarray
    gate: np.ndarray
    cost: np.ndarray
    cost_known: bool
    cond: np.ndarray
    conditions: tuple[frozenset[int], ...] = (frozenset(),)

    @property
    def observed(self) -> np.ndarray:
        return ~np.isnan(self.value)

    @property
    def first_runs(self) -> np.ndarray:
        """Outcomes observed as first runs."""
        return self.observed & (self.cond == 0)

    @property
    def logged(self) -> bool:
        """Some outcome came after another config had failed (the matrix is not full-information)."""
        return len(self.conditions) > 1

    def allowed(self, before: Iterable[int]) -> np.ndarray | None:
        """Per condition: does a ladder whose earlier rungs are ``before`` imply it (a subset of them)? None on a
        full-information matrix (every outcome a first run: always)."""
        if not self.logged:
            return None
        earlier = frozenset(before)
        return np.fromiter((c <= earlier for c in self.conditions), dtype=bool, count=len(self.conditions))


def _filled_costs(tv: pl.DataFrame, cost_estimates: dict[str, float] | None) -> tuple[pl.DataFrame, bool]:
    """Add ``cost`` = known cost + (attempts of unknown cost) x the config's estimate (see :class:`TaskMatrix`)."""
    unknown = pl.col("unknown_cost") if "unknown_cost" in tv.columns else pl.col("cost_usd").is_null().cast(pl.Int64)
    tv = tv.with_columns(_unknown=unknown.fill_null(1))
    known = tv.filter((pl.col("_unknown") == 0) & pl.col("cost_usd").is_not_null())
    global_mean = mean_of(known["cost_usd"])  # None when no cost is known
    if global_mean is None:
        if not cost_estimates:
            return tv.with_columns(cost=pl.lit(None, pl.Float64)), False
        global_mean = float(np.mean(list(cost_estimates.values())))
    if cost_estimates:
        est = pl.DataFrame(
            {"config_key": list(cost_estimates), "_est": list(cost_estimates.values())},
            schema={"config_key": pl.String, "_est": pl.Float64},
        ).with_columns(pl.col("config_key").cast(tv.schema["config_key"]))
    else:
        est = known.group_by("config_key").agg(_est=pl.col("cost_usd").mean())
    tv = tv.join(est, on="config_key", how="left").with_columns(
        cost=pl.col("cost_usd").fill_null(0.0) + pl.col("_unknown") * pl.col("_est").fill_null(global_mean)
    )
    return tv, True


def task_matrix(
    task_values: pl.DataFrame, configs: tuple[str, ...] | None = None, cost_estimates: dict[str, float] | None = None
) -> TaskMatrix:
    """Pivot ``task_values`` (task, region, config_key, value, gate, cost_usd[, unknown_cost][, after]) to a matrix.

    ``after`` (optional): the configs that had failed on the task before this outcome (empty: a first run; null:
    an escalation after configs unknown, which no ladder can place, so the row is left out). Without the column
    every outcome is a first run (a full-information table)."""
    tv = task_values.filter(pl.col("value").is_not_null())
    if "after" in tv.columns:
        tv = tv.filter(pl.col("after").is_not_null())
    tv, cost_known = _filled_costs(tv, cost_estimates)
    if configs is None:
        configs = tuple(sorted(tv["config_key"].unique().to_list()))
    tasks = tv.group_by("task").agg(pl.col("region").first()).sort("task")
    t_index = tasks.with_row_index("_ti")
    c_index = (
        pl.DataFrame({"config_key": list(configs)}, schema={"config_key": pl.String})
        .with_columns(pl.col("config_key").cast(tv.schema["config_key"]))
        .with_row_index("_ci")
    )
    cells = tv.join(t_index.select("task", "_ti"), on="task").join(c_index, on="config_key")
    shape = (tasks.height, len(configs))
    ti, ci = cells["_ti"].to_numpy(), cells["_ci"].to_numpy()

    def grid(column: str) -> np.ndarray:
        out = np.full(shape, np.nan)
        out[ti, ci] = cells[column].cast(pl.Float64).fill_null(np.nan).to_numpy()
        return out

    cond = np.zeros(shape, dtype=np.int64)
    conditions: tuple[frozenset[int], ...] = (frozenset(),)
    if "after" in cells.columns:
        column = {c: j for j, c in enumerate(configs)}
        sets = [frozenset(column.get(c, -1) for c in after) for after in cells["after"].cast(pl.List(pl.String))]
        conditions = tuple(dict.fromkeys([frozenset(), *sets]))
        index = {s: k for k, s in enumerate(conditions)}
        cond[ti, ci] = np.fromiter((index[s] for s in sets), dtype=np.int64, count=len(sets))
    return TaskMatrix(
        tasks=tasks["task"].to_numpy(),
        regions=tasks["region"].cast(pl.String).to_numpy(),
        configs=tuple(configs),
        value=grid("value"),
        gate=grid("gate"),
        cost=grid("cost"),
        cost_known=cost_known,
        cond=cond,
        conditions=conditions,
    )


@dataclass(frozen=True)
class LadderRun:
    """A ladder run over every task of a matrix (arrays of length T)."""

    quality: np.ndarray  # task value at the stopping rung (NaN where not observed)
    cost: np.ndarray  # summed cost of the rungs run (NaN where unknown)
    calls: np.ndarray  # rungs run (a donors' mean where the run was completed from donors; NaN where not observed)
    stop: np.ndarray  # index into the ladder of the stopping rung; -1 where completed from donors or unobserved
    observed: np.ndarray  # rung 1 seen and every rung needed after it seen or completed from donors


@dataclass(frozen=True)
class _Rung:
    """What one rung did on every task (the forward pass): the tasks that needed it and saw it (``donors``), those
    of them that stopped there, those that needed it and did not see it (``missing``), and its column."""

    donors: np.ndarray
    stops: np.ndarray
    missing: np.ndarray
    value: np.ndarray
    cost: np.ndarray


@dataclass(frozen=True)
class _Partial:
    """A ladder's run after its first rungs, none of them the last (the escalation rule's running state): the
    tasks that still need a rung, what each rung did, and the forward sums along the seen paths (the whole run
    where no needed rung was missing)."""

    active: np.ndarray  # needs the next rung: every rung so far seen and failed
    rungs: tuple[_Rung, ...]
    done: np.ndarray  # stopped at a seen rung
    quality: np.ndarray
    cost: np.ndarray
    calls: np.ndarray
    stop: np.ndarray
    missing: bool  # some task needed a rung it did not see


def _start(rows: np.ndarray) -> _Partial:
    n = len(rows)
    return _Partial(
        active=rows.copy(),
        rungs=(),
        done=np.zeros(n, dtype=bool),
        quality=np.full(n, np.nan),
        cost=np.zeros(n),
        calls=np.zeros(n),
        stop=np.full(n, -1, dtype=np.int64),
        missing=False,
    )


@dataclass(frozen=True)
class _Column:
    """One config's column of a matrix, with what the escalation rule asks of it computed once."""

    value: np.ndarray
    cost: np.ndarray
    cond: np.ndarray
    seen_last: np.ndarray  # a task value (all the last rung needs)
    seen: np.ndarray  # a task value and a gate (what an earlier rung needs)
    passes: np.ndarray  # gate >= pass threshold

    @classmethod
    def of(
        cls, value: np.ndarray, gate: np.ndarray, cost: np.ndarray, cond: np.ndarray, pass_threshold: float
    ) -> _Column:
        seen_last = ~np.isnan(value)
        return cls(value, cost, cond, seen_last, seen_last & ~np.isnan(gate), gate >= pass_threshold)


def _step(p: _Partial, column: _Column, allowed: np.ndarray | None, *, last: bool) -> _Partial:
    """The next rung (its config's column; ``allowed``: the conditions the ladder's earlier rungs imply)."""
    seen = column.seen_last if last else column.seen
    if allowed is not None:
        seen = seen & allowed[column.cond]
    donors = p.active & seen
    stops = donors if last else donors & column.passes
    missing = p.active & ~seen if p.rungs else np.zeros_like(seen)
    return _Partial(
        active=donors & ~stops,
        rungs=(*p.rungs, _Rung(donors, stops, missing, column.value, column.cost)),
        done=p.done | stops,
        quality=np.where(stops, column.value, p.quality),
        cost=p.cost + np.where(donors, column.cost, 0.0),
        calls=p.calls + donors,
        stop=np.where(stops, len(p.rungs), p.stop),
        missing=p.missing or bool(missing.any()),
    )


def _finish(p: _Partial) -> LadderRun:
    """The backward pass: each task's continuation from each rung, the missing ones completed from the donors. A
    rung some task needs without seeing it, with fewer than ``MIN_DONORS`` donors, leaves the ladder unestimated on
    every task: a mean over the other tasks alone would lean towards the paths that stop early."""
    n = len(p.active)
    if not p.missing:  # every needed rung seen: the forward sums are the run
        return _run(p.done, p.quality, p.cost, p.calls, p.stop)
    quality, cost, calls = np.full(n, np.nan), np.full(n, np.nan), np.zeros(n)
    ok, stop = np.zeros(n, dtype=bool), np.full(n, -1, dtype=np.int64)
    for k in range(len(p.rungs) - 1, -1, -1):
        r = p.rungs[k]
        quality = np.where(r.stops, r.value, quality)
        cost = r.cost + np.where(r.stops, 0.0, cost)
        calls = 1.0 + np.where(r.stops, 0.0, calls)
        ok = r.donors & (r.stops | ok)
        stop = np.where(r.stops, k, np.where(r.donors, stop, -1))
        if (r.donors & ~ok).any() or (r.missing.any() and ok.sum() < MIN_DONORS):
            return _unestimated(n)
        if r.missing.any():
            with np.errstate(invalid="ignore"):
                quality = np.where(r.missing, quality[ok].mean(), quality)
                cost = np.where(r.missing, cost[ok].mean(), cost)
                calls = np.where(r.missing, calls[ok].mean(), calls)
            ok = ok | r.missing
    return _run(ok, quality, cost, calls, stop)


def _run(ok: np.ndarray, quality: np.ndarray, cost: np.ndarray, calls: np.ndarray, stop: np.ndarray) -> LadderRun:
    nan = np.nan
    return LadderRun(
        np.where(ok, quality, nan), np.where(ok, cost, nan), np.where(ok, calls, nan), np.where(ok, stop, -1), ok
    )


def _unestimated(n: int) -> LadderRun:
    nan = np.full(n, np.nan)
    return LadderRun(nan, nan, nan, np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=bool))


def run_ladder(
    m: TaskMatrix, rungs: tuple[int, ...], pass_threshold: float, rows: np.ndarray | None = None
) -> LadderRun:
    """Run a ladder (column indexes of ``m``) on the ``rows`` tasks (None: every task; the others unobserved, and
    never donors): the escalation rule of the module docstring."""
    state = _start(np.ones(len(m.tasks), dtype=bool) if rows is None else rows)
    for k, j in enumerate(rungs):
        column = _Column.of(m.value[:, j], m.gate[:, j], m.cost[:, j], m.cond[:, j], pass_threshold)
        state = _step(state, column, m.allowed(rungs[:k]), last=k == len(rungs) - 1)
    return _finish(state)


class _Runner:
    """:func:`run_ladder` for many ladders of one matrix: columns laid out contiguously once, and the running
    state of the last prefix of each length kept (the search extends one parent by every config in a row),
    so a ladder costs one rung step past its prefix and the backward pass. Same arithmetic, in the same order, as
    :func:`run_ladder`: the runs are identical."""

    def __init__(self, m: TaskMatrix, pass_threshold: float):
        value, gate, cost, cond = (np.ascontiguousarray(x.T) for x in (m.value, m.gate, m.cost, m.cond))
        self.m = m
        self.columns = [_Column.of(value[j], gate[j], cost[j], cond[j], pass_threshold) for j in range(len(m.configs))]
        self.prefixes: dict[tuple[int, ...], _Partial] = {(): _start(np.ones(len(m.tasks), dtype=bool))}

    def _step(self, prefix: tuple[int, ...], j: int, *, last: bool) -> _Partial:
        return _step(self._prefix(prefix), self.columns[j], self.m.allowed(prefix), last=last)

    def _prefix(self, rungs: tuple[int, ...]) -> _Partial:
        state = self.prefixes.get(rungs)
        if state is None:
            state = self._step(rungs[:-1], rungs[-1], last=False)
            self.prefixes = {p: s for p, s in self.prefixes.items() if len(p) < len(rungs)}
            self.prefixes[rungs] = state
        return state

    def run(self, rungs: tuple[int, ...]) -> LadderRun:
        return _finish(self._step(rungs[:-1], rungs[-1], last=True))


def _take_rows(m: TaskMatrix, rows: np.ndarray) -> TaskMatrix:
    """The matrix of the ``rows`` tasks only (a run is row by row, so a search on them needs no other row)."""
    return TaskMatrix(
        tasks=m.tasks[rows],
        regions=m.regions[rows],
        configs=m.configs,
        value=m.value[rows],
        gate=m.gate[rows],
        cost=m.cost[rows],
        cost_known=m.cost_known,
        cond=m.cond[rows],
        conditions=m.conditions,
    )


@dataclass(frozen=True)
class Measure:
    """What a ladder is judged on, per task: its **value** on the objective and its **spend**, the resource the
    objective leaves out (docs/design.md, The rule that chooses a ladder)::

        quality per dollar (and the budget target):  value = quality_t              spend = cost_t (calls without costs)
        utility (costs known):                        value = lambda q_t - cost_t   spend = configs run
        quality:                                      value = quality_t             spend = configs run
    """

    name: str = "quality_per_dollar"
    lambda_: float = 1.0

    def value(self, run: LadderRun, cost_known: bool) -> np.ndarray:
        if self.name == "utility" and cost_known:
            return self.lambda_ * run.quality - run.cost
        return run.quality

    def spends_calls(self, cost_known: bool) -> bool:
        """Is the spend configs run (where a single always spends least)?"""
        return self.name in ("utility", "quality") or not cost_known

    def spend(self, run: LadderRun, cost_known: bool) -> np.ndarray:
        return run.calls if self.spends_calls(cost_known) else run.cost


#: Today's measure of the best-single and budget targets: quality, spending money.
QUALITY = Measure()


@dataclass(frozen=True)
class Score:
    """Means of a run over the observed rows of a mask; ``value`` and ``spend`` by the :class:`Measure`."""

    quality: float | None
    cost: float | None
    calls: float | None
    coverage: float
    n: int
    n_observed: int
    value: float | None = None
    spend: float = math.inf


def mean_or_none(x: np.ndarray) -> float | None:
    """The mean of an array, None when it is empty."""
    return float(np.mean(x)) if x.size else None


def score(run: LadderRun, rows: np.ndarray | None, cost_known: bool, measure: Measure = QUALITY) -> Score:
    """``rows`` None: every row."""
    ok = run.observed if rows is None else rows & run.observed
    n = len(run.observed) if rows is None else int(rows.sum())
    means: dict[int, float | None] = {}  # by array: a measure's value or spend is often a column of the run itself

    def mean(x: np.ndarray) -> float | None:
        if id(x) not in means:
            means[id(x)] = mean_or_none(x[ok])
        return means[id(x)]

    spend = mean(measure.spend(run, cost_known))
    return Score(
        quality=mean(run.quality),
        cost=mean(run.cost) if cost_known else None,
        calls=mean(run.calls),
        coverage=(int(ok.sum()) / n) if n else 0.0,
        n=n,
        n_observed=int(ok.sum()),
        value=mean(measure.value(run, cost_known)),
        spend=math.inf if spend is None else spend,
    )


# -------------------------------------------------------------------------------------------- search
def dominated_configs(m: TaskMatrix, rows: np.ndarray, pass_threshold: float) -> np.ndarray:
    """Configs pruned from the rungs: ``b`` is dominated by ``a`` when ``a`` was observed on every task
    ``b`` was, and on each of them ``value_a >= value_b``, ``cost_a <= cost_b``, and the gate sends a
    ladder the same way at ``a`` as at ``b`` (both pass, both fail, or both unobserved), except that ``a``
    may pass where ``b`` fails when ``value_a`` is the task's best value; strictly better somewhere
    (identical columns: the later key is pruned).

    Why this prune is safe: put ``a`` where ``b`` stood in any ladder. Where the gates agree, the ladder
    takes the same path, stopping (if there) on a value no lower and spending no more. Where only ``a``
    passes, the ladder stops at ``a`` on the task's best value and skips the rest, so it can neither lose
    quality nor spend more. A gate that is merely higher is NOT enough: ``b`` failing its gate may send
    the task on to a rung that beats what ``a`` would have stopped on. We deliberately do NOT prune on
    mean quality and mean cost: ladders live on complementarity, and a config that is costlier and worse
    on average is often the best first rung (on RouterBench, WizardLM-13B is worse and dearer than
    Mistral-7B on average, yet opens the cheapest ladder that matches GPT-4). Mean dominance is used one
    level up instead, on partial ladders (the Pareto beam of :func:`search_ladders`).
    The check is vectorised over tasks (T x n x n booleans, in blocks of tasks).
    """
    n = len(m.configs)
    spend = m.cost if m.cost_known else np.zeros_like(m.value)
    # gate state per (task, config): 0 unobserved, 1 fails, 2 passes
    state = np.where(np.isnan(m.gate), 0, np.where(m.gate >= pass_threshold, 2, 1))
    covers = np.ones((n, n), dtype=bool)  # covers[a, b]: a at least as good as b on every task of b
    strict = np.zeros((n, n), dtype=bool)
    idx = np.flatnonzero(rows)
    for start in range(0, idx.size, 4096):  # blocks of tasks bound the memory, not a loop over ratings
        r = idx[start : start + 4096]
        v, g, c = m.value[r], state[r], spend[r]
        seen_b = ~np.isnan(v)[:, None, :]
        seen_a = ~np.isnan(v)[:, :, None]
        top = np.nanmax(np.where(np.isnan(v), -np.inf, v), axis=1)[:, None, None]
        same_way = (g[:, :, None] == g[:, None, :]) | (
            (g[:, :, None] == 2) & (g[:, None, :] == 1) & (v[:, :, None] >= top)
        )
        ge = (v[:, :, None] >= v[:, None, :]) & (c[:, :, None] <= c[:, None, :]) & same_way
        covers &= np.all(~seen_b | (seen_a & ge), axis=0)
        gt = (v[:, :, None] > v[:, None, :]) | (c[:, :, None] < c[:, None, :]) | (g[:, :, None] != g[:, None, :])
        strict |= np.any(seen_b & seen_a & gt, axis=0)
    tie = covers & covers.T & ~strict & ~strict.T
    dom = covers & (strict | np.triu(tie, k=1))  # among identical columns the first key survives
    np.fill_diagonal(dom, False)
    return np.any(dom, axis=0)


def _pareto(items: list[tuple[tuple[int, ...], Score]]) -> list[tuple[tuple[int, ...], Score]]:
    """Ladders no other ladder beats in both spend and value; sorted by spend (ties: fewer rungs, order)."""
    ranked = sorted(
        ((lad, s, q) for lad, s in items if (q := s.value) is not None),
        key=lambda it: (it[1].spend, -it[2], len(it[0]), it[0]),
    )
    front: list[tuple[tuple[int, ...], Score]] = []
    best = -math.inf
    for lad, s, q in ranked:
        if q > best + _EPS:
            front.append((lad, s))
            best = q
    return front


def _thin(front: list, width: int) -> list:
    """At most ``width`` evenly spaced members of a spend-sorted front (both ends kept)."""
    if len(front) <= width:
        return front
    picks = sorted({round(i * (len(front) - 1) / (width - 1)) for i in range(width)})
    return [front[i] for i in picks]


@dataclass(frozen=True)
class LadderSearch:
    candidates: list[tuple[tuple[int, ...], Score]]  # learn-Pareto ladders (plus every single)
    pruned: tuple[str, ...]
    evaluated: int


def search_ladders(
    m: TaskMatrix,
    rows: np.ndarray,
    pass_threshold: float,
    *,
    strategy: str = "beam",
    max_rungs: int = MAX_RUNGS,
    beam: int = BEAM,
    measure: Measure = QUALITY,
) -> LadderSearch:
    """Candidate ladders on the learn rows of ``m``.

    ``beam`` (the default): dominated configs (:func:`dominated_configs`) are pruned from the rungs;
    every surviving single is extended by every other surviving config (n^2 two-rung ladders: the first
    rung's value is complementarity, which no single-config score shows); from then on only the Pareto
    front of the previous level in (mean spend, mean value) of the ``measure``, thinned to ``beam``, is extended by one
    more rung: a partial ladder that is both costlier and no better than another is not extended.
    Cost: about n^2 + beam * n ladder runs instead of n^3 (30 configs: ~1,600 instead of 24,360).
    ``exhaustive``: every ordered ladder of distinct configs up to ``max_rungs`` (the reference
    ``tests/fit/test_ladder_search.py`` compares the beam with: the beam finds every front ladder of up
    to two rungs; of three rungs it misses some, by at most 0.067 in quality on its 40 random matrices;
    refused above 12 configs). Returns the Pareto front over everything
    scored (ladders of 2+ rungs need coverage >= MIN_COVERAGE) plus every single config.
    """
    n = len(m.configs)
    scored: dict[tuple[int, ...], Score] = {}
    if not rows.all():  # scores use the rows alone: search on their sub-matrix
        m = _take_rows(m, rows)
        rows = np.ones(len(m.tasks), dtype=bool)
    runner = _Runner(m, pass_threshold)

    def evaluate(ladders: Iterable[tuple[int, ...]]) -> None:
        for lad in ladders:
            if lad not in scored:
                scored[lad] = score(runner.run(lad), None, m.cost_known, measure)

    singles = [(j,) for j in range(n)]
    evaluate(singles)
    pruned: tuple[str, ...] = ()
    if strategy == "exhaustive":
        if n > 12:
            raise ValueError(f"exhaustive ladder search refused for {n} configs (more than 12); use the beam")
        evaluate([p for k in range(2, max_rungs + 1) for p in itertools.permutations(range(n), k)])
    elif strategy == "beam":
        # Dominance compares whole columns of outcomes; an escalation outcome is not comparable with a first run.
        dominated = np.zeros(n, dtype=bool) if m.logged else dominated_configs(m, rows, pass_threshold)
        keep = [j for j in range(n) if not dominated[j]]
        pruned = tuple(m.configs[j] for j in range(n) if dominated[j])
        level = [(j,) for j in keep]
        for depth in range(2, max_rungs + 1):
            parents = (
                [(lad, scored[lad]) for lad in level]
                if depth == 2
                else _thin(_pareto([(lad, scored[lad]) for lad in level]), beam)
            )
            level = [(*lad, j) for lad, _s in parents for j in keep if j not in lad]
            evaluate(level)
    else:
        raise ValueError(f"unknown ladder search strategy {strategy!r}")
    eligible = [(lad, s) for lad, s in scored.items() if len(lad) == 1 or s.coverage >= MIN_COVERAGE]
    front = _pareto(eligible)
    in_front = {lad for lad, _ in front}
    candidates = front + [(lad, scored[lad]) for lad in singles if lad not in in_front]
    return LadderSearch(candidates=candidates, pruned=pruned, evaluated=len(scored))
