"""Costs from token counts: ``fits/shipped.json`` ``prices`` (docs/design.md, Imports, Costs).

An attempt's cost is the source's when it has one; else its tokens at the price of its config (USD per million
input and output tokens, the most specific selector of ``prices``); else the config's per-task price; else
unknown (null, never 0). The summary counts each (``costs``: ``source``, ``tokens``, ``price``, ``unknown``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from ..events import MAX_COST_USD


class PriceLike(Protocol):
    """What a price is to an import (``pipeline.fit.shipped.Price`` is the model that parses and checks one)."""

    @property
    def selector(self) -> str: ...

    @property
    def segments(self) -> int: ...

    @property
    def usd_per_task(self) -> float | None: ...

    def tokens_cost(self, input_tokens: float, output_tokens: float) -> float | None: ...


P = TypeVar("P", bound=PriceLike)


def price_for(key: str, prices: Sequence[P]) -> P | None:
    """The price of config ``key``: the entry whose selector equals the most leading segments of the key, the
    earlier entry on a tie; None when no selector matches (docs/design.md, Routing table: fits/shipped.json)."""
    parts = key.split("/")
    best: P | None = None
    for price in prices:
        n = price.segments
        if "/".join(parts[:n]) == price.selector and (best is None or n > best.segments):
            best = price
    return best


class Pricer:
    """The prices of one import: those of the home's ``fits/shipped.json`` (read by the caller, or by ``load`` on the
    first price asked for: a source that never needs one never reads the file), or none."""

    def __init__(self, prices: Sequence[PriceLike] | Callable[[], Sequence[PriceLike]] = ()) -> None:
        self._prices = prices
        self._price = functools.lru_cache(maxsize=4096)(lambda key: price_for(key, self.prices))

    @functools.cached_property
    def prices(self) -> tuple[PriceLike, ...]:
        return tuple(self._prices() if callable(self._prices) else self._prices)

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
