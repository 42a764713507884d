"""The nightly refit of a backtest: the product's own fit, on a scratch home of the loop (docs/design.md, Backtest,
Refit). One function, :func:`refit`, so that the path it takes can change in one place.

Today's path is the product's: the night's events are appended to the loop's scratch home, compacted, and fitted
either without held-out evaluation (``table``: :func:`pipeline.nightly.job.refit_table`, the current constants
refit on every task) or by the whole nightly job (``full``: verdicts included).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from ..home import Home
from ..nightly.options import FitOptions
from ..routing.table import RoutingTable

FitMode = Literal["table", "full"]
#: The case study a ``--fit full`` refit writes in its scratch home.
CASE_STUDY = "backtest"


def scratch_home(root: Path, shipped: dict[str, Any]) -> Home:
    """A new scratch home at ``root`` (emptied by the caller) with ``shipped`` as its ``fits/shipped.json``."""
    home = Home.resolve(root)
    home.write(home.fits / "shipped.json", (json.dumps(shipped, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    return home


def refit(home: Home, events: Sequence[dict[str, Any]], options: FitOptions, mode: FitMode) -> RoutingTable:
    """Append ``events`` (one night) to ``home``, compact, refit, and return the table published."""
    from ..compact import compact
    from ..nightly.job import refit_table, run_fit
    from ..streams.log import append

    if events:
        append(home, events, fsync="never", source="backtest")
    if mode == "table":
        compact(home)
        return refit_table(home, options)
    return run_fit(home, options.model_copy(update={"case_study": CASE_STUDY})).table
