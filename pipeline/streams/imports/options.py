"""What an import is told (``ratings import`` options) and the maps a person writes (docs/design.md, Imports).

- ``--config-map FILE``: a JSON object from a source's name for a configuration (a long table's config cell, a
  mini-ork lane, an OTLP agent or model name, a Langfuse or LangSmith model or trace name) to a config key
  (``cli/route/model/effort``) or a config object.
- ``--label-map FILE``: a JSON object from a categorical label to a score in [0, 1], optionally per evaluation
  name: ``{"good": 1, "bad": 0, "helpfulness": {"high": 1, "low": 0}}`` (a name's own map wins).
- ``--score-range LO:HI``: scores of the source lie in [LO, HI] and are mapped linearly onto [0, 1].
"""

from __future__ import annotations

import math
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ...errors import PipelineError
from ...jsonfile import read_json
from ..events import Config
from ..future import MAX_FUTURE
from .mapping import Cfg, config_of
from .values import Problem, missing

Format = Literal["auto", "long", "mini-ork", "otlp", "langfuse", "langsmith"]
FORMATS: tuple[str, ...] = ("auto", "long", "mini-ork", "otlp", "langfuse", "langsmith")
ConfigColumnFormat = Literal["auto", "key", "model"]


class ImportOptionError(PipelineError):
    """An option or a map file an import cannot use (exit 2)."""


class ScoreRange(BaseModel):
    model_config = ConfigDict(frozen=True)

    low: float
    high: float

    @classmethod
    def parse(cls, text: str) -> ScoreRange:
        """``LO:HI`` with finite LO < HI."""
        try:
            low_text, high_text = text.split(":")
            low, high = float(low_text), float(high_text)
        except ValueError:
            raise ImportOptionError(f"--score-range {text!r}: expected LO:HI, e.g. 1:5 or 0:100") from None
        if not (math.isfinite(low) and math.isfinite(high)) or low >= high:
            raise ImportOptionError(f"--score-range {text!r}: LO and HI must be finite numbers with LO < HI")
        return cls(low=low, high=high)

    def unit(self, value: float) -> float | None:
        """``(value - LO) / (HI - LO)``; None outside [LO, HI]."""
        if value < self.low or value > self.high:
            return None
        return (value - self.low) / (self.high - self.low)


class Maps(BaseModel):
    """The parsed ``--config-map`` and ``--label-map`` (empty when not given)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    configs: dict[str, Cfg] = Field(default_factory=dict)
    labels: dict[str, float] = Field(default_factory=dict)
    labels_by_name: dict[str, dict[str, float]] = Field(default_factory=dict)

    def config(self, *names: str | None) -> Cfg | None:
        """The mapped configuration of the first of ``names`` the map holds."""
        for name in names:
            if name is not None and name in self.configs:
                return self.configs[name]
        return None

    def label(self, label: str, name: str | None = None) -> float | None:
        """The score of a categorical label (a name's own map first, then the global one; exact, then any case)."""
        for table in (self.labels_by_name.get(name or "", {}), self.labels):
            if label in table:
                return table[label]
            folded = {k.casefold(): v for k, v in table.items()}
            if label.casefold() in folded:
                return folded[label.casefold()]
        return None


def _config_entry(path: Path, name: str, value: Any) -> Cfg:
    try:
        if isinstance(value, str):
            config = Config.from_key(value)
        elif isinstance(value, dict):
            config = Config.model_validate(value)
        else:
            raise ValueError("expected a config key cli/route/model/effort or a config object")
    except ValueError as exc:
        reason = str(exc).splitlines()[-1 if "validation error" in str(exc) else 0].strip()
        raise ImportOptionError(f"{path}: {name!r}: {reason}") from None
    return config_of(config.cli, config.route, config.model, config.effort)


def _score(path: Path, where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ImportOptionError(f"{path}: {where}: a label's score is a number in [0, 1], not {value!r}")
    return float(value)


def load_maps(config_map: str | Path | None, label_map: str | Path | None) -> Maps:
    configs: dict[str, Cfg] = {}
    labels: dict[str, float] = {}
    by_name: dict[str, dict[str, float]] = {}
    if config_map is not None:
        path = Path(config_map)
        data = read_json(path, ImportOptionError, missing="no such file (--config-map)")
        if not isinstance(data, dict):
            raise ImportOptionError(f"{path}: expected a JSON object of source name -> config key")
        configs = {str(name): _config_entry(path, name, value) for name, value in data.items()}
    if label_map is not None:
        path = Path(label_map)
        data = read_json(path, ImportOptionError, missing="no such file (--label-map)")
        if not isinstance(data, dict):
            raise ImportOptionError(f"{path}: expected a JSON object of label -> score in [0, 1]")
        for name, value in data.items():
            if isinstance(value, dict):
                by_name[name] = {str(k): _score(path, f"{name}.{k}", v) for k, v in value.items()}
            else:
                labels[str(name)] = _score(path, name, value)
    return Maps(configs=configs, labels=labels, labels_by_name=by_name)


class ImportOptions(BaseModel):
    """Everything an import is told, typed (the CLI builds it; a library caller may too)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    fmt: Format = "auto"
    rater_kind: Literal["gate", "reviewer", "human"] | None = None  # None: the source's own default
    rater_name: str | None = None
    thread: str | None = None
    task_key: str | None = None
    region_key: str | None = None
    config_column_format: ConfigColumnFormat = "auto"
    maps: Maps = Field(default_factory=Maps)
    score_range: ScoreRange | None = None
    skip_bad: bool = False
    dry_run: bool = False
    future: timedelta | None = MAX_FUTURE  # how far after the import a time may lie (None: any; --allow-future)

    def score(self, value: Any, field: str, *, label: Any = None, name: str | None = None) -> float | None:
        """A source's score as a score in [0, 1]: a boolean is 1 or 0; a number in [0, 1] is itself, or mapped
        from ``--score-range``; a label alone goes through ``--label-map``. None when the source gave neither;
        :class:`Problem` when it cannot be mapped (the reason says which option would map it)."""
        if isinstance(value, bool):
            return 1.0 if value else 0.0
        if not missing(value):
            try:
                number = float(value)
            except (TypeError, ValueError):
                raise Problem(field, f"{value!r} is not a number") from None
            if not math.isfinite(number):
                raise Problem(field, f"{value!r} is not a finite number")
            if self.score_range is not None:
                unit = self.score_range.unit(number)
                if unit is None:
                    low, high = self.score_range.low, self.score_range.high
                    raise Problem(field, f"{number:g} is outside --score-range {low:g}:{high:g}")
                return unit
            if not 0.0 <= number <= 1.0:
                raise Problem(field, f"{number:g} is outside [0, 1]: give the scale with --score-range LO:HI")
            return number
        if missing(label):
            return None
        mapped = self.maps.label(str(label), name)
        if mapped is None:
            raise Problem(field, f"label {str(label)!r} has no score: map it with --label-map FILE")
        return mapped
