"""Times in the future (docs/design.md, Bounds): how far after now an event's time may lie, and why one past it is
refused by ``append`` and ``import`` and dead-lettered by compaction."""

from __future__ import annotations

from datetime import datetime, timedelta

from ..utc import format_timestamp

#: How far after the moment it is appended (or compacted) an event's time may lie: a writer's clock a little ahead
#: is fine, an event dated next year is a mistake that makes every other rating look old to the fit's recency
#: weights (docs/design.md, Bounds). ``--skew`` changes it, ``--allow-future`` lifts it.
MAX_FUTURE = timedelta(days=1)


def latest_time(now: datetime, skew: timedelta) -> str:
    """The latest time an event may carry when appended at ``now`` (``now + skew``, to the second, normalised)."""
    try:
        return format_timestamp((now + skew).replace(microsecond=0))
    except OverflowError:  # past year 9999: nothing is too late
        return "9999-12-31T23:59:59Z"


def describe_skew(skew: timedelta) -> str:
    """``1 day``, ``6 h``, ``90 s``: a skew for people."""
    seconds = skew.total_seconds()
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if unit == 'day' and n != 1 else ''}"
    return f"{seconds:g} s"


def future_reason(at: str, latest: str, skew: timedelta, *, moment: str = "now") -> str | None:
    """Why an event time ``at`` (normalised) is refused, when it is after ``latest`` (:func:`latest_time` of
    ``moment``); None when it is not. Both are compared to the second (the normalised form sorts as text)."""
    if at[:19] <= latest[:19]:
        return None
    return (
        f"{at} is more than {describe_skew(skew)} after {moment} (at most {latest}): an event dated in the future "
        "makes every other rating look old to the fit; fix the writer's clock, or pass --allow-future (a backfill "
        "that needs it)"
    )
