"""``2^-x`` with ``+``, ``-``, ``*`` only (pipeline/fit/halving.py): within its stated error bound of the true value
(5.8e-15 relative, plus 8.3e-18 of truncation) on a grid of ages, 0 from 256 halvings on, and 1 at age 0."""

from __future__ import annotations

import math

import duckdb
import pytest

from pipeline.fit.halving import HALVING_LIMIT, halving_sql


def _halved(xs: list[float]) -> list[float]:
    con = duckdb.connect()
    values = ", ".join(f"({x!r}::DOUBLE)" for x in xs)
    ks = f"SELECT x, floor(x + 0.5e0) AS k FROM (VALUES {values}) t(x)"
    sql = f"SELECT {halving_sql('k', 'f')} FROM (SELECT x, k, x - k AS f FROM ({ks}) a) b"
    return [row[0] for row in con.execute(sql).fetchall()]


def test_two_to_the_minus_x_is_within_its_bound():
    xs = [i / 64 for i in range(64 * 40)] + [0.4999999, 0.5, 0.5000001, 100.25, 255.49]
    for x, got in zip(xs, _halved(xs), strict=True):
        assert got == pytest.approx(2.0**-x, rel=6e-15, abs=0.0), x  # libm's pow, itself within an ulp


def test_at_age_zero_it_is_one_and_from_the_limit_on_zero():
    assert _halved([0.0]) == [1.0]
    assert _halved([HALVING_LIMIT - 0.5, HALVING_LIMIT + 3.0, 1e6]) == [0.0, 0.0, 0.0]
    assert math.isclose(_halved([1.0])[0], 0.5, rel_tol=6e-15)
