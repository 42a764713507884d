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


@dataclass(frozen=True)
class Attempts:
    """A chunk's attempts (one per assigned slot, row-major over tasks, routed config first): who, the outcome,
    cost, timing, traces."""

    task: np.ndarray  # local task index
    slot: np.ndarray
    cfg: np.ndarray
    region: np.ndarray
    success: np.ndarray
    status: np.ndarray  # -1 success, else index into FAILURE_STATUSES
    cost: np.ndarray  # NaN when unknown
    duration_ms: np.ndarray
    end_s: np.ndarray
    tools: np.ndarray
    read: np.ndarray
    written: np.ndarray
    prompt: np.ndarray  # -1 none

    def then(self, other: Attempts) -> Attempts:
        """These attempts followed by ``other``."""
        return Attempts(*(np.concatenate([getattr(self, f), getattr(other, f)]) for f in _ATTEMPT_FIELDS))


_ATTEMPT_FIELDS = tuple(Attempts.__dataclass_fields__)


@dataclass
class Ratings:
    """The ratings of some attempts, each indexing them by position, and each attempt's reviewer verdict."""

    verdict: np.ndarray  # per attempt: -1 no reviewer, 0 approve, 1 request-changes
    gates: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]  # per gate: attempt, score, conf, at
    review: tuple[np.ndarray, ...]  # attempt, reviewer, score, conf, at, retracted, retract_at
    human: tuple[np.ndarray, ...]  # attempt, human, score, at
    reject: tuple[np.ndarray, ...]  # attempt, reviewer, at

    def then(self, other: Ratings, m: int) -> Ratings:
        """These ratings followed by ``other``'s, whose attempts come after the first ``m``."""

        def joined(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
            return tuple(np.concatenate([x, y + m if i == 0 else y]) for i, (x, y) in enumerate(zip(a, b, strict=True)))

        return Ratings(
            verdict=np.concatenate([self.verdict, other.verdict]),
            gates=[joined(a, b) for a, b in zip(self.gates, other.gates, strict=True)],  # type: ignore[misc]
            review=joined(self.review, other.review),
            human=joined(self.human, other.human),
            reject=joined(self.reject, other.reject),
        )


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

    def then(self, other: Decisions) -> Decisions:
        return Decisions(**{name: np.concatenate([getattr(self, name), getattr(other, name)]) for name in vars(self)})


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
    attempts: Attempts  # per attempt (row-major over tasks, routed config first), then the escalations
    ratings: Ratings  # of the attempts, by position
    decisions: Decisions

    @property
    def n(self) -> int:
        return len(self.region)


def draw_chunk(st: Static, rng: np.random.Generator, first: int, n: int) -> Chunk:
    """Tasks ``first`` to ``first + n - 1``: their routing, attempts and ratings. The draws from ``rng`` come in
    one fixed order (tasks, attempts, gates, reviewer, humans, rejections, then the escalations' own), so a seed
    gives the same chunk."""
    sc = st.scenario
    idx = np.arange(first, first + n)
    region, open_s, decide_s, explored, primary, propensity, assigned, available, others = _route(st, rng, idx)
    difficulty = rng.standard_normal(n)
    close_delay = rng.integers(600, 7201, n)
    undone = rng.choice(2, size=n, p=np.array(UNDONE_WEIGHTS))
    a_task, a_slot = np.nonzero(assigned >= 0)
    a_cfg = assigned[a_task, a_slot]
    # Second opinions start a few minutes apart; side-by-side lanes start with the routed one.
    staggered = sc.side_by_side == 0
    a = _attempts(st, rng, idx, region, difficulty, a_task, a_slot, a_cfg, decide_s[a_task] + 10, staggered)
    ratings = _rate(st, rng, a)
    none = np.zeros(n, dtype=np.int64)
    decisions = Decisions(np.arange(n), decide_s, primary, propensity, explored, kind=none, excluded=none)
    if sc.side_by_side > 0:  # each lane's decision: uniform among the others, with the routed one
        t = a.task[a.slot == 1]
        decisions = decisions.then(
            Decisions(
                t,
                decide_s[t],
                a.cfg[a.slot == 1],
                1.0 / np.maximum(others[t], 1),
                np.ones(len(t), dtype=bool),
                kind=np.ones(len(t), dtype=np.int64),
                excluded=np.left_shift(1, primary[t]),
            )
        )
    if sc.escalation > 0:
        a, ratings, decisions = _escalate(st, rng, idx, region, difficulty, available, a, ratings, decisions)
    # closing: after the last attempt ends; done iff the routed attempt succeeded (second opinions), or any attempt
    # did (a dispatcher's lanes and escalations)
    last_end = np.zeros(n, dtype=np.int64)
    np.maximum.at(last_end, a.task, a.end_s)
    if sc.dispatcher:
        done = np.zeros(n, dtype=bool)
        np.logical_or.at(done, a.task, a.success)
    else:
        done = a.success[a.slot == 0]  # one routed attempt per task, in task order
    return Chunk(
        first=first,
        region=region,
        open_s=open_s,
        decide_s=decide_s,
        primary=primary,
        explored=explored,
        propensity=propensity,
        close_s=last_end + close_delay,
        outcome=np.where(done, 0, 1 + undone),
        attempts=a,
        ratings=ratings,
        decisions=decisions,
    )


def _rate(st: Static, rng: np.random.Generator, a: Attempts) -> Ratings:
    """The ratings of attempts ``a``: gates, a model reviewer, occasional humans, grounded rejections of some
    failed ones, by a model reviewer."""
    spec = st.scenario.ratings
    m = len(a.task)
    rated = rng.random(m) >= spec.unrated_share
    gates = _gates(st, rng, a, rated)
    review, verdict = _review(st, rng, a, rated)
    human = _humans(st, rng, a, rated)
    rejected = rated & ~a.success & (rng.random(m) < spec.rejection_rate)
    j_who = rng.integers(0, len(st.scenario.reviewers), m)
    j_at = a.end_s + rng.integers(600, 7201, m)
    sel = np.nonzero(rejected)[0]
    return Ratings(verdict, gates, review, human, (sel, j_who[sel], j_at[sel]))


def _route(st: Static, rng: np.random.Generator, idx: np.ndarray) -> tuple[np.ndarray, ...]:
    """Each task's region, open and decision times, the routing decision (explored, config, propensity), the
    configs that attempt it (``assigned``: one row per task, -1 for a slot no config takes), which configs exist at
    its time and how many others do."""
    sc, pol = st.scenario, st.policy
    k, n = pol.n_configs, len(idx)
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
    assigned = np.full((n, 3), -1, dtype=np.int64)
    assigned[:, 0] = primary
    if k > 1:
        assigned[:, 1] = np.where(n_cfg >= 2, extras[:, 0], -1)
        assigned[:, 2] = np.where(n_cfg >= 3, extras[:, 1], -1)
    return region, open_s, decide_s, explored, primary, propensity, assigned, available, others


def _escalate(
    st: Static,
    rng: np.random.Generator,
    idx: np.ndarray,
    region: np.ndarray,
    difficulty: np.ndarray,
    available: np.ndarray,
    a: Attempts,
    ratings: Ratings,
    decisions: Decisions,
) -> tuple[Attempts, Ratings, Decisions]:
    """A dispatcher's escalations: a task whose every lane failed its gates (each has a gate rating and their mean
    is below 0.5) runs, with probability ``escalation``, the escalation config after the last gate: the logging
    policy's ``frontier_config`` when it has not run, else the highest believed quality that has not."""
    sc = st.scenario
    n, m = len(region), len(a.task)
    gate_w, gate_s, gate_at = np.zeros(m), np.zeros(m), np.zeros(m, dtype=np.int64)
    for att, score, _conf, at in ratings.gates:
        np.add.at(gate_w, att, 1.0)
        np.add.at(gate_s, att, score)
        np.maximum.at(gate_at, att, at)
    all_failed = np.ones(n, dtype=bool)
    np.logical_and.at(all_failed, a.task, (gate_w > 0) & (gate_s < 0.5 * gate_w))
    ran = np.zeros(n, dtype=np.int64)
    np.bitwise_or.at(ran, a.task, np.left_shift(1, a.cfg))
    last_gate = np.zeros(n, dtype=np.int64)
    np.maximum.at(last_gate, a.task, gate_at)
    want = rng.random(n) < sc.escalation
    delay = rng.integers(30, 601, n)
    # the escalation config per task: frontier first, then by believed quality in the task's region
    order = np.argsort(-st.believed[:, region].T, axis=1, kind="stable")  # [n, k]
    if sc.policy.frontier_config:
        frontier = sc.config_keys.index(sc.policy.frontier_config)
        order = np.concatenate([np.full((n, 1), frontier), order], axis=1)
    free = ((np.right_shift(ran[:, None], order) & 1) == 0) & available[np.arange(n)[:, None], order]
    target = order[np.arange(n), np.argmax(free, axis=1)]
    esc = np.nonzero(all_failed & want & free.any(axis=1))[0]
    e_cfg, e_at = target[esc], last_gate[esc] + delay[esc]
    second = _attempts(st, rng, idx, region, difficulty, esc, np.full(len(esc), 2), e_cfg, e_at + 10, False)
    more = _rate(st, rng, second)
    k = len(esc)
    up = Decisions(esc, e_at, e_cfg, np.ones(k), np.zeros(k, dtype=bool), np.full(k, 2, dtype=np.int64), ran[esc])
    return a.then(second), ratings.then(more, m), decisions.then(up)


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
    """The attempts ``(a_task, a_slot, a_cfg)`` starting at ``start_s`` (later slots up to ten minutes later when
    ``staggered``): outcome, cost, status, timing, traces."""
    sc = st.scenario
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
    stagger = rng.integers(0, 601, m) * (a_slot > 0) * staggered
    duration_s = np.array([x.duration_s for x in sc.regions])[a_region]
    duration_ms = np.maximum(1, np.round(duration_s * 1000 * np.exp(0.6 * rng.standard_normal(m)))).astype(np.int64)

    def per_region(attr: str) -> np.ndarray:
        return np.array([getattr(x, attr) for x in sc.regions])[a_region]

    tools = rng.poisson(per_region("tool_calls") * np.where(success, 1.2, 0.8))
    read = rng.poisson(per_region("files_read"))
    written = rng.poisson(per_region("files_written"))
    with_prompt = rng.random(m) < sc.prompt_version_rate
    prompt = np.where(with_prompt, rng.integers(0, max(len(sc.prompt_versions), 1), m), -1)
    status = np.where(success, -1, fail_kind)
    end_s = start_s + stagger + (duration_ms + 999) // 1000
    return Attempts(
        a_task, a_slot, a_cfg, a_region, success, status, cost, duration_ms, end_s, tools, read, written, prompt
    )


def _gates(st: Static, rng: np.random.Generator, a: Attempts, rated: np.ndarray) -> list[tuple]:
    """Per gate: binary scores, flipped with probability gate_noise, high confidence."""
    m = len(a.task)
    gates = []
    for gate in st.scenario.gates:
        ran = rated & (rng.random(m) < gate.rate)
        flip = rng.random(m) < st.scenario.gate_noise
        lo, hi = gate.confidence
        conf = np.round(lo + (hi - lo) * rng.random(m), 2)
        at = a.end_s + rng.integers(5, 301, m)
        score = (a.success ^ flip).astype(float)
        sel = np.nonzero(ran)[0]
        gates.append((sel, score[sel], np.maximum(conf[sel], 0.01), at[sel]))
    return gates


def _review(st: Static, rng: np.random.Generator, a: Attempts, rated: np.ndarray) -> tuple[tuple, np.ndarray]:
    """One model reviewer per reviewed attempt: clip(N(base + bias, noise)), rounded to 0.01; a few retracted and
    corrected. Also each attempt's reviewer verdict (-1 when none)."""
    sc, spec = st.scenario, st.scenario.ratings
    m = len(a.task)
    reviewed = rated & (rng.random(m) < spec.review_rate)
    who = rng.integers(0, len(sc.reviewers), m)
    bias = np.array([r.bias for r in sc.reviewers])[who]
    noise = np.array([r.noise for r in sc.reviewers])[who]
    base = np.where(a.success, spec.success_mean, spec.failure_mean)
    r_score = np.round(np.clip(base + bias + noise * rng.standard_normal(m), 0.0, 1.0), 2)
    lo, hi = spec.review_confidence
    r_conf = np.maximum(np.round(lo + (hi - lo) * rng.random(m), 2), 0.01)
    r_at = a.end_s + rng.integers(600, 21601, m)
    retracted = reviewed & (rng.random(m) < spec.retraction_rate)
    retract_at = r_at + rng.integers(600, 7201, m)
    verdict = np.where(reviewed, (r_score < 0.5).astype(np.int64), -1)
    sel = np.nonzero(reviewed)[0]
    return (sel, who[sel], r_score[sel], r_conf[sel], r_at[sel], retracted[sel], retract_at[sel]), verdict


def _humans(st: Static, rng: np.random.Generator, a: Attempts, rated: np.ndarray) -> tuple:
    """Occasional humans: 1.0 / 0.75 for a success, 0.0 / 0.25 for a failure (60/40)."""
    m = len(a.task)
    by_human = rated & (rng.random(m) < st.scenario.ratings.human_rate)
    h_who = rng.integers(0, len(st.scenario.humans), m)
    lower = rng.random(m) >= 0.6
    h_score = np.where(a.success, np.where(lower, 0.75, 1.0), np.where(lower, 0.25, 0.0))
    h_at = a.end_s + rng.integers(3600, 259201, m)
    sel = np.nonzero(by_human)[0]
    return (sel, h_who[sel], h_score[sel], h_at[sel])
