"""``ratings fit`` (``fit-routing``), ``case-study`` and ``compare``: the nightly job and what it wrote."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

import click

from .. import defaults
from ..bounds import MAX_COUNT, MAX_HALF_LIFE_DAYS, MAX_LAMBDA, MAX_PRIOR_WEIGHT, MAX_USD
from ..errors import PipelineError
from ..workspace import Workspace
from .common import (
    OBJECTIVES,
    Finite,
    cli,
    emit_json,
    future_options,
    handle_errors,
    json_option,
    lambda_option,
    negation,
    option,
    pass_threshold_option,
    quiet_option,
    seed_option,
    shipped_option,
    table_option,
    workspace,
)

if TYPE_CHECKING:
    from ..nightly.job import FitResult


# --------------------------------------------------------------------------- fit (fit-routing)
def _half_life(ctx: click.Context, param: click.Parameter, value: str | None) -> float | Literal["inf"] | None:
    if value is None or value.lower() in ("inf", "infinity"):
        return None if value is None else "inf"
    try:
        days = float(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a number of days or 'inf'") from None
    if not 0 < days <= MAX_HALF_LIFE_DAYS:
        raise click.BadParameter(f"must be a number of days above 0 and at most {MAX_HALF_LIFE_DAYS:g}, or 'inf'")
    return days


def _since(ctx: click.Context, param: click.Parameter, value: str | None) -> datetime | None:
    if value is None:
        return None
    from ..utc import parse_time

    try:
        return parse_time(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a date (YYYY-MM-DD) or an RFC 3339 time") from None


def _case_study(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from ..workspace import case_study_name

    try:
        return case_study_name(value)
    except PipelineError as exc:
        raise click.BadParameter(str(exc)) from None


@cli.command("fit")
@workspace(store=True, writer=True, as_of=True)
@option(
    "--split",
    Finite(0, 1, min_open=True, max_open=True),
    defaults.SPLIT,
    "Fraction of tasks (in time order) learned; the rest is held out.",
)
@seed_option(defaults.SEED, "Seed of the bootstrap and replay draws.")
@option(
    "--case-study",
    None,
    defaults.CASE_STUDY,
    "Write case-studies/NAME/stats.json.",
    dest="case_study",
    callback=_case_study,
)
@shipped_option("Shipped constants and priors (default: <home>/fits/shipped.json).")
@option("--objective", OBJECTIVES, None, "What routing maximises (default: shipped.json's, else quality_per_dollar).")
@lambda_option(Finite(0, MAX_LAMBDA, min_open=True), "Pin lambda of the utility objective (lambda * q - cost).")
@option(
    "--cost-floor",
    Finite(0, MAX_USD, min_open=True),
    defaults.COST_FLOOR_USD,
    "Costs below this many USD count as this.",
    dest="cost_floor_usd",
)
@option("--prior-source", click.Choice(["shipped", "measured"]), None, "Pin the prior source.")
@option("--prior-weight", Finite(0, MAX_PRIOR_WEIGHT), None, "Pin the prior weight.", metavar="K")
@option("--exploration", Finite(0, 1), None, "Pin exploration.", metavar="EPS")
@option(
    "--min-exploration",
    Finite(0, 1),
    defaults.MIN_EXPLORATION,
    "Floor of the searched exploration grid (0: the loop may stop trying non-greedy configs).",
    metavar="EPS",
)
@option(
    "--half-life-days",
    None,
    None,
    "Pin the recency half-life in days (inf: no recency weighting).",
    dest="half_life_days",
    metavar="H|inf",
    callback=_half_life,
)
@option(
    "--min-samples",
    click.IntRange(0, MAX_COUNT),
    None,
    "Evidence gate: ratings a learned choice needs (default: shipped.json's, else 3).",
    metavar="N",
)
@option(
    "--min-quality",
    Finite(0, 1),
    None,
    "Quality floor: the best objective among configs of quality >= Q, else the highest quality.",
    metavar="Q",
)
@click.option("--thread", default=None, help="Fit only the tasks of this thread.")
@click.option("--since", default=None, metavar="DATE", callback=_since, help="Fit only tasks opened since DATE.")
@click.option("--no-compact", is_flag=True, help="Do not compact the streams first.")
@negation(
    "--no-evaluate",
    "evaluate",
    "Refit the table on every task with the current constants (the live table's, else shipped.json's); "
    "no held-out evaluation, no page.",
)
@option(
    "--engine",
    click.Choice(["duckdb", "spark"]),
    "duckdb",
    "Where the aggregation runs: DuckDB in this process, or Spark SQL (pip install '.[spark]' and a Java runtime) "
    "for a store beyond one machine; the same table and stats either way.",
)
@option(
    "--spark-master",
    str,
    None,
    "With --engine spark: the cluster's master URL (default: local mode on every core, local[*]).",
    metavar="URL",
)
@click.option("--wait", is_flag=True, help="Wait for a running fit on this home instead of exiting.")
@negation("--no-prm", "prm", "No PRM fill-in ratings from attempt traces.")
@pass_threshold_option(
    Finite(0, 1),
    defaults.PASS_THRESHOLD,
    "Escalation ladders: a rung whose gate rating is below this escalates to the next.",
)
@option(
    "--ladder-target",
    click.Choice(["best-single"]),
    None,
    "Cheapest ladder whose validated quality reaches the best single config's (the default).",
)
@option(
    "--ladder-budget",
    Finite(0, MAX_USD, min_open=True),
    None,
    "Instead: the best validated quality within this mean cost per task.",
    dest="ladder_budget_usd",
    metavar="USD",
)
@negation("--no-writeback", "writeback", "Ignore logged route.decided events (no decision writeback).")
@click.option("--no-render", is_flag=True, help="Write stats.json only; do not render the case-study page.")
@click.option("--credit", default=None, metavar="TEXT", help="Where the data came from, shown on the case-study page.")
@option(
    "--backtest",
    click.Path(dir_okay=False),
    None,
    "Attach a `ratings backtest` backtest.json to the case study (its backtest section and figure).",
    dest="backtest",
    metavar="FILE",
)
@future_options
@quiet_option
@json_option
@handle_errors
def fit(
    ws: Workspace,
    home: str | None,
    ladder_target: str | None,
    no_render: bool,
    quiet: bool,
    as_json: bool,
    future: timedelta | None,
    **fit_options: Any,
) -> None:
    """Fit routing from the ratings, check it on held-out tasks, publish the routing table.

    Compacts first, splits tasks in time order (learned / held-out), chooses
    the constants not pinned on validation inside the learned part, reports
    shipped against fitted constants once on held-out, then publishes
    fits/routing-table.json (refit on all tasks), writes case-studies/NAME/stats.json
    and renders the page beside it (index.html, README.md, figures).
    `fit-routing` is the same command.

    \b
    Example:
      fit-routing --home ./myteam
      ratings fit --objective quality --prior-weight 3 --exploration 0.1 --json
      ratings fit --half-life-days inf --since 2026-01-01 --case-study january
      ratings fit --ladder-budget 0.001 --pass-threshold 0.7
      ratings fit --min-quality 0.8
      fit-routing --no-evaluate --no-compact
      fit-routing --home build/lcb --case-study livecodebench --credit "LiveCodeBench leaderboard data"
    """
    from ..nightly.job import run_fit
    from ..nightly.options import FitOptions

    if ladder_target is not None and fit_options["ladder_budget_usd"] is not None:
        raise click.UsageError("--ladder-target best-single and --ladder-budget USD exclude each other")
    options = FitOptions(**fit_options)  # every other option is named as the FitOptions field it sets
    result = run_fit(
        ws,
        options,
        progress=not quiet and not as_json and sys.stderr.isatty(),
        command=options.command_line(home),
        then=None if no_render else _render_case_study(options.case_study, quiet=quiet or as_json),
        future=future,
    )
    if as_json:
        emit_json(result.stats.to_json_dict())
        return
    for line in result.summary_lines():
        click.echo(line)


def _render_case_study(name: str, *, quiet: bool) -> Callable[[Workspace, FitResult], None]:
    """The step after the fit (still under its lock): render the case-study page from the stats it wrote (a refit
    without evaluation writes no page: its stats hold no held-out figure)."""

    def render(ws: Workspace, result: FitResult) -> None:
        from ..casestudy import render_case_study

        if result.evaluation is None:
            return

        if not quiet and sys.stderr.isatty():
            click.echo("fit: rendering the case study...", err=True)
        render_case_study(ws, name)

    return render


# --------------------------------------------------------------------------- case-study / compare
@cli.command("case-study")
@workspace()
@json_option
@click.argument("name")
@handle_errors
def case_study(ws: Workspace, as_json: bool, name: str) -> None:
    """Render case-studies/NAME/index.html and README.md (and SVG figures) from its stats.json alone.

    \b
    Example:
      fit-routing --home . --case-study routing-by-rating
      ratings case-study routing-by-rating --home .
    """
    from ..casestudy import render_case_study

    rendered = render_case_study(ws, name)
    if as_json:
        emit_json(rendered.summary())
    else:
        click.echo(f"wrote {rendered.directory / rendered.files[0]} ({', '.join(rendered.files[1:])})")


@cli.command()
@workspace(optional=lambda ws, kw: not kw["previous"] and (kw["table"] is not None or kw["stats"] is not None))
@shipped_option("Shipped constants and priors (default: fits/shipped.json).", exists=False)
@table_option
@option(
    "--stats",
    click.Path(dir_okay=False),
    None,
    "Case-study stats (default: the one the table points to, else case-studies/routing-by-rating/stats.json).",
)
@click.option("--previous", is_flag=True, help="Also compare the table with the previous fit in fits/history/.")
@json_option
@handle_errors
def compare(
    ws: Workspace, shipped: str | None, table: str | None, stats: str | None, previous: bool, as_json: bool
) -> None:
    """Shipped against fitted constants: held-out hit rates, the published choice, disagreeing priors.

    \b
    Example:
      ratings compare --home .
      ratings compare --previous --json
    """
    from ..commands.compare import compare as run_compare
    from ..commands.compare_text import comparison_text

    result = run_compare(ws, shipped=shipped, table=table, stats=stats, previous=previous)
    if as_json:
        emit_json(result.to_json_dict())
    else:
        click.echo(comparison_text(result))
