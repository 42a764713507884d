"""Known prices (``fits/shipped.json`` ``prices``, docs/design.md, Cost prior): the one model of a price, the one
rule that finds a config's price, and the one formula that turns a price into the cost of a config before its own
attempts say.

Read by the fit (:mod:`pipeline.fit.model`: a member without a known cost in a region), the routing table and the
Router (the prior row of a config the table does not know) and ``ratings import`` (token counts into costs).
Pydantic only: the router imports it without loading the fitter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Protocol, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from .bounds import MAX_USD, MAX_USD_PER_MTOK

# Strict like every field of shipped.json: a number where a number belongs, finite, no unknown key.
_STRICT = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False, defer_build=True)


def selector_of(selector: str) -> str:
    """``selector`` if it is 1 to 4 segments of a config key (``cli``, ``cli/route``, ...), none empty."""
    parts = selector.split("/")
    if len(parts) > 4 or any(not part for part in parts):
        raise ValueError(
            f"selector {selector!r} must be 1 to 4 non-empty segments of a config key (cli/route/model/effort)"
        )
    return selector


Selector = Annotated[str, Field(min_length=1), AfterValidator(selector_of)]


class Price(BaseModel):
    """What a config costs before its own attempts say: per task, or per million input and output tokens.
    ``selector`` is 1 to 4 segments of a config key, like a prior's; the most specific selector that matches a key
    wins (then the earlier entry: :func:`price_for`)."""

    model_config = _STRICT

    selector: Selector
    usd_per_task: float | None = Field(default=None, ge=0.0, le=MAX_USD)
    input_usd_per_mtok: float | None = Field(default=None, ge=0.0, le=MAX_USD_PER_MTOK)
    output_usd_per_mtok: float | None = Field(default=None, ge=0.0, le=MAX_USD_PER_MTOK)

    @model_validator(mode="after")
    def _one_way(self) -> Price:
        tokens = (self.input_usd_per_mtok, self.output_usd_per_mtok)
        if self.usd_per_task is None and None in tokens:
            raise ValueError(
                f"price of {self.selector!r}: give usd_per_task, or both input_usd_per_mtok and output_usd_per_mtok"
            )
        if self.usd_per_task is not None and tokens != (None, None):
            raise ValueError(f"price of {self.selector!r}: either usd_per_task or token prices, not both")
        return self

    @property
    def segments(self) -> int:
        return len(self.selector.split("/"))

    def tokens_cost(self, input_tokens: float, output_tokens: float) -> float | None:
        """USD for these token counts: ``input * input_usd_per_mtok / 1e6 + output * output_usd_per_mtok / 1e6``
        (None for a per-task price)."""
        if self.input_usd_per_mtok is None or self.output_usd_per_mtok is None:
            return None
        return (input_tokens * self.input_usd_per_mtok + output_tokens * self.output_usd_per_mtok) / 1e6


class PriceLike(Protocol):
    """What :func:`price_for` reads of a price (:class:`Price` is one)."""

    @property
    def selector(self) -> str: ...

    @property
    def segments(self) -> int: ...


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


def implied_tokens(known: Iterable[tuple[float, Price]]) -> float | None:
    """A region's mean tokens per task (input and output each), implied by its members that have both a known mean
    cost ``C_k`` and a token price: ``m = 1e6 * sum_k C_k / sum_k (input_usd_per_mtok_k + output_usd_per_mtok_k)``
    (the ratio estimate of ``C_k = m * (in_k + out_k) / 1e6``, as many input as output tokens).
    None without such a member. The store's attempts carry no token counts, so the tokens come from costs."""
    spent = per_mtok = 0.0
    for cost, price in known:
        if price.input_usd_per_mtok is not None and price.output_usd_per_mtok is not None:
            spent += cost
            per_mtok += price.input_usd_per_mtok + price.output_usd_per_mtok
    return 1e6 * spent / per_mtok if per_mtok > 0 else None


def tokens_in(mean_tokens: Mapping[str, float | None], region: str) -> float | None:
    """The mean tokens token prices are read with in ``region``: the region's, else the global pool's (``*``)."""
    own = mean_tokens.get(region)
    return own if own is not None else mean_tokens.get("*")


def prior_cost(key: str, prices: Sequence[Price], mean_tokens: float | None) -> float | None:
    """The cost prior of config ``key`` in a region (docs/design.md, Cost prior): its price's ``usd_per_task``;
    for a token price, ``(m * input_usd_per_mtok + m * output_usd_per_mtok) / 1e6`` with ``m`` the region's
    :func:`implied_tokens`; None without a price (or a token price where no ``m`` is known). Unfloored."""
    price = price_for(key, prices)
    if price is None:
        return None
    if price.usd_per_task is not None:
        return price.usd_per_task
    return None if mean_tokens is None else price.tokens_cost(mean_tokens, mean_tokens)
