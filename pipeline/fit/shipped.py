"""``fits/shipped.json`` (docs/design.md, Routing table): the constants, static roles and priors a team ships.

Every key is optional; an absent file or key means prior weight 3, exploration
0.3, min samples 3, no priors (the defaults of :class:`Constants`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from ..bounds import MAX_COUNT, MAX_HALF_LIFE_DAYS, MAX_LAMBDA, MAX_PRIOR_WEIGHT, MAX_USD
from ..defaults import Objective
from ..errors import FitError
from ..jsonfile import read_json, validate
from ..prices import Price, selector_of
from ..routing.table import Constants, Static
from ..streams.events import Config

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
        "exploration_mode": "thompson",
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

#: shipped.json is read strictly: a number where a number belongs (never the text "0.3" or true), finite, in its
#: bounds (:mod:`pipeline.bounds`); no key the file does not define.
_STRICT = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)


def config_key_of(key: str) -> str:
    """``key`` if it is a config key (``cli/route/model/effort``, 4 parts, cli and model not empty); else
    :class:`ValueError` saying what is wrong."""
    try:
        Config.from_key(key)
    except ValidationError:
        raise ValueError(f"config key {key!r} needs a cli and a model (its 1st and 3rd parts; '-' is none)") from None
    return key


ConfigKey = Annotated[str, AfterValidator(config_key_of)]


class Prior(BaseModel):
    """A shipped belief: configs whose key starts with ``selector`` have ``quality`` in ``region``.

    ``selector`` is 1 to 4 segments of a config key, in key form (``cli``, ``cli/route``, ...,
    percent-encoded like the key); ``region`` ``'*'`` means every region.
    """

    model_config = _STRICT

    selector: Annotated[str, Field(min_length=1), AfterValidator(selector_of)]
    region: str = Field(default="*", min_length=1)
    quality: float = Field(ge=0.0, le=1.0)

    @property
    def segments(self) -> int:
        return len(self.selector.split("/"))


class ShippedConstants(BaseModel):
    """``constants`` of shipped.json: any field of :class:`Constants`, plus the objective."""

    model_config = ConfigDict(**_STRICT, populate_by_name=True)

    prior_source: Literal["shipped", "measured"] | None = None
    prior_weight: float | None = Field(default=None, ge=0.0, le=MAX_PRIOR_WEIGHT)
    exploration: float | None = Field(default=None, ge=0.0, le=1.0)
    exploration_mode: Literal["epsilon", "thompson"] | None = None
    half_life_days: float | None = Field(default=None, gt=0.0, le=MAX_HALF_LIFE_DAYS)
    min_samples: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    cost_floor_usd: float | None = Field(default=None, gt=0.0, le=MAX_USD)
    lambda_: float | None = Field(default=None, alias="lambda", gt=0.0, le=MAX_LAMBDA)
    min_quality: float | None = Field(default=None, ge=0.0, le=1.0)
    objective: Objective | None = None


class Shipped(BaseModel):
    """The parsed shipped.json, read strictly: a key it does not define is refused (a typo would be ignored), a
    config key has 4 parts; a config the store never saw is fine (a cold start names configs before they run:
    ``ratings doctor`` warns)."""

    model_config = _STRICT

    constants: ShippedConstants = Field(default_factory=ShippedConstants)
    default_config: ConfigKey | None = None
    cheap_config: ConfigKey | None = None
    frontier_config: ConfigKey | None = None
    pinned: dict[Annotated[str, Field(min_length=1)], ConfigKey] = Field(default_factory=dict)
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
        _known_keys(data, path)
        data = _without_placeholders(data, left)
    return validate(Shipped, {**data, "placeholders": left} if isinstance(data, dict) else data, path, FitError)


def _known_keys(data: dict[str, Any], path: Path) -> None:
    """Refuse a top-level key shipped.json does not define (a typo of one would be ignored without a word)."""
    import difflib

    known = [name for name in Shipped.model_fields if name not in ("found", "placeholders")]
    for key in data:
        if key not in known:
            near = difflib.get_close_matches(str(key), known, n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise FitError(f"{path}: {key}: not a key of shipped.json; {hint}(known: {', '.join(known)})")


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
    """The constants the defaults note names (:class:`Constants`, the stats' constant sets)."""

    @property
    def prior_weight(self) -> float: ...
    @property
    def exploration(self) -> float: ...
    @property
    def exploration_mode(self) -> str: ...
    @property
    def min_samples(self) -> int: ...


def defaults_note(constants: RoutingConstants) -> str:
    """The one sentence every output gives when no shipped.json was read (summary, page, ``ratings compare``)."""
    return (
        f"no shipped constants: code defaults k {constants.prior_weight:g}, exploration {constants.exploration:g} "
        f"({constants.exploration_mode}), "
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


def priors_frame(priors: Sequence[Prior]) -> pl.DataFrame:
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
