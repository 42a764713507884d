"""Times: one text form, naive means UTC (never the machine's local time), what a person types is parsed once."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.utc import (
    aware,
    format_timestamp,
    is_canonical_time,
    is_plain_time,
    naive,
    parse_time,
    parse_timestamp,
    stamp,
    utc_timestamp,
)


@pytest.fixture
def far_from_utc(monkeypatch):
    """The machine's local time zone set 9 hours east of UTC: a naive time read as local would show it."""
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_a_naive_time_is_utc_whatever_the_local_zone(far_from_utc):
    moment = datetime(2026, 1, 31, 12, 0, 0)
    assert format_timestamp(moment) == "2026-01-31T12:00:00Z"
    assert aware(moment) == datetime(2026, 1, 31, 12, tzinfo=UTC)
    assert naive(aware(moment)) == moment and naive(moment) is moment
    tokyo = datetime(2026, 1, 31, 21, 0, 0, 5, tzinfo=timezone(timedelta(hours=9)))
    assert format_timestamp(tokyo) == "2026-01-31T12:00:00.000005Z" and naive(tokyo) == moment.replace(microsecond=5)


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("2026-01-31", datetime(2026, 1, 31, tzinfo=UTC)),
        (" 2026-01-31T12:00:00Z ", datetime(2026, 1, 31, 12, tzinfo=UTC)),
        ("2026-01-31T12:00:00z", datetime(2026, 1, 31, 12, tzinfo=UTC)),
        ("2026-01-31T12:00:00+02:00", datetime(2026, 1, 31, 10, tzinfo=UTC)),
        ("2026-01-31T12:00:00", datetime(2026, 1, 31, 12, tzinfo=UTC)),
    ],
)
def test_what_a_person_types_is_an_aware_time(typed, expected):
    assert parse_time(typed) == expected


def test_the_text_form_round_trips_and_bad_input_is_refused():
    assert utc_timestamp("2026-01-31T14:00:00.1234567+02:00") == "2026-01-31T12:00:00.123456Z"
    assert format_timestamp(parse_timestamp("2026-01-31T12:00:00.123456Z")) == "2026-01-31T12:00:00.123456Z"
    with pytest.raises(ValueError):
        parse_time("last tuesday")
    assert stamp(datetime(2026, 1, 31, 12, 0, 1, tzinfo=UTC)) == "20260131T120001Z"


_TIMES = st.builds(
    "{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}{}Z".format,
    *(st.integers(0, top) for top in (9999, 13, 32, 25, 61, 61)),
    st.sampled_from(["", ".000000", ".500000"]),
)


@settings(max_examples=150, deadline=None)
@given(_TIMES)
def test_a_plain_time_is_a_canonical_time_the_calendar_accepts(text):
    """The fast lane (is_plain_time: one pattern) accepts only what the calendar does, and a text it passes by is
    still judged by the full rule (the same verdict as before the lane)."""
    full = not text.endswith(".000000Z") and _calendar_accepts(text[:-1])
    assert is_canonical_time(text) == full
    assert not is_plain_time(text) or full


def _calendar_accepts(text: str) -> bool:
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def test_the_plain_lane_covers_the_common_times_and_leaves_the_rest_to_the_calendar():
    assert all(is_plain_time(t) for t in ("2026-01-01T00:00:00Z", "0001-12-28T23:59:59Z", "9999-02-28T12:30:05Z"))
    assert not any(
        is_plain_time(t)
        for t in ("0000-01-01T00:00:00Z", "2026-01-29T00:00:00Z", "2026-13-01T00:00:00Z", "2026-01-01T24:00:00Z",
                  "2026-01-01T00:60:00Z", "2026-01-01T00:00:00.500000Z", "2026-01-01 00:00:00Z")
    )  # fmt: skip
    assert is_canonical_time("2024-02-29T00:00:00Z") and not is_canonical_time("2026-02-29T00:00:00Z")
