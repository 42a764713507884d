"""The verdicts of the evaluation: adopt, keep or insufficient-evidence, each with a sentence that gives the numbers.

:func:`recommend` decides between the fitted and the shipped constants (greedy hit rates on validation and on
the held-out tasks); :func:`calibration_verdict` between the fitted regions and the plain per-config mean
(mean squared error on held-out ratings). Both call a difference real only when its paired bootstrap interval
(:func:`pipeline.evaluate.intervals.paired_bootstrap`) excludes 0, and neither decides on too few tasks.
"""

from __future__ import annotations

import math
from typing import Literal

Recommendation = Literal["adopt", "keep", "insufficient-evidence"]

#: Fewer eligible held-out tasks than this and no recommendation is made (docs/design.md, Verdicts).
MIN_ELIGIBLE = 10
#: Fewer held-out tasks than this and no calibration verdict is given (docs/design.md, Verdicts).
MIN_TASKS = 10
#: How a verdict names the tasks :data:`MIN_ELIGIBLE` counts.
ELIGIBLE_TASKS = "eligible held-out task(s) (tasks done by two or more configs with some value > 0)"


def contains_zero(ci: tuple[float, float] | None) -> bool:
    """An undefined interval, or one that contains 0: the difference may be chance."""
    return ci is None or ci[0] <= 0.0 <= ci[1]


def more_tasks(diff: float, ci: tuple[float, float] | None, n: int) -> str:
    """What would decide an undecided difference, from the observed spread.

    An interval's half-width shrinks like ``1 / sqrt(n)``. The half on the side of 0, ``h`` (``diff - low``
    for a positive difference, ``high - diff`` for a negative one), excludes 0 once it is below ``|diff|``:
    at ``n' = n * (h / |diff|) ** 2`` tasks, if the difference and the spread per task stay as observed. A
    difference of exactly 0 (the two route alike) is not decided by more tasks.
    """
    if diff == 0.0:
        return "the difference is exactly 0: fitted and shipped route alike here, so more tasks would not decide"
    if ci is None or n <= 0:
        return "the interval is undefined, so no estimate of the tasks needed can be made"
    half = diff - ci[0] if diff > 0 else ci[1] - diff
    needed = math.ceil(n * (half / abs(diff)) ** 2)
    return (
        f"about {max(needed - n, 1)} more such task(s) ({needed} in all) would make the interval exclude 0 if "
        "the difference and its spread stay as observed"
    )


def recommend(
    diff: float | None,
    ci: tuple[float, float] | None,
    n: int,
    val: dict[str, float | None],
    *,
    same: bool,
    measure: str = "held-out hit rate",
    tasks: str = ELIGIBLE_TASKS,
    fmt: str = "{:+.4f}",
    val_fmt: str = "{:.4f}",
    same_text: str = "the fitted constants are the shipped ones",
) -> tuple[Recommendation, str]:
    """adopt / keep / insufficient-evidence (docs/design.md, Verdicts), with a sentence that gives the numbers.

    adopt: fitted beats shipped on validation (``val``) and on held-out, the 95% interval of the held-out
    difference ``diff`` (fitted minus shipped, measured by ``measure`` on ``n`` ``tasks``) excluding 0; keep:
    the interval excludes 0 but fitted does not beat shipped on one of them; insufficient-evidence: the
    interval contains 0 or is undefined, fewer than :data:`MIN_ELIGIBLE` tasks, or nothing to compare (the
    fitted values are the shipped ones). An undecided verdict says what more data would decide it.
    """
    if diff is None or n < MIN_ELIGIBLE:
        return "insufficient-evidence", (
            f"only {n} {tasks}; at least {MIN_ELIGIBLE} are needed to compare fitted and shipped constants"
        )
    ci_text = "undefined" if ci is None else f"[{fmt.format(ci[0])}, {fmt.format(ci[1])}]"
    numbers = f"{measure} fitted minus shipped {fmt.format(diff)} (95% CI {ci_text}, n = {n})"
    if same:
        return "insufficient-evidence", f"{same_text}; {numbers}"
    if contains_zero(ci):
        return (
            "insufficient-evidence",
            f"{numbers}: the interval contains 0, so the difference may be chance; {more_tasks(diff, ci, n)}",
        )
    vs, vf = val.get("shipped"), val.get("fitted")
    val_text = "undefined" if vs is None or vf is None else f"{val_fmt.format(vf)} vs {val_fmt.format(vs)}"
    if diff > 0 and vs is not None and vf is not None and vf > vs:
        return "adopt", f"fitted beats shipped on validation ({val_text}) and on held-out: {numbers}"
    where = "held-out" if diff <= 0 else "validation"
    return "keep", f"fitted does not beat shipped on {where} (validation {val_text}); {numbers}"


def calibration_verdict(
    mse_r: float, mse_p: float, ci: tuple[float, float] | None, tasks: int, n: int
) -> tuple[Recommendation, str]:
    """adopt: regions' MSE lower and the interval of the difference excludes 0; keep: not lower; else insufficient."""
    numbers = f"regions MSE {mse_r:.4f} vs plain mean MSE {mse_p:.4f} on {n} held-out ratings of {tasks} tasks"
    if tasks < MIN_TASKS:
        return "insufficient-evidence", f"{numbers}; fewer than {MIN_TASKS} held-out tasks, no verdict"
    ci_text = "undefined" if ci is None else f"[{ci[0]:.4f}, {ci[1]:.4f}]"
    if contains_zero(ci):
        return (
            "insufficient-evidence",
            f"{numbers}; the 95% interval of the difference {ci_text} contains 0, so regions show no reliable signal",
        )
    if mse_r < mse_p:
        return "adopt", f"{numbers}; difference 95% interval {ci_text} below 0: regions carry a signal"
    return "keep", f"{numbers}; difference 95% interval {ci_text} above 0: regions predict worse than the plain mean"
