"""``fits/shipped.json`` (DESIGN 7): the constants, static roles and priors a team ships.

Every key is optional; an absent file or key means prior weight 3, exploration
0.3, min samples 3, no priors (the defaults of :class:`Constants`).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import FitError
from ..routing.table import Constants, Static


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

    def to_constants(self, **overrides: Any) -> Constants:
        """The shipped constants as :class:`Constants` (defaults where shipped.json is silent).

        ``overrides`` (Constants field names; ``lambda_`` for lambda) win over the file.
        """
        given = self.constants.model_dump(exclude_none=True, exclude={"objective"}, by_alias=True)
        given.update({"lambda" if k == "lambda_" else k: v for k, v in overrides.items()})
        return Constants.model_validate(given)

    @property
    def static(self) -> Static:
        return Static(default_config=self.default_config, cheap_config=self.cheap_config,
                      frontier_config=self.frontier_config, pinned=dict(self.pinned))


def load_shipped(path: str | Path | None) -> Shipped:
    """Read shipped.json; ``None`` or a missing file gives the defaults. A bad file raises :class:`FitError`."""
    if path is None:
        return Shipped()
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Shipped()
    except ValueError as exc:
        raise FitError(f"{path}: not valid JSON: {exc}") from None
    try:
        return Shipped.model_validate(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err["loc"]) or "-"
        raise FitError(f"{path}: {where}: {err['msg']}") from None
