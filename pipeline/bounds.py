"""Bounds of the numbers a person gives the fit: ``fits/shipped.json`` and the command line's options.

Each is finite, and small enough that no sum or product of the fit overflows a 64-bit float (the events' own
bounds are in :mod:`pipeline.streams.events`). One place, read by the shipped file's model
(:mod:`pipeline.fit.shipped`) and by the CLI's options (:mod:`pipeline.cli`), so both refuse the same values.
"""

from __future__ import annotations

#: k: a prior counts as this many ratings at most (more would drown a million ratings).
MAX_PRIOR_WEIGHT = 1e6
#: Days of the recency half-life (beyond a million days recency weighs nothing: use none, or ``inf``).
MAX_HALF_LIFE_DAYS = 1e6
#: Dollars per unit of quality of the utility objective.
MAX_LAMBDA = 1e9
#: Dollars: the cost floor, a ladder's budget per task, a shipped per-task price (the events' MAX_COST_USD).
MAX_USD = 1e6
#: Dollars per million tokens of a shipped token price (``prices``).
MAX_USD_PER_MTOK = 1e6
#: Tasks (the evidence gate's min samples) and other counts a person gives.
MAX_COUNT = 10**9
#: Seeds of the bootstrap, replay and simulator draws (numpy takes 0 to 2^64 - 1).
MAX_SEED = 2**64 - 1
