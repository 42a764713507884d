"""Routing: the table dispatchers load (``table``) and the router that acts on it (``router``, ``policies``,
``view``: a region's rows; ``explain_sql``: the query behind ``--explain``).

``from pipeline.routing import Router`` is the dispatcher's entry point::

    router = Router.load("fits/routing-table.json")
    decision = router.route("implement", pool=[...], role="implementer", rng=random.Random(0))
"""

from .policies import BUILTIN as BUILTIN_POLICIES
from .policies import register_policy
from .router import DEFAULT_POLICY, Decision, Router
from .table import RoutingTable, load

__all__ = ["BUILTIN_POLICIES", "DEFAULT_POLICY", "Decision", "Router", "RoutingTable", "load", "register_policy"]
