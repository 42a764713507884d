"""The recency weight ``2^-x`` in SQL with ``+``, ``-``, ``*`` only (docs/design.md, Rating weight), the same bits on
every engine: :func:`halving_sql`, and the rows of a source with their recency factors, :func:`recency_sql`
(read by the fit's aggregation, :mod:`pipeline.fit.aggregate`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal, localcontext


def double(value: float) -> str:
    """A double literal in both engines."""
    text = repr(float(value))
    return text if "e" in text else text + "e0"


def _halving_coefficients() -> tuple[float, ...]:
    """The polynomial of :func:`halving_sql`: ``(-ln 2)^n / n!`` for n = 0..13, each rounded once to a double."""
    with localcontext() as precise:
        precise.prec = 60
        ln2 = Decimal(2).ln()
        return tuple(float((-ln2) ** n / math.factorial(n)) for n in range(HALVING_DEGREE + 1))


#: Degree of the polynomial for ``2^-f`` on ``|f| <= 1/2`` (:func:`halving_sql`).
HALVING_DEGREE = 13
HALVING_COEFFICIENTS = _halving_coefficients()
#: ``2^-x`` is 0 from this many halvings on: a term ``w 2^-x <= 2^20 2^-255`` has ``floor(x 2^107) = 0``.
HALVING_LIMIT = 256


def halving_sql(k: str, f: str) -> str:
    """``2^-x`` for ``x >= 0`` given ``k = floor(x + 1/2)`` and ``f = x - k`` (exact; ``|f| <= 1/2``), with ``+``,
    ``-``, ``*`` only, so that every engine computes the same bits (a libm's ``exp`` does not: Java's
    ``Math.exp`` and glibc's differ in the last bit of some terms). ``2^-x = 2^-k * 2^-f``:

    - ``2^-k`` by its exponent: the product of ``2^-(2^j)`` over the bits j of k (k < 256; every factor and
      product a power of two, exact); 0 for ``k >= 256``, where the fixed-point sums of the term are 0 anyway;
    - ``2^-f`` by a fixed polynomial, the Taylor series of ``e^(-f ln 2)`` to degree 13 (``HALVING_COEFFICIENTS``)
      by Horner's rule. Error bound: the truncation is at most ``(ln 2 / 2)^14 / 14! * e^(ln 2 / 2) / 2^(-1/2)
      < 8.3e-18`` relative; Horner's 13 roundings at most ``26 * 2^-53 * e^(ln 2 / 2) / 2^(-1/2) < 5.8e-15``
      relative (the standard bound; measured at most 1.05 ulp over 20,000 points of ``[-1/2, 1/2]``, against
      0.75 ulp for glibc's ``exp``).

    The operations are IEEE 754 doubles rounded to nearest, which DuckDB (C++, one vectorised operator at a time)
    and Spark (the JVM's strict floating point) both do, and ``floor`` is exact, so the result is the same bits in
    both.
    """
    bits = " * ".join(
        f"CASE WHEN floor({k} * {double(2.0**-j)}) - 2e0 * floor({k} * {double(2.0 ** -(j + 1))}) > 0e0 "
        f"THEN {double(2.0 ** -(2**j))} ELSE 1e0 END"
        for j in range(HALVING_LIMIT.bit_length() - 1)
    )
    horner = double(HALVING_COEFFICIENTS[-1])
    for c in reversed(HALVING_COEFFICIENTS[:-1]):
        horner = f"({horner} * {f} + {double(c)})"
    return f"CASE WHEN {k} >= {HALVING_LIMIT}e0 THEN 0e0 ELSE ({bits}) * {horner} END"


def recency_sql(source: str, half_lives: Sequence[float]) -> str:
    """The rows of ``source`` (with ``ref`` and ``at_us``) with per half-life i the rating's recency factor
    relative to its task's reference, ``rec<i> = 2^-((ref - at) / H)``, the age in days (:func:`halving_sql`)."""
    lives = list(enumerate(half_lives))
    if not lives:
        return f"SELECT * FROM {source}"
    x = ", ".join(f"((ref - at_us) / 86400000000e0) / {double(h)} AS x{i}" for i, h in lives)
    k = ", ".join(f"floor(x{i} + 0.5e0) AS k{i}" for i, _ in lives)
    f = ", ".join(f"x{i} - k{i} AS f{i}" for i, _ in lives)
    rec = ", ".join(f"{halving_sql(f'k{i}', f'f{i}')} AS rec{i}" for i, _ in lives)
    return f"SELECT *, {rec} FROM (SELECT *, {f} FROM (SELECT *, {k} FROM (SELECT *, {x} FROM {source}) hx) hk) hf"
