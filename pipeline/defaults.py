"""The code defaults of the fit, in one place: the CLI's options, :class:`pipeline.nightly.options.FitOptions`,
the routing constants (:class:`pipeline.routing.table.Constants`) and the evaluation's grids are built from here,
and the names an option may take (:data:`Objective`, :data:`FitMode`) are written here once.
Published figures are rounded where a file is written (:mod:`pipeline.rounding`).

Imports nothing heavy: the CLI reads it at start.
"""

from __future__ import annotations

from typing import Literal, get_args

from .rounding import DECIMALS

# ---------------------------------------------------------------------------------------- the routing constants
#: Where a member's prior comes from (docs/design.md, Priors).
PRIOR_SOURCE = "shipped"
#: The prior weight k (docs/design.md, Quality).
PRIOR_WEIGHT = 3.0
#: Exploration eps (docs/design.md, Exploration).
EXPLORATION = 0.3
#: How exploration draws: Thompson sampling on the posteriors (why: docs/design.md, Exploration).
EXPLORATION_MODE = "thompson"
#: The recency half-life in days: None, no recency weighting.
HALF_LIFE_DAYS: float | None = None
#: The evidence gate's shared tasks (docs/design.md, Evidence gate).
MIN_SAMPLES = 3
#: Costs below this many USD count as this (docs/design.md, Cost).
COST_FLOOR_USD = 0.000001
#: What routing may maximise (docs/design.md, Objectives): the one list every option, model and table takes.
Objective = Literal["quality_per_dollar", "utility", "quality"]
OBJECTIVES: tuple[Objective, ...] = get_args(Objective)
#: The objective (docs/design.md, Objectives).
OBJECTIVE: Objective = "quality_per_dollar"

# ---------------------------------------------------------------------------------------- the fit's options
#: The learned fraction of the chronological split (docs/design.md, Split).
SPLIT = 0.7
#: The seed of every bootstrap and replay draw (docs/design.md, Determinism).
SEED = 0
#: The floor of the searched exploration grid (docs/design.md, Grids and the search).
MIN_EXPLORATION = 0.05
#: A ladder rung whose gate is below this escalates (docs/design.md, Ladders); the held-out policies use it too.
PASS_THRESHOLD = 0.5
#: The case study a fit writes.
CASE_STUDY = "routing-by-rating"

#: How ``ratings backtest`` refits each night: the table with the current constants, or the whole nightly job
#: (docs/design.md, Backtest, Refit).
FitMode = Literal["table", "full"]

# ---------------------------------------------------------------------------------------- the grids
PRIOR_SOURCES = ("shipped", "measured")
PRIOR_WEIGHTS = (0.0, 1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0, 34.0)
#: The exploration grid; the searched one starts at the floor (:data:`MIN_EXPLORATION`).
EXPLORATIONS = (0.0, 0.05, 0.1, 0.2, 0.3)
#: None: infinity, no recency weighting.
HALF_LIVES: tuple[float | None, ...] = (None, 90.0, 30.0, 14.0)
#: The utility lambda grid: :data:`LAMBDA_STEPS` values geometric from 10^LAMBDA_DECADES[0] to 10^LAMBDA_DECADES[1]
#: times its scale (docs/design.md, Grids and the search).
LAMBDA_STEPS = 13
LAMBDA_DECADES = (-2, 2)

# ---------------------------------------------------------------------------------------- reports
#: A shipped prior disagrees with the ratings when they differ by more than this with n >= min samples.
DISAGREE_BY = 0.1


def lambda_grid(scale: float, decimals: int = DECIMALS) -> list[float]:
    """``scale * 10 ** (d0 + (d1 - d0) * i / (steps - 1))`` for i = 0..steps-1 (0.01x to 100x the scale),
    each rounded where it is made to ``decimals``: the lambda routed by, published and reported is one number."""
    low, high = LAMBDA_DECADES
    return [round(scale * 10 ** (low + (high - low) * i / (LAMBDA_STEPS - 1)), decimals) for i in range(LAMBDA_STEPS)]
