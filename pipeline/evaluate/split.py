"""The chronological split of DESIGN 6: learned tasks first, held-out tasks after a cutoff.

Task time is the time of the task's first event (``first_at``). Tasks are
ordered by ``(first_at, task)``; the first ``floor(N * fraction)`` are learned
and the rest held out. The count is computed with exact rational arithmetic:
``0.7`` means 7/10, so ten tasks give seven learned ones, never six because
``10 * 0.7 == 6.999...`` in binary floating point.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction

import polars as pl


@dataclass(frozen=True)
class Split:
    """``learned`` and ``held_out`` task ids in time order; ``cutoff_at`` = first held-out task's time."""

    learned: pl.Series
    held_out: pl.Series
    cutoff_at: datetime | None


def exact_fraction(fraction: float | str | Fraction) -> Fraction:
    """The decimal the user wrote (``0.7`` -> 7/10), not the nearest binary float."""
    value = fraction if isinstance(fraction, Fraction) else Fraction(str(fraction))
    if not 0 < value < 1:
        raise ValueError(f"split fraction must be strictly between 0 and 1, got {fraction}")
    return value


def learned_count(n: int, fraction: float | str | Fraction) -> int:
    """``floor(n * fraction)`` computed exactly."""
    product = n * exact_fraction(fraction)
    return product.numerator // product.denominator


def split_tasks(tasks: pl.DataFrame, fraction: float | str | Fraction) -> Split:
    """Split ``tasks`` (columns ``task``, ``first_at``) chronologically; ties in time broken by task id."""
    ordered = tasks.select("task", "first_at").unique().sort(["first_at", "task"])
    k = learned_count(ordered.height, fraction)
    learned = ordered.head(k)
    held_out = ordered.slice(k)
    cutoff = held_out["first_at"][0] if held_out.height else None
    return Split(learned=learned["task"], held_out=held_out["task"], cutoff_at=cutoff)
