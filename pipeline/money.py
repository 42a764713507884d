"""Dollars as a person reads them, one rule for the pages, ``ratings compare``, ``ratings route`` and ``ratings table``.

No dependency beyond the standard library: the routing commands import it without loading the case-study code.
"""

from __future__ import annotations

import math

NA = "n/a"


def usd(x: float | None) -> str:
    """Dollars with three significant digits below $1 (``$0.0123``), cents above (``$1.23``)."""
    if x is None:
        return NA
    if x == 0:
        return "$0"
    if abs(x) >= 1:
        return f"${x:,.2f}"
    decimals = max(2, 2 - math.floor(math.log10(abs(x))))
    return f"${x:.{decimals}f}"
