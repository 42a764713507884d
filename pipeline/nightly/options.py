"""The options of one nightly fit (``fit-routing``, ``ratings fit``): what the CLI builds and ``stats.json`` records."""

from __future__ import annotations

import math
import shlex
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .. import defaults

DEFAULT_CASE_STUDY = defaults.CASE_STUDY


class FitOptions(BaseModel):
    """The options of one fit (the CLI builds it; the stats file records it).

    A constant left None is searched on validation; a given one is pinned. ``half_life_days`` is a number of
    days or ``"inf"`` (pinned to no recency weighting). ``shipped`` None means ``fits/shipped.json``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    split: float = Field(default=defaults.SPLIT, gt=0.0, lt=1.0)
    seed: int = defaults.SEED
    case_study: str = DEFAULT_CASE_STUDY
    shipped: str | None = None
    objective: defaults.Objective | None = None
    lambda_: float | None = Field(default=None, alias="lambda", gt=0.0)
    cost_floor_usd: float = Field(default=defaults.COST_FLOOR_USD, gt=0.0)
    prior_source: Literal["shipped", "measured"] | None = None
    prior_weight: float | None = Field(default=None, ge=0.0)
    exploration: float | None = Field(default=None, ge=0.0, le=1.0)
    # The floor of the searched exploration grid (0 only when asked for: the loop then stops learning).
    min_exploration: float = Field(default=defaults.MIN_EXPLORATION, ge=0.0, le=1.0)
    half_life_days: float | Literal["inf"] | None = None
    min_samples: int | None = Field(default=None, ge=0)
    min_quality: float | None = Field(default=None, ge=0.0, le=1.0)  # --min-quality: the quality floor
    thread: str | None = None
    since: datetime | None = None
    prm: bool = True
    pass_threshold: float = Field(default=defaults.PASS_THRESHOLD, ge=0.0, le=1.0)  # ladder gate pass mark
    ladder_budget_usd: float | None = Field(default=None, gt=0.0)  # --ladder-budget: budget target, else best-single
    credit: str | None = None  # where the data came from, shown on the page (stats.source.credit)
    backtest: str | None = None  # a `ratings backtest` backtest.json to attach to the stats (--backtest)
    writeback: bool = True  # resolve logged route.decided events with task.closed (--no-writeback: ignore them)
    no_compact: bool = False
    wait: bool = False
    # --no-evaluate: refit the table on every task with the current constants, without the held-out evaluation
    evaluate: bool = True
    # --engine: where the aggregation runs (docs/design.md, Fit, Spark); the same bytes either way, so not recorded
    engine: Literal["duckdb", "spark"] = Field(default="duckdb", exclude=True)
    spark_master: str | None = Field(default=None, exclude=True)  # --spark-master URL (None: local[*])

    @field_validator("half_life_days")
    @classmethod
    def _positive_or_inf(cls, value: float | str | None) -> float | str | None:
        if isinstance(value, float) and (value <= 0 or math.isnan(value)):
            raise ValueError("half-life must be a positive number of days or 'inf'")
        if isinstance(value, float) and math.isinf(value):
            return "inf"
        return value

    def command_line(self, home: str | None = None) -> str:
        """The ``fit-routing`` command that gives these options: ``--home`` as given, then every option that
        differs from its default, in the CLI's spelling (``stats.source.command``); ``--credit`` is
        presentation, recorded beside it in ``stats.source.credit``, not repeated here."""
        words = ["fit-routing"] + (["--home", home] if home is not None else [])
        words += ["--case-study", self.case_study]
        defaults = FitOptions()
        for field, flag in _FLAGS.items():
            value = getattr(self, field)
            if field == "case_study" or value == getattr(defaults, field):
                continue
            if isinstance(value, bool):
                words.append(flag)
            else:
                text = (
                    value.isoformat()
                    if isinstance(value, datetime)
                    else f"{value:g}"
                    if isinstance(value, float)
                    else str(value)
                )
                words += [flag, text]
        return " ".join(shlex.quote(w) for w in words)

    def ladders(self) -> Any:
        """The ladder options (:class:`pipeline.fit.learning.LadderOptions`) these options give."""
        from ..fit.learning import LadderOptions

        return LadderOptions(
            pass_threshold=self.pass_threshold,
            budget_usd=self.ladder_budget_usd,
            target="budget" if self.ladder_budget_usd is not None else "best-single",
        )

    def pins(self) -> dict[str, Any]:
        """The pinned constants, by :data:`pipeline.evaluate.search.SEARCHED` name (half-life inf -> None)."""
        pins: dict[str, Any] = {}
        for name in ("prior_source", "prior_weight", "exploration"):
            if getattr(self, name) is not None:
                pins[name] = getattr(self, name)
        if self.half_life_days is not None:
            pins["half_life_days"] = None if self.half_life_days == "inf" else float(self.half_life_days)
        if self.lambda_ is not None:
            pins["lambda"] = self.lambda_
        return pins


#: FitOptions field -> its fit-routing option (booleans are flags that flip the default).
_FLAGS = {
    "split": "--split",
    "seed": "--seed",
    "case_study": "--case-study",
    "shipped": "--shipped",
    "objective": "--objective",
    "lambda_": "--lambda",
    "cost_floor_usd": "--cost-floor",
    "prior_source": "--prior-source",
    "prior_weight": "--prior-weight",
    "exploration": "--exploration",
    "min_exploration": "--min-exploration",
    "half_life_days": "--half-life-days",
    "min_samples": "--min-samples",
    "min_quality": "--min-quality",
    "thread": "--thread",
    "since": "--since",
    "prm": "--no-prm",
    "pass_threshold": "--pass-threshold",
    "ladder_budget_usd": "--ladder-budget",
    "writeback": "--no-writeback",
    "backtest": "--backtest",
    "no_compact": "--no-compact",
    "wait": "--wait",
    "evaluate": "--no-evaluate",
    "engine": "--engine",
    "spark_master": "--spark-master",
}
