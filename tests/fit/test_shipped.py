"""The most specific shipped prior (docs/design.md, Priors), the one rule the fitter and the simulator share."""

from __future__ import annotations

import polars as pl

from pipeline.fit.shipped import Prior, priors_frame, shipped_prior

PRIORS = [
    Prior(selector="c", quality=0.1),
    Prior(selector="c/r", region="a", quality=0.2),
    Prior(selector="c/r", quality=0.3),
    Prior(selector="c/r", quality=0.35),  # same rank as the one before it: the earlier wins
    Prior(selector="c/r/m/high", region="b", quality=0.4),
    Prior(selector="d/r/m/high/x", quality=0.9),  # five segments never match a key
]


def test_more_segments_then_the_region_then_the_earlier_prior():
    keys = pl.DataFrame(
        {
            "config_key": ["c/r/m/high", "c/r/m/high", "c/r/m/high", "c/s/m/-", "d/r/m/high", "e/-/m/-"],
            "region": ["a", "b", "z", "a", "a", "a"],
        }
    )
    found = shipped_prior(keys, priors_frame(PRIORS)).sort("config_key", "region")
    assert found.rows() == [
        ("c/r/m/high", "a", 0.2),
        ("c/r/m/high", "b", 0.4),
        ("c/r/m/high", "z", 0.3),
        ("c/s/m/-", "a", 0.1),
    ]
