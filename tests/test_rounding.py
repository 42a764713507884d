"""Published numbers: 9 decimals, no negative zero, undefined figures as null, whole trees at once."""

from __future__ import annotations

import math

from pipeline.rounding import round_figure, rounded


def test_a_figure_is_rounded_to_nine_decimals():
    assert round_figure(-0.0) == 0.0 and str(round_figure(-0.0)) == "0.0"
    assert round_figure(1 / 3) == 0.333333333 and round_figure(None) is None
    assert round_figure(math.nan) is None and round_figure(-math.inf) is None


def test_a_tree_is_rounded_float_by_float():
    tree = {"a": (1 / 3, [2 / 3, None, "x"]), "b": {"c": math.inf, "d": 7}}
    assert rounded(tree) == {"a": [0.333333333, [0.666666667, None, "x"]], "b": {"c": None, "d": 7}}
