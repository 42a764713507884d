"""The Router: load a routing table once, then decide routes in microseconds.

Everything a decision needs is precomputed at load: per region a dict of rows
(what the table believes of each configuration there) and each row's sort key
for the table's objective and for quality per dollar, so choosing among a pool
is one ``min`` over the pool with a C-level dict lookup as key.

Rules this module fixes (docs/design.md, Routing, says them for readers in other languages):

- **Unknown region** -> the global pool ``*``.
- **Pool.** ``pool=None`` means the region's own members (the global members for
  ``*``). A pool member the region does not list takes its global (``*``) row;
  a member the table does not know at all takes the *prior row*: quality = the
  global weighted mean quality ``sum(W*q)/sum(W)`` over the ``*`` members (the
  plain mean when no member has weight), cost = the mean of the ``*`` members'
  known costs (null when none), ``n_ratings`` 0, so it never passes the gate.
- **Failures.** A failed configuration must be in the pool (else an error that
  lists the pool). The failed ones are removed from the pool before any policy
  runs (unless that would empty it); every policy then chooses among the
  members whose published quality is above the highest published quality of
  the failed ones while any remain, else takes the highest-quality member left:
  escalation escalates. No exploration draw once a task has a failure.
- **Quality floor** (``constants.min_quality``): whatever the policy, a choice
  below the floor gives way to the best member at or above it while one exists
  (a pinned role keeps its config); exploration draws only among the members at
  or above it.
- **Ties** (docs/design.md, Greedy choice and ties): best objective, then higher quality, then lower cost
  (unknown cost last), then key order.
- **Exploration** (policies that allow it, with an ``rng``): with probability
  ``epsilon = constants.exploration`` a uniformly chosen other pool member
  (members in key order, index ``floor(u * (m-1))`` of a second draw).
  Propensity: ``1 - eps`` for the greedy choice, ``eps / (m - 1)`` for each
  other member; ``1`` when nothing can be explored (no rng, one member, a
  pinned role, a policy that does not explore).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import RoutingError
from . import thompson
from .explain_sql import explain_sql
from .greedy import objective_value
from .policies import POLICIES, Policy, gate_checks
from .table import SCHEMA_MAJOR, Evidence, Member, RoutingTable, load
from .view import GLOBAL, RegionView, Row

DEFAULT_POLICY = "learning_governed"
_MEMO_LIMIT = 1 << 16  # memoised greedy decisions per router (cleared when full)


class Decision(NamedTuple):
    """One routing decision; :meth:`to_event` is the ``route.decided`` event it logs."""

    config: str
    policy: str
    reason: str
    explored: bool
    table_version: str
    predicted_quality: float | None
    propensity: float
    candidates: tuple[str, ...] = ()
    #: The configs that had already failed on the task (an escalation; logged as ``after``).
    after: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = self._asdict()
        data["candidates"] = list(self.candidates)
        data["after"] = list(self.after)
        return data

    def to_event(self, task: str) -> dict[str, Any]:
        """The ``route.decided`` event (docs/design.md, Events) for ``task``."""
        event: dict[str, Any] = {
            "type": "route.decided",
            "task": task,
            "policy": self.policy,
            "chosen": self.config,
            "candidates": list(self.candidates),
            "propensity": self.propensity,
            "table": self.table_version or None,
            "explored": self.explored,
            "reason": self.reason,
        }
        if self.predicted_quality is not None:
            event["predicted_quality"] = self.predicted_quality
        if self.after:
            event["after"] = list(self.after)
        return event


class Router:
    """Loads a table and decides routes. Build with :meth:`load` or from a :class:`RoutingTable`."""

    def __init__(self, table: RoutingTable):
        self.table = table
        self.version = table.version
        self.constants = table.constants
        self.static = table.static
        self.objective = table.objective
        self.exploration = float(table.constants.exploration or 0.0)
        self.exploration_mode = table.constants.exploration_mode
        self._wins: dict[tuple, float] = {}
        self.min_samples = int(table.constants.min_samples)
        # A v1 table publishes no gate tests (Member.gate); its gate is the one it was published with.
        self.gated = table.schema_ != SCHEMA_MAJOR
        self._policies = POLICIES
        self._memo: dict[tuple, tuple] = {}
        star_region = table.regions.get(GLOBAL)
        star_members = star_region.members if star_region else []
        self._global_quality, self._global_cost = _global_means(star_members)
        star_rows = {m.config: _row(m, GLOBAL) for m in star_members}
        floor = table.constants.cost_floor_usd
        min_quality = table.constants.min_quality
        self.star = RegionView(
            GLOBAL,
            dict(star_rows),
            star_region.ladder if star_region else None,
            floor=floor,
            prior_row=self.prior_row,
            min_quality=min_quality,
            evidence=_evidence(star_members),
        )
        self.views: dict[str, RegionView] = {GLOBAL: self.star}
        for name, region in table.regions.items():
            if name == GLOBAL:
                continue
            rows = dict(star_rows)
            rows.update((m.config, _row(m, name)) for m in region.members)
            self.views[name] = RegionView(
                name,
                rows,
                region.ladder,
                floor=floor,
                prior_row=self.prior_row,
                min_quality=min_quality,
                evidence=_evidence(region.members),
            )
        # docs/design.md, Static fallback: the config with the most fitted ratings is the last static fallback.
        self.most_rated = min(star_rows.values(), key=lambda r: (-r.n_ratings, r.config)).config if star_rows else None

    @classmethod
    def load(cls, path: str | Path) -> Router:
        return cls(load(path))

    # ------------------------------------------------------------------ helpers policies use
    def prior_row(self, config: str) -> Row:
        q, cost = self._global_quality, self._global_cost
        return Row(
            config,
            q,
            cost,
            objective_value(q, cost, self.objective, self.constants.lambda_, self.constants.cost_floor_usd),
            0.0,
            0,
            None,
            None,
            "prior",
        )

    def view(self, region: str) -> RegionView:
        """The region's view; an unknown region uses the global pool ``*``."""
        view = self.views.get(region)
        if view is not None:
            return view
        if not self.star.rows:
            raise RoutingError(f"region {region!r} is not in the table and the table has no global pool '*'")
        return self.star

    def static_choice(self, view: RegionView, pool: Sequence[str], role: str | None) -> tuple[str, str]:
        """The static fallback (docs/design.md, Static fallback), restricted to the pool.

        static_hybrid's choice (frontier for reviewer, cheap for any other role
        or none) when cheap and frontier are named, else ``default_config``,
        else the config with the most fitted ratings; a static config outside
        the pool gives way to the pool member with the most fitted ratings.
        """
        s = self.static
        config: str | None
        if s.cheap_config and s.frontier_config:
            config = s.frontier_config if role == "reviewer" else s.cheap_config
            why = "static_hybrid " + ("frontier for reviewer" if role == "reviewer" else "cheap")
        elif s.default_config:
            config, why = s.default_config, "default_config"
        else:
            config, why = self.most_rated, "most-rated config"
        if config is not None and config in pool:
            return config, f"{why} {config}"
        star = self.star
        star._learn(pool)
        fallback = min(pool, key=lambda c: (-star.rows[c].n_ratings, c))
        return fallback, f"{why} {config} not in pool; most-rated pool member {fallback}"

    # ------------------------------------------------------------------ the decision
    def route(
        self,
        region: str,
        pool: Sequence[str] | None = None,
        role: str | None = None,
        failures: Sequence[str] = (),
        policy: str | None = None,
        rng: random.Random | None = None,
    ) -> Decision:
        """Decide the configuration for a task of ``region``. See the module doc for the rules.

        The greedy part is a pure function of the table and the arguments, so it is
        memoised (bounded); only the exploration draw runs on every call.
        """
        name = policy or DEFAULT_POLICY
        pool_t = None if pool is None else tuple(pool)
        fail_t = tuple(failures) if failures else ()
        fn = self._policies.get(name)
        key = (fn, region, pool_t, role, fail_t)
        greedy = self._memo.get(key)
        if greedy is None:
            greedy = self._greedy(name, fn, region, pool_t, role, fail_t)
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            self._memo[key] = greedy
        config, reason, others, candidates, view, quality = greedy
        if others and rng is not None and self.exploration_mode == "thompson":
            return self._thompson(name, greedy, rng)
        if others and rng is not None:
            eps = self.exploration
            if rng.random() < eps:
                k = len(others)  # m - 1
                config = others[min(int(rng.random() * k), k - 1)]
                return Decision(
                    config,
                    name,
                    f"{reason}; explored (epsilon {eps}) -> {config}",
                    True,
                    self.version,
                    view.row(config).quality,
                    eps / k,
                    candidates,
                )
            return Decision(config, name, reason, False, self.version, quality, 1.0 - eps, candidates)
        return Decision(config, name, reason, False, self.version, quality, 1.0, candidates, fail_t)

    def _thompson(self, name: str, greedy: tuple, rng: random.Random) -> Decision:
        """With probability eps a Thompson draw among the explorable members (the greedy choice among them), else
        the greedy choice; propensity ``(1 - eps) * [c is the greedy choice] + eps * P_draw(c)`` with P_draw exact
        (:mod:`pipeline.routing.thompson`), memoised per (region, members, config)."""
        config, reason, others, candidates, view, _ = greedy
        eps = self.exploration
        pool = tuple(sorted((config, *others)))
        drawn = rng.random() < eps
        chosen = thompson.draw([view.row(c) for c in pool], rng, self.objective, self.constants) if drawn else config
        key = (view.name, pool, chosen)
        win = self._wins.get(key)
        if win is None:
            win = thompson.win_probability([view.row(c) for c in pool], chosen, self.objective, self.constants)
            if len(self._wins) >= _MEMO_LIMIT:
                self._wins.clear()
            self._wins[key] = win
        propensity = max((1.0 - eps) * (chosen == config) + eps * win, 1e-12)
        if drawn:
            reason = f"{reason}; Thompson draw (share {eps:g}) -> {chosen}"
        return Decision(
            chosen, name, reason, chosen != config, self.version, view.row(chosen).quality, propensity, candidates
        )

    def _greedy(
        self,
        name: str,
        fn: Policy | None,
        region: str,
        pool: tuple[str, ...] | None,
        role: str | None,
        failures: tuple[str, ...],
    ) -> tuple[str, str, tuple[str, ...], tuple[str, ...], RegionView, float]:
        """The policy's choice before exploration: (config, reason, others, candidates, view, predicted quality).

        ``others`` are the members an exploration draw picks from (key order); empty when the choice
        cannot be explored (policy, single member, exploration 0).
        """
        if fn is None:
            raise RoutingError(f"unknown policy {name!r}; known: {', '.join(sorted(self._policies))}")
        view = self.view(region)
        if pool is None:
            candidates = view.members
            if not candidates:
                raise RoutingError(f"region {region!r} has no members and no pool was given")
        else:
            candidates = tuple(dict.fromkeys(pool))
            if not candidates:
                raise RoutingError("empty pool: give at least one configuration key")
        prefix = ""
        if failures:
            unknown = [f for f in dict.fromkeys(failures) if f not in candidates]
            if unknown:
                raise RoutingError(
                    f"failed config(s) {', '.join(unknown)} not in the pool, so their quality is unknown here; "
                    f"the pool: {', '.join(candidates)}"
                )
            candidates, prefix = _after_failures(view, candidates, failures)
        config, reason, explorable = fn(self, view, candidates, role, failures)
        if config not in candidates:
            raise RoutingError(f"policy {name!r} chose {config!r}, which is not in the pool")
        config, reason = self._floored(view, candidates, role, config, reason)
        others: tuple[str, ...] = ()
        if explorable and not failures and len(candidates) > 1 and self.exploration > 0.0:
            others = tuple(sorted(c for c in self._above_floor(view, candidates, config) if c != config))
        return config, prefix + reason, others, candidates, view, view.row(config).quality

    def _above_floor(self, view: RegionView, candidates: tuple[str, ...], config: str) -> tuple[str, ...]:
        """The candidates an exploration draw may take: those at or above the quality floor, unless the choice
        itself is below it (then every member is)."""
        floor = self.constants.min_quality
        if floor is None or view.row(config).quality < floor:
            return candidates
        return tuple(c for c in candidates if view.row(c).quality >= floor)

    def _floored(
        self, view: RegionView, candidates: tuple[str, ...], role: str | None, config: str, reason: str
    ) -> tuple[str, str]:
        """Every policy keeps the quality floor (docs/design.md, Routing): a choice below it gives way to the best
        member at or above it (the greedy order), while one exists; a pinned role keeps its config."""
        floor = self.constants.min_quality
        quality = view.row(config).quality
        if floor is None or quality >= floor or (role is not None and self.static.pinned.get(role) == config):
            return config, reason
        above = tuple(c for c in candidates if view.row(c).quality >= floor)
        if not above:
            return config, f"{reason}; every member is below the quality floor {floor:g}"
        chosen = view.best(above)
        return chosen, (
            f"{reason}; {config} is below the quality floor {floor:g} (quality {quality:.4g}): the best member at "
            f"or above it, {chosen}"
        )

    def describe(self, decision: Decision, region: str, role: str | None = None) -> dict[str, Any]:
        """``decision`` as a dict with the rows of its candidates (rank order) and the checks of its policy: the
        table rows and gate checks that decided it (``ratings route --explain``)."""
        view = self.view(region)
        out: dict[str, Any] = decision.to_dict()
        out["region"] = region
        out["region_used"] = view.name
        out["objective"] = self.objective
        out["constants"] = {"min_samples": self.min_samples, "exploration": self.exploration}
        out["rows"] = [view.row(c).as_json() for c in sorted(decision.candidates, key=view.keys.__getitem__)]
        out["sql"] = explain_sql(view, self.constants, self.objective, decision.candidates)
        if decision.policy == DEFAULT_POLICY:
            out["gate"] = gate_checks(self, view, decision.candidates, role)
        ladder = view.ladder or self.star.ladder
        if decision.policy == "ladder" and ladder is not None:
            out["ladder"] = ladder.model_dump(mode="json")
        return out


def _after_failures(
    view: RegionView, candidates: tuple[str, ...], failures: tuple[str, ...]
) -> tuple[tuple[str, ...], str]:
    """The members a policy may choose after ``failures`` (docs/design.md, Escalation), and the reason's prefix:
    those above the failed configs' highest published quality while any remain, else the highest-quality member
    left; when every candidate has failed, all of them again."""
    remaining = tuple(c for c in candidates if c not in failures)
    if not remaining:
        return candidates, "every candidate has failed; choosing among them again: "
    top = max(view.row(f).quality for f in failures)
    better = tuple(c for c in remaining if view.row(c).quality > top)
    if better:
        return better, f"escalating above the failed configs' quality {top:.4g}: "
    best = view.best_by(remaining, lambda r: (-r.quality, math.inf if r.cost_usd is None else r.cost_usd))
    return (best,), f"no member left above the failed configs' quality {top:.4g}: the highest-quality member left: "


def _evidence(members: Sequence[Member]) -> dict[tuple[str, str], Evidence]:
    """(member, static choice) -> the member's published gate test against it (none in a v1 table)."""
    return {(m.config, s): ev for m in members for s, ev in (m.gate or {}).items()}


def _row(member: Member, source: str) -> Row:
    return Row(
        member.config,
        member.quality,
        member.cost_usd,
        member.value,
        member.weight,
        member.n_ratings,
        member.relative_advantage,
        member.win_rate,
        source,
        member.prior,
    )


def _global_means(members: Sequence[Member]) -> tuple[float, float | None]:
    """Prior row figures: weighted mean quality sum(W*q)/sum(W) (plain mean when W sums to 0), mean known cost."""
    if not members:
        return 0.0, None
    total_w = sum(m.weight for m in members)
    if total_w > 0:
        quality = sum(m.weight * m.quality for m in members) / total_w
    else:
        quality = sum(m.quality for m in members) / len(members)
    costs = [m.cost_usd for m in members if m.cost_usd is not None]
    return round(quality, 9), (round(sum(costs) / len(costs), 9) if costs else None)
