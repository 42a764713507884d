"""``ratings fit`` (``fit-routing``), ``case-study`` and ``compare``: the nightly job and what it wrote."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import Literal

import click

from .. import defaults
from ..errors import PipelineError
from .common import (
    cli,
    emit_json,
    handle_errors,
    home_option,
    json_option,
    quiet_option,
    seed_option,
    store_options,
    table_option,
)


# --------------------------------------------------------------------------- fit (fit-routing)
def _half_life(ctx: click.Context, param: click.Parameter, value: str | None) -> float | Literal["inf"] | None:
    if value is None or value.lower() in ("inf", "infinity"):
        return None if value is None else "inf"
    try:
        days = float(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a number of days or 'inf'") from None
    if not days > 0:
        raise click.BadParameter("must be a positive number of days or 'inf'")
    return days


def _since(ctx: click.Context, param: click.Parameter, value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a date (YYYY-MM-DD) or an RFC 3339 time") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _case_study(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from ..home import case_study_name

    try:
        return case_study_name(value)
    except PipelineError as exc:
        raise click.BadParameter(str(exc)) from None


@cli.command("fit")
@home_option
@click.option(
    "--split",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=defaults.SPLIT,
    show_default=True,
    help="Fraction of tasks (in time order) learned; the rest is held out.",
)
@seed_option(defaults.SEED, "Seed of the bootstrap and replay draws.")
@click.option(
    "--case-study",
    "case_study",
    default=defaults.CASE_STUDY,
    show_default=True,
    callback=_case_study,
    help="Write case-studies/NAME/stats.json.",
)
@click.option(
    "--shipped",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Shipped constants and priors (default: <home>/fits/shipped.json).",
)
@click.option(
    "--objective",
    type=click.Choice(["quality_per_dollar", "utility", "quality"]),
    default=None,
    help="What routing maximises (default: shipped.json's, else quality_per_dollar).",
)
@click.option(
    "--lambda",
    "lambda_",
    type=click.FloatRange(0, min_open=True),
    default=None,
    help="Pin lambda of the utility objective (lambda * q - cost).",
)
@click.option(
    "--cost-floor",
    "cost_floor",
    type=click.FloatRange(0, min_open=True),
    default=defaults.COST_FLOOR_USD,
    show_default=True,
    help="Costs below this many USD count as this.",
)
@click.option("--prior-source", type=click.Choice(["shipped", "measured"]), default=None, help="Pin the prior source.")
@click.option("--prior-weight", type=click.FloatRange(0), default=None, metavar="K", help="Pin the prior weight.")
@click.option("--exploration", type=click.FloatRange(0, 1), default=None, metavar="EPS", help="Pin exploration.")
@click.option(
    "--min-exploration",
    type=click.FloatRange(0, 1),
    default=defaults.MIN_EXPLORATION,
    show_default=True,
    metavar="EPS",
    help="Floor of the searched exploration grid (0: the loop may stop trying non-greedy configs).",
)
@click.option(
    "--half-life-days",
    "half_life",
    default=None,
    metavar="H|inf",
    callback=_half_life,
    help="Pin the recency half-life in days (inf: no recency weighting).",
)
@click.option(
    "--min-samples",
    type=click.IntRange(0),
    default=None,
    metavar="N",
    help="Evidence gate: ratings a learned choice needs (default: shipped.json's, else 3).",
)
@click.option(
    "--min-quality",
    type=click.FloatRange(0, 1),
    default=None,
    metavar="Q",
    help="Quality floor: the best objective among configs of quality >= Q, else the highest quality.",
)
@click.option("--thread", default=None, help="Fit only the tasks of this thread.")
@click.option("--since", default=None, metavar="DATE", callback=_since, help="Fit only tasks opened since DATE.")
@click.option("--no-compact", is_flag=True, help="Do not compact the streams first.")
@click.option(
    "--no-evaluate",
    is_flag=True,
    help="Refit the table on every task with the current constants (the live table's, else shipped.json's); "
    "no held-out evaluation, no page.",
)
@click.option("--wait", is_flag=True, help="Wait for a running fit on this home instead of exiting.")
@click.option("--no-prm", is_flag=True, help="No PRM fill-in ratings from attempt traces.")
@click.option(
    "--pass-threshold",
    type=click.FloatRange(0, 1),
    default=defaults.PASS_THRESHOLD,
    show_default=True,
    help="Escalation ladders: a rung whose gate rating is below this escalates to the next.",
)
@click.option(
    "--ladder-target",
    type=click.Choice(["best-single"]),
    default=None,
    help="Cheapest ladder whose validated quality reaches the best single config's (the default).",
)
@click.option(
    "--ladder-budget",
    type=click.FloatRange(0, min_open=True),
    default=None,
    metavar="USD",
    help="Instead: the best validated quality within this mean cost per task.",
)
@click.option("--no-writeback", is_flag=True, help="Ignore logged route.decided events (no decision writeback).")
@click.option("--no-render", is_flag=True, help="Write stats.json only; do not render the case-study page.")
@click.option("--credit", default=None, metavar="TEXT", help="Where the data came from, shown on the case-study page.")
@store_options(writer=True, as_of=True)
@quiet_option
@json_option
@handle_errors
def fit(
    home: str | None,
    split: float,
    seed: int,
    case_study: str,
    shipped: str | None,
    objective: Literal["quality_per_dollar", "utility", "quality"] | None,
    lambda_: float | None,
    cost_floor: float,
    prior_source: Literal["shipped", "measured"] | None,
    prior_weight: float | None,
    exploration: float | None,
    min_exploration: float,
    half_life: float | Literal["inf"] | None,
    min_samples: int | None,
    min_quality: float | None,
    thread: str | None,
    since: datetime | None,
    no_compact: bool,
    no_evaluate: bool,
    wait: bool,
    no_prm: bool,
    pass_threshold: float,
    ladder_target: str | None,
    ladder_budget: float | None,
    no_writeback: bool,
    no_render: bool,
    credit: str | None,
    quiet: bool,
    as_json: bool,
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

    if ladder_target is not None and ladder_budget is not None:
        raise click.UsageError("--ladder-target best-single and --ladder-budget USD exclude each other")
    options = FitOptions(
        split=split,
        seed=seed,
        case_study=case_study,
        shipped=shipped,
        objective=objective,
        lambda_=lambda_,
        cost_floor_usd=cost_floor,
        prior_source=prior_source,
        prior_weight=prior_weight,
        exploration=exploration,
        min_exploration=min_exploration,
        half_life_days=half_life,
        min_samples=min_samples,
        min_quality=min_quality,
        thread=thread,
        since=since,
        no_compact=no_compact,
        evaluate=not no_evaluate,
        wait=wait,
        prm=not no_prm,
        pass_threshold=pass_threshold,
        ladder_budget_usd=ladder_budget,
        writeback=not no_writeback,
        credit=credit,
    )
    result = run_fit(
        home,
        options,
        progress=not quiet and not as_json and sys.stderr.isatty(),
        command=options.command_line(home),
        render=not no_render,
    )
    if as_json:
        emit_json(result.stats.to_json_dict())
        return
    for line in result.summary_lines():
        click.echo(line)


# --------------------------------------------------------------------------- case-study / compare
@cli.command("case-study")
@home_option
@json_option
@click.argument("name")
@handle_errors
def case_study(home: str | None, as_json: bool, name: str) -> None:
    """Render case-studies/NAME/index.html and README.md (and SVG figures) from its stats.json alone.

    \b
    Example:
      fit-routing --home . --case-study routing-by-rating
      ratings case-study routing-by-rating --home .
    """
    from ..casestudy import render_case_study

    rendered = render_case_study(home, name)
    if as_json:
        emit_json(rendered.summary())
    else:
        click.echo(f"wrote {rendered.directory / 'index.html'} ({', '.join(rendered.files[1:])})")


@cli.command()
@home_option
@click.option(
    "--shipped",
    type=click.Path(dir_okay=False),
    default=None,
    help="Shipped constants and priors (default: fits/shipped.json).",
)
@table_option
@click.option(
    "--stats",
    type=click.Path(dir_okay=False),
    default=None,
    help="Case-study stats (default: the one the table points to, else case-studies/routing-by-rating/stats.json).",
)
@click.option("--previous", is_flag=True, help="Also compare the table with the previous fit in fits/history/.")
@json_option
@handle_errors
def compare(
    home: str | None, shipped: str | None, table: str | None, stats: str | None, previous: bool, as_json: bool
) -> None:
    """Shipped against fitted constants: held-out hit rates, the published choice, disagreeing priors.

    \b
    Example:
      ratings compare --home .
      ratings compare --previous --json
    """
    from ..commands.compare import compare as run_compare

    result = run_compare(home, shipped=shipped, table=table, stats=stats, previous=previous)
    if as_json:
        emit_json(result.to_json_dict())
    else:
        click.echo(result.text())
