"""Every number the fit publishes is finite: what the fit does with values that would make one infinite or NaN.

The event boundary bounds each number (weights and costs at most 1e6, durations and counts at most 1e12:
:mod:`pipeline.streams.events`), small enough that no sum of the fit overflows a 64-bit float. A store can still hold
rows outside those bounds (written before the bounds existed, or by another writer): the aggregation leaves them
out of the fit (:mod:`pipeline.fit.aggregate`) and :func:`left_out` names them. A quotient of finite numbers can
still overflow (a mean cost over a subnormal mean quality): the caller asks :func:`finite_or_none` and reports
what it could not compute. Nothing non-finite reaches the table, the stats or the page; each such case is a line
in the stats' notes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

#: Ids named per note (the count is always given).
SHOWN = 5


def ids_text(ids: Iterable[str]) -> str:
    """The first :data:`SHOWN` ids in order, and how many more."""
    ordered = sorted(str(i) for i in ids)
    more = len(ordered) - SHOWN
    return ", ".join(ordered[:SHOWN]) + (f" and {more} more" if more > 0 else "")


def left_out(what: str, n: int, first: list[str]) -> str:
    """The note on ``n`` rows of a kind outside the event bounds, naming the ``first`` (in id order) of them."""
    more = n - len(first)
    shown = ", ".join(first) + (f" and {more} more" if more > 0 else "")
    return f"{n} {what} were left out of the fit (the event bounds): {shown}"


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
