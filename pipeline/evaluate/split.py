"""The chronological split (docs/design.md, Split): learned tasks first, held-out tasks after a cutoff.

:func:`parts` applies it twice to a fit's inputs: learned and held-out parts, then the inner learned
and validation parts of the learned tasks (the evaluation, the learning stage and the policies all
cut the same parts).

Task time is the time of the task's first event (``first_at``). Tasks are
ordered by ``(first_at, task)``; the first ``floor(N * fraction)`` are learned
and the rest held out. The count is computed with exact rational arithmetic:
``0.7`` means 7/10, so ten tasks give seven learned ones, never six because
``10 * 0.7 == 6.999...`` in binary floating point.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from typing import NamedTuple

import polars as pl

from ..errors import FitError
from ..fit.inputs import FitInputs, restrict
from ..utc import format_timestamp


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


class Parts(NamedTuple):
    """The outer parts of one fit's inputs: learned events come at or before their cutoff."""

    outer: Split
    learned: FitInputs
    held_out: FitInputs


class InnerParts(NamedTuple):
    """The validation split, the rule repeated inside the learned part of :class:`Parts`."""

    inner: Split
    inner_learned: FitInputs
    validation: FitInputs


def parts(inputs: FitInputs, fraction: float) -> Parts:
    """The :class:`Parts` of ``inputs`` split at ``fraction``; memoised on ``inputs`` (every stage of a fit cuts
    the same parts)."""
    key = ("parts", fraction)
    if key not in inputs._derived:
        inputs._derived[key] = _parts(inputs, fraction)
    cut: Parts = inputs._derived[key]
    return cut


def inner_parts(inputs: FitInputs, fraction: float) -> InnerParts:
    """The :class:`InnerParts` of ``inputs``: the learned tasks of :func:`parts` split again at ``fraction``. Not
    memoised: only the choice of the constants reads them, and they are freed with it.

    Cut from ``inputs`` itself, with the learned part's time limit where the inner split has none: a cut of a cut
    is the cut at the earlier time (:func:`pipeline.fit.inputs.restrict`), and the learned part was slimmed.
    """
    cut = parts(inputs, fraction)
    inner = split_tasks(cut.learned.tasks, fraction)
    until = inner.cutoff_at if inner.cutoff_at is not None else cut.outer.cutoff_at
    inner_learned = restrict(inputs, inner.learned, until=until)
    validation = restrict(inputs, inner.held_out, until=cut.outer.cutoff_at)
    return InnerParts(inner, _slim(inner_learned), _slim(validation))


def _parts(inputs: FitInputs, fraction: float) -> Parts:
    outer = split_tasks(inputs.tasks, fraction)
    n = inputs.tasks.height
    if outer.learned.len() == 0:
        raise FitError(
            f"{n} task(s): the learned part is empty (floor({n} x {fraction}) = 0 tasks); "
            f"a held-out evaluation needs at least {_tasks_needed(fraction)} tasks"
        )
    learned = restrict(inputs, outer.learned, until=outer.cutoff_at)
    weighted = int((learned.ratings["w"] > 0).sum())
    if weighted == 0:
        total = int((inputs.ratings["w"] > 0).sum())
        raise FitError(
            f"the learned part ({outer.learned.len()} of {n} tasks, events at or before "
            f"{_text(outer.cutoff_at)}) has no rating with weight > 0 (the store has {total}, all on held-out "
            "tasks or later): nothing to fit; append ratings of the earlier tasks"
        )
    held = restrict(inputs, outer.held_out, until=None)
    return Parts(outer, _slim(learned), _slim(held))


def _text(moment: datetime | None) -> str:
    return "the end" if moment is None else format_timestamp(moment)


def _tasks_needed(fraction: float) -> int:
    """The fewest tasks whose split leaves one learned task: ``ceil(1 / fraction)``."""
    f = exact_fraction(fraction)
    return -(-f.denominator // f.numerator)


def _slim(part: FitInputs) -> FitInputs:
    """A part with only the columns the fit reads from it once it is cut (its task values, calibration and
    prior checks): rating ids and rater names, the attempts' traces, decisions and closures go (they are
    read from the whole inputs). Its times, ``newest_at`` included, were taken before."""
    return dataclasses.replace(
        part,
        ratings=part.ratings.select("task", "region", "config_key", "at", "score", "w", "rater_kind", "origin"),
        attempts=part.attempts.select("task", "region", "config_key", "at", "cost_usd"),
        decisions=part.decisions.clear(),
        closures=part.closures.clear(),
    )
