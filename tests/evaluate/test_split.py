"""The chronological split (docs/design.md, Split)."""

from __future__ import annotations

from datetime import datetime, timedelta
from fractions import Fraction

import polars as pl
import pytest

from pipeline.evaluate.split import exact_fraction, learned_count, split_tasks

T0 = datetime(2026, 1, 1)


def tasks(times: dict[str, int]) -> pl.DataFrame:
    return pl.DataFrame({"task": list(times), "first_at": [T0 + timedelta(days=d) for d in times.values()]})


def test_count_is_exact_where_binary_floats_are_not():
    # 100 * 0.29 == 28.999999999999996 in floats; the user meant 29.
    assert int(100 * 0.29) == 28
    assert learned_count(100, 0.29) == 29
    assert learned_count(10, 0.7) == 7
    assert learned_count(7, 0.7) == 4  # floor(4.9)
    assert exact_fraction(0.7) == Fraction(7, 10)


@pytest.mark.parametrize("bad", [0, 1, 1.5, -0.1])
def test_fraction_out_of_range(bad):
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        exact_fraction(bad)


def test_order_by_time_then_task_id_and_cutoff_is_first_held_out_time():
    # Ten tasks; b and a share day 3 (a sorts first); 7 learned.
    frame = tasks({"j": 9, "b": 3, "a": 3, "c": 4, "d": 5, "e": 6, "f": 7, "g": 8, "h": 1, "i": 2})
    split = split_tasks(frame, 0.7)
    assert split.learned.to_list() == ["h", "i", "a", "b", "c", "d", "e"]
    assert split.held_out.to_list() == ["f", "g", "j"]
    assert split.cutoff_at == T0 + timedelta(days=7)


def test_same_time_across_the_boundary_is_split_by_task_id():
    frame = tasks({"x": 1, "y": 1, "z": 1, "w": 0})
    split = split_tasks(frame, 0.5)
    assert split.learned.to_list() == ["w", "x"]
    assert split.held_out.to_list() == ["y", "z"]
    assert split.cutoff_at == T0 + timedelta(days=1)


def test_one_task_is_held_out_and_no_tasks_have_no_cutoff():
    split = split_tasks(tasks({"a": 0}), 0.7)
    assert split.learned.to_list() == [] and split.held_out.to_list() == ["a"]
    assert split.cutoff_at == T0
    assert split_tasks(tasks({}), 0.7).cutoff_at is None
