"""Every number the fit publishes is finite: what the fit does with values that would make one infinite or NaN.

The event boundary bounds each number (weights and costs at most 1e6, durations and counts at most 1e12:
:mod:`pipeline.streams.events`), small enough that no sum of the fit overflows a 64-bit float. A store can still hold
rows outside those bounds (written before the bounds existed, or by another writer): :func:`within_bounds`
leaves them out of the fit and names them. A quotient of finite numbers can still overflow (a mean cost over a
subnormal mean quality): the caller asks :func:`finite_or_none` and reports what it could not compute. Nothing
non-finite reaches the table, the stats or the page; each such case is a line in the stats' notes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import polars as pl

from ..streams.events import MAX_COST_USD, MAX_WEIGHT

#: Ids named per note (the count is always given).
SHOWN = 5


def _finite_within(column: str, low: float, high: float) -> pl.Expr:
    """``low <= column <= high`` and finite (a null stays: unknown is not out of bounds)."""
    value = pl.col(column)
    return value.is_null() | (value.is_finite() & (value >= low) & (value <= high))


def within_bounds(ratings: pl.DataFrame, attempts: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, list[str]]:
    """``ratings`` and ``attempts`` without the rows whose numbers are outside the event bounds, and one note
    per kind left out, naming its ids.

    A rating's ``w = precision * confidence * importance`` (or a rejection's ``weight``) must be finite and in
    ``[0, 1e6]`` and its score in ``[0, 1]``; an attempt's ``cost_usd`` finite and in ``[0, 1e6]``.
    """
    notes: list[str] = []
    ratings = _keep(
        ratings,
        _finite_within("w", 0.0, MAX_WEIGHT) & _finite_within("score", 0.0, 1.0),
        f"rating(s) with a weight outside [0, {MAX_WEIGHT:g}] or a score outside [0, 1]",
        notes,
    )
    attempts = _keep(
        attempts,
        _finite_within("cost_usd", 0.0, MAX_COST_USD),
        f"attempt(s) with a cost outside [0, {MAX_COST_USD:g}] USD",
        notes,
    )
    return ratings, attempts, notes


def _keep(frame: pl.DataFrame, good: pl.Expr, what: str, notes: list[str]) -> pl.DataFrame:
    """The rows of ``frame`` where ``good`` holds; a note naming the others (``<count> <what> were left out...``)."""
    bad = frame.filter(~good)
    if not bad.height:
        return frame
    notes.append(f"{bad.height} {what} were left out of the fit (the event bounds): {ids_text(bad['id'])}")
    return frame.filter(good)


def ids_text(ids: Iterable[str]) -> str:
    """The first :data:`SHOWN` ids in order, and how many more."""
    ordered = sorted(str(i) for i in ids)
    more = len(ordered) - SHOWN
    return ", ".join(ordered[:SHOWN]) + (f" and {more} more" if more > 0 else "")


def finite_or_none(value: float | None) -> float | None:
    """``value`` when it is a finite number, else None (the caller says why in the notes)."""
    return value if value is not None and math.isfinite(value) else None


def non_finite_paths(value: object, path: str = "") -> list[str]:
    """The JSON paths (``routing.difference.value``, ``grid[3].lambda``) of the NaN and infinite floats in
    ``value`` (dicts, lists, tuples and pydantic-free plain data)."""
    if isinstance(value, float):
        return [] if math.isfinite(value) else [path or "-"]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in non_finite_paths(v, f"{path}.{k}" if path else str(k))]
    if isinstance(value, (list, tuple)):
        return [p for i, v in enumerate(value) for p in non_finite_paths(v, f"{path}[{i}]")]
    return []
