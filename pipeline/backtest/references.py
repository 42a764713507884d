"""The objective's realized value and the references a backtest is measured against (docs/design.md, Backtest,
References), all on exactly the tasks reported.

Each reference runs one config per task and reveals that config's first row (what a single run reveals):

- a **static start**: one config for every task;
- the **best single**: the one config with the best realized value on the tasks, in hindsight;
- the **best region-level table**: one config per region, chosen together with hindsight to maximize the
  realized value on the tasks;
- the **per-task oracle**: one config per task, the same way.

The last three are one function, :func:`best_choice`, over groups of tasks (one group; one per region; one per
task). For quality and utility the value is a sum over groups, so each group takes its own best. For quality per
dollar it is a ratio of totals over the groups together, maximized exactly by Dinkelbach's iteration: with rho
the current ratio, every group takes the config maximizing ``Q_g,c - rho C_g,c`` (its quality total minus rho
times its cost total), and rho becomes the new choice's ``sum Q / sum C``, until rho stops rising; at the fixed
point ``max sum_g (Q - rho C) = 0``, so no choice has a ratio above rho. (Exact whenever the best choice's total
cost is at least the cost floor: a total below it would be floored.) Ties go to the config first in key order.
"""

from __future__ import annotations

import numpy as np

#: Dinkelbach's iteration rises strictly until its fixed point; it stops in a handful of steps. A bound all the same.
MAX_ITERATIONS = 1000


def effective_objective(objective: str, cost_known: bool) -> str:
    """The objective ranked by: quality when the table has no costs (as the fit degrades it)."""
    return objective if cost_known else "quality"


def realized_value(quality: np.ndarray, cost: np.ndarray, objective: str, lam: float | None, floor: float) -> float:
    """The realized value of outcomes (one per task, the task's quality and its cost summed over its runs).

    quality_per_dollar = sum q / max(sum cost, floor); utility = mean (lambda * q - cost); quality = mean q.
    """
    if not len(quality):
        return float("nan")
    if objective == "quality_per_dollar":
        return float(quality.sum() / max(float(cost.sum()), floor))
    if objective == "utility":
        assert lam is not None, "utility needs lambda"
        return float((lam * quality.sum() - cost.sum()) / len(quality))
    return float(quality.mean())


def best_choice(
    quality: np.ndarray,
    cost: np.ndarray,
    groups: np.ndarray,
    n_groups: int,
    objective: str,
    lam: float | None,
    floor: float,
) -> np.ndarray:
    """Per group, the config index that maximizes the realized value of all groups together (module doc).

    ``quality``, ``cost``: [tasks, configs] first-row outcomes; ``groups``: [tasks] group codes 0..n_groups-1.
    """
    configs = quality.shape[1]
    q = np.zeros((n_groups, configs))
    c = np.zeros((n_groups, configs))
    np.add.at(q, groups, quality)
    np.add.at(c, groups, cost)
    if objective == "quality":
        return np.argmax(q, axis=1)
    if objective == "utility":
        assert lam is not None, "utility needs lambda"
        return np.argmax(lam * q - c, axis=1)
    rows = np.arange(n_groups)
    rho = 0.0
    choice = np.argmax(q, axis=1)
    for _ in range(MAX_ITERATIONS):
        ratio = q[rows, choice].sum() / max(c[rows, choice].sum(), floor)
        if ratio <= rho:
            break
        rho = float(ratio)
        choice = np.argmax(q - rho * c, axis=1)
    return choice
