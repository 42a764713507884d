"""The points of the cost-quality picture, read from the stats' frontier, ladders and baselines."""

from __future__ import annotations

from dataclasses import dataclass

from ..nightly.stats import Stats


@dataclass(frozen=True)
class Point:
    kind: str  # single | router | ladder | shipped | fitted | oracle
    label: str
    quality: float | None
    cost: float | None


def frontier_points(stats: Stats) -> list[Point]:
    """Every point of the cost-quality picture: singles, the router's sweep, the ladder, baselines, oracle."""
    frontier, b = stats.frontier, stats.baselines
    points = [Point("single", p.config, p.quality, p.cost_usd) for p in (frontier.singles if frontier else [])]
    points += [
        Point("router", f"λ={p.lambda_:g}", p.quality, p.cost_usd) for p in (frontier.router if frontier else [])
    ]
    if not points:  # no frontier stage: the single baselines are still single configurations
        points += [
            Point("single", x.config, x.mean_quality, x.mean_cost_usd) for x in (b.best_single, b.cheapest) if x.config
        ]
    summary = stats.ladders.summary if stats.ladders else None
    if summary is not None:
        points.append(Point("ladder", "ladder", summary.held_out_quality, summary.held_out_cost_usd))
    points.append(Point("shipped", "shipped", b.shipped.mean_quality, b.shipped.mean_cost_usd))
    points.append(Point("fitted", "fitted", b.fitted.mean_quality, b.fitted.mean_cost_usd))
    if frontier is not None:
        points.append(Point("oracle", "oracle", frontier.oracle.quality, frontier.oracle.cost_usd))
    else:
        points.append(Point("oracle", "oracle", b.oracle.mean_quality, b.oracle.mean_cost_usd))
    return points
