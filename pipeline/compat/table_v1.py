"""Routing tables written before the store was a Delta table: their ``source`` names the store snapshot they read
as ``manifest``, not ``version``. ``ratings compare --previous`` still orders such a table in ``fits/history/``.
May be dropped in 0.2.0 (:mod:`pipeline.compat`).
"""

from __future__ import annotations

from typing import Any


def store_version(source: dict[str, Any]) -> Any:
    """The store snapshot a table's ``source`` names: ``version``, else the older tables' ``manifest``."""
    return source.get("version", source.get("manifest"))
