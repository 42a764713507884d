"""The cost prior (docs/design.md, Cost prior): a config's price, token prices read at a region's implied tokens."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pipeline.prices import Price, implied_tokens, prior_cost, tokens_in

FLAT = Price(selector="cheap", usd_per_task=0.002)
TOKENS = Price(selector="big/openai", input_usd_per_mtok=10.0, output_usd_per_mtok=30.0)
SMALL = Price(selector="small", input_usd_per_mtok=1.0, output_usd_per_mtok=3.0)


def test_a_per_task_price_is_the_prior_whatever_the_tokens():
    assert prior_cost("cheap/-/m/-", [FLAT], None) == 0.002
    assert prior_cost("cheap/-/m/-", [FLAT], 5000.0) == 0.002
    assert prior_cost("other/-/m/-", [FLAT], 5000.0) is None  # no price: the caller's fallback


def test_token_prices_are_read_at_the_implied_tokens_of_the_region():
    # small ran in the region at a mean cost of $0.004: 1e6 * 0.004 / (1 + 3) = 1000 tokens of input and of output.
    m = implied_tokens([(0.004, SMALL), (9.0, FLAT)])  # a per-task price says nothing of tokens
    assert m == pytest.approx(1000.0)
    # big, never run: (1000 * 10 + 1000 * 30) / 1e6 = $0.04, ten times small, as its token prices are
    assert prior_cost("big/openai/gpt/-", [TOKENS, SMALL], m) == pytest.approx(0.04)
    # two known members: 1e6 * (0.004 + 0.08) / (4 + 40) = 1909.09...
    assert implied_tokens([(0.004, SMALL), (0.08, TOKENS)]) == pytest.approx(1e6 * 0.084 / 44)
    # no tokens known anywhere: a token price gives no prior
    assert implied_tokens([(0.5, FLAT)]) is None
    assert prior_cost("big/openai/gpt/-", [TOKENS], None) is None


def test_a_region_without_implied_tokens_reads_the_global_pools():
    assert tokens_in({"*": 1000.0, "hard": 4000.0}, "hard") == 4000.0
    assert tokens_in({"*": 1000.0, "hard": None}, "hard") == 1000.0
    assert tokens_in({"*": 1000.0}, "easy") == 1000.0
    assert tokens_in({}, "easy") is None


def test_a_price_is_either_per_task_or_per_token():
    with pytest.raises(ValidationError, match="either usd_per_task or token prices"):
        Price(selector="x", usd_per_task=1.0, input_usd_per_mtok=1.0, output_usd_per_mtok=1.0)
    with pytest.raises(ValidationError, match="give usd_per_task"):
        Price(selector="x", input_usd_per_mtok=1.0)
    with pytest.raises(ValidationError, match="1 to 4 non-empty segments"):
        Price(selector="a//b", usd_per_task=1.0)
