"""Times (docs/design.md, Common fields): UTC everywhere, in two forms, and the one place that converts them.

Streams and every output hold one text form (``2026-01-31T12:00:00Z``, six fraction digits when there are any:
:func:`format_timestamp`); the store holds naive ``TIMESTAMP`` values that are UTC. A naive ``datetime`` is
therefore always UTC here (:func:`aware`, :func:`naive`), never the machine's local time.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})", re.ASCII)


#: The form :func:`format_timestamp` writes: UTC, ``Z``, no fraction or six digits that are not all zero.
CANONICAL_TIME = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{6})?Z"
_CANONICAL = re.compile(CANONICAL_TIME)


#: The commonest canonical times, that need no calendar: whole seconds, days 01 to 28 (which every month has),
#: years 0001 to 9999 (the pattern without its year 0000, which :data:`_PLAIN` refuses: for regex engines without
#: lookahead, such as Arrow's).
PLAIN_TIME = r"[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]Z"
_PLAIN = re.compile(r"(?!0000)" + PLAIN_TIME)


def is_plain_time(value: str) -> bool:
    """Whether ``value`` is a canonical time of whole seconds on a day 01 to 28: one pattern, no calendar (the fast
    lane of :func:`is_canonical_time`, for readers that check a time a row)."""
    return _PLAIN.fullmatch(value) is not None


def is_canonical_time(value: str) -> bool:
    """Whether ``value`` is a real time already in the normalised form, so that :func:`utc_timestamp` returns it
    unchanged (the form alone is not enough: 2026-02-30 has it)."""
    if _PLAIN.fullmatch(value):
        return True
    if not _CANONICAL.fullmatch(value) or value.endswith(".000000Z"):
        return False
    try:
        datetime.fromisoformat(value[:-1])
    except ValueError:
        return False
    return True


def utc_timestamp(value: str) -> str:
    """Accept an RFC 3339 timestamp with a zone; return it in UTC as ``...Z``.

    Microsecond precision: finer digits are truncated, which keeps ordering.
    """
    if is_canonical_time(value):  # the common case: nothing to normalise
        return value
    if not _RFC3339.fullmatch(value):
        raise ValueError("not an RFC 3339 timestamp with a time zone (e.g. 2026-01-31T12:00:00Z)")
    text = value.replace("t", "T").replace(" ", "T").replace("z", "Z")
    frac = re.search(r"\.(\d+)", text)
    if frac and len(frac.group(1)) > 6:
        text = text.replace(frac.group(0), "." + frac.group(1)[:6])
    try:
        return format_timestamp(datetime.fromisoformat(text.replace("Z", "+00:00")))
    except ValueError as exc:
        raise ValueError(f"not a valid date or time: {exc}") from None
    except OverflowError:  # a valid local time whose UTC lies outside years 1..9999
        raise ValueError("the time in UTC is outside the years 1 to 9999") from None


def format_timestamp(moment: datetime) -> str:
    """The one textual form of a time in streams and outputs: UTC, ``Z``, micro-seconds when present (a naive
    ``moment`` is UTC, as the store's times are)."""
    moment = naive(moment)
    # isoformat, not strftime: strftime does not zero-pad years before 1000 on every platform
    return moment.isoformat(timespec="microseconds" if moment.microsecond else "seconds") + "Z"


def aware(moment: datetime) -> datetime:
    """``moment`` with its zone: a naive time is UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def naive(moment: datetime) -> datetime:
    """``moment`` as the store holds it: naive UTC (an aware time converted, a naive one as it is)."""
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment


def parse_timestamp(text: str) -> datetime:
    """A time of the text form (a validated ``...Z``, or any RFC 3339 time with a zone), aware."""
    return datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))


def parse_time(text: str) -> datetime:
    """What a person types for a time (``--since``, ``--as-of``): RFC 3339, or a date meaning its start; aware,
    UTC when no zone is given. :class:`ValueError` when it is neither."""
    return aware(parse_timestamp(text.strip()))


def now() -> datetime:
    """The current time, aware UTC."""
    return datetime.now(UTC)


def now_ms() -> int:
    """The current time in milliseconds since the epoch (what Delta records as a file's modification time)."""
    return int(now().timestamp() * 1000)


def stamp(moment: datetime | None = None) -> str:
    """A compact UTC stamp for names of things moved aside: ``20260131T120000Z``."""
    return (moment or now()).astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
