"""The greedy rule (docs/design.md, Greedy choice and ties): the one ordering of members every greedy choice uses.

The router ranks a pool by it (:mod:`pipeline.routing.view`), the fit ranks a region's members by it (the table's
``choice``, the held-out hit rates, the baselines, the target policy of the off-policy estimates) and the compiled
replay (:mod:`pipeline.evaluate.replay_kernel`) reimplements it operation for operation, tested against the router
on generated tables (``tests/evaluate/test_replay_kernel.py``).

The order, best first:

1. with a quality floor Q: members with ``q >= Q`` first; those below it after them, by q alone;
2. the higher value of the objective (:func:`objective_value`);
3. the higher q;
4. the lower cost, an unknown cost last;
5. the config key in ascending order.

An undefined quality or value (None or NaN: nothing is known of the member) ranks after every defined one.

Lambda: the utility objective needs lambda, always. A table whose objective is utility carries it
(:class:`pipeline.routing.table.RoutingTable` refuses one without), the fit refuses to fit utility without it, and
:func:`objective_value` refuses to rank by utility without it: there is no default lambda anywhere.
"""

from __future__ import annotations

import math

from ..defaults import OBJECTIVES
from ..errors import RoutingError

#: The objectives a table ranks by.

GreedyKey = tuple[bool, float, float, float, str]


def _known(x: float | None) -> bool:
    return x is not None and not math.isnan(x)


def greedy_key(
    config: str, quality: float | None, cost: float | None, value: float | None, min_quality: float | None = None
) -> GreedyKey:
    """The sort key of a member in the greedy order (module docstring): the smallest key ranks first."""
    q = quality if quality is not None and _known(quality) else -math.inf
    below = min_quality is not None and q < min_quality
    v = q if below else (value if value is not None and _known(value) else -math.inf)
    c = cost if cost is not None and _known(cost) else math.inf
    return (below, -v, -q, c, config)


def objective_value(quality: float, cost: float | None, objective: str, lambda_: float | None, floor: float) -> float:
    """The objective (docs/design.md, Objectives): ``quality_per_dollar = q / max(cost, floor)``, ``utility =
    lambda * q - cost``, ``quality = q``; with no known cost every objective ranks by quality."""
    if objective not in OBJECTIVES:
        raise RoutingError(f"unknown objective {objective!r}; expected one of {', '.join(OBJECTIVES)}")
    if objective == "utility" and lambda_ is None:
        raise RoutingError("the utility objective needs lambda (constants.lambda): none is given")
    if cost is None or objective == "quality":
        return quality
    if objective == "utility":
        assert lambda_ is not None
        return lambda_ * quality - cost
    return quality / max(cost, floor)
