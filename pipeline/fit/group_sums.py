"""Sums per group in row order, compensated (Kahan), compiled: the same numbers on every machine and every run.

polars sums a float column per group with Kahan's compensated summation in row order when it runs on one
thread; on several threads it combines partial sums of chunks of rows, so at a million ratings the last bits of a
(task, config) sum change from run to run. The fit's task values are these sums (``W = sum w``, ``S = sum w*s``)
and the known costs of a (task, config), so they are taken here instead, one row after the other: polars'
single-thread result, whatever the threads (``tests/fit/test_group_sums.py``).

Only :mod:`pipeline.fit.inputs` imports this module, inside the functions that sum, so numba is loaded by a fit and
never by the CLI.
"""

from __future__ import annotations

import numba
import numpy as np


def group_sums(groups: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """``n_groups`` x columns: per group ``g`` (``groups[i]`` is row i's group, 0 .. n_groups - 1) the sum of each
    column of ``values`` (rows x columns) over its rows, in row order, with Kahan's compensation::

        y = v - c;  t = s + y;  c = (t - s) - y;  s = t        (s = c = 0 to start; the sum is s)
    """
    out = np.zeros((n_groups, values.shape[1]))
    _kahan(np.ascontiguousarray(groups, dtype=np.int64), np.ascontiguousarray(values, dtype=np.float64), out)
    return out


@numba.njit(cache=True, nogil=True)
def _kahan(groups, values, out):  # type: ignore[no-untyped-def]
    carry = np.zeros_like(out)
    for i in range(groups.shape[0]):
        g = groups[i]
        for j in range(values.shape[1]):
            y = values[i, j] - carry[g, j]
            t = out[g, j] + y
            carry[g, j] = (t - out[g, j]) - y
            out[g, j] = t
