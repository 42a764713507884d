"""Read the optional sections (``ladders``, ``frontier``, ``policies``, ``signals``) that other stages write.

Their shapes are fixed by issues 6 and 7 only in outline, so these readers
accept the spellings a stage may reasonably use (``ladder`` or ``rungs``,
``mean_cost_usd`` or ``cost_usd``, points grouped by series or tagged with a
``kind``) and never fail on a missing piece: a page with less is still a page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..nightly.stats import Stats


@dataclass(frozen=True)
class Point:
    kind: str  # single | router | ladder | shipped | fitted | oracle
    label: str
    quality: float | None
    cost: float | None


def first(row: dict[str, Any], *keys: str) -> Any:
    """The value of the first key present (and not null) in ``row``."""
    for key in keys:
        if isinstance(row, dict) and row.get(key) is not None:
            return row[key]
    return None


def short_config(key: str) -> str:
    """``claude-code/anthropic/opus/high`` -> ``opus high``: the model and effort a reader recognises."""
    from urllib.parse import unquote

    parts = key.split("/")
    if len(parts) != 4:
        return key
    model, effort = unquote(parts[2]), unquote(parts[3])
    return model if effort == "-" else f"{model} {effort}"


#: The fields of a stats file that hold configuration keys (one key, or a list of them).
CONFIG_FIELDS = frozenset(
    {"config", "config_key", "best_single_config", "configs", "rungs", "ladder", "cheap_config", "frontier_config"}
    | {"default_config"}
)


def config_keys(stats: Stats) -> list[str]:
    """Every configuration key the stats names, longest first (so a key inside another is replaced second)."""
    keys: set[str] = set()

    def walk(value: Any, field: str = "") -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, k)
        elif isinstance(value, list):
            for v in value:
                walk(v, field)
        elif isinstance(value, str) and field in CONFIG_FIELDS and len(value.split("/")) == 4:
            keys.add(value)

    walk(stats.model_dump(by_alias=True))
    return sorted(keys, key=lambda k: (-len(k), k))


def short_configs_in(text: str, keys: list[str]) -> str:
    """``text`` with each configuration key in ``keys`` written as :func:`short_config` writes it."""
    if not keys or not text:
        return text
    pattern = re.compile("|".join(re.escape(k) for k in sorted(keys, key=len, reverse=True)))
    return pattern.sub(lambda m: short_config(m.group(0)), text)


def rungs(ladder: dict[str, Any] | None) -> list[str]:
    value = first(ladder or {}, "ladder", "rungs", "configs")
    if isinstance(value, dict):  # a nested routing-table style ladder
        value = first(value, "rungs", "configs")
    return [str(v) for v in value or []]


def ladder_summary(stats: Stats) -> dict[str, Any] | None:
    summary = (stats.ladders or {}).get("summary")
    return summary if isinstance(summary, dict) else None


def ladder_regions(stats: Stats) -> dict[str, dict[str, Any]]:
    """Region -> its ladder row (``*`` first), whether the stage nests them under ``regions`` or not."""
    ladders = stats.ladders or {}
    nested = ladders.get("regions")
    regions = (
        nested
        if isinstance(nested, dict)
        else {k: v for k, v in ladders.items() if k != "summary" and isinstance(v, dict)}
    )
    return dict(sorted(regions.items(), key=lambda kv: (kv[0] != "*", kv[0])))


def _point(kind: str, row: dict[str, Any], label: str | None = None) -> Point:
    if label is None:
        lam = first(row, "lambda", "lambda_")
        label = first(row, "config", "label", "name") or (f"λ={lam:g}" if lam is not None else kind)
    return Point(
        kind,
        str(label),
        first(row, "mean_quality", "quality", "held_out_quality"),
        first(row, "mean_cost_usd", "cost_usd", "held_out_cost_usd", "cost"),
    )


def _series(frontier: dict[str, Any], name: str) -> list[dict[str, Any]]:
    value = frontier.get(name)
    if isinstance(value, dict):
        value = value.get("points")
    if isinstance(value, list):
        return [v for v in value if isinstance(v, dict)]
    tagged = frontier.get("points")
    if isinstance(tagged, list):
        singular = name.rstrip("s")
        return [p for p in tagged if isinstance(p, dict) and first(p, "kind", "series") in (name, singular)]
    return []


def frontier_aiq(stats: Stats) -> dict[str, float]:
    """AIQ per series (``router``, ``singles``), from ``frontier.<series>.aiq`` or ``frontier.aiq.<series>``."""
    frontier = stats.frontier or {}
    out: dict[str, float] = {}
    for name in ("router", "singles"):
        series = frontier.get(name)
        value = series.get("aiq") if isinstance(series, dict) else None
        if value is None and isinstance(frontier.get("aiq"), dict):
            value = frontier["aiq"].get(name)
        if value is not None:
            out[name] = value
    return out


def frontier_points(stats: Stats) -> list[Point]:
    """Every point of the cost-quality picture: singles, the router's sweep, the ladder, baselines, oracle."""
    frontier = stats.frontier or {}
    points = [_point("single", p) for p in _series(frontier, "singles")]
    points += [_point("router", p) for p in _series(frontier, "router")]
    b = stats.baselines
    if not points:  # no frontier stage: the single baselines are still single configurations
        points += [
            Point("single", x.config, x.mean_quality, x.mean_cost_usd) for x in (b.best_single, b.cheapest) if x.config
        ]
    summary = ladder_summary(stats)
    if summary:
        label = " → ".join(short_config(k) for k in rungs(summary)) or "ladder"
        points.append(_point("ladder", summary, label))
    points.append(Point("shipped", "shipped", b.shipped.mean_quality, b.shipped.mean_cost_usd))
    points.append(Point("fitted", "fitted", b.fitted.mean_quality, b.fitted.mean_cost_usd))
    oracle = frontier.get("oracle") if isinstance(frontier.get("oracle"), dict) else None
    points.append(
        _point("oracle", oracle, "oracle")
        if oracle
        else Point("oracle", "oracle", b.oracle.mean_quality, b.oracle.mean_cost_usd)
    )
    return points


def policy_rows(stats: Stats) -> list[tuple[str, dict[str, Any]]]:
    """(policy, figures) in the stage's order; accepts a mapping or a list of rows with a ``policy`` key."""
    policies = stats.policies
    if isinstance(policies, dict):
        rows = policies.get("policies", policies)
        if isinstance(rows, dict):
            return [(k, v) for k, v in rows.items() if isinstance(v, dict)]
        policies = rows
    if isinstance(policies, list):
        return [(str(first(r, "policy", "name")), r) for r in policies if isinstance(r, dict)]
    return []
