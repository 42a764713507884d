"""The chronological split (docs/design.md, Split): exact counts, time then task id, the cutoff, refusals."""

from __future__ import annotations

from fractions import Fraction

import pytest
from fixtures_fit import A, at, context, opened, rated

from pipeline.errors import FitError
from pipeline.evaluate.split import check_split, exact_fraction
from pipeline.fit.aggregate import learned_count
from pipeline.fit.context import Part


def test_count_is_exact_where_binary_floats_are_not():
    # 100 * 0.29 == 28.999999999999996 in floats; the user meant 29.
    assert int(100 * 0.29) == 28
    assert learned_count(100, exact_fraction(0.29)) == 29
    assert learned_count(10, exact_fraction(0.7)) == 7
    assert learned_count(7, exact_fraction(0.7)) == 4  # floor(4.9)
    assert exact_fraction(0.7) == Fraction(7, 10)


@pytest.mark.parametrize("bad", [0, 1, 1.5, -0.1])
def test_fraction_out_of_range(bad):
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        exact_fraction(bad)


def tasks_on_days(days: dict[str, int]) -> list:
    return [e for task, d in days.items() for e in (opened(task, hours=24 * d), rated(f"r{task}", task, A, 1, 24 * d))]


def learned_ids(ctx, names: list[str], part: Part = Part.LEARNED) -> list[str]:
    return [names[t] for t in ctx.tasks_of(part)["task"].to_list()]


def test_order_by_time_then_task_id_and_cutoff_is_first_held_out_time():
    # Ten tasks; b and a share day 3 (a sorts first); 7 learned.
    days = {"j": 9, "b": 3, "a": 3, "c": 4, "d": 5, "e": 6, "f": 7, "g": 8, "h": 1, "i": 2}
    ctx = context(*tasks_on_days(days), fraction=Fraction(7, 10))
    names = sorted(days)
    assert learned_ids(ctx, names) == ["h", "i", "a", "b", "c", "d", "e"]
    assert learned_ids(ctx, names, Part.HELD_OUT) == ["f", "g", "j"]
    assert ctx.split.cutoff == at(24 * 7)


def test_same_time_across_the_boundary_is_split_by_task_id():
    ctx = context(*tasks_on_days({"x": 1, "y": 1, "z": 1, "w": 0}), fraction=Fraction(1, 2))
    names = ["w", "x", "y", "z"]
    assert learned_ids(ctx, names) == ["w", "x"] and learned_ids(ctx, names, Part.HELD_OUT) == ["y", "z"]
    assert ctx.split.cutoff == at(24)


def test_one_task_leaves_the_learned_part_empty_and_the_fit_says_how_many_are_needed():
    ctx = context(*tasks_on_days({"a": 0}), fraction=Fraction(7, 10))
    assert (ctx.split.learned, ctx.split.cutoff) == (0, at(0))
    with pytest.raises(FitError, match=r"floor\(1 x 0.7\) = 0 tasks.*at least 2 tasks"):
        check_split(ctx)
    assert context(fraction=Fraction(7, 10)).split.cutoff is None
