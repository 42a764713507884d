"""Typed scalars of a source row, read one way for every source (docs/design.md, Imports).

A missing value is ``None``, an empty or blank string, or a NaN number, in every format (CSV, JSON, Parquet,
SQLite): NaN means "not measured" everywhere, never an error in one format and a blank in another. Infinity and
numbers out of the events' bounds are bad values (:class:`Problem`).
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from ...utc import format_timestamp, utc_timestamp
from ...utc import now as utc_now
from ..events import MAX_COST_USD, MAX_COUNT
from ..future import MAX_FUTURE, future_reason, latest_time


class Problem(ValueError):
    """One bad value of a source row: ``field`` and ``reason``."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(field, reason)
        self.field, self.reason = field, reason


def missing(value: Any) -> bool:
    """None, an empty or blank string, or NaN: a value the source did not measure."""
    if value is None:
        return True
    if isinstance(value, str):
        stripped = value.strip()
        return not stripped or (len(stripped) == 3 and stripped.lower() == "nan")
    return isinstance(value, float) and math.isnan(value)


def number(value: Any, field: str, *, low: float = 0.0, high: float | None = None) -> float | None:
    """A finite number in ``[low, high]`` (None when missing); text is parsed, booleans are refused."""
    if missing(value):
        return None
    if isinstance(value, bool):
        raise Problem(field, f"{value!r} is a boolean, not a number")
    if isinstance(value, (int, float)):
        out = float(value)
    elif isinstance(value, str):
        try:
            out = float(value)
        except ValueError:
            raise Problem(field, f"{value.strip()!r} is not a number") from None
    else:
        raise Problem(field, f"{type(value).__name__} {value!r} is not a number")
    if not math.isfinite(out):
        raise Problem(field, f"{value!r} is not a finite number")
    if out < low or (high is not None and out > high):
        bound = f"in [{low:g}, {high:g}]" if high is not None else f">= {low:g}"
        raise Problem(field, f"{out:g} is not {bound}")
    return out


def amount(value: Any) -> float | None:
    """A finite number >= 0 of an export's numeric field (cost, tokens), or None for anything else."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) and out >= 0 else None


def seconds(value: Any) -> float | None:
    """A time of an export (RFC 3339, UTC text without a zone, or unix numbers) as unix seconds; None if missing."""
    at = moment(value, "time", naive_utc=True, unix_numbers=True)
    return None if at is None else datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()


def cost(value: Any, field: str = "cost_usd") -> float | None:
    """A cost in USD within the events' bounds (0 to 1e6 per attempt)."""
    return number(value, field, low=0.0, high=MAX_COST_USD)


def count(value: Any, field: str) -> int | None:
    """A whole count in [0, 1e12] (trace counts, durations in ms, tokens)."""
    out = number(value, field, low=0.0, high=float(MAX_COUNT))
    if out is None:
        return None
    if out != int(out):
        raise Problem(field, f"{out:g} is not a whole number")
    return int(out)


def text(value: Any) -> str | None:
    """A non-blank string (stripped), None when missing; numbers are written as they read."""
    if type(value) is str:  # the commonest case first, as missing() and the end below read it
        stripped = value.strip()
        return None if not stripped or (len(stripped) == 3 and stripped.lower() == "nan") else stripped
    if missing(value):
        return None
    if isinstance(value, float) and value == int(value):
        return str(int(value))
    return str(value).strip()


def rfc3339(value: str) -> str:
    """The events' own rule (RFC 3339 with a zone, normalised to UTC ``Z``: the ``at`` of every event);
    :class:`ValueError` otherwise."""
    return utc_timestamp(value)


#: Unix times by magnitude: seconds below 1e11 (until 5138), then milliseconds, microseconds, nanoseconds.
_UNIX_SCALES = ((1e11, 1.0), (1e14, 1e3), (1e17, 1e6), (math.inf, 1e9))


def unix(seconds_or_finer: float) -> str:
    """A unix time (seconds, milliseconds, microseconds or nanoseconds, told apart by magnitude) as a timestamp."""
    if isinstance(seconds_or_finer, int) and 0 <= seconds_or_finer < 100_000_000_000:  # whole seconds (to 5138)
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds_or_finer))  # format_timestamp's form, faster
    scale = next(s for limit, s in _UNIX_SCALES if abs(seconds_or_finer) < limit)
    try:
        return format_timestamp(datetime.fromtimestamp(seconds_or_finer / scale, UTC))
    except (OverflowError, OSError, ValueError):
        raise ValueError(f"{seconds_or_finer:g} is not a unix time this reader can date") from None


def moment(value: Any, field: str, *, naive_utc: bool = False, unix_numbers: bool = False) -> str | None:
    """A time as the events write it (UTC ``...Z``), None when missing.

    RFC 3339 text with a zone always; text without a zone (``2026-01-31 12:00:00.5``) only where the source
    documents UTC (``naive_utc``); integer or decimal unix times (also as digits in text) where it writes them
    (``unix_numbers``); a ``datetime`` (Parquet, SQLite adapters), naive meaning UTC.
    """
    if missing(value):
        return None
    try:
        if isinstance(value, datetime):
            return format_timestamp(value if value.tzinfo else value.replace(tzinfo=UTC))
        if isinstance(value, bool):
            raise ValueError(f"{value!r} is not a time")
        if isinstance(value, (int, float)):
            if not unix_numbers:
                raise ValueError(f"{value!r} is a number, not an RFC 3339 time")
            return unix(value)
        raw = str(value).strip()
        if unix_numbers and raw.lstrip("-").replace(".", "", 1).isdigit():
            return unix(int(raw) if raw.lstrip("-").isdigit() else float(raw))
        try:
            return rfc3339(raw)
        except ValueError:
            if not naive_utc:
                raise
            return rfc3339(raw + "Z")
    except ValueError as exc:
        raise Problem(field, str(exc)) from None


class Clock:
    """The moment of the import and the latest time an event may carry: ``future`` after it (``--skew``; None:
    any, ``--allow-future``), the rule of ``append`` (pipeline/streams/future.py)."""

    def __init__(self, *, future: timedelta | None = MAX_FUTURE, now: datetime | None = None) -> None:
        self.now = now or utc_now()
        self.now_text = format_timestamp(self.now)
        self.skew = future if future is not None else MAX_FUTURE
        self.latest = latest_time(self.now, future) if future is not None else None

    def check(self, at: str, field: str) -> str:
        """``at`` (a normalised time), or :class:`Problem` when it lies beyond the latest time."""
        if self.latest is not None:
            reason = future_reason(at, self.latest, self.skew)
            if reason is not None:
                raise Problem(field, reason)
        return at
