"""What the router knows of one region: its rows (one per configuration) with their sort keys.

Policies (:mod:`pipeline.routing.policies`) and the router (:mod:`pipeline.routing.router`) both import this
module, and it imports neither: a policy reads the router through :class:`RouterLike`, the part of it a
policy may use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, Protocol

from .greedy import GreedyKey, greedy_key, objective_value
from .table import Evidence, Ladder, Static

GLOBAL = "*"
#: :attr:`Row.source` of a config the table does not know: its cost the members' mean, or its price (Fit, Cost prior).
PRIOR = "prior"
PRICED = "price"


class Row(NamedTuple):
    """What the router knows of one configuration in one region view.

    ``source`` is where the figures come from: the region itself, ``*`` (the
    region does not list the config), ``prior`` (the table does not know it) or ``price`` (the table does not know
    it, its cost is its price).
    """

    config: str
    quality: float
    cost_usd: float | None
    value: float
    weight: float
    n_ratings: int
    relative_advantage: float | None
    win_rate: float | None
    source: str
    prior: float | None = None

    def as_json(self) -> dict[str, Any]:
        return self._asdict()


def _sort_key(row: Row, min_quality: float | None = None) -> GreedyKey:
    """The greedy order of the table's objective (:func:`pipeline.routing.greedy.greedy_key` of the row's value)."""
    return greedy_key(row.config, row.quality, row.cost_usd, row.value, min_quality)


def _qpd_key(row: Row, floor: float, min_quality: float | None = None) -> GreedyKey:
    """The greedy order of quality per dollar ``q / max(cost, floor)`` whatever the table's objective (quality
    without a cost)."""
    qpd = objective_value(row.quality, row.cost_usd, "quality_per_dollar", None, floor)
    return greedy_key(row.config, row.quality, row.cost_usd, qpd, min_quality)


class RegionView:
    """One region's rows with their sort keys; ``members`` are the region's own configs in rank order."""

    __slots__ = (
        "_floor",
        "_min_quality",
        "_prior_row",
        "evidence",
        "keys",
        "ladder",
        "members",
        "name",
        "qpd_keys",
        "rows",
    )

    def __init__(
        self,
        name: str,
        rows: dict[str, Row],
        ladder: Ladder | None,
        *,
        floor: float,
        prior_row: Callable[[str], Row],
        min_quality: float | None = None,
        evidence: dict[tuple[str, str], Evidence] | None = None,
    ) -> None:
        """``floor``: the table's cost floor; ``prior_row(config)``: the row of a config the table does not know;
        ``min_quality``: the quality floor; ``evidence``: (member, static choice) -> its gate test in this region."""
        self.name = name
        self.rows = rows
        self._floor = floor
        self._min_quality = min_quality
        self._prior_row = prior_row
        self.evidence = evidence or {}
        self.keys = {c: _sort_key(r, min_quality) for c, r in rows.items()}
        self.qpd_keys = {c: _qpd_key(r, floor, min_quality) for c, r in rows.items()}
        own = [c for c, r in rows.items() if r.source == name]
        self.members = tuple(sorted(own, key=self.keys.__getitem__))
        self.ladder = ladder

    def _learn(self, pool: Iterable[str]) -> None:
        """Add prior rows for pool members the table does not know (rare; then cached)."""
        for c in pool:
            if c not in self.rows:
                row = self._prior_row(c)
                self.rows[c] = row
                self.keys[c] = _sort_key(row, self._min_quality)
                self.qpd_keys[c] = _qpd_key(row, self._floor, self._min_quality)

    def row(self, config: str) -> Row:
        try:
            return self.rows[config]
        except KeyError:
            self._learn((config,))
            return self.rows[config]

    def best(self, pool: Sequence[str]) -> str:
        """Greedy choice by the table's objective with the tie rules of docs/design.md, Greedy choice and ties."""
        return self._least(pool, self.keys)

    def best_qpd(self, pool: Sequence[str]) -> str:
        """Greedy choice by quality per dollar (:func:`_qpd_key`), the same ties."""
        return self._least(pool, self.qpd_keys)

    def _least(self, pool: Sequence[str], keys: dict[str, GreedyKey]) -> str:
        """The pool member of the least key; members the table does not know get their prior rows first (rare)."""
        try:
            return min(pool, key=keys.__getitem__)
        except KeyError:
            self._learn(pool)
            return min(pool, key=keys.__getitem__)

    def ranked(self, pool: Sequence[str]) -> list[str]:
        """``pool`` in the greedy order of :meth:`best` (best first)."""
        self._learn(pool)
        return sorted(pool, key=self.keys.__getitem__)

    def best_by(self, pool: Sequence[str], key: Callable[[Row], Any]) -> str:
        """Choice by any key over rows (e.g. highest quality); ties by key order."""
        self._learn(pool)
        rows = self.rows
        return min(pool, key=lambda c: (key(rows[c]), c))


class RouterLike(Protocol):
    """What a policy reads of the router (:class:`pipeline.routing.router.Router` is one)."""

    static: Static
    star: RegionView
    min_samples: int

    @property
    def objective(self) -> str:
        """The table's objective (what ``value`` ranks by)."""
        ...

    @property
    def gated(self) -> bool:
        """The table publishes the evidence gate's tests (v1.1); a v1 table is gated by relative advantage."""
        ...

    def static_choice(self, view: RegionView, pool: Sequence[str], role: str | None) -> tuple[str, str]:
        """The static fallback of the table for a task of ``role``, restricted to ``pool``: (config, why)."""
        ...


def levels(router: RouterLike, view: RegionView) -> tuple[RegionView, ...]:
    """The region, then the global pool (once when the region is the global pool)."""
    return (view, router.star) if view is not router.star else (view,)
