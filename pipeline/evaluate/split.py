"""The chronological split (docs/design.md, Split; Validation): learned tasks first, held-out tasks after a cutoff.

The aggregation labels every task (:mod:`pipeline.fit.aggregate`: :class:`~pipeline.fit.aggregate.Split`); here
the split is checked before anything is fitted on it, and described for the stats.

Task time is the time of the task's first event (``first_at``). Tasks are ordered by ``(first_at, task)``; the
first ``floor(N * fraction)`` are learned and the rest held out. The count is computed with exact rational
arithmetic: ``0.7`` means 7/10, so ten tasks give seven learned ones, never six because ``10 * 0.7 == 6.999...`` in
binary floating point.
"""

from __future__ import annotations

from datetime import datetime
from fractions import Fraction
from typing import Any

from ..errors import FitError
from ..fit.context import FitContext, Part
from ..utc import format_timestamp


def exact_fraction(fraction: float | str | Fraction) -> Fraction:
    """The decimal the user wrote (``0.7`` -> 7/10), not the nearest binary float."""
    value = fraction if isinstance(fraction, Fraction) else Fraction(str(fraction))
    if not 0 < value < 1:
        raise ValueError(f"split fraction must be strictly between 0 and 1, got {fraction}")
    return value


def check_split(ctx: FitContext) -> None:
    """Refuse a split that leaves nothing to fit: an empty learned part, or one without a rating of weight above 0,
    with a message that says what is missing."""
    split = ctx.split
    if split is None:
        raise ValueError("the context was aggregated without a split")
    fraction = ctx.spec.fraction
    assert fraction is not None
    n = split.tasks
    if split.learned == 0:
        raise FitError(
            f"{n} task(s): the learned part is empty (floor({n} x {float(fraction):g}) = 0 tasks); "
            f"a held-out evaluation needs at least {-(-fraction.denominator // fraction.numerator)} tasks"
        )
    if float(ctx.values(Part.LEARNED)["weight"].sum()) <= 0:
        total = sum(int(r["weighted"]) for r in ctx.counts) + int(ctx.values(Part.FULL)["prm"].sum())
        raise FitError(
            f"the learned part ({split.learned} of {n} tasks, events at or before {_text(split.cutoff)}) has no "
            f"rating with weight > 0 (the store has {total}, all on held-out tasks or later): nothing to fit; "
            "append ratings of the earlier tasks"
        )


def split_rows(ctx: FitContext, eligible_held_out: int) -> dict[str, Any]:
    """The ``split`` object of the stats (its cutoff as a store time: the caller writes it as text)."""
    split = ctx.split
    assert split is not None
    return {
        "learned_tasks": split.learned,
        "held_out_tasks": split.tasks - split.learned,
        "eligible_held_out": eligible_held_out,
        "cutoff_at": split.cutoff,
        "validation_tasks": split.validation,
    }


def _text(moment: datetime | None) -> str:
    return "the end" if moment is None else format_timestamp(moment)
