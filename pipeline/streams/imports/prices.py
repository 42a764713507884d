"""Costs from token counts: ``fits/shipped.json`` ``prices`` (docs/design.md, Imports, Costs).

An attempt's cost is the source's when it has one; else its tokens at the price of its config (USD per million
input and output tokens, the most specific selector of ``prices``); else the config's per-task price; else
unknown (null, never 0). The summary counts each (``costs``: ``source``, ``tokens``, ``price``, ``unknown``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

from ...fit.shipped import Price, load_shipped, price_for
from ..events import MAX_COST_USD


class Pricer:
    """The prices of one import (those of the home's ``fits/shipped.json``, or none)."""

    def __init__(self, prices: Sequence[Price] = ()) -> None:
        self.prices = tuple(prices)
        self._price = functools.lru_cache(maxsize=4096)(lambda key: price_for(key, self.prices))

    @classmethod
    def of_home(cls, root: Path) -> Pricer:
        return cls(load_shipped(root / "fits" / "shipped.json").prices)

    def tokens(self, key: str, input_tokens: float, output_tokens: float) -> float | None:
        """USD for these tokens at the config's token prices; None without token prices (or over the bound)."""
        price = self._price(key)
        if price is None:
            return None
        spent = price.tokens_cost(float(input_tokens), float(output_tokens))
        return None if spent is None or spent > MAX_COST_USD else spent

    def per_task(self, key: str) -> tuple[float | None, str]:
        """(the config's per-task price, ``price``), else (None, ``unknown``)."""
        price = self._price(key)
        if price is not None and price.usd_per_task is not None:
            return price.usd_per_task, "price"
        return None, "unknown"
