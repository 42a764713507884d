"""The intervals of the evaluation: Wilson for one rate, one paired bootstrap for every difference.

Every figure the evaluation compares is a per-task column first (a hit, a quality, a cost, a sum of squared
errors, ...). Two methods scored on the same tasks are two columns of one frame, one row per task, and the
interval of their difference is :func:`paired_bootstrap` over those rows: tasks are the resampled unit, so
the pairing (and any correlation between ratings of one task) is kept.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

#: z of a two-sided 95% normal interval.
Z95 = 1.959963984540054
#: Resamples of every paired bootstrap (docs/design.md, Evaluation).
RESAMPLES = 1000
#: Above this many tasks a resample draws this many (the m-out-of-n bootstrap: :func:`paired_bootstrap`).
SUBSAMPLE = 20_000


def wilson(hits: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval: ``(p + z^2/2n +- z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)``; None when n = 0."""
    if n == 0:
        return None
    p = hits / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def paired_bootstrap(
    per_task: pl.DataFrame, a: str, b: str, *, weight: str | None = None, seed: int, resamples: int = RESAMPLES
) -> tuple[float, float] | None:
    """95% percentile interval of ``sum(a)/sum(w) - sum(b)/sum(w)`` resampling the rows (tasks) with replacement.

    ``a`` and ``b`` name the per-task columns of the two methods on the same tasks (paired); ``weight`` the
    per-task denominators (1 each when None: a rate or a mean per task; the number of ratings for a mean
    squared error over ratings). Rows are taken in the frame's order, so callers sort it (by task). Seeded:
    same frame, same interval. None when there are no tasks.

    Above :data:`SUBSAMPLE` tasks each resample draws ``m = SUBSAMPLE`` of the n tasks and the interval is the
    estimate plus ``sqrt(m / n)`` times the resamples' spread about it, ``est + sqrt(m / n) (q_0.025 - est,
    q_0.975 - est)`` (the m-out-of-n bootstrap of a smooth statistic; with m = n, the percentile interval): the
    cost stays ``resamples * m`` however many tasks there are.
    """
    n = per_task.height
    if n == 0:
        return None
    w = np.ones(n) if weight is None else per_task[weight].to_numpy().astype(float)
    diff = per_task[a].to_numpy().astype(float) - per_task[b].to_numpy().astype(float)
    m = min(n, SUBSAMPLE)
    rng = np.random.default_rng(seed)
    stats = np.empty(resamples)
    chunk = max(1, min(resamples, 4_000_000 // m))
    for start in range(0, resamples, chunk):
        size = min(chunk, resamples - start)
        idx = rng.integers(0, n, size=(size, m))
        den = w[idx].sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            stats[start : start + size] = diff[idx].sum(axis=1) / den
    stats = stats[np.isfinite(stats)]
    if stats.size == 0:
        return None
    low, high = np.quantile(stats, [0.025, 0.975])
    if m == n:
        return (float(low), float(high))
    estimate = float(diff.sum() / w.sum())
    scale = math.sqrt(m / n)
    return (estimate + scale * (float(low) - estimate), estimate + scale * (float(high) - estimate))
