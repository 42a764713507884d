"""The compiled replay gives the same floats, bit for bit, as the plain numpy replay it replaced.

``numpy_routes`` is that replay, step by step over all runs at once (numpy over runs x configs), kept here as
the reference. Hypothesis draws pools, regions, priors (NaN included), cost estimates (NaN and zero included),
quality floors, every objective, weights of 0, orders with repeats and several draw sequences; both must agree
on every total exactly.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.evaluate.replay_kernel import Outcomes, Policy, Totals, route_runs


def numpy_values(policy: Policy, q: np.ndarray, cost: np.ndarray) -> np.ndarray:
    if policy.objective == "quality":
        return q
    if policy.objective == "utility":
        return np.where(np.isnan(cost), q, (policy.lam or 0.0) * q - cost)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return np.where(np.isnan(cost), q, q / cost)


def numpy_greedy(above: np.ndarray, score: np.ndarray, q: np.ndarray, est: np.ndarray) -> np.ndarray:
    best = above == above.max(axis=1, keepdims=True)
    s_best = np.where(best, score, -np.inf)
    best &= s_best == s_best.max(axis=1, keepdims=True)
    q_best = np.where(best, q, -np.inf)
    best &= q_best == q_best.max(axis=1, keepdims=True)
    cheap = np.where(best, -np.nan_to_num(est, nan=0.0), -np.inf)
    best &= cheap == cheap.max(axis=1, keepdims=True)
    return np.argmax(best, axis=1)


def numpy_routes(
    policy: Policy,
    outcomes: Outcomes,
    init: np.ndarray,
    order: np.ndarray,
    draws: tuple[np.ndarray, np.ndarray],
    draw_of_run: np.ndarray,
    eps: np.ndarray,
) -> Totals:
    value, weight, cost, known, task_region = outcomes
    n_runs, (g_regions, k_pool, _) = len(eps), init.shape
    sums = np.broadcast_to(init, (n_runs, g_regions, k_pool, 4)).copy()
    orders = np.broadcast_to(order, (n_runs, len(order)))
    draw_u, draw_i = draws[0][draw_of_run], draws[1][draw_of_run]
    rows = np.arange(n_runs)
    routed = np.zeros(n_runs, dtype=np.int64)
    explored = np.zeros(n_runs, dtype=np.int64)
    total_q, total_cost, total_utility = np.zeros(n_runs), np.zeros(n_runs), np.zeros(n_runs)
    k = policy.prior_weight
    for step in range(orders.shape[1]):
        task = orders[:, step]
        region = task_region[task]
        acc = sums[rows, region]
        s, w, cost_sum, cost_n = acc[..., 0], acc[..., 1], acc[..., 2], acc[..., 3]
        p = policy.prior[region]
        with np.errstate(invalid="ignore", divide="ignore"):
            q = np.where(k + w == 0, p, (k * p + s) / (k + w))
            est = np.where(cost_n > 0, cost_sum / np.maximum(cost_n, 1), policy.fallback[region])
        est = np.where(np.isnan(est), np.nan, np.maximum(est, policy.floor))
        above = np.ones_like(q, dtype=bool) if policy.min_quality is None else q >= policy.min_quality
        score = np.where(above, numpy_values(policy, q, est), q)
        chosen = greedy = numpy_greedy(above, score, q, est)
        if k_pool > 1:
            explore = draw_u[:, step] < eps
            other = (draw_i[:, step] * (k_pool - 1)).astype(np.int64)
            chosen = np.where(explore, np.where(other < greedy, other, other + 1), greedy)
            explored += explore
        cell = task * k_pool + chosen
        q_seen = value[cell]
        seen = ~np.isnan(q_seen)
        routed += seen
        q_seen = np.where(seen, q_seen, 0.0)
        c_seen = cost[cell]
        priced = seen & ~np.isnan(c_seen)
        c_val = np.where(priced, c_seen, 0.0)
        total_q += q_seen
        total_cost += c_val
        if policy.lam is not None:
            total_utility += np.where(priced, policy.lam * q_seen - c_val, 0.0)
        w_seen = np.where(seen, weight[cell], 0.0)
        learn = seen & known[cell]
        target = sums[rows, region, chosen]
        target[:, 0] += q_seen * w_seen
        target[:, 1] += w_seen
        target[:, 2] += np.where(learn, c_val, 0.0)
        target[:, 3] += learn
        sums[rows, region, chosen] = target
    return Totals(routed, explored, total_q, total_cost, total_utility)


def _floats(draw: st.DrawFn, n: int, *, nan: float, zero: float, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    out = []
    for _ in range(n):
        pick = draw(st.floats(0, 1))
        out.append(np.nan if pick < nan else 0.0 if pick < nan + zero else draw(st.floats(low, high)))
    return np.array(out, dtype=float)


@st.composite
def cases(draw: st.DrawFn) -> tuple:
    k_pool, n_regions, n_tasks = draw(st.integers(1, 4)), draw(st.integers(1, 3)), draw(st.integers(1, 40))
    objective = draw(st.sampled_from(["quality", "utility", "quality_per_dollar"]))
    policy = Policy(
        prior=_floats(draw, n_regions * k_pool, nan=0.1, zero=0.1).reshape(n_regions, k_pool),
        fallback=_floats(draw, n_regions * k_pool, nan=0.3, zero=0.1, high=2.0).reshape(n_regions, k_pool),
        prior_weight=draw(st.sampled_from([0.0, 1.0, 3.0, 13.0])),
        floor=draw(st.sampled_from([0.0, 0.001, 0.5])),
        objective=objective,
        lam=draw(st.sampled_from([None, 0.5, 7.0])) if objective == "utility" else None,
        min_quality=draw(st.sampled_from([None, 0.3, 0.8])),
    )
    cells = n_tasks * k_pool
    value = _floats(draw, cells, nan=0.5, zero=0.15)
    cost = _floats(draw, cells, nan=0.3, zero=0.1, high=3.0)
    known = np.array([draw(st.booleans()) for _ in range(cells)]) & ~np.isnan(cost)
    outcomes = Outcomes(
        value=value,
        weight=_floats(draw, cells, nan=0.0, zero=0.2, high=4.0),
        cost=cost,
        known=known,
        task_region=np.array([draw(st.integers(0, n_regions - 1)) for _ in range(n_tasks)], dtype=np.int64),
    )
    init = np.zeros((n_regions, k_pool, 4))
    for g in range(n_regions):
        for c in range(k_pool):
            if draw(st.booleans()):
                w, n = draw(st.floats(0, 5)), draw(st.integers(0, 3))
                init[g, c] = (w * draw(st.floats(0, 1)), w, n * draw(st.floats(0, 2)), n)
    length = draw(st.integers(1, 50))
    order = np.array([draw(st.integers(0, n_tasks - 1)) for _ in range(length)], dtype=np.int64)
    n_draws, n_runs = draw(st.integers(1, 3)), draw(st.integers(1, 6))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    draws = (rng.random((n_draws, length)), rng.random((n_draws, length)))
    draw_of_run = np.array([draw(st.integers(0, n_draws - 1)) for _ in range(n_runs)], dtype=np.int64)
    eps = np.array([draw(st.sampled_from([0.0, 0.05, 0.3, 1.0])) for _ in range(n_runs)])
    return policy, outcomes, init, order, draws, draw_of_run, eps


def _same(a: Totals, b: Totals) -> bool:
    return all(np.array_equal(x, y, equal_nan=True) and x.dtype == y.dtype for x, y in zip(a, b, strict=True))


@settings(max_examples=150, deadline=None, derandomize=True)
@given(cases())
def test_the_compiled_replay_is_the_numpy_replay_bit_for_bit(case: tuple) -> None:
    """150 derandomized examples (the same cases every run); the long replay below adds the tie-breaks at scale."""
    compiled, reference = route_runs(*case), numpy_routes(*case)
    assert _same(compiled, reference), (compiled, reference)


def test_a_long_replay_with_ties_and_a_floor() -> None:
    # Many tasks, every value on a coarse grid (ties everywhere), a quality floor between grid points, and costs
    # of equal size: the tie-breaks of the greedy order decide most steps.
    rng = np.random.default_rng(5)
    n_tasks, k_pool, n_regions = 2000, 5, 3
    value = rng.choice([np.nan, 0.0, 0.5, 1.0], size=n_tasks * k_pool, p=[0.6, 0.1, 0.1, 0.2])
    cost = rng.choice([np.nan, 0.1, 0.2], size=n_tasks * k_pool)
    outcomes = Outcomes(
        value, np.ones(n_tasks * k_pool), cost, ~np.isnan(cost), rng.integers(0, n_regions, size=n_tasks)
    )
    policy = Policy(
        np.full((n_regions, k_pool), 0.5), np.full((n_regions, k_pool), 0.1), 3.0, 0.05, "quality_per_dollar", None, 0.6
    )
    init = np.zeros((n_regions, k_pool, 4))
    order = np.concatenate([np.arange(n_tasks), rng.integers(0, n_tasks, size=500)])
    draws = (rng.random((2, order.size)), rng.random((2, order.size)))
    case = (policy, outcomes, init, order, draws, np.array([0, 1, 0, 1]), np.array([0.0, 0.0, 0.2, 0.2]))
    compiled = route_runs(*case)
    assert _same(compiled, numpy_routes(*case))
    assert compiled.routed.min() > 0 and compiled.explored[2:].min() > 0  # the case exercises both paths
