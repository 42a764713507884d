"""The compiled replay follows the router's greedy rule (pipeline.routing.greedy), the spec.

- Its choice from any state is the router's: hypothesis draws pools, regions, priors, sums, cost estimates
  (unknown ones included), quality floors and every objective, makes a routing table of the kernel's posterior rows
  and asks ``Router.view(region).best(pool)``.
- A whole replay gives the same floats, bit for bit, as one written plainly in Python that asks the rule itself
  (:func:`greedy_key`) at every step: exploration draws, skips, the sums it learns, weights of 0, orders with
  repeats, undefined priors (which rank last).
- Its Thompson draw is the router's (:func:`pipeline.routing.thompson.draw`) from the same normals, so the replay of
  Thompson exploration explores as the dispatcher does (whose propensities tests/routing/test_thompson.py checks
  against a brute-force count).
- Utility without lambda is refused, as everywhere.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.evaluate.replay_kernel import Outcomes, Policy, Totals, greedy_choices, route_runs, thompson_choice
from pipeline.routing import thompson
from pipeline.routing.greedy import greedy_key
from pipeline.routing.router import Router
from pipeline.routing.table import Constants, Member, Region, RoutingTable, Source, Static


def posterior(policy: Policy, g: int, c: int, sums: np.ndarray) -> tuple[float, float | None, float]:
    """q, the cost estimate (None: unknown) and the objective of (region g, config c), as docs/design.md says."""
    k = policy.prior_weight
    s, w, cost_sum, cost_n = (float(x) for x in sums[g, c])
    p = float(policy.prior[g, c])
    q = p if k + w == 0 else (k * p + s) / (k + w)
    est: float | None = cost_sum / max(cost_n, 1.0) if cost_n > 0 else float(policy.fallback[g, c])
    est = None if est is None or math.isnan(est) else max(est, policy.floor)
    if est is None or policy.objective == "quality":
        value = q
    elif policy.objective == "utility":
        assert policy.lam is not None
        value = policy.lam * q - est
    else:
        value = q / est
    return q, est, value


def rule_choice(policy: Policy, g: int, sums: np.ndarray, names: list[str]) -> int:
    """The greedy choice of region g by the router's rule itself."""
    rows = [(names[c], *posterior(policy, g, c, sums)) for c in range(len(names))]
    keys = [greedy_key(name, q, est, value, policy.min_quality) for name, q, est, value in rows]
    return min(range(len(names)), key=keys.__getitem__)


def python_routes(
    policy: Policy,
    outcomes: Outcomes,
    init: np.ndarray,
    order: np.ndarray,
    draws: tuple[np.ndarray, np.ndarray],
    draw_of_run: np.ndarray,
    eps: np.ndarray,
) -> Totals:
    """The replay of docs/design.md, Sequential replay, one run and one step after the other."""
    value, weight, cost, known, task_region = outcomes
    k_pool = init.shape[1]
    names = [f"c{c}" for c in range(k_pool)]
    out = Totals(np.zeros(len(eps), np.int64), np.zeros(len(eps), np.int64), *np.zeros((3, len(eps))))
    for run, e in enumerate(eps):
        sums = init.copy()
        u_row, i_row = draws[0][draw_of_run[run]], draws[1][draw_of_run[run]]
        routed = explored = 0
        tq = tc = tu = 0.0
        for step, task in enumerate(order):
            g = int(task_region[task])
            chosen = rule_choice(policy, g, sums, names)
            if k_pool > 1 and u_row[step] < e:
                other = int(i_row[step] * (k_pool - 1))
                chosen = other if other < chosen else other + 1
                explored += 1
            cell = task * k_pool + chosen
            v = float(value[cell])
            if math.isnan(v):
                continue
            routed += 1
            tq += v
            c = float(cost[cell])
            if not math.isnan(c):
                tc += c
                if policy.lam is not None:
                    tu += policy.lam * v - c
            w = float(weight[cell])
            sums[g, chosen, 0] += v * w
            sums[g, chosen, 1] += w
            if known[cell]:
                sums[g, chosen, 2] += c
                sums[g, chosen, 3] += 1.0
        out.routed[run], out.explored[run] = routed, explored
        out.total_q[run], out.total_cost[run], out.total_utility[run] = tq, tc, tu
    return out


def _floats(draw: st.DrawFn, n: int, *, nan: float, zero: float, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    out = []
    for _ in range(n):
        pick = draw(st.floats(0, 1))
        out.append(np.nan if pick < nan else 0.0 if pick < nan + zero else draw(st.floats(low, high)))
    return np.array(out, dtype=float)


@st.composite
def policies(draw: st.DrawFn, *, k_pool: int, n_regions: int, nan_priors: float) -> Policy:
    objective = draw(st.sampled_from(["quality", "utility", "quality_per_dollar"]))
    return Policy(
        prior=_floats(draw, n_regions * k_pool, nan=nan_priors, zero=0.1).reshape(n_regions, k_pool),
        fallback=_floats(draw, n_regions * k_pool, nan=0.3, zero=0.1, high=2.0).reshape(n_regions, k_pool),
        prior_weight=draw(st.sampled_from([0.0, 1.0, 3.0, 13.0])),
        floor=draw(st.sampled_from([0.001, 0.5])),
        objective=objective,
        lam=draw(st.sampled_from([0.5, 7.0])) if objective == "utility" else None,
        min_quality=draw(st.sampled_from([None, 0.3, 0.8])),
    )


@st.composite
def states(draw: st.DrawFn, k_pool: int, n_regions: int) -> np.ndarray:
    """Starting sums: S, W, the sum and count of known costs per (region, config); on a coarse grid, so that
    ties are common."""
    init = np.zeros((n_regions, k_pool, 4))
    for g in range(n_regions):
        for c in range(k_pool):
            if draw(st.booleans()):
                w, n = draw(st.sampled_from([0.0, 1.0, 2.0, 4.5])), draw(st.integers(0, 3))
                init[g, c] = (w * draw(st.sampled_from([0.0, 0.5, 1.0])), w, n * draw(st.sampled_from([0.1, 2.0])), n)
    return init


def _table(objective: str, constants: Constants, regions: dict[str, Region]) -> RoutingTable:
    """A routing table of ``regions`` under ``constants`` (no source, no static roles)."""
    return RoutingTable(
        fitted_at=None,
        source=Source(),
        objective=objective,
        constants=constants,
        constants_source="shipped",
        static=Static(),
        regions=regions,
    )


def _drawn(data) -> tuple:
    """A drawn case: its number of regions, a policy (no missing priors), a start state, the config names."""
    k_pool, n_regions = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 3))
    policy = data.draw(policies(k_pool=k_pool, n_regions=n_regions, nan_priors=0.0))
    return n_regions, policy, data.draw(states(k_pool, n_regions)), [f"c{c}" for c in range(k_pool)]


@settings(max_examples=120, deadline=None, derandomize=True)
@given(data=st.data())
def test_the_kernel_chooses_what_the_router_chooses(data) -> None:
    n_regions, policy, init, names = _drawn(data)
    regions = {}
    for g in range(n_regions):
        members = []
        for c, name in enumerate(names):
            q, est, value = posterior(policy, g, c, init)
            members.append(Member(config=name, quality=q, cost_usd=est, value=value, weight=0.0, n_ratings=0))
        regions[f"r{g}"] = Region(members=members, choice=names[0])
    constants = Constants(min_quality=policy.min_quality, **({"lambda": policy.lam} if policy.lam else {}))
    router = Router(_table(policy.objective, constants, regions))
    chosen = greedy_choices(policy, init)
    assert [names[i] for i in chosen] == [router.view(f"r{g}").best(names) for g in range(n_regions)]


class _Normals:
    """A stand-in for ``random.Random`` whose ``gauss`` returns given normals in turn (the router draws one per
    member, in key order)."""

    def __init__(self, z: np.ndarray) -> None:
        self._z = iter(z.tolist())

    def gauss(self, mu: float, sigma: float) -> float:
        return mu + sigma * next(self._z)


@settings(max_examples=120, deadline=None, derandomize=True)
@given(data=st.data())
def test_the_kernels_thompson_draw_is_the_routers(data) -> None:
    n_regions, policy, init, names = _drawn(data)
    constants = Constants(
        prior_weight=policy.prior_weight,
        cost_floor_usd=policy.floor,
        **({"lambda": policy.lam} if policy.lam else {}),
    )
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    for g in range(n_regions):
        rows = []
        for c, name in enumerate(names):
            q, est, value = posterior(policy, g, c, init)
            rows.append(Member(config=name, quality=q, cost_usd=est, value=value, weight=float(init[g, c, 1]),
                               n_ratings=0))  # fmt: skip
        view = Router(_table(policy.objective, constants, {"r": Region(members=rows, choice=names[0])})).view("r")
        for _ in range(5):
            z = rng.standard_normal(len(names)) * 2
            want = thompson.draw([view.row(n) for n in names], _Normals(z), policy.objective, constants)
            assert names[thompson_choice(policy, init, g, z)] == want


@st.composite
def cases(draw: st.DrawFn) -> tuple:
    k_pool, n_regions, n_tasks = draw(st.integers(1, 4)), draw(st.integers(1, 3)), draw(st.integers(1, 40))
    policy = draw(policies(k_pool=k_pool, n_regions=n_regions, nan_priors=0.1))
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
    init = draw(states(k_pool, n_regions))
    length = draw(st.integers(1, 50))
    order = np.array([draw(st.integers(0, n_tasks - 1)) for _ in range(length)], dtype=np.int64)
    n_draws, n_runs = draw(st.integers(1, 3)), draw(st.integers(1, 6))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    draws = (rng.random((n_draws, length)), rng.random((n_draws, length)))
    draw_of_run = np.array([draw(st.integers(0, n_draws - 1)) for _ in range(n_runs)], dtype=np.int64)
    eps = np.array([draw(st.sampled_from([0.0, 0.05, 0.3, 1.0])) for _ in range(n_runs)])
    return policy, outcomes, init, order, draws, draw_of_run, eps


def _same(a: Totals, b: Totals) -> bool:
    return all(np.array_equal(x, y, equal_nan=True) and x.dtype == y.dtype for x, y in zip(a, b, strict=True))


@settings(max_examples=120, deadline=None, derandomize=True)
@given(cases())
def test_a_compiled_replay_is_the_rule_asked_at_every_step_bit_for_bit(case: tuple) -> None:
    compiled, reference = route_runs(*case), python_routes(*case)
    assert _same(compiled, reference), (compiled, reference)


def test_a_long_replay_with_ties_and_a_floor() -> None:
    # Many tasks, every value on a coarse grid (ties everywhere), a quality floor between grid points, and costs
    # of equal size: the tie-breaks of the greedy order decide most steps.
    rng = np.random.default_rng(5)
    n_tasks, k_pool, n_regions = 600, 5, 3
    value = rng.choice([np.nan, 0.0, 0.5, 1.0], size=n_tasks * k_pool, p=[0.6, 0.1, 0.1, 0.2])
    cost = rng.choice([np.nan, 0.1, 0.2], size=n_tasks * k_pool)
    outcomes = Outcomes(
        value, np.ones(n_tasks * k_pool), cost, ~np.isnan(cost), rng.integers(0, n_regions, size=n_tasks)
    )
    policy = Policy(
        np.full((n_regions, k_pool), 0.5), np.full((n_regions, k_pool), 0.1), 3.0, 0.05, "quality_per_dollar", None, 0.6
    )
    init = np.zeros((n_regions, k_pool, 4))
    order = np.concatenate([np.arange(n_tasks), rng.integers(0, n_tasks, size=200)])
    draws = (rng.random((2, order.size)), rng.random((2, order.size)))
    case = (policy, outcomes, init, order, draws, np.array([0, 1, 0, 1]), np.array([0.0, 0.0, 0.2, 0.2]))
    compiled = route_runs(*case)
    assert _same(compiled, python_routes(*case))
    assert compiled.routed.min() > 0 and compiled.explored[2:].min() > 0  # the case exercises both paths


def test_utility_without_lambda_is_refused_everywhere() -> None:
    """One rule for a missing lambda: the fit, the table, the replay and the router's objective all refuse it."""
    import polars as pl

    from pipeline.errors import FitError, RoutingError
    from pipeline.fit.model import fit_values
    from pipeline.fit.shipped import Shipped
    from pipeline.routing.greedy import objective_value

    policy = Policy(np.zeros((1, 2)), np.zeros((1, 2)), 1.0, 0.01, "utility", None, None)
    with pytest.raises(ValueError, match="needs lambda"):
        greedy_choices(policy, np.zeros((1, 2, 4)))
    with pytest.raises(RoutingError, match="needs lambda"):
        objective_value(0.5, 0.1, "utility", None, 0.01)
    with pytest.raises(ValueError, match=r"needs constants\.lambda"):
        RoutingTable(
            fitted_at=None, source=Source(), objective="utility", constants=Constants(), constants_source="shipped",
            static=Static(), regions={},
        )  # fmt: skip
    values = pl.DataFrame(
        {"task": [0], "region": ["r"], "config_key": ["c"], "value": [1.0], "weight": [1.0], "wscore": [1.0],
         "n": [1], "cost_usd": [0.1], "unknown_cost": [0]}
    )  # fmt: skip
    with pytest.raises(FitError, match="needs lambda"):
        fit_values(values, Constants(), Shipped(), "utility")
