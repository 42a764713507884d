"""The compiled inner loop of the sequential replay (:mod:`pipeline.evaluate.replay`).

A replay is sequential by nature, and the exploration verdict reruns it thousands of times (seeds times
moving-block resamples), so the loop over task positions is compiled (numba), one run at a time, runs in
parallel. Each run keeps, per region, the greedy choice of its current posterior and recomputes it only when a
routed task changes that region's sums: a skipped task costs a few loads.

The arithmetic is the one :mod:`pipeline.evaluate.replay` documents, operation for operation (the same IEEE
operations in the same order, no fast-math), so a run gives the same floats, bit for bit, as a plain numpy
replay: ``tests/evaluate/test_replay_kernel.py`` checks it against one.

Only :mod:`pipeline.evaluate.replay` imports this module, inside the function that routes, so numba is loaded
by a replay and never by the CLI. Compiled code is cached beside this file when the directory is writable.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

#: Objective codes of the kernel.
OBJECTIVES = {"quality": 0, "utility": 1, "quality_per_dollar": 2}
_BIG = np.finfo(np.float64).max

_jit = numba.njit(cache=True, nogil=True, error_model="numpy")


class Totals(NamedTuple):
    """Per run: tasks routed, explorations drawn, total quality, total known cost, total utility."""

    routed: np.ndarray
    explored: np.ndarray
    total_q: np.ndarray
    total_cost: np.ndarray
    total_utility: np.ndarray


class Policy(NamedTuple):
    """What the posterior and the greedy order need besides the sums (from the replay's start)."""

    prior: np.ndarray  # regions x configs: p(c, r)
    fallback: np.ndarray  # regions x configs: cost(c, r) of the fit the replay starts from (NaN: unknown)
    prior_weight: float
    floor: float
    objective: str  # the effective objective
    lam: float | None
    min_quality: float | None


class Outcomes(NamedTuple):
    """Flat task x config arrays (row-major, tasks in replay order) and each task's region (an index)."""

    value: np.ndarray  # q_t,c (NaN: not observed)
    weight: np.ndarray
    cost: np.ndarray  # cost_t,c (NaN: unknown)
    known: np.ndarray  # cost_t,c is a known cost (every attempt priced): it updates the cost mean
    task_region: np.ndarray


def route_runs(
    policy: Policy,
    outcomes: Outcomes,
    init: np.ndarray,
    order: np.ndarray | None,
    draws: tuple[np.ndarray, np.ndarray],
    draw_of_run: np.ndarray,
    eps: np.ndarray,
) -> Totals:
    """Route every run over ``order`` (task positions; None: every task once, in replay order).

    ``init``: regions x configs x 4 starting sums (S, W, sum and count of known costs). ``draws``: the uniforms
    that decide whether to explore and the ones that pick the other member, one row per draw sequence, indexed by
    the step; ``draw_of_run``: each run's row; ``eps``: each run's exploration.
    """
    steps = np.arange(outcomes.task_region.shape[0]) if order is None else order
    n_runs = eps.shape[0]
    totals = Totals(np.zeros(n_runs, np.int64), np.zeros(n_runs, np.int64), *np.zeros((3, n_runs)))
    _routes(
        np.ascontiguousarray(steps, dtype=np.int64),
        np.ascontiguousarray(outcomes.task_region, dtype=np.int64),
        np.ascontiguousarray(outcomes.value, dtype=np.float64),
        np.ascontiguousarray(outcomes.weight, dtype=np.float64),
        np.ascontiguousarray(outcomes.cost, dtype=np.float64),
        np.ascontiguousarray(outcomes.known, dtype=np.bool_),
        np.ascontiguousarray(init, dtype=np.float64),
        np.ascontiguousarray(policy.prior, dtype=np.float64),
        np.ascontiguousarray(policy.fallback, dtype=np.float64),
        np.array(
            [policy.prior_weight, policy.floor, policy.lam or 0.0, policy.min_quality or 0.0], dtype=np.float64
        ),
        np.array(
            [OBJECTIVES[policy.objective], policy.lam is not None, policy.min_quality is not None], dtype=np.int64
        ),
        np.ascontiguousarray(draws[0], dtype=np.float64),
        np.ascontiguousarray(draws[1], dtype=np.float64),
        np.ascontiguousarray(draw_of_run, dtype=np.int64),
        np.ascontiguousarray(eps, dtype=np.float64),
        *totals,
    )
    return totals


@_jit
def _refresh(sums, prior, fallback, c, params, flags, keys, above):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Config c's posterior of one region: its greedy keys (score, q, minus the cost) and whether q is at or above
    the quality floor."""
    k, floor, lam, min_quality = params[0], params[1], params[2], params[3]
    s, w, cost_sum, cost_n = sums[c, 0], sums[c, 1], sums[c, 2], sums[c, 3]
    p = prior[c]
    # q = (k * p + S) / (k + W); q = p when k + W = 0 (DESIGN 5)
    q = p if k + w == 0 else (k * p + s) / (k + w)
    # cost(c, r): the mean of the known task costs revealed so far, else the fit's estimate; floored
    est = cost_sum / max(cost_n, 1.0) if cost_n > 0 else fallback[c]
    if not np.isnan(est):
        est = max(est, floor)
    # the objective on the posterior (quality where the cost is unknown)
    if flags[0] == 0 or np.isnan(est):
        value = q
    elif flags[0] == 1:
        value = lam * q - est
    else:
        value = q / est
    above[c] = True if flags[2] == 0 else q >= min_quality
    # at or above the quality floor first, by the objective; below it, by quality alone (docs/design.md, Fit)
    keys[c, 0] = value if above[c] else q
    keys[c, 1] = q
    # lower cost first, an unknown cost as 0 (numpy's nan_to_num: infinities as the largest finite numbers)
    keys[c, 2] = -(0.0 if np.isnan(est) else (_BIG if est == np.inf else (-_BIG if est == -np.inf else est)))


@_jit
def _greedy(keys, above, best):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """The greedy choice of one region (docs/design.md, Fit), stage by stage as a max over the remaining ties: at or
    above the floor, the best score, the higher q, the lower cost, then the first key. As with numpy's max, a NaN
    among the remaining ties leaves none, and the choice is then the first key."""
    n = keys.shape[0]
    any_above = False
    for c in range(n):
        any_above = any_above or above[c]
    for c in range(n):
        best[c] = above[c] == any_above
    for stage in range(3):
        top = -np.inf
        nan = False
        for c in range(n):
            x = keys[c, stage] if best[c] else -np.inf
            if np.isnan(x):
                nan = True
            elif x > top:
                top = x
        for c in range(n):
            best[c] = best[c] and not nan and keys[c, stage] == top
    for c in range(n):
        if best[c]:
            return c
    return 0


@numba.njit(cache=True, nogil=True, error_model="numpy", parallel=True)
def _routes(  # type: ignore[no-untyped-def]  # noqa: ANN001, PLR0913
    order, task_region, value, weight, cost, known, init, prior, fallback, params, flags, draw_u, draw_i,
    draw_of_run, eps, routed, explored, total_q, total_cost, total_utility,
):  # fmt: skip
    n_regions, k_pool = init.shape[0], init.shape[1]
    lam = params[2]
    # Every run starts from the same sums, so from the same keys and greedy choices.
    keys0 = np.empty((n_regions, k_pool, 3))
    above0 = np.empty((n_regions, k_pool), dtype=np.bool_)
    choice0 = np.empty(n_regions, dtype=np.int64)
    ties = np.empty(k_pool, dtype=np.bool_)
    for g in range(n_regions):
        for c in range(k_pool):
            _refresh(init[g], prior[g], fallback[g], c, params, flags, keys0[g], above0[g])
        choice0[g] = _greedy(keys0[g], above0[g], ties)
    for run in numba.prange(eps.shape[0]):
        sums, keys, above, choice = init.copy(), keys0.copy(), above0.copy(), choice0.copy()
        best = np.empty(k_pool, dtype=np.bool_)
        u_row, i_row, e = draw_u[draw_of_run[run]], draw_i[draw_of_run[run]], eps[run]
        n_routed, n_explored, tq, tc, tu = 0, 0, 0.0, 0.0, 0.0
        for step in range(order.shape[0]):
            task = order[step]
            g = task_region[task]
            chosen = choice[g]
            if k_pool > 1 and u_row[step] < e:
                other = np.int64(i_row[step] * (k_pool - 1))  # uniform over the pool without the greedy choice
                chosen = other if other < chosen else other + 1
                n_explored += 1
            cell = task * k_pool + chosen
            v = value[cell]
            if np.isnan(v):  # the chosen config did not do this task: skipped, nothing revealed
                continue
            n_routed += 1
            tq += v
            c = cost[cell]
            if not np.isnan(c):
                tc += c
                if flags[1]:
                    tu += lam * v - c
            w = weight[cell]
            sums[g, chosen, 0] += v * w
            sums[g, chosen, 1] += w
            if known[cell]:
                sums[g, chosen, 2] += c
                sums[g, chosen, 3] += 1.0
            _refresh(sums[g], prior[g], fallback[g], chosen, params, flags, keys[g], above[g])
            choice[g] = _greedy(keys[g], above[g], best)
        routed[run] = n_routed
        explored[run] = n_explored
        total_q[run] = tq
        total_cost[run] = tc
        total_utility[run] = tu
