"""The price of a config (pipeline.streams.imports.prices): the most specific selector, then the earlier entry."""

from __future__ import annotations

from pipeline.fit.shipped import Price
from pipeline.streams.imports.prices import Pricer, price_for

PRICES = [
    Price(selector="codex", usd_per_task=0.3),
    Price(selector="codex/openai/gpt-5", input_usd_per_mtok=1.25, output_usd_per_mtok=10.0),
    Price(selector="codex/openai", usd_per_task=0.2),
    Price(selector="codex", usd_per_task=9.9),  # a later entry of the same specificity loses
]


def test_the_most_specific_price_wins_then_the_earlier_entry():
    assert price_for("codex/openai/gpt-5/high", PRICES) is PRICES[1]
    assert price_for("codex/openai/o3/-", PRICES) is PRICES[2]
    assert price_for("codex/azure/gpt-5/-", PRICES) is PRICES[0]
    assert price_for("claude-code/anthropic/opus/-", PRICES) is None
    assert price_for("codex2/openai/gpt-5/-", PRICES) is None  # a selector matches whole segments only


def test_a_pricer_reads_its_prices_only_when_a_first_price_is_asked_for():
    calls: list[int] = []

    def load() -> list[Price]:
        calls.append(1)
        return PRICES

    pricer = Pricer(load)
    assert calls == []
    assert pricer.prices[1] is PRICES[1]
    assert pricer.prices[0] is PRICES[0]
    assert calls == [1]
