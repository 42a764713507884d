"""Draw one chunk of tasks, vectorised with numpy: who did them, how it went, who rated it, when.

Every draw is made for every row whether or not it is used, in a fixed order,
so the output depends on the seed, the scenario and the chunk size only.
Times are integer seconds of a synthetic timeline, never the clock.

The outcome model: task t has a difficulty ``z_t ~ N(0, 1)`` shared by its
attempts; attempt (t, c) succeeds when ``sqrt(rho) z_t + sqrt(1 - rho) e_tc < Phi^-1(Q(c, r))``
with ``e_tc ~ N(0, 1)``, so P(success) is exactly Q(c, r) over the population of
tasks while the attempts on one task are correlated (hard tasks fail for all).
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from .policy import LoggingPolicy
from .scenario import Scenario

#: Failure statuses and their probabilities (a success is always ``success``).
FAILURE_STATUSES = ("failure", "vacuous", "blocked", "escalated")
FAILURE_WEIGHTS = (0.7, 0.1, 0.1, 0.1)
#: Outcomes of ``task.closed`` when the routed attempt failed.
UNDONE_OUTCOMES = ("escalated", "abandoned")
UNDONE_WEIGHTS = (0.7, 0.3)


@dataclass
class Static:
    """What every chunk shares: the scenario in arrays."""

    scenario: Scenario
    policy: LoggingPolicy
    n_tasks: int
    start_s: int
    span_s: int
    shares: np.ndarray  # [R]
    threshold: np.ndarray  # [2, K, R] Phi^-1(Q) before / after drift
    cost_mean: np.ndarray  # [K, R]
    cost_sigma: np.ndarray  # [K]
    cost_missing: np.ndarray  # [K]
    greedy: np.ndarray  # [R]
    believed: np.ndarray  # [K, R]
    drift_first: int  # first task index (0-based) after the drift; n_tasks when none
    drift_config: int  # -1 when none
    available_first: np.ndarray  # [K] first task index from which each config exists
    preference: np.ndarray  # [R, K] position of each config in the region's greedy order of the logging policy

    @classmethod
    def of(cls, scenario: Scenario, start_s: int) -> Static:
        policy = LoggingPolicy.of(scenario)
        regions = scenario.region_names
        k, r = len(scenario.configs), len(regions)
        quality = np.zeros((2, k, r))
        for i, c in enumerate(scenario.configs):
            for j, name in enumerate(regions):
                quality[:, i, j] = c.quality[name]
        drift_first, drift_config = scenario.tasks, -1
        if scenario.drift is not None:
            drift_config = scenario.config_keys.index(scenario.drift.config)
            drift_first = int(scenario.drift.at * scenario.tasks)
            for name, q in scenario.drift.quality.items():
                quality[1, drift_config, regions.index(name)] = q
        inv = NormalDist().inv_cdf
        threshold = np.vectorize(lambda q: -np.inf if q <= 0 else np.inf if q >= 1 else inv(q))(quality)
        shares = np.array([x.share for x in scenario.regions], dtype=float)
        return cls(
            scenario=scenario,
            policy=policy,
            n_tasks=scenario.tasks,
            start_s=start_s,
            span_s=round(scenario.days * 86400),
            shares=shares / shares.sum(),
            threshold=threshold,
            cost_mean=np.array([[c.cost_usd * x.cost_multiplier for x in scenario.regions] for c in scenario.configs]),
            cost_sigma=np.array([c.cost_sigma for c in scenario.configs]),
            cost_missing=np.array([c.cost_missing for c in scenario.configs]),
            greedy=np.array(policy.greedy),
            believed=np.array(policy.believed),
            drift_first=drift_first,
            drift_config=drift_config,
            available_first=np.array([int(c.available_from * scenario.tasks) for c in scenario.configs]),
            preference=_preference(scenario, policy),
        )


def _preference(scenario: Scenario, policy: LoggingPolicy) -> np.ndarray:
    """[R, K]: each config's position in the region's order of the logging policy (its greedy rule, by belief)."""
    pol, k = scenario.policy, len(scenario.configs)
    out = np.zeros((len(scenario.regions), k), dtype=np.int64)
    for j in range(len(scenario.regions)):

        def score(i: int, j: int = j) -> tuple[float, float, str]:
            q, c = policy.believed[i][j], scenario.configs[i].cost_usd
            return (-(q / c if pol.objective == "quality_per_dollar" else q), -q, scenario.configs[i].key)

        out[j, sorted(range(k), key=score)] = np.arange(k)
    return out


@dataclass
class Attempts:
    """Attempts and what happened to them: outcome, cost, status, timing, traces, and their ratings (each rating
    tuple indexes the attempts by position)."""

    task: np.ndarray  # local task index
    slot: np.ndarray
    cfg: np.ndarray
    success: np.ndarray
    status: np.ndarray  # -1 success, else index into FAILURE_STATUSES
    cost: np.ndarray  # NaN when unknown
    duration_ms: np.ndarray
    end_s: np.ndarray
    tools: np.ndarray
    read: np.ndarray
    written: np.ndarray
    prompt: np.ndarray  # -1 none
    verdict: np.ndarray  # -1 none, 0 approve, 1 request-changes
    gates: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]  # per gate: attempt, score, conf, at
    review: tuple[np.ndarray, ...]  # attempt, reviewer, score, conf, at, retracted, retract_at
    human: tuple[np.ndarray, ...]  # attempt, human, score, at
    reject: tuple[np.ndarray, ...]  # attempt, reviewer, at

    def __len__(self) -> int:
        return len(self.task)

    def then(self, other: Attempts) -> Attempts:
        """These attempts followed by ``other`` (its ratings re-indexed after these)."""
        m = len(self)

        def shifted(part: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
            return (part[0] + m, *part[1:])

        joined = {
            name: np.concatenate([getattr(self, name), getattr(other, name)])
            for name in (
                "task", "slot", "cfg", "success", "status", "cost", "duration_ms", "end_s", "tools", "read",
                "written", "prompt", "verdict",
            )
        }  # fmt: skip
        gates = [
            tuple(np.concatenate([a, b]) for a, b in zip(mine, shifted(theirs), strict=True))
            for mine, theirs in zip(self.gates, other.gates, strict=True)
        ]
        parts = {
            name: tuple(
                np.concatenate([a, b]) for a, b in zip(getattr(self, name), shifted(getattr(other, name)), strict=True)
            )
            for name in ("review", "human", "reject")
        }
        return Attempts(**joined, gates=gates, **parts)  # type: ignore[arg-type]


@dataclass
class Decisions:
    """The logged ``route.decided`` events: per decision its task, time, config, propensity, whether it explored,
    its kind (0 the routed config, 1 a side-by-side lane, 2 an escalation) and the configs excluded from its
    candidates (a bit mask: the lanes that ran before it)."""

    task: np.ndarray
    at: np.ndarray
    cfg: np.ndarray
    propensity: np.ndarray
    explored: np.ndarray
    kind: np.ndarray
    excluded: np.ndarray


@dataclass
class Chunk:
    """Tasks ``first .. first + n - 1`` and everything that happened to them (times in epoch seconds)."""

    first: int
    # per task
    region: np.ndarray
    open_s: np.ndarray
    decide_s: np.ndarray
    primary: np.ndarray
    explored: np.ndarray
    propensity: np.ndarray
    close_s: np.ndarray
    outcome: np.ndarray  # 0 done, 1 escalated, 2 abandoned
    attempts: Attempts  # the routed config first, then the other lanes, then escalations
    decisions: Decisions

    @property
    def n(self) -> int:
        return len(self.region)


def draw_chunk(st: Static, rng: np.random.Generator, first: int, n: int) -> Chunk:
    sc, pol = st.scenario, st.policy
    k = pol.n_configs
    idx = np.arange(first, first + n)

    region, open_s, decide_s, explored, primary, propensity, extras, n_cfg, available, others = _route(st, rng, idx)
    difficulty = rng.standard_normal(n)
    close_delay = rng.integers(600, 7201, n)
    undone = rng.choice(2, size=n, p=np.array(UNDONE_WEIGHTS))

    assigned = np.full((n, 3), -1, dtype=np.int64)
    assigned[:, 0] = primary
    if k > 1:
        assigned[:, 1] = np.where(n_cfg >= 2, extras[:, 0], -1)
        assigned[:, 2] = np.where(n_cfg >= 3, extras[:, 1], -1)
    a_task, a_slot = np.nonzero(assigned >= 0)
    a_cfg = assigned[a_task, a_slot]
    # Second opinions start a few minutes apart; side-by-side lanes start with the routed one.
    staggered = sc.side_by_side == 0
    attempts = _attempts(st, rng, idx, region, difficulty, a_task, a_slot, a_cfg, decide_s[a_task] + 10, staggered)
    decisions = Decisions(
        task=np.arange(n),
        at=decide_s,
        cfg=primary,
        propensity=propensity,
        explored=explored,
        kind=np.zeros(n, dtype=np.int64),
        excluded=np.zeros(n, dtype=np.int64),
    )
    if sc.side_by_side > 0:
        lane = a_slot == 1
        decisions = _joined(
            decisions,
            Decisions(
                task=a_task[lane],
                at=decide_s[a_task[lane]],
                cfg=a_cfg[lane],
                propensity=1.0 / np.maximum(others[a_task[lane]], 1),
                explored=np.ones(int(lane.sum()), dtype=bool),
                kind=np.ones(int(lane.sum()), dtype=np.int64),
                excluded=np.left_shift(1, primary[a_task[lane]]),
            ),
        )
    if sc.escalation > 0:
        attempts, decisions = _escalate(st, rng, idx, region, difficulty, available, attempts, decisions)

    # --- closing: after the last attempt ends; done iff the routed attempt succeeded (second opinions) or any
    # attempt did (a dispatcher's lanes and escalations)
    last_end = np.zeros(n, dtype=np.int64)
    np.maximum.at(last_end, attempts.task, attempts.end_s)
    if sc.dispatcher:
        done = np.zeros(n, dtype=bool)
        np.logical_or.at(done, attempts.task, attempts.success)
    else:
        done = attempts.success[attempts.slot == 0]  # one routed attempt per task, in task order
    outcome = np.where(done, 0, 1 + undone)

    return Chunk(
        first=first,
        region=region,
        open_s=open_s,
        decide_s=decide_s,
        primary=primary,
        explored=explored,
        propensity=propensity,
        close_s=last_end + close_delay,
        outcome=outcome,
        attempts=attempts,
        decisions=decisions,
    )


def _joined(a: Decisions, b: Decisions) -> Decisions:
    return Decisions(**{name: np.concatenate([getattr(a, name), getattr(b, name)]) for name in vars(a)})


def _escalate(
    st: Static,
    rng: np.random.Generator,
    idx: np.ndarray,
    region: np.ndarray,
    difficulty: np.ndarray,
    available: np.ndarray,
    attempts: Attempts,
    decisions: Decisions,
) -> tuple[Attempts, Decisions]:
    """A dispatcher's escalations: a task whose every lane failed its gates (each has a gate rating and their mean
    is below 0.5) runs, with probability ``escalation``, the escalation config after the last gate: the logging
    policy's ``frontier_config`` when it has not run, else the highest believed quality that has not."""
    sc = st.scenario
    n = len(region)
    gate_w = np.zeros(len(attempts))
    gate_s = np.zeros(len(attempts))
    gate_at = np.zeros(len(attempts), dtype=np.int64)
    for att, score, _conf, at in attempts.gates:
        np.add.at(gate_w, att, 1.0)
        np.add.at(gate_s, att, score)
        np.maximum.at(gate_at, att, at)
    failed = (gate_w > 0) & (gate_s < 0.5 * gate_w)
    all_failed = np.ones(n, dtype=bool)
    np.logical_and.at(all_failed, attempts.task, failed)
    ran = np.zeros(n, dtype=np.int64)
    np.bitwise_or.at(ran, attempts.task, np.left_shift(1, attempts.cfg))
    last_gate = np.zeros(n, dtype=np.int64)
    np.maximum.at(last_gate, attempts.task, gate_at)
    want = rng.random(n) < sc.escalation
    delay = rng.integers(30, 601, n)
    # the escalation config per task: frontier first, then by believed quality in the task's region
    order = np.argsort(-st.believed[:, region].T, axis=1, kind="stable")  # [n, k]
    frontier = sc.config_keys.index(sc.policy.frontier_config) if sc.policy.frontier_config else -1
    if frontier >= 0:
        order = np.concatenate([np.full((n, 1), frontier), order], axis=1)
    free = ((np.right_shift(ran[:, None], order) & 1) == 0) & available[np.arange(n)[:, None], order]
    has = free.any(axis=1)
    target = order[np.arange(n), np.argmax(free, axis=1)]
    esc = np.nonzero(all_failed & want & has)[0]
    e_cfg = target[esc]
    e_decide = last_gate[esc] + delay[esc]
    second = _attempts(
        st, rng, idx, region, difficulty, esc, np.full(len(esc), 2), e_cfg, e_decide + 10, staggered=False
    )
    escalations = Decisions(
        task=esc,
        at=e_decide,
        cfg=e_cfg,
        propensity=np.ones(len(esc)),
        explored=np.zeros(len(esc), dtype=bool),
        kind=np.full(len(esc), 2, dtype=np.int64),
        excluded=ran[esc],
    )
    return attempts.then(second), _joined(decisions, escalations)


def _attempts(
    st: Static,
    rng: np.random.Generator,
    idx: np.ndarray,
    region: np.ndarray,
    difficulty: np.ndarray,
    a_task: np.ndarray,
    a_slot: np.ndarray,
    a_cfg: np.ndarray,
    start_s: np.ndarray,
    staggered: bool,
) -> Attempts:
    """Outcome, cost, status, timing, traces and ratings of the attempts ``(a_task, a_slot, a_cfg)`` starting at
    ``start_s`` (plus a stagger of up to ten minutes for slots after the first when ``staggered``)."""
    sc, spec = st.scenario, st.scenario.ratings
    m = len(a_task)
    a_region = region[a_task]
    period = ((idx[a_task] >= st.drift_first) & (a_cfg == st.drift_config)).astype(np.int64)
    rho = sc.correlation
    latent = np.sqrt(rho) * difficulty[a_task] + np.sqrt(1.0 - rho) * rng.standard_normal(m)
    success = latent < st.threshold[period, a_cfg, a_region]
    sigma = st.cost_sigma[a_cfg]
    # Lognormal around the mean: mean * exp(sigma Z - sigma^2 / 2) has expectation mean.
    cost = st.cost_mean[a_cfg, a_region] * np.exp(sigma * rng.standard_normal(m) - sigma**2 / 2)
    cost = np.where(rng.random(m) < st.cost_missing[a_cfg], np.nan, np.round(cost, 6))
    fail_kind = rng.choice(len(FAILURE_STATUSES), size=m, p=np.array(FAILURE_WEIGHTS))
    status = np.where(success, -1, fail_kind)
    stagger = rng.integers(0, 601, m) * (a_slot > 0) * staggered
    duration_s = np.array([x.duration_s for x in sc.regions])[a_region]
    duration_ms = np.maximum(1, np.round(duration_s * 1000 * np.exp(0.6 * rng.standard_normal(m)))).astype(np.int64)
    end_s = start_s + stagger + (duration_ms + 999) // 1000
    lam = lambda attr: np.array([getattr(x, attr) for x in sc.regions])[a_region]  # noqa: E731
    tools = rng.poisson(lam("tool_calls") * np.where(success, 1.2, 0.8))
    read = rng.poisson(lam("files_read"))
    written = rng.poisson(lam("files_written"))
    with_prompt = rng.random(m) < sc.prompt_version_rate
    prompt = np.where(with_prompt, rng.integers(0, max(len(sc.prompt_versions), 1), m), -1)
    rated = rng.random(m) >= spec.unrated_share

    gates, review, human, reject, verdict = _ratings(st, rng, success, end_s, rated)

    return Attempts(
        task=a_task,
        slot=a_slot,
        cfg=a_cfg,
        success=success,
        status=status,
        cost=cost,
        duration_ms=duration_ms,
        end_s=end_s,
        tools=tools,
        read=read,
        written=written,
        prompt=prompt,
        verdict=verdict,
        gates=gates,
        review=review,
        human=human,
        reject=reject,
    )


def _ratings(
    st: Static, rng: np.random.Generator, success: np.ndarray, end_s: np.ndarray, rated: np.ndarray
) -> tuple[Any, tuple[np.ndarray, ...], tuple[np.ndarray, ...], tuple[np.ndarray, ...], np.ndarray]:
    """The ratings of attempts (their outcomes, end times and whether they are rated): gates, a model reviewer,
    occasional humans, grounded rejections, each indexing the attempts by position; and each attempt's reviewer
    verdict (-1 none)."""
    sc, spec = st.scenario, st.scenario.ratings
    m = len(success)
    # --- gates: binary, flipped with probability gate_noise, high confidence
    gates = []
    for gate in sc.gates:
        ran = rated & (rng.random(m) < gate.rate)
        flip = rng.random(m) < sc.gate_noise
        lo, hi = gate.confidence
        conf = np.round(lo + (hi - lo) * rng.random(m), 2)
        at = end_s + rng.integers(5, 301, m)
        score = (success ^ flip).astype(float)
        sel = np.nonzero(ran)[0]
        gates.append((sel, score[sel], np.maximum(conf[sel], 0.01), at[sel]))

    # --- one model reviewer: clip(N(base + bias, noise)), rounded to 0.01; a few retracted and corrected
    reviewed = rated & (rng.random(m) < spec.review_rate)
    who = rng.integers(0, len(sc.reviewers), m)
    bias = np.array([r.bias for r in sc.reviewers])[who]
    noise = np.array([r.noise for r in sc.reviewers])[who]
    base = np.where(success, spec.success_mean, spec.failure_mean)
    r_score = np.round(np.clip(base + bias + noise * rng.standard_normal(m), 0.0, 1.0), 2)
    lo, hi = spec.review_confidence
    r_conf = np.maximum(np.round(lo + (hi - lo) * rng.random(m), 2), 0.01)
    r_at = end_s + rng.integers(600, 21601, m)
    retracted = reviewed & (rng.random(m) < spec.retraction_rate)
    retract_at = r_at + rng.integers(600, 7201, m)
    verdict = np.where(reviewed, (r_score < 0.5).astype(np.int64), -1)
    sel = np.nonzero(reviewed)[0]
    review = (sel, who[sel], r_score[sel], r_conf[sel], r_at[sel], retracted[sel], retract_at[sel])

    # --- occasional humans: 1.0 / 0.75 for a success, 0.0 / 0.25 for a failure (60/40)
    by_human = rated & (rng.random(m) < spec.human_rate)
    h_who = rng.integers(0, len(sc.humans), m)
    lower = rng.random(m) >= 0.6
    h_score = np.where(success, np.where(lower, 0.75, 1.0), np.where(lower, 0.25, 0.0))
    h_at = end_s + rng.integers(3600, 259201, m)
    sel = np.nonzero(by_human)[0]
    human = (sel, h_who[sel], h_score[sel], h_at[sel])

    # --- grounded rejections of some failed attempts, by a model reviewer
    rejected = rated & ~success & (rng.random(m) < spec.rejection_rate)
    j_who = rng.integers(0, len(sc.reviewers), m)
    j_at = end_s + rng.integers(600, 7201, m)
    sel = np.nonzero(rejected)[0]
    reject = (sel, j_who[sel], j_at[sel])

    return gates, review, human, reject, verdict


def _route(st: Static, rng: np.random.Generator, idx: np.ndarray) -> tuple[np.ndarray, ...]:
    """Tasks ``idx``: region, open and decision times, the logging policy's routed config (explored or greedy)
    with its propensity, the other lanes or second opinions in order, how many configs attempt, which configs
    exist at each task's time and how many others do."""
    sc, pol = st.scenario, st.policy
    k, n = pol.n_configs, len(idx)
    # --- tasks: region, time, routing decision, how many configs attempt
    region = rng.choice(len(st.shares), size=n, p=st.shares)
    # Stratified arrival: task i opens in the i-th of N equal slices of the timeline (sorted, chunkable).
    open_s = st.start_s + np.floor((idx + rng.random(n)) / st.n_tasks * st.span_s).astype(np.int64)
    decide_s = open_s + rng.integers(1, 31, n)
    explored = rng.random(n) < pol.exploration
    other = rng.integers(0, max(k - 1, 1), n)
    greedy = st.greedy[region]
    primary = np.where(explored, other + (other >= greedy), greedy)
    propensity = np.where(explored, pol.exploration / max(k - 1, 1), 1.0 - pol.exploration)
    if sc.side_by_side > 0:  # competing lanes: a second config on a share of the tasks, at the same time
        n_cfg = np.minimum(1 + (rng.random(n) < sc.side_by_side).astype(np.int64), k)
    else:
        n_cfg = np.minimum(rng.choice(3, size=n, p=np.array(sc.attempts)) + 1, k)
    keys = rng.random((n, k))
    available = idx[:, None] >= st.available_first[None, :]
    others = np.full(n, k - 1)
    if not available.all():  # late configs: route and ask only among the configs that exist at the task's time
        greedy = np.argmin(np.where(available, st.preference[region], k), axis=1)
        others = available.sum(axis=1) - 1
        explored &= others > 0
        # the floor(u * m)-th available config other than the greedy one, u uniform: each with probability eps / m
        pick = np.floor(rng.random(n) * np.maximum(others, 1)).astype(np.int64)
        rank = np.cumsum(available & (np.arange(k)[None, :] != greedy[:, None]), axis=1) - 1
        candidate = available & (np.arange(k)[None, :] != greedy[:, None]) & (rank == pick[:, None])
        primary = np.where(explored, np.argmax(candidate, axis=1), greedy)
        propensity = np.where(
            explored, pol.exploration / np.maximum(others, 1), np.where(others > 0, 1.0 - pol.exploration, 1.0)
        )
        n_cfg = np.minimum(n_cfg, others + 1)
        keys[~available] = 3.0  # never a second opinion before it exists
    keys[np.arange(n), primary] = 2.0  # the routed config is never its own second opinion
    extras = np.argsort(keys, axis=1, kind="stable")[:, :2] if k > 1 else np.zeros((n, 2), dtype=np.int64)
    return region, open_s, decide_s, explored, primary, propensity, extras, n_cfg, available, others
