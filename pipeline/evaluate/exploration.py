"""The exploration verdict's evidence: the sequential replay on held-out tasks, the fitted against the shipped arm
(how it explores, epsilon or Thompson, and how much).

One replay path cannot carry an interval: it is path-dependent (what it learns on a task changes later
choices), which tasks it skips depends on epsilon, and for quality per dollar its value is a ratio of totals,
so a per-task bootstrap of one path resamples quantities that are not independent. So (docs/design.md,
Evaluation):

- **Seeds.** Each epsilon is replayed with :data:`SEEDS` draw sequences; its value is the mean over them of the
  realized objective (:mod:`pipeline.evaluate.replay`). Both epsilons use the same draws (common random
  numbers), so the difference ``D = mean_s V(fitted, s) - V(shipped, s)`` is paired. What is estimated is the
  expected difference over the replay's draws, so the Monte Carlo error of this mean must be small next to
  the interval.
- **Moving-block bootstrap** (Kuensch 1989). The held-out tasks in time order are cut into overlapping blocks
  of ``L = round(n ** (1/3))`` consecutive tasks (the rate that balances bias and variance for a variance or
  distribution estimate, Hall, Horowitz and Jing 1995); a resample is ``ceil(n / L)`` blocks drawn with
  replacement, concatenated and cut to n tasks. On each of :data:`RESAMPLES` resamples every replay is rerun
  from the same learned start with :data:`BOOTSTRAP_SEEDS` of the seeds (their larger Monte Carlo error only
  widens the bootstrap distribution, the conservative side, at a fraction of the cost), the ratio computed on
  that resample, and D recomputed (resamples where a side routes nothing are dropped and counted). Blocks keep
  the short-range dependence of consecutive tasks (drift, bursts of one region); the replays are rerun, not
  their per-task values resampled, so path dependence and skips are inside every resample.
- **Many tasks: m out of n.** Above :data:`SUBSAMPLE` held-out tasks each resample replays ``m = SUBSAMPLE``
  tasks (``ceil(m / L)`` blocks of ``L = round(m ** (1/3))`` drawn from all n positions), and the spread of its
  D_b is scaled by ``sqrt(m / n)`` (the m-out-of-n bootstrap: Politis and Romano 1994; Bickel, Goetze and van
  Zwet 1997). A replay's value is a mean (or a ratio of totals) over its tasks, so its spread falls like
  ``1 / sqrt(tasks)``; the scaled spread of m-task replays estimates the n-task one, the estimate D itself still
  replays all n tasks with every seed, and the bootstrap's cost stays fixed however many tasks there are (the
  replays of the estimate grow linearly). Checked on the simulator (bench.verdicts ``--subsample``:
  docs/design.md, Verdicts).
- **The interval takes only the spread from the bootstrap** (:func:`recentred_interval`). A path-dependent
  replay rerun on shuffled blocks learns differently from the time-ordered path (a drift it learns from is cut
  into pieces, and fewer seeds average each resample), so the bootstrap distribution sits away from the
  estimate by more than sampling error. That offset is a property of the resampling, not a bias of the
  estimate, so it is not corrected for: a bias-corrected percentile interval read it as bias and, when every
  resample fell below the estimate, collapsed to the top of the distribution, beside the estimate (RouterBench:
  +2866 with interval [+2830, +2831]).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl

from .replay import ReplayResult, ReplayRun, ReplayStart, replay_runs

#: Replay seeds averaged per epsilon for a value or a difference (validation and held-out).
SEEDS = 32
#: Replay seeds per epsilon on each bootstrap resample (the first of the :data:`SEEDS`).
BOOTSTRAP_SEEDS = 8
#: Moving-block bootstrap resamples.
RESAMPLES = 200
#: Above this many held-out tasks a resample replays this many (the m-out-of-n block bootstrap, module doc).
SUBSAMPLE = 5000


def block_length(n: int) -> int:
    """``max(1, round(n ** (1/3)))`` consecutive tasks per block."""
    return max(1, round(n ** (1 / 3)))


def block_orders(n: int, *, resamples: int, seed: int | tuple[int, ...], tasks: int | None = None) -> np.ndarray:
    """``resamples`` x ``m`` task positions (``m = tasks``, default ``n``): blocks of ``block_length(m)``
    consecutive positions of the ``n``, their starts uniform over the ``n - L + 1`` possible ones, concatenated
    and cut to ``m``."""
    m = n if tasks is None else tasks
    length = block_length(m)
    blocks = math.ceil(m / length)
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, n - length + 1, size=(resamples, blocks))
    return (starts[:, :, None] + np.arange(length)).reshape(resamples, blocks * length)[:, :m]


def recentred_interval(stats: np.ndarray, estimate: float, scale: float = 1.0) -> tuple[float, float]:
    """95% interval of ``estimate`` from its bootstrap values ``stats``: their 2.5% and 97.5% quantiles moved by
    ``estimate - median(stats)``, their spread times ``scale``: ``estimate + scale (q_0.025 - median, q_0.975 -
    median)``.

    The bootstrap gives the spread; the estimate gives the centre (see the module doc for why the bootstrap's
    own centre is not used). The estimate is always inside its interval. ``scale`` is ``sqrt(m / n)`` when each
    resample replayed m of the n tasks.
    """
    low, median, high = np.quantile(stats, [(1 - 0.95) / 2, 0.5, (1 + 0.95) / 2])
    return float(estimate + scale * (low - median)), float(estimate + scale * (high - median))


def _mean(results: list[ReplayResult], field: str) -> float | None:
    values = [getattr(r, field) for r in results if getattr(r, field) is not None]
    return float(np.mean(values)) if values else None


#: How a replay explores and how much: ``(mode, eps)``, mode ``epsilon`` or ``thompson`` (docs/design.md, Exploration).
Arm = tuple[str, float]


def _side(results: list[ReplayResult], arm: Arm) -> dict[str, Any]:
    return {
        "exploration": arm[1],
        "exploration_mode": arm[0],
        "realized_value": _mean(results, "realized_value"),
        "tasks_routed": _mean(results, "tasks_routed"),
        "tasks_skipped": _mean(results, "tasks_skipped"),
        "explored": _mean(results, "explored"),
    }


def _difference(fitted: list[ReplayResult], shipped: list[ReplayResult]) -> float | None:
    """Mean over the seeds where both sides routed something of ``V(fitted) - V(shipped)``."""
    pairs = [
        f.realized_value - s.realized_value
        for f, s in zip(fitted, shipped, strict=True)
        if f.realized_value is not None and s.realized_value is not None
    ]
    return float(np.mean(pairs)) if pairs else None


def seeded_runs(arm: Arm, seed: int, *, seeds: int, order: np.ndarray | None = None) -> list[ReplayRun]:
    """The :data:`SEEDS` runs of one arm: seed ``(seed, i)`` for replicate i (both modes share the draws)."""
    return [ReplayRun(arm[1], (seed, i), order, arm[0]) for i in range(seeds)]


def replay_value(
    start: ReplayStart, tasks: pl.DataFrame, outcomes: pl.DataFrame, arms: list[Arm], *, seed: int,
    seeds: int = SEEDS,
) -> list[dict[str, Any]]:  # fmt: skip
    """Per arm, its replay averaged over ``seeds`` seeds (:func:`_side`): what validation chooses by."""
    runs = [r for arm in arms for r in seeded_runs(arm, seed, seeds=seeds)]
    results = replay_runs(start, tasks, outcomes, runs)
    return [_side(results[i * seeds : (i + 1) * seeds], arm) for i, arm in enumerate(arms)]


def compare_explorations(
    start: ReplayStart,
    tasks: pl.DataFrame,
    outcomes: pl.DataFrame,
    *,
    shipped: Arm | float,
    fitted: Arm | float,
    seed: int,
    seeds: int = SEEDS,
    bootstrap_seeds: int = BOOTSTRAP_SEEDS,
    resamples: int = RESAMPLES,
    subsample: int | None = None,
) -> dict[str, Any]:
    """Held-out replay of ``fitted`` against ``shipped`` (arms; a bare eps explores the epsilon way) from one learned
    start: both sides averaged over ``seeds`` seeds, their difference and its moving-block bootstrap 95% interval
    (``bootstrap_seeds`` seeds a resample; above ``subsample`` tasks each resample replays ``subsample`` of them,
    module doc)."""
    fitted = fitted if isinstance(fitted, tuple) else ("epsilon", fitted)
    shipped = shipped if isinstance(shipped, tuple) else ("epsilon", shipped)
    n = tasks.height
    base = seeded_runs(fitted, seed, seeds=seeds) + seeded_runs(shipped, seed, seeds=seeds)
    results = replay_runs(start, tasks, outcomes, base)
    fit_runs, ship_runs = results[:seeds], results[seeds:]
    diff = _difference(fit_runs, ship_runs)
    boot_seeds = min(bootstrap_seeds, seeds)
    method = {
        "seeds": seeds,
        "bootstrap_seeds": boot_seeds,
        "resamples": resamples,
        "block_length": block_length(min(n, SUBSAMPLE if subsample is None else subsample)) if n else None,
        "tasks": n,
    }
    ci = None
    dropped = resamples
    m = min(n, SUBSAMPLE if subsample is None else subsample)
    if m < n:
        method["resample_tasks"] = m
    if n and diff is not None and resamples:
        orders = block_orders(n, resamples=resamples, seed=(seed, 1_000_003), tasks=m)
        runs = [
            r
            for order in orders
            for arm in (fitted, shipped)
            for r in seeded_runs(arm, seed, seeds=boot_seeds, order=order)
        ]
        boot = replay_runs(start, tasks, outcomes, runs)
        stats = []
        for b in range(resamples):
            chunk = boot[b * 2 * boot_seeds : (b + 1) * 2 * boot_seeds]
            d = _difference(chunk[:boot_seeds], chunk[boot_seeds:])
            if d is not None and math.isfinite(d):
                stats.append(d)
        dropped = resamples - len(stats)
        if stats:
            ci = recentred_interval(np.array(stats), diff, math.sqrt(m / n))
    method["dropped_resamples"] = dropped
    return {
        "shipped": _side(ship_runs, shipped),
        "fitted": _side(fit_runs, fitted),
        "difference": {"value": diff, "ci95": ci},
        "method": method,
    }
