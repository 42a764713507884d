"""Typed scalars of polars columns, for every layer that reads one (the fit and its judging).

polars types a column's ``mean()`` or ``max()`` as any Python scalar (a number, a date, a string, a list, ...),
whatever the column holds. These helpers say which scalar the caller expects and refuse any other, so a wrong
column is a clear error instead of a number that silently is not one.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl


def mean_of(series: pl.Series) -> float | None:
    """A numeric column's mean as a float (None when it is empty or all null)."""
    value = series.mean()
    if value is None:
        return None
    if isinstance(value, int | float | Decimal):
        return float(value)
    raise TypeError(f"column {series.name!r} of type {series.dtype} has no numeric mean")


def latest(series: pl.Series) -> datetime | None:
    """A datetime column's latest time (None when it is empty or all null)."""
    value = series.max()
    if value is None or isinstance(value, datetime):
        return value
    raise TypeError(f"column {series.name!r} of type {series.dtype} holds no datetimes")
