"""Published numbers: every float in the routing table and the stats is rounded to 9 decimals, so that the same
fit gives the same bytes (docs/design.md, Determinism); JSON has no NaN or infinity, so an undefined figure is
null; ``-0.0`` is written ``0.0``."""

from __future__ import annotations

import math
from typing import Any, overload

#: Decimals of every published figure.
DECIMALS = 9


@overload
def round_figure(x: float) -> float: ...


@overload
def round_figure(x: None) -> None: ...


def round_figure(x: float | None) -> float | None:
    """One published figure: rounded to :data:`DECIMALS`; None, NaN and infinities (undefined) are None."""
    if x is None or not math.isfinite(x):
        return None
    return round(float(x), DECIMALS) + 0.0


def rounded(value: Any) -> Any:
    """Every float of a JSON-like value rounded (:func:`round_figure`), tuples as lists; the rest as it is."""
    if isinstance(value, float):
        return round_figure(value)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded(v) for v in value]
    return value
