"""``ratings backtest``: the loop replayed on a full-information table (pipeline.backtest)."""

from __future__ import annotations

import sys
from typing import get_args

import click

from ..defaults import FitMode
from ..workspace import Workspace
from .common import (
    OBJECTIVES,
    cli,
    config_format_option,
    emit_json,
    gate_noise_option,
    handle_errors,
    json_option,
    lambda_option,
    option,
    pass_threshold_option,
    quiet_option,
    shipped_option,
    workspace,
)


@cli.command()
@click.argument("table", required=False, type=click.Path(dir_okay=False))
@workspace(store=True, as_of=True)
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Write everything under this directory.")
@config_format_option("How the config column is read, as ratings import reads it.", dest="config_format")
@option(
    "--policy",
    None,
    None,
    "Routing policy (repeatable; default learning_governed).",
    dest="policies",
    multiple=True,
    metavar="NAME",
)
@option(
    "--objective",
    OBJECTIVES,
    None,
    "Objective (repeatable; default quality_per_dollar).",
    dest="objectives",
    multiple=True,
)
@option(
    "--start",
    click.Choice(["cheapest", "frontier", "shipped"]),
    None,
    "default_config before the data speaks (repeatable; default frontier).",
    dest="starts",
    multiple=True,
)
@shipped_option("shipped.json: its constants and priors for every start, its static choice for --start shipped.")
@lambda_option(
    click.FloatRange(0, min_open=True), "lambda of utility (default (c_f - c_c) / (q_f - q_c) on the whole table)."
)
@option("--night-size", click.IntRange(1), None, "Tasks per night (default ceil(5% of n)).")
@option("--seeds", click.IntRange(1), 20, "Seeds 0..N-1.")
@pass_threshold_option(click.FloatRange(0, 1), 0.5, "A run whose score is below this fails its gate.")
@option("--max-runs", click.IntRange(1), 3, "Runs per task at most for policies that escalate.")
@gate_noise_option(click.FloatRange(0, 1), 0.0, "Probability that the gate's verdict is flipped.")
@option(
    "--fit",
    click.Choice(get_args(FitMode)),
    "table",
    "Each night: refit the table with the current constants (table) or run the whole nightly job (full).",
    dest="fit_mode",
)
@option("--jobs", click.IntRange(1), 1, "Processes (same bytes as one).")
@click.option("--keep-homes", is_flag=True, help="Keep the scratch homes under OUT/homes/.")
@quiet_option
@json_option
@handle_errors
def backtest(
    ws: Workspace,
    table: str | None,
    home: str | None,
    out: str,
    config_format: str,
    policies: tuple[str, ...],
    objectives: tuple[str, ...],
    starts: tuple[str, ...],
    shipped: str | None,
    lambda_: float | None,
    night_size: int | None,
    seeds: int,
    pass_threshold: float,
    max_runs: int,
    gate_noise: float,
    fit_mode: str,
    jobs: int,
    keep_homes: bool,
    quiet: bool,
    as_json: bool,
) -> None:
    """Replay a full-information table as a dispatcher would live it: one run per task (plus escalations), only
    the runs chosen revealed, the table refit every night. A simulation of deployment, not a deployment.

    TABLE is a long table as `ratings import` reads it; or --home of a home whose tasks several configs did (its
    store, --store included, is only read).
    Writes OUT/backtest.json, OUT/backtest.txt and OUT/learning-curve.svg (docs/design.md, Backtest).

    \b
    Example:
      ratings backtest data/routerbench-zero-shot.csv.gz --out build/bt --jobs 2
      ratings backtest data/livecodebench.csv.gz --out build/bt-lcb --policy learning_governed \\
        --policy ladder --start cheapest --start frontier --seeds 5
      ratings backtest --home ./team --out build/bt-team --objective utility --lambda 0.5 --json
    """
    from ..backtest.run import BacktestOptions, progress_printer, run_backtest
    from ..backtest.text import report_text

    if table is None and home is None:
        raise click.UsageError("give a TABLE file or --home")
    if table is not None and home is not None:
        raise click.UsageError("give a TABLE file or --home, not both")
    options = BacktestOptions.model_validate(
        {
            "policies": policies or ("learning_governed",),
            "objectives": objectives or ("quality_per_dollar",),
            "starts": tuple(dict.fromkeys(starts)) or ("frontier",),
            "shipped": shipped,
            "lambda": lambda_,
            "night_size": night_size,
            "seeds": seeds,
            "pass_threshold": pass_threshold,
            "max_runs": max_runs,
            "gate_noise": gate_noise,
            "fit": fit_mode,
            "config_format": config_format,
            "jobs": jobs,
            "keep_homes": keep_homes,
        }
    )
    report = run_backtest(
        out,
        table=table,
        home=ws if home is not None else None,
        options=options,
        progress=progress_printer(not quiet and not as_json and sys.stderr.isatty()),
    )
    if as_json:
        emit_json(report.to_json_dict())
    else:
        click.echo(report_text(report))
