"""``fits/shipped.json`` (docs/design.md, Routing table): the constants, static roles and priors a team ships.

Every key is optional; an absent file or key means prior weight 3, exploration
0.3, min samples 3, no priors (the defaults of :class:`Constants`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..errors import FitError
from ..jsonfile import read_json, validate
from ..routing.table import Constants, Static

if TYPE_CHECKING:
    import polars as pl

#: The region of a prior that holds in every region.
EVERY_REGION = "*"

#: A value still holding a template placeholder (``<cli>``, ``<model>``: what ``ratings init`` writes).
PLACEHOLDER = re.compile(r"<[^<>/]+>")
_KEY_PLACEHOLDER = "<cli>/<route>/<model>/<effort>"

#: The ``fits/shipped.json`` that ``ratings init`` writes: every field present, each config and prior a
#: placeholder that the fit ignores (and names) until a person replaces it, the constants at the code defaults.
TEMPLATE: dict[str, Any] = {
    # Every constant, at the code default; null where the default is none (no recency, no lambda, no floor) or
    # where the fit's option wins (the cost floor).
    "constants": {
        "objective": "quality_per_dollar",
        "prior_source": "shipped",
        "prior_weight": 3.0,
        "exploration": 0.3,
        "half_life_days": None,
        "min_samples": 3,
        "lambda": None,
        "min_quality": None,
        "cost_floor_usd": None,
    },
    "default_config": _KEY_PLACEHOLDER,
    "cheap_config": _KEY_PLACEHOLDER,
    "frontier_config": _KEY_PLACEHOLDER,
    "pinned": {"reviewer": _KEY_PLACEHOLDER},
    "priors": [{"selector": "<cli>", "region": "*", "quality": 0.5}],
    "prices": [{"selector": "<cli>/<route>/<model>", "input_usd_per_mtok": None, "output_usd_per_mtok": None}],
}

#: Bounds of a price (docs/design.md, Routing table: fits/shipped.json): no attempt costs more than the events allow
#: (``cost_usd`` <= 1e6), and no token price is above a million dollars per million tokens.
MAX_PRICE_USD = 1e6


class Prior(BaseModel):
    """A shipped belief: configs whose key starts with ``selector`` have ``quality`` in ``region``.

    ``selector`` is 1 to 4 segments of a config key, in key form (``cli``, ``cli/route``, ...,
    percent-encoded like the key); ``region`` ``'*'`` means every region.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    selector: str = Field(min_length=1)
    region: str = "*"
    quality: float = Field(ge=0.0, le=1.0)

    @property
    def segments(self) -> int:
        return len(self.selector.split("/"))


class Price(BaseModel):
    """What a config costs before its own attempts say (docs/design.md, Routing table: fits/shipped.json): per task,
    or per million input and output tokens. ``selector`` is 1 to 4 segments of a config key, like a prior's; the most
    specific selector that matches a key wins (then the earlier entry). Used by ``ratings import`` to turn
    token counts into costs, and as the cost prior of configs not yet run."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, strict=True)

    selector: str = Field(min_length=1)
    usd_per_task: float | None = Field(default=None, ge=0.0, le=MAX_PRICE_USD)
    input_usd_per_mtok: float | None = Field(default=None, ge=0.0, le=MAX_PRICE_USD)
    output_usd_per_mtok: float | None = Field(default=None, ge=0.0, le=MAX_PRICE_USD)

    @model_validator(mode="after")
    def _one_way(self) -> Price:
        parts = self.selector.split("/")
        if len(parts) > 4 or "" in parts:
            raise ValueError(
                f"selector {self.selector!r}: 1 to 4 non-empty segments of a config key (cli[/route[/model[/effort]]])"
            )
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


class ShippedConstants(BaseModel):
    """``constants`` of shipped.json: any field of :class:`Constants`, plus the objective."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    prior_source: Literal["shipped", "measured"] | None = None
    prior_weight: float | None = Field(default=None, ge=0.0)
    exploration: float | None = Field(default=None, ge=0.0, le=1.0)
    half_life_days: float | None = Field(default=None, gt=0.0)
    min_samples: int | None = Field(default=None, ge=0)
    cost_floor_usd: float | None = Field(default=None, gt=0.0)
    lambda_: float | None = Field(default=None, alias="lambda", gt=0.0)
    min_quality: float | None = Field(default=None, ge=0.0, le=1.0)
    objective: Literal["quality_per_dollar", "utility", "quality"] | None = None


class Shipped(BaseModel):
    """The parsed shipped.json. Unknown top-level keys are kept and ignored."""

    model_config = ConfigDict(frozen=True, extra="allow")

    constants: ShippedConstants = Field(default_factory=ShippedConstants)
    default_config: str | None = None
    cheap_config: str | None = None
    frontier_config: str | None = None
    pinned: dict[str, str] = Field(default_factory=dict)
    priors: list[Prior] = Field(default_factory=list)
    prices: list[Price] = Field(default_factory=list)
    #: Whether a shipped.json was read (False: the code defaults, no roles, no priors).
    found: bool = Field(default=True, exclude=True)
    #: Fields that still held a template placeholder: ignored, as if absent (``default_config``, ``priors[0]``).
    placeholders: list[str] = Field(default_factory=list, exclude=True)

    def to_constants(self, **overrides: Any) -> Constants:
        """The shipped constants as :class:`Constants` (defaults where shipped.json is silent).

        ``overrides`` (Constants field names; ``lambda_`` for lambda) win over the file.
        """
        given = self.constants.model_dump(exclude_none=True, exclude={"objective"}, by_alias=True)
        given.update({"lambda" if k == "lambda_" else k: v for k, v in overrides.items()})
        return Constants.model_validate(given)

    @property
    def static(self) -> Static:
        return Static(
            default_config=self.default_config,
            cheap_config=self.cheap_config,
            frontier_config=self.frontier_config,
            pinned=dict(self.pinned),
        )


def load_shipped(path: str | Path | None) -> Shipped:
    """Read shipped.json; ``None`` or a missing file gives the defaults (``found`` False). A bad file raises
    :class:`FitError`. A config key or prior selector still holding a template placeholder is dropped and named
    in ``placeholders``: a template a person has not filled in routes like no file at all."""
    if path is None:
        return Shipped(found=False)
    path = Path(path)
    try:
        data = read_json(path, FitError)
    except FileNotFoundError:
        return Shipped(found=False)
    left: list[str] = []
    if isinstance(data, dict):
        data = _without_placeholders(data, left)
    return validate(Shipped, {**data, "placeholders": left} if isinstance(data, dict) else data, path, FitError)


def _without_placeholders(data: dict[str, Any], left: list[str]) -> dict[str, Any]:
    """``data`` without the roles, pins and priors that still hold a placeholder; their paths go to ``left``."""
    out = dict(data)
    for role in ("default_config", "cheap_config", "frontier_config"):
        if isinstance(out.get(role), str) and PLACEHOLDER.search(out[role]):
            left.append(role)
            del out[role]
    if isinstance(out.get("pinned"), dict):
        pinned = {}
        for role, key in out["pinned"].items():
            if isinstance(key, str) and PLACEHOLDER.search(key):
                left.append(f"pinned.{role}")
            else:
                pinned[role] = key
        out["pinned"] = pinned
    if isinstance(out.get("priors"), list):
        priors = []
        for i, prior in enumerate(out["priors"]):
            selector = prior.get("selector") if isinstance(prior, dict) else None
            if isinstance(selector, str) and PLACEHOLDER.search(selector):
                left.append(f"priors[{i}]")
            else:
                priors.append(prior)
        out["priors"] = priors
    for field in ("prices",):
        if isinstance(out.get(field), list):
            kept = []
            for i, entry in enumerate(out[field]):
                selector = entry.get("selector") if isinstance(entry, dict) else None
                if isinstance(selector, str) and PLACEHOLDER.search(selector):
                    left.append(f"{field}[{i}]")
                else:
                    kept.append(entry)
            out[field] = kept
    return out


class RoutingConstants(Protocol):
    """The three constants the defaults note names (:class:`Constants`, the stats' constant sets)."""

    @property
    def prior_weight(self) -> float: ...
    @property
    def exploration(self) -> float: ...
    @property
    def min_samples(self) -> int: ...


def defaults_note(constants: RoutingConstants) -> str:
    """The one sentence every output gives when no shipped.json was read (summary, page, ``ratings compare``)."""
    return (
        f"no shipped constants: code defaults k {constants.prior_weight:g}, exploration {constants.exploration:g}, "
        f"min samples {constants.min_samples}"
    )


def placeholder_note(shipped: Shipped, path: str) -> str | None:
    """The one sentence every output gives when shipped.json still holds template placeholders (None: none)."""
    if not shipped.placeholders:
        return None
    return (
        f"{path} still holds template placeholders at {', '.join(shipped.placeholders)}: they are ignored, as if "
        'absent; replace each with a config key of yours (ratings sql "SELECT DISTINCT config_key FROM attempts") '
        "or delete it"
    )


class PriorLike(Protocol):
    """Anything with a prior's three fields (:class:`Prior`, the simulator's scenario prior), read only: both
    are frozen models."""

    @property
    def selector(self) -> str: ...

    @property
    def region(self) -> str: ...

    @property
    def quality(self) -> float: ...


def priors_frame(priors: Sequence[PriorLike]) -> pl.DataFrame:
    """The priors as a frame for :func:`shipped_prior`: ``selector, prior_region, prior_quality, segments,
    order`` (``order``: position in the file, the last tie-break)."""
    import polars as pl

    return pl.DataFrame(
        {
            "selector": [p.selector for p in priors],
            "prior_region": [p.region for p in priors],
            "prior_quality": [float(p.quality) for p in priors],
            "segments": [len(p.selector.split("/")) for p in priors],
            "order": list(range(len(priors))),
        },
        schema={
            "selector": pl.String,
            "prior_region": pl.String,
            "prior_quality": pl.Float64,
            "segments": pl.Int64,
            "order": pl.Int64,
        },
    )


def shipped_prior(keys: pl.DataFrame, priors: pl.DataFrame) -> pl.DataFrame:
    """(config_key, region, shipped_prior): the most specific shipped prior matching each pair (docs/design.md, Priors).

    A selector matches when it equals the first 1..4 segments of the key and its region is r or
    '*'; more segments win, then region r over '*', then the earlier prior in the file. Pairs no
    prior matches are absent. ``priors`` is :func:`priors_frame`. The fitter and the simulator's
    logging policy both call this: one rule.
    """
    import polars as pl

    parts = pl.col("config_key").str.split("/")
    prefixes = pl.concat([keys.with_columns(selector=parts.list.head(n).list.join("/")) for n in range(1, 5)])
    return (
        prefixes.join(priors, on="selector", how="inner")
        .filter((pl.col("prior_region") == pl.col("region")) | (pl.col("prior_region") == EVERY_REGION))
        .with_columns(exact=pl.col("prior_region") == pl.col("region"))
        .group_by("config_key", "region")
        .agg(
            shipped_prior=pl.col("prior_quality")
            .sort_by(["segments", "exact", "order"], descending=[True, True, False])
            .first()
        )
    )
