"""Group sums in row order with Kahan's compensation: polars' own single-thread group sum, row for row."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.fit.group_sums import group_sums


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.floats(0, 1e6, allow_subnormal=True), st.floats(0, 1)), min_size=1, max_size=60
    )
)
def test_the_sums_are_polars_sums_of_one_chunk(rows: list[tuple[int, float, float]]) -> None:
    # One small chunk on one thread: polars sums each group in row order, compensated; so must group_sums.
    frame = pl.DataFrame(rows, schema={"g": pl.Int64, "a": pl.Float64, "b": pl.Float64}, orient="row")
    expected = frame.group_by("g").agg(pl.col("a", "b").sum()).sort("g")
    got = group_sums(frame["g"].to_numpy(), frame.select("a", "b").to_numpy(), 6)
    present = expected["g"].to_numpy()
    assert got[present].tolist() == [list(r) for r in expected.select("a", "b").rows()]
    absent = np.setdiff1d(np.arange(6), present)
    assert (got[absent] == 0.0).all()


def test_compensation_keeps_what_a_plain_sum_loses() -> None:
    # 1 + 1e-16 + ... (ten times): a plain left-to-right sum stays at 1.0, the compensated one reaches 1 + 1e-15.
    values = np.array([[1.0]] + [[1e-16]] * 10)
    got = group_sums(np.zeros(len(values), dtype=np.int64), values, 1)[0, 0]
    assert got == 1.0 + 1e-15 and sum(values[:, 0]) == 1.0
