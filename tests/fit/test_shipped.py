"""The most specific shipped prior (docs/design.md, Priors), the one rule the fitter and the simulator share; and
shipped prices (docs/design.md, Routing table), validated strictly."""

from __future__ import annotations

import json

import polars as pl
import pytest

from pipeline.errors import FitError
from pipeline.fit.shipped import (
    TEMPLATE,
    Price,
    Prior,
    Shipped,
    _without_placeholders,
    load_shipped,
    priors_frame,
    shipped_prior,
)

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


# --------------------------------------------------------------------------- prices (docs/design.md, Routing table)
@pytest.mark.parametrize(
    "entry, accepted",
    [
        ({"selector": "codex", "usd_per_task": 0.3}, True),
        ({"selector": "codex/openai/gpt-5", "input_usd_per_mtok": 1.25, "output_usd_per_mtok": 10}, True),
        ({"selector": "a/b/c/d", "usd_per_task": 0}, True),
        ({"selector": "codex"}, False),  # no price at all
        ({"selector": "codex", "input_usd_per_mtok": 1.25}, False),  # half a token price
        ({"selector": "codex", "usd_per_task": 1, "input_usd_per_mtok": 1, "output_usd_per_mtok": 1}, False),
        ({"selector": "a/b/c/d/e", "usd_per_task": 1}, False),  # 5 segments
        ({"selector": "a//b", "usd_per_task": 1}, False),
        ({"selector": "", "usd_per_task": 1}, False),
        ({"selector": "codex", "usd_per_task": -1}, False),
        ({"selector": "codex", "usd_per_task": 1e308}, False),  # over the bound of 1e6
        ({"selector": "codex", "usd_per_task": float("inf")}, False),
        ({"selector": "codex", "usd_per_task": float("nan")}, False),
        ({"selector": "codex", "usd_per_task": "0.3"}, False),  # strict: text is not a number
        ({"selector": "codex", "usd_per_task": True}, False),
        ({"selector": "codex", "usd_per_task": 1, "currency": "EUR"}, False),  # unknown key
    ],
)
def test_a_price_is_validated_strictly(tmp_path, entry, accepted):
    path = tmp_path / "shipped.json"
    path.write_text(json.dumps({"prices": [entry]}, allow_nan=True))
    if accepted:
        assert load_shipped(path).prices[0].selector == entry["selector"]
    else:
        with pytest.raises(FitError, match="prices"):
            load_shipped(path)


def test_tokens_are_priced_per_million():
    per_task = Price(selector="codex", usd_per_task=0.3)
    per_token = Price(selector="codex/openai/gpt-5", input_usd_per_mtok=1.25, output_usd_per_mtok=10.0)
    assert per_token.tokens_cost(2_000, 500) == pytest.approx(2_000 * 1.25 / 1e6 + 500 * 10.0 / 1e6)
    assert per_task.tokens_cost(2_000, 500) is None  # a per-task price does not price tokens


def test_a_template_price_is_a_placeholder():
    left: list[str] = []
    shipped = Shipped.model_validate({**_without_placeholders(dict(TEMPLATE), left), "placeholders": left})
    assert shipped.prices == [] and "prices[0]" in left
