"""The evidence gate of a ``routing-table/v1`` table (it publishes no tests): a table in ``fits/history/`` that an
older fit wrote still pins and routes as it did. May be dropped in 0.2.0 (:mod:`pipeline.compat`).

The learned choice passes on ``n(c, r) >= min_samples`` and ``relative_advantage(c, r) > 0``, in the region,
then in the global pool; else the static fallback.
"""

from __future__ import annotations

from typing import Any

from ..routing.view import RegionView, RouterLike, levels


def passes(view: RegionView, config: str, min_samples: int) -> bool:
    """The gate of a v1 table (it publishes no tests): n(c, r) >= min_samples AND relative_advantage(c, r) > 0."""
    row = view.rows[config]
    ra = row.relative_advantage
    return row.source == view.name and row.n_ratings >= min_samples and ra is not None and ra > 0.0


def why_not(view: RegionView, config: str, min_samples: int) -> str:
    """Why ``config`` does not pass the v1 gate in ``view``, in words with its numbers."""
    row = view.rows[config]
    if row.source != view.name:
        return f"{config} has no ratings in {view.name}"
    if row.n_ratings < min_samples:
        return f"{config} has n {row.n_ratings} < {min_samples}"
    if row.relative_advantage is None:
        return f"{config} has no relative advantage (null)"
    return f"{config} has relative advantage {row.relative_advantage:.4g} <= 0"


def learning_governed(
    router: RouterLike, view: RegionView, pool: tuple[str, ...], role: str | None
) -> tuple[str, str, bool]:
    """The ``learning_governed`` policy of a v1 table (:func:`pipeline.routing.policies.learning_governed`)."""
    ms = router.min_samples
    misses: list[str] = []
    for level in levels(router, view):
        learned = level.best(pool)
        if passes(level, learned, ms):
            row = level.rows[learned]
            return (
                learned,
                "".join(f"{m}; " for m in misses)
                + (
                    f"learned choice in {level.name}: n {row.n_ratings} >= {ms}, "
                    f"relative advantage {row.relative_advantage:.4g} > 0"
                ),
                True,
            )
        misses.append(f"{'gate not met in ' if not misses else 'in '}{level.name}: {why_not(level, learned, ms)}")
    config, static_why = router.static_choice(view, pool, role)
    return config, f"{'; '.join(misses)}; static: {static_why}", True


def gate_check(view: RegionView, learned: str, min_samples: int) -> dict[str, Any]:
    """The v1 gate's check of the learned choice in ``view``, spelled out for ``--explain``."""
    row = view.rows[learned]
    return {
        "region": view.name,
        "learned": learned,
        "rule": "v1: n >= min_samples and relative advantage > 0",
        "n_ratings": row.n_ratings,
        "relative_advantage": row.relative_advantage,
        "passes": passes(view, learned, min_samples),
    }
