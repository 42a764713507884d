"""The ``ratings`` command line: a thin layer over the library.

Each command parses its options, calls one library function and turns the
library's exceptions into a message and an exit code (0 ok, 1 failed check,
2 bad input or usage). Heavy libraries (polars, duckdb, pyarrow, scipy,
matplotlib) are imported inside the commands that need them, never here.
"""

from __future__ import annotations

from . import backtest, fit, routing, store, streams, tools  # noqa: F401  (each registers its commands on the group)
from .common import cli

__all__ = ["cli", "fit_routing_main", "main"]


def main() -> None:
    cli(prog_name="ratings")


def fit_routing_main() -> None:
    """``fit-routing``: the nightly job, the same command as ``ratings fit``."""
    fit.fit.main(prog_name="fit-routing", help_option_names=["-h", "--help"])
