"""Thompson sampling over a region's members, with the exact propensity of each choice (docs/design.md, Decisions).

Each member's quality has a normal posterior with the table's quality as its mean and the variance of a Beta
with the member's pseudo-count n = prior_weight + weight (its rating weight plus the prior's):

```
a = q * n + 1/2,  b = (1 - q) * n + 1/2,  sd = sqrt(a * b / ((a + b)^2 * (a + b + 1)))
```

(the halves keep a member with q = 0 or 1 uncertain). A draw samples theta_c = q_c + sd_c * z_c for every
candidate (in key order, one ``rng.gauss`` each) and chooses the best sampled objective ``f_c(theta_c)``:
quality per dollar theta / max(cost, floor), utility lambda * theta - cost, quality theta (the quality where the
cost is unknown, as the table's value). Each f_c is increasing and affine in theta, so the probability that c wins is
one integral over c's own draw:

```
P(c) = integral phi(z) * prod_{j != c} Phi((g_j(q_c + sd_c z) - q_j) / sd_j) dz,   g_j = f_j^-1 o f_c
```

computed by the trapezoid rule on z in [-8, 8] (:data:`NODES` nodes; the integrand is smooth and its tails are
below 1e-14, so the rule is exact to about 1e-9). No objective of the product is outside this case; a
registered objective that is not increasing in quality would need the propensity from counted draws.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from .table import Constants
from .view import Row

#: Trapezoid nodes of the propensity's integral over z in [-SPAN, SPAN].
NODES = 321
SPAN = 8.0
_STEP = 2 * SPAN / (NODES - 1)
_Z = [-SPAN + i * _STEP for i in range(NODES)]
_PHI = [
    math.exp(-z * z / 2) / math.sqrt(2 * math.pi) * (_STEP / 2 if i in (0, NODES - 1) else _STEP)
    for i, z in enumerate(_Z)
]


def posterior_sd(row: Row, prior_weight: float) -> float:
    """The posterior spread of a member's quality (module doc)."""
    n = max(float(prior_weight), 0.0) + max(float(row.weight), 0.0)
    q = min(max(row.quality, 0.0), 1.0)
    a, b = q * n + 0.5, (1.0 - q) * n + 0.5
    return math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1.0)))


def _affine(row: Row, objective: str, constants: Constants) -> tuple[float, float]:
    """(slope, intercept) of the member's objective as a function of its quality: f = slope * theta + intercept."""
    if row.cost_usd is None or objective == "quality":
        return 1.0, 0.0
    if objective == "utility":
        return float(constants.lambda_ or 1.0), -row.cost_usd
    return 1.0 / max(row.cost_usd, constants.cost_floor_usd), 0.0


def draw(rows: Sequence[Row], rng: random.Random, objective: str, constants: Constants) -> str:
    """One Thompson draw among ``rows`` (key order): the config with the best sampled objective."""
    best, best_value = rows[0].config, -math.inf
    for row in rows:
        theta = row.quality + posterior_sd(row, constants.prior_weight) * rng.gauss(0.0, 1.0)
        slope, intercept = _affine(row, objective, constants)
        value = slope * theta + intercept
        if value > best_value:
            best, best_value = row.config, value
    return best


def win_probability(rows: Sequence[Row], config: str, objective: str, constants: Constants) -> float:
    """P(a draw among ``rows`` chooses ``config``), by the integral of the module doc."""
    sd = {r.config: posterior_sd(r, constants.prior_weight) for r in rows}
    me = next(r for r in rows if r.config == config)
    slope, intercept = _affine(me, objective, constants)
    others = []
    for r in rows:
        if r.config != config:
            s, c = _affine(r, objective, constants)
            others.append((s, c, r.quality, sd[r.config]))
    total = 0.0
    for z, weight in zip(_Z, _PHI, strict=True):
        value = slope * (me.quality + sd[config] * z) + intercept
        p = weight
        for s, c, q, spread in others:
            # the other's draw must give a lower objective: theta_j < (value - c) / s
            p *= 0.5 * math.erfc(-((value - c) / s - q) / (spread * math.sqrt(2.0)))
            if p == 0.0:
                break
        total += p
    return min(max(total, 0.0), 1.0)
