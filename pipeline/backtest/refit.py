"""The nightly refit of a backtest: the product's own fit, on a scratch home of the loop (docs/design.md, Backtest,
Refit). One function, :func:`refit`, so that the path it takes can change in one place.

The path is the product's: the night's events are appended to the loop's scratch home, compacted and fitted,
either without held-out evaluation (``table``: :func:`pipeline.nightly.job.run_fit` with ``evaluate=False``, as
``fit-routing --no-evaluate``: the current constants refit on every task) or by the whole nightly job (``full``:
verdicts included).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..defaults import FitMode
from ..nightly.options import FitOptions
from ..routing.table import RoutingTable
from ..workspace import Workspace

#: The case study a ``--fit full`` refit writes in its scratch home.
CASE_STUDY = "backtest"


def scratch_home(root: Path, shipped: dict[str, Any] | None = None) -> Workspace:
    """A new scratch home at ``root`` (emptied by the caller), its store inside it whatever ``$RATINGS_STORE``
    says, with ``shipped`` (when given) as its ``fits/shipped.json``."""
    ws = Workspace(root.absolute())
    if shipped is not None:
        ws.write(ws.shipped, (json.dumps(shipped, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    return ws


def refit(ws: Workspace, events: Sequence[dict[str, Any]], options: FitOptions, mode: FitMode) -> RoutingTable:
    """Append ``events`` (one night) to the scratch home ``ws``, compact, refit, and return the table published."""
    from ..nightly.job import run_fit
    from ..streams.log import append

    if events:
        append(ws, events, fsync="never", source="backtest")
    if mode == "table":
        return run_fit(ws, options.model_copy(update={"evaluate": False})).table
    return run_fit(ws, options.model_copy(update={"case_study": CASE_STUDY})).table
