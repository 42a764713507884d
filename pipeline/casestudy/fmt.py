"""How numbers read on a case-study page and in ``ratings compare``: one place, so both say the same."""

from __future__ import annotations

from ..money import NA, usd

__all__ = [
    "NA",
    "constant",
    "count",
    "interval",
    "mean_count",
    "num",
    "pct",
    "points",
    "points_interval",
    "sentence",
    "signed",
    "usd",
]


def pct(x: float | None) -> str:
    """0.650485 -> ``65.0%``."""
    return NA if x is None else f"{100 * x:.1f}%"


def interval(ci: tuple[float, float] | list[float] | None) -> str:
    """A 95% interval of rates: ``60.3%–69.5%``."""
    return NA if not ci else f"{pct(ci[0])}–{pct(ci[1])}"


def points(x: float | None) -> str:
    """A difference of two rates in percentage points, signed: ``+9.0 points``."""
    return NA if x is None else f"{100 * x:+.1f} points"


def points_interval(ci: tuple[float, float] | list[float] | None) -> str:
    return NA if not ci else f"{100 * ci[0]:+.1f} to {100 * ci[1]:+.1f}"


def num(x: float | None, digits: int = 4) -> str:
    """A plain figure (an MSE, a quality): four decimals, trailing zeros kept for alignment."""
    return NA if x is None else f"{x:.{digits}f}"


def signed(x: float | None, digits: int = 4) -> str:
    return NA if x is None else f"{x:+.{digits}f}"


def sentence(text: str | None) -> str:
    """A reason as a sentence: capital first letter, final period (the fitter writes clauses)."""
    text = (text or "").strip()
    if not text:
        return ""
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def count(n: float | None) -> str:
    """A count with thousands separators (a mean count over replay seeds keeps its decimals)."""
    return NA if n is None else f"{n:,}"


def mean_count(x: float | None) -> str:
    """A count averaged over runs (replay seeds): ``949`` when whole, else ``3.53`` under 10 and ``48.3`` above."""
    if x is None:
        return NA
    if float(x).is_integer():
        return f"{x:,.0f}"
    return f"{x:.2f}" if abs(x) < 10 else f"{x:,.1f}"


def arm(mode: str | None, exploration: float) -> str:
    """An exploration arm as a person reads it: ``Thompson 0.3``, ``epsilon 0.05`` (docs/design.md, Exploration)."""
    return f"{'Thompson' if mode == 'thompson' else 'epsilon'} {constant('exploration', exploration)}"


def constant(name: str, value: float | str | None) -> str:
    """A routing constant as a person reads it: no recency weighting is ``off (∞)``."""
    if value is None:
        return "off (∞)" if name == "half_life_days" else NA
    if isinstance(value, float) and value.is_integer() and name != "cost_floor_usd":
        return str(int(value))
    if name == "cost_floor_usd":
        return "$" + f"{value:.12f}".rstrip("0").rstrip(".")
    return str(value)
