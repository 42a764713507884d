"""The compiled inner loop of the sequential replay (:mod:`pipeline.evaluate.replay`).

A replay is sequential by nature, and the exploration verdict reruns it thousands of times (seeds times
moving-block resamples), so the loop over task positions is compiled (numba), one run at a time, runs in
parallel. Each run keeps, per region, the greedy choice of its current posterior and recomputes it only when a
routed task changes that region's sums: a skipped task costs a few loads.

The greedy choice is the router's rule (:func:`pipeline.routing.greedy.greedy_key`, the spec), written here once
more because a compiled loop cannot call it: members at or above the quality floor first, then the higher value,
the higher quality, the lower cost (an unknown cost last), the lower index (the pool is in key order); an
undefined quality or value ranks after every defined one. ``tests/evaluate/test_replay_kernel.py`` checks the
kernel's choice against the router on generated tables, and whole replays against one that asks the rule itself
at every step (the same IEEE operations in the same order, no fast-math: the same floats, bit for bit).

Only :mod:`pipeline.evaluate.replay` imports this module, inside the function that routes, so numba is loaded
by a replay and never by the CLI. Compiled code is cached beside this file when the directory is writable.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

#: Objective codes of the kernel.
OBJECTIVES = {"quality": 0, "utility": 1, "quality_per_dollar": 2}

_jit = numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")


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
    draws: tuple[np.ndarray, ...],
    draw_of_run: np.ndarray,
    eps: np.ndarray,
    thompson: np.ndarray | None = None,
) -> Totals:
    """Route every run over ``order`` (task positions; None: every task once, in replay order).

    ``init``: regions x configs x 4 starting sums (S, W, sum and count of known costs). ``draws``: the uniforms
    that decide whether to explore, the ones that pick the other member (epsilon) and the standard normals of a
    Thompson draw (one per config; omitted, or rows x 1 x 1, when no run draws the Thompson way), one row per draw
    sequence, indexed by the step; ``draw_of_run``: each run's row; ``eps``: each run's exploration;
    ``thompson``: whether each run explores by Thompson draws (default: none does).
    """
    steps = np.arange(outcomes.task_region.shape[0]) if order is None else order
    n_runs = eps.shape[0]
    totals = Totals(np.zeros(n_runs, np.int64), np.zeros(n_runs, np.int64), *np.zeros((3, n_runs)))
    n_regions, k_pool = policy.prior.shape
    _routes(
        k_pool,
        np.ascontiguousarray(steps, dtype=np.int64),
        np.ascontiguousarray(outcomes.task_region, dtype=np.int64),
        np.ascontiguousarray(outcomes.value, dtype=np.float64),
        np.ascontiguousarray(outcomes.weight, dtype=np.float64),
        np.ascontiguousarray(outcomes.cost, dtype=np.float64),
        np.ascontiguousarray(outcomes.known, dtype=np.bool_),
        np.ascontiguousarray(init, dtype=np.float64).reshape(n_regions * k_pool, 4),
        np.ascontiguousarray(policy.prior, dtype=np.float64).reshape(-1),
        np.ascontiguousarray(policy.fallback, dtype=np.float64).reshape(-1),
        *_constants(policy),
        np.ascontiguousarray(draws[0], dtype=np.float64),
        np.ascontiguousarray(draws[1], dtype=np.float64),
        np.ascontiguousarray(draws[2] if len(draws) > 2 else np.zeros((len(draws[0]), 1, 1)), dtype=np.float64),
        np.ascontiguousarray(draw_of_run, dtype=np.int64),
        np.ascontiguousarray(eps, dtype=np.float64),
        np.zeros(n_runs, np.bool_) if thompson is None else np.ascontiguousarray(thompson, dtype=np.bool_),
        *totals,
    )
    return totals


@_jit
def _refresh(i, sums, prior, fallback, params, flags, keys, above):  # type: ignore[no-untyped-def]
    """The posterior of cell ``i`` (a region's config): its greedy keys (the score, q, minus the cost estimate) and
    whether q is at or above the quality floor. ``sums``: S, W, the sum and count of known costs per cell."""
    k, floor, lam, min_quality = params[0], params[1], params[2], params[3]
    s, w, cost_sum, cost_n = sums[i, 0], sums[i, 1], sums[i, 2], sums[i, 3]
    p = prior[i]
    # q = (k * p + S) / (k + W); q = p when k + W = 0 (docs/design.md, Quality)
    q = p if k + w == 0 else (k * p + s) / (k + w)
    # cost(c, r): the mean of the known task costs revealed so far, else the fit's estimate; floored
    est = cost_sum / max(cost_n, 1.0) if cost_n > 0 else fallback[i]
    if not np.isnan(est):
        est = max(est, floor)
    # the objective on the posterior (quality where the cost is unknown: pipeline.routing.greedy.objective_value)
    if flags[0] == 0 or np.isnan(est):
        value = q
    elif flags[0] == 1:
        value = lam * q - est
    else:
        value = q / est
    # an undefined quality or value ranks after every defined one (pipeline.routing.greedy.greedy_key)
    if np.isnan(q):
        q = -np.inf
    if np.isnan(value):
        value = -np.inf
    up = True if flags[2] == 0 else q >= min_quality
    above[i] = up
    # at or above the quality floor first, by the objective; below it, by quality alone (docs/design.md, Fit)
    keys[i, 0] = value if up else q
    keys[i, 1] = q
    # lower cost first, an unknown cost last
    keys[i, 2] = -np.inf if np.isnan(est) else -est


@_jit
def _thompson(first, n, sums, prior, fallback, params, flags, z):  # type: ignore[no-untyped-def]
    """A Thompson draw among cells ``first .. first + n - 1`` (the router's, :func:`pipeline.routing.thompson.draw`):
    theta = q + sd z per config (``z`` in key order), sd of a Beta with n = k + W pseudo-samples; the best sampled
    objective, the first in key order on a tie. Returns the index in the region."""
    k, floor, lam = params[0], params[1], params[2]
    best, best_value = 0, -np.inf
    for j in range(n):
        i = first + j
        s, w, cost_sum, cost_n = sums[i, 0], sums[i, 1], sums[i, 2], sums[i, 3]
        p = prior[i]
        q = p if k + w == 0 else (k * p + s) / (k + w)
        m = max(k, 0.0) + max(w, 0.0)
        qc = min(max(q, 0.0), 1.0)
        a, b = qc * m + 0.5, (1.0 - qc) * m + 0.5
        sd = np.sqrt(a * b / ((a + b) ** 2 * (a + b + 1.0)))
        est = cost_sum / max(cost_n, 1.0) if cost_n > 0 else fallback[i]
        if not np.isnan(est):
            est = max(est, floor)
        theta = q + sd * z[j]
        # the objective is affine in theta, slope * theta + intercept, the same operations as the router's
        # (pipeline.routing.thompson._affine): quality where the cost is unknown
        slope, intercept = 1.0, 0.0
        if flags[0] == 1 and not np.isnan(est):
            slope, intercept = (lam if flags[1] else 1.0), -est
        elif flags[0] == 2 and not np.isnan(est):
            slope = 1.0 / est
        value = slope * theta + intercept
        if value > best_value:
            best, best_value = j, value
    return best


@_jit
def _before(keys, above, a, b):  # type: ignore[no-untyped-def]
    """Cell a ranks strictly before cell b in the greedy order (a lower index breaks a tie: the caller's order)."""
    if above[a] != above[b]:
        return above[a]
    for j in range(3):
        if keys[a, j] != keys[b, j]:
            return keys[a, j] > keys[b, j]
    return False


@_jit
def _greedy(first, n, keys, above):  # type: ignore[no-untyped-def]
    """The greedy choice among cells ``first .. first + n - 1`` (one region's configs, in key order)."""
    b = first
    for i in range(first + 1, first + n):
        if _before(keys, above, i, b):
            b = i
    return b - first


def greedy_choices(policy: Policy, init: np.ndarray) -> np.ndarray:
    """Per region the kernel's greedy choice (an index into the pool) from ``init`` (regions x configs x 4 sums):
    what a replay routes a task to before any exploration draw (``tests/evaluate/test_replay_kernel.py`` holds it
    against the router)."""
    n_regions, k_pool = policy.prior.shape
    return _choices(
        k_pool,
        np.ascontiguousarray(init, dtype=np.float64).reshape(n_regions * k_pool, 4),
        np.ascontiguousarray(policy.prior, dtype=np.float64).reshape(-1),
        np.ascontiguousarray(policy.fallback, dtype=np.float64).reshape(-1),
        *_constants(policy),
    )


def thompson_choice(policy: Policy, init: np.ndarray, region: int, z: np.ndarray) -> int:
    """The kernel's Thompson draw in ``region`` (an index into the pool) from ``init`` and the normals ``z`` (one per
    config, key order): ``tests/evaluate/test_replay_kernel.py`` holds it against the router's draw."""
    n_regions, k_pool = policy.prior.shape
    params, flags = _constants(policy)
    return int(
        _thompson_at(
            region * k_pool,
            k_pool,
            np.ascontiguousarray(init, dtype=np.float64).reshape(n_regions * k_pool, 4),
            np.ascontiguousarray(policy.prior, dtype=np.float64).reshape(-1),
            np.ascontiguousarray(policy.fallback, dtype=np.float64).reshape(-1),
            params,
            flags,
            np.ascontiguousarray(z, dtype=np.float64),
        )
    )


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _thompson_at(first, n, sums, prior, fallback, params, flags, z):  # type: ignore[no-untyped-def]
    return _thompson(first, n, sums, prior, fallback, params, flags, z)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _choices(k_pool, init, prior, fallback, params, flags):  # type: ignore[no-untyped-def]
    n_cells = init.shape[0]
    keys = np.empty((n_cells, 3))
    above = np.empty(n_cells, dtype=np.bool_)
    for i in range(n_cells):
        _refresh(i, init, prior, fallback, params, flags, keys, above)
    out = np.empty(n_cells // k_pool, dtype=np.int64)
    for g in range(n_cells // k_pool):
        out[g] = _greedy(g * k_pool, k_pool, keys, above)
    return out


def _constants(policy: Policy) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's ``params`` (k, floor, lambda, quality floor) and ``flags`` (objective code, lambda given, floor
    given). Utility needs lambda: there is no default (pipeline.routing.greedy)."""
    if policy.objective == "utility" and policy.lam is None:
        raise ValueError("the utility objective needs lambda: a replay has no default")
    params = np.array(
        [policy.prior_weight, policy.floor, policy.lam or 0.0, policy.min_quality or 0.0], dtype=np.float64
    )
    flags = np.array(
        [OBJECTIVES[policy.objective], policy.lam is not None, policy.min_quality is not None], dtype=np.int64
    )
    return params, flags


@numba.njit(cache=True, nogil=True, error_model="numpy", parallel=True)
def _routes(  # type: ignore[no-untyped-def]
    k_pool, order, task_region, value, weight, cost, known, init, prior, fallback, params, flags, draw_u, draw_i,
    draw_z, draw_of_run, eps, thompson, routed, explored, total_q, total_cost, total_utility,
):  # fmt: skip
    """Cells (``init``, ``prior``, ``fallback``) are region-major: cell = region * configs + config. The keys have one
    more row, where a cell's previous keys are kept while it is refreshed."""
    n_cells = init.shape[0]
    n_regions, lam, old = n_cells // k_pool, params[2], n_cells
    # Every run starts from the same sums, so from the same keys and greedy choices.
    keys0 = np.empty((n_cells + 1, 3))
    above0 = np.empty(n_cells + 1, dtype=np.bool_)
    choice0 = np.empty(n_regions, dtype=np.int64)
    for i in range(n_cells):
        _refresh(i, init, prior, fallback, params, flags, keys0, above0)
    for g in range(n_regions):
        choice0[g] = _greedy(g * k_pool, k_pool, keys0, above0)
    for run in numba.prange(eps.shape[0]):
        sums, keys, above, choice = init.copy(), keys0.copy(), above0.copy(), choice0.copy()
        row = draw_of_run[run]
        u_row, i_row, z_rows, e, ts = draw_u[row], draw_i[row], draw_z[row], eps[run], thompson[run]
        n_routed, n_explored, tq, tc, tu = 0, 0, 0.0, 0.0, 0.0
        for step in range(order.shape[0]):
            task = order[step]
            g = task_region[task]
            chosen = choice[g]
            if k_pool > 1 and u_row[step] < e:
                if ts:  # a Thompson draw among the whole pool (it may draw the greedy choice)
                    drawn = _thompson(g * k_pool, k_pool, sums, prior, fallback, params, flags, z_rows[step])
                    if drawn != chosen:
                        n_explored += 1
                    chosen = drawn
                else:
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
            first = g * k_pool
            i = first + chosen
            sums[i, 0] += v * w
            sums[i, 1] += w
            if known[cell]:
                sums[i, 2] += c
                sums[i, 3] += 1.0
            keys[old, 0], keys[old, 1], keys[old, 2], above[old] = keys[i, 0], keys[i, 1], keys[i, 2], above[i]
            _refresh(i, sums, prior, fallback, params, flags, keys, above)
            # Only cell i changed: the choice is the better of the previous choice and i, unless i was the choice
            # and fell back: then every cell of the region is ranked again.
            b = first + choice[g]
            if i == b and _before(keys, above, old, i):
                choice[g] = _greedy(first, k_pool, keys, above)
            elif i != b and (_before(keys, above, i, b) or (i < b and not _before(keys, above, b, i))):
                choice[g] = chosen
        routed[run] = n_routed
        explored[run] = n_explored
        total_q[run] = tq
        total_cost[run] = tc
        total_utility[run] = tu
