"""Times: one text form, naive means UTC (never the machine's local time), what a person types is parsed once."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta, timezone

import pytest

from pipeline.utc import aware, format_timestamp, naive, parse_time, parse_timestamp, stamp, utc_timestamp


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
