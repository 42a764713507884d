"""The ``ratings`` command line: a thin layer over the library.

Each command parses its options, calls one library function and turns the
library's exceptions into a message and an exit code (0 ok, 1 failed check,
2 bad input or usage). Heavy libraries (polars, duckdb, pyarrow, scipy,
matplotlib) are imported inside the commands that need them, never here.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import wraps
from typing import Any, Literal

import click

from .errors import InvalidBatch, PipelineError

# --------------------------------------------------------------------------- shared options
home_option = click.option(
    "--home",
    "home",
    type=click.Path(file_okay=False),
    default=None,
    help="Home directory (default: $RATINGS_HOME, else the current directory).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for programs instead of a table.")
quiet_option = click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
table_option = click.option(
    "--table",
    "table",
    type=click.Path(dir_okay=False),
    default=None,
    help="Routing table file (default: <home>/fits/routing-table.json).",
)
fsync_option = click.option(
    "--fsync",
    type=click.Choice(["always", "batch", "never"]),
    default="batch",
    show_default=True,
    help="fsync after every line, once per batch, or never.",
)


def seed_option(default: int | None, help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--seed N`` with this command's default and meaning."""
    return click.option("--seed", type=int, default=default, show_default=default is not None, help=help)


def store_options(*, writer: bool = False, as_of: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--store URI`` and ``--storage-option KEY=VALUE`` (plus ``--writer`` / ``--as-of`` where asked) for a command
    that reads or writes the store; the command body runs with that store configured (pipeline.store.location)."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            from .store.location import StoreConfig, configured, parse_storage_options

            try:
                config = StoreConfig(
                    uri=kwargs.pop("store_uri"),
                    storage_options=parse_storage_options(kwargs.pop("storage_option")),
                    writer=kwargs.pop("writer") if writer else None,
                    as_of=kwargs.pop("as_of") if as_of else None,
                )
            except PipelineError as exc:
                click.echo(f"error: {exc}", err=True)
                sys.exit(exc.exit_code)
            with configured(config):
                return fn(*args, **kwargs)

        options = [
            click.option(
                "--store",
                "store_uri",
                default=None,
                envvar="RATINGS_STORE",
                metavar="URI",
                help="The store: a local path or s3://, gs://, az:// URI (default: $RATINGS_STORE, else <home>/store).",
            ),
            click.option(
                "--storage-option",
                "storage_option",
                multiple=True,
                metavar="KEY=VALUE",
                help="An object-store setting for delta-rs (repeat), e.g. AWS_ENDPOINT_URL=http://127.0.0.1:9000.",
            ),
        ]
        if writer:
            options.append(
                click.option(
                    "--writer",
                    default=None,
                    metavar="NAME",
                    help="This home's name in the store (default: the name it first used, else the host name).",
                )
            )
        if as_of:
            options.append(
                click.option(
                    "--as-of",
                    "as_of",
                    default=None,
                    metavar="VERSION|TIME",
                    help="Read the store as it was at this table version or time (RFC 3339 or a date).",
                )
            )
        for option in reversed(options):
            wrapper = option(wrapper)
        return wrapper

    return decorate


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, ensure_ascii=False, allow_nan=False))


def print_table(rows: list[dict[str, Any]], columns: list[str] | None = None) -> None:
    """A plain aligned text table for people."""
    if not rows:
        click.echo("(no rows)")
        return
    columns = columns or list(rows[0])
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    click.echo("  ".join("-" * w for w in widths))
    for row in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def handle_errors(fn: Callable) -> Callable:
    """Turn library errors into one line per problem on stderr and the error's exit code."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except InvalidBatch as exc:
            for err in exc.errors:
                click.echo(err.message(), err=True)
            named = f" (the first {len(exc.errors)} named above)" if exc.total > len(exc.errors) else ""
            click.echo(f"nothing appended: {exc.total} invalid event(s){named}", err=True)
            sys.exit(2)
        except PipelineError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except BrokenPipeError:  # the reader went away (`ratings sql ... | head`): nothing to say to it
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
            sys.exit(1)
        except OSError as exc:  # an unwritable home, a full disk: the environment failed, not the input
            click.echo(f"error: {os_error_line(exc)}", err=True)
            sys.exit(1)

    return wrapper


def os_error_line(exc: OSError) -> str:
    """One line for an I/O failure: what failed, on which file, and the notes the library added (what was kept)."""
    what = exc.strerror or str(exc) or type(exc).__name__
    if exc.filename is not None:
        what += f": {exc.filename}"
    notes = getattr(exc, "__notes__", [])
    return what + (f" ({'; '.join(notes)})" if notes else "")


@contextmanager
def json_errors(as_json: bool, **shape: Any) -> Iterator[None]:
    """With ``--json``, report a failure as one JSON object on stdout (``shape`` plus ``errors`` or ``error``)
    and exit with its code; without it, let :func:`handle_errors` print it for people."""
    if not as_json:
        yield
        return
    try:
        yield
    except InvalidBatch as exc:
        emit_json({**shape, "errors": [e.as_json() for e in exc.errors], "invalid": exc.total})
        sys.exit(exc.exit_code)
    except PipelineError as exc:
        emit_json({**shape, "error": str(exc)})
        sys.exit(exc.exit_code)
    except OSError as exc:
        emit_json({**shape, "error": os_error_line(exc)})
        sys.exit(1)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Ratings pipeline: append events, compact them, fit routing, route.

    \b
    Example:
      ratings append '{"type":"task.opened","task":"T-1","region":"implement"}'
      fit-routing --home .
    """


# --------------------------------------------------------------------------- append / repair
@cli.command()
@home_option
@fsync_option
@click.option(
    "--max-line-bytes",
    type=click.IntRange(min=1),
    default=1 << 20,
    show_default=True,
    help="Reject lines (as given and as stored, with id and at) longer than this.",
)
@click.option(
    "--allow-type",
    "allow_types",
    multiple=True,
    metavar="NAME",
    help="Keep events of this unknown type although it is one edit away from a v1 type (repeat).",
)
@json_option
@click.argument("events", nargs=-1)
@handle_errors
def append(
    home: str | None,
    fsync: str,
    max_line_bytes: int,
    allow_types: tuple[str, ...],
    as_json: bool,
    events: tuple[str, ...],
) -> None:
    """Append events (JSON objects) to the task and rating streams.

    Reads NDJSON from stdin when no EVENTS are given. The whole batch is
    validated first: one bad line and nothing is appended (exit 2, one
    message per bad line naming each of its problems). Events without `id`
    or `at` get a ULID and the current time; each goes to the tasks or
    ratings stream by its type. A type one edit away from a v1 type
    (task.opend) is refused as a typo unless --allow-type names it; other
    unknown types are kept. With --json, the result or the errors as JSON.

    \b
    Example:
      ratings append '{"type":"task.rated","task":"T-1","config":{"cli":"claude-code","route":"anthropic","model":"opus","effort":"high"},"rater":{"kind":"gate","name":"pytest"},"score":1}'
      cat events.ndjson | ratings append --fsync always
    """  # noqa: E501  # the example event is one line, as a reader copies it into a shell
    from .events import nearest_type
    from .streams import append as append_events

    if events:
        source, lines = "<arg>", [e.encode("utf-8", "surrogateescape") for e in events]
    else:
        source, lines = "<stdin>", sys.stdin.buffer.read().split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
    with json_errors(as_json, appended=0):
        result = append_events(
            home,
            lines,
            fsync=fsync,  # type: ignore[arg-type]  # click.Choice checked it
            source=source,
            max_bytes=max_line_bytes,
            allow_types=allow_types,
        )
    for kind, count in sorted(result.unknown_types.items()):
        near = nearest_type(kind)
        hint = f"; did you mean {near[1]}?" if near is not None and kind not in allow_types else ""
        click.echo(
            f"note: {count} event(s) of type {kind!r}, which v1 does not know: kept (family 'other'), "
            f"ignored by the fit{hint}",
            err=True,
        )
    if as_json:
        emit_json(result.summary())
    else:
        per = ", ".join(f"{n} to {s}" for s, n in result.streams.items()) or "nothing"
        click.echo(f"appended {result.appended} event(s): {per}")


@cli.command()
@home_option
@json_option
@handle_errors
def repair(home: str | None, as_json: bool) -> None:
    """Recover every stream: move torn tails and batches cut short to quarantine/.

    A batch whose writer died is completed when all of it is on disk (only
    its end line missing), else moved whole to quarantine/ (all or nothing).

    \b
    Example:
      ratings repair --home ./myteam
    """
    from .streams import repair as repair_streams

    done = repair_streams(home)
    if as_json:
        emit_json({"quarantined": done.quarantined, "completed": done.completed})
        return
    for path in done.quarantined:
        click.echo(f"quarantined {path}")
    for batch in done.completed:
        click.echo(f"completed batch {batch}")
    if not done.quarantined and not done.completed:
        click.echo("nothing to repair: no torn tail, no batch cut short")


@cli.command()
@home_option
@json_option
@handle_errors
def init(home: str | None, as_json: bool) -> None:
    """Start a home of your own: its folders and a fits/shipped.json template.

    Every field of the template is present: the constants at the code
    defaults, and each config key and prior selector a <...> placeholder
    that the fit ignores (and names) until you replace it. Nothing that
    exists is overwritten.

    \b
    Example:
      ratings init --home ./myteam
      ratings init --json
    """
    from .init_home import init_home

    result = init_home(home)
    if as_json:
        emit_json(result.summary())
    else:
        click.echo(result.text())


# --------------------------------------------------------------------------- route
@cli.command()
@home_option
@click.option("--region", required=True, help="The task's region (unknown regions use the global pool '*').")
@click.option(
    "--pool",
    "pool",
    multiple=True,
    metavar="KEY",
    help="A candidate config key (repeat; default: the region's members).",
)
@click.option("--role", default=None, help="The task's role (implementer, reviewer, researcher, ...).")
@click.option(
    "--failed", "failed", multiple=True, metavar="KEY", help="A config that already failed on the task (repeat)."
)
@click.option("--policy", default=None, help="Routing policy (default: learning_governed).")
@seed_option(None, "Seed of the exploration draw (default: no exploration, greedy).")
@click.option("--explain", is_flag=True, help="Add the table rows and the gate checks that decided it.")
@click.option("--log", "log", is_flag=True, help="Append the decision as a route.decided event (needs --task).")
@click.option("--task", default=None, help="The task id the logged decision belongs to.")
@table_option
@json_option
@handle_errors
def route(
    home: str | None,
    region: str,
    pool: tuple[str, ...],
    role: str | None,
    failed: tuple[str, ...],
    policy: str | None,
    seed: int | None,
    explain: bool,
    log: bool,
    task: str | None,
    table: str | None,
    as_json: bool,
) -> None:
    """Decide which configuration does a task, from the published routing table.

    Prints the decision for people: the config, the policy, why (the gate's test in
    words), the predicted quality, the propensity and the candidates; with --json
    the same as one object (config, policy, reason, explored, table_version,
    predicted_quality, propensity, candidates). A --pool key the table does not
    know is refused (exit 2). --log --task ID warns on stderr when the home has
    never seen the task.

    \b
    Example:
      ratings route --region implement --role implementer
      ratings route --region review --pool codex/openai/gpt-5/medium --pool kimi/moonshot/k2/- --explain
      ratings route --region implement --seed 7 --log --task T-42 --json
    """
    from .routing.decide import decide
    from .routing.words import decision_lines

    if log and not task:
        raise click.UsageError("--log needs --task ID (the task the decision is logged for)")
    out = decide(
        home,
        region=region,
        pool=pool,
        role=role,
        failures=failed,
        policy=policy,
        seed=seed,
        explain=explain,
        table=table,
        log_task=task if log else None,
    )
    for warning in out.pop("warnings", []):
        click.echo(f"warning: {warning}", err=True)
    if as_json:
        emit_json(out)
        return
    for line in decision_lines(out):
        click.echo(line)


@cli.command("table")
@home_option
@table_option
@json_option
@handle_errors
def table_(home: str | None, table: str | None, as_json: bool) -> None:
    """Print the published routing table for people: per region the choice, its quality, cost and n, the
    runner-up, the ladder, and why (the evidence gate's reason, with its numbers).

    \b
    Example:
      ratings table --home ./myteam
      ratings table --json | jq '.regions[] | {region, config: .choice.config}'
    """
    from .routing.decide import table_path
    from .routing.summary import summarize
    from .routing.table import load
    from .routing.words import table_lines

    summary = summarize(load(table_path(home, table)))
    if as_json:
        emit_json(summary.model_dump(mode="json"))
        return
    for line in table_lines(summary):
        click.echo(line)


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
    from .home import case_study_name

    try:
        return case_study_name(value)
    except PipelineError as exc:
        raise click.BadParameter(str(exc)) from None


@cli.command("fit")
@home_option
@click.option(
    "--split",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.7,
    show_default=True,
    help="Fraction of tasks (in time order) learned; the rest is held out.",
)
@seed_option(0, "Seed of the bootstrap and replay draws.")
@click.option(
    "--case-study",
    "case_study",
    default="routing-by-rating",
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
    default=0.000001,
    show_default=True,
    help="Costs below this many USD count as this.",
)
@click.option("--prior-source", type=click.Choice(["shipped", "measured"]), default=None, help="Pin the prior source.")
@click.option("--prior-weight", type=click.FloatRange(0), default=None, metavar="K", help="Pin the prior weight.")
@click.option("--exploration", type=click.FloatRange(0, 1), default=None, metavar="EPS", help="Pin exploration.")
@click.option(
    "--min-exploration",
    type=click.FloatRange(0, 1),
    default=0.05,
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
@click.option("--wait", is_flag=True, help="Wait for a running fit on this home instead of exiting.")
@click.option("--no-prm", is_flag=True, help="No PRM fill-in ratings from attempt traces.")
@click.option(
    "--pass-threshold",
    type=click.FloatRange(0, 1),
    default=0.5,
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
      fit-routing --home build/lcb --case-study livecodebench --credit "LiveCodeBench leaderboard data"
    """
    from .nightly.job import run_fit
    from .nightly.options import FitOptions

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
    from .casestudy import render_case_study

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
    from .compare import compare as run_compare

    result = run_compare(home, shipped=shipped, table=table, stats=stats, previous=previous)
    if as_json:
        emit_json(result.to_json_dict())
    else:
        click.echo(result.text())


# --------------------------------------------------------------------------- doctor / pin
@cli.command()
@home_option
@store_options()
@json_option
@handle_errors
def doctor(home: str | None, as_json: bool) -> None:
    """Check that the learning loop is closed: code defaults [CODE] and this home [LIVE].

    Prints every check, then LOOP: CLOSED, or LOOP: OPEN with the reasons (exit 1).

    \b
    Example:
      ratings doctor --home ./myteam
      ratings doctor --json | jq .reasons
    """
    from .doctor import doctor as run_doctor

    report = run_doctor(home)
    if as_json:
        emit_json(report.model_dump(mode="json"))
    else:
        for check in report.checks:
            click.echo(f"[{check.kind}] {check.status:<6} {check.name}: {check.detail}")
        click.echo("LOOP: CLOSED" if report.closed else "LOOP: OPEN")
        for reason in report.reasons:
            click.echo(f"  - {reason}")
    if not report.closed:
        sys.exit(1)


@cli.command()
@home_option
@click.option("--latest", is_flag=True, help="Remove the pin and publish the newest fit in fits/history/ again.")
@json_option
@click.argument("version", required=False)
@handle_errors
def pin(home: str | None, latest: bool, as_json: bool, version: str | None) -> None:
    """Pin the published routing table to a past fit in fits/history/, or follow the newest fit again.

    The pin is recorded in fits/pin.json; `ratings doctor` reports the table as pinned, not stale.

    \b
    Example:
      ratings pin 3f2a9c0d1e7b4a65
      ratings pin --latest
    """
    from .pin import pin as pin_table

    if latest == (version is not None):
        raise click.UsageError("give either VERSION or --latest")
    result = pin_table(home, version, latest=latest)
    if as_json:
        emit_json(result)
    elif result["pinned"]:
        click.echo(f"pinned routing table {result['pinned']} (from fits/{result['history']})")
    else:
        click.echo(f"unpinned; published the newest fit {result['table']} (from fits/{result['history']})")


# --------------------------------------------------------------------------- compact / sql / verify / vacuum / import
@cli.command()
@home_option
@click.option(
    "--merge-threshold",
    type=click.IntRange(min=2),
    default=16,
    show_default=True,
    help="Merge a partition's files (Delta's optimize) when it holds more than this many.",
)
@click.option(
    "--rebuild",
    is_flag=True,
    help="Move the local table aside and rebuild it from the streams (after `ratings verify` found damage).",
)
@store_options(writer=True)
@json_option
@quiet_option
@handle_errors
def compact(home: str | None, merge_threshold: int, rebuild: bool, as_json: bool, quiet: bool) -> None:
    """Compact the new lines of the streams into the store's events table: one Delta commit per run.

    Incremental and idempotent: a run with no new input commits nothing, and a
    rerun after a crash lands every event exactly once. Invalid lines and id
    conflicts go to deadletter/<stream>.jsonl. A store in the old manifest
    format is moved aside and rebuilt from the streams on the first run.

    \b
    Example:
      ratings compact --home ./myteam
      ratings compact --json -q
      ratings compact --store s3://team-ratings/store --writer ci-runner-7
      ratings verify && ratings compact --rebuild
    """
    from .compact import compact as compact_store

    result = compact_store(
        home, progress=not quiet and sys.stderr.isatty(), merge_threshold=merge_threshold, rebuild=rebuild
    )
    for note in result.notes:
        click.echo(note, err=True)
    if as_json:
        emit_json(result.summary())
        return
    print_table([{"stream": s, **o.model_dump()} for s, o in result.streams.items()])
    state = f"version {result.version}" if result.created else "no new input: nothing committed"
    rows = ", ".join(f"{f} {n}" for f, n in result.rows.items() if n) or "no rows"
    click.echo(
        f"{state} (writer {result.writer}); {result.files_written} file(s) written, {result.files_merged} merged; "
        f"store: {rows}"
    )


@cli.command()
@home_option
@store_options(as_of=True)
@click.option("--schema", "schema", is_flag=True, help="List the views and their columns instead of running a query.")
@json_option
@click.argument("query", required=False)
@handle_errors
def sql(home: str | None, schema: bool, as_json: bool, query: str | None) -> None:
    """Run a read-only SQL query on the store's views, at one table version.

    Views: tasks, attempts, ratings, rejections, retractions, decisions,
    closures, other (one row per event id; --schema lists their columns).
    The query can read the table's live files and nothing else, and cannot
    write files. Note: quote the column "at" (a DuckDB keyword).

    \b
    Example:
      ratings sql 'SELECT config_key, avg(score) AS q, count(*) AS n FROM ratings GROUP BY 1 ORDER BY q DESC'
      ratings sql --json 'SELECT task, "at" FROM tasks LIMIT 5'
      ratings sql --as-of 1 'SELECT count(*) FROM ratings'
      ratings sql --as-of 2026-01-31T00:00:00Z 'SELECT count(*) FROM ratings'
      ratings sql --schema
    """
    if schema == (query is not None):
        raise click.UsageError("give either a QUERY or --schema")
    if schema:
        from .families import schema_rows

        rows = schema_rows()
    else:
        from .store import run_sql

        rows = run_sql(home, query or "")
    if as_json:
        emit_json(rows)
    else:
        print_table(rows)


@cli.command()
@home_option
@store_options(as_of=True)
@json_option
@handle_errors
def verify(home: str | None, as_json: bool) -> None:
    """Check the store against its commit log and this home's streams (exit 1 naming each problem).

    Every live file exists with the size and rows the log records; this
    writer's committed stream ranges are contiguous and hash as recorded; dead
    letters and outcome counts agree; the stored events equal the table's rows.
    Ids stored twice by concurrent writers are listed (readers keep one row).

    \b
    Example:
      ratings verify --home ./myteam
      ratings verify --store s3://team-ratings/store --json
    """
    from .verify import verify as verify_store

    result = verify_store(home)
    if as_json:
        emit_json(result.summary())
    else:
        for problem in result.problems:
            click.echo(f"problem: {problem}", err=True)
        if result.duplicate_ids:
            shown = ", ".join(result.duplicate_ids[:10])
            count = len(result.duplicate_ids)
            click.echo(f"note: {count} id(s) stored twice by concurrent commits (readers keep one row): {shown}")
        if result.unreferenced_files:
            click.echo(
                f"note: {result.unreferenced_files} file(s) under the table that this version does not list "
                "(replaced by optimize, or of runs that never committed); `ratings vacuum` removes them past "
                "the retention"
            )
        if result.ok:
            state = f"version {result.version}" if result.version is not None else "no table yet"
            click.echo(f"ok: {state}, {result.commits} compaction commit(s), {result.files} file(s) verified")
    if not result.ok:
        sys.exit(1)


@cli.command()
@home_option
@click.option(
    "--retain-hours",
    type=click.IntRange(min=0),
    default=168,
    show_default=True,
    help="Keep the files every version of the last H hours needs (time travel that far back keeps working).",
)
@store_options()
@json_option
@handle_errors
def vacuum(home: str | None, retain_hours: int, as_json: bool) -> None:
    """Remove files of the store no retained version needs, and files no version references.

    Prints the store's size before and after.

    \b
    Example:
      ratings vacuum --home ./myteam
      ratings vacuum --retain-hours 0 --json
    """
    from .store.upkeep import vacuum as vacuum_store

    result = vacuum_store(home, retain_hours=retain_hours)
    if as_json:
        emit_json(result.summary())
    else:
        click.echo(
            f"removed {result.files_removed} file(s): store {_size(result.bytes_before)} before, "
            f"{_size(result.bytes_after)} after ({_size(result.live_bytes)} in the live files of version "
            f"{result.version}; versions of the last {result.retain_hours} h kept)"
        )


def _size(n: int) -> str:
    """Bytes for people: ``812 B``, ``3.4 MiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{value:,.1f} GiB"


@cli.command(name="import")
@home_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["long"]),
    default="long",
    show_default=True,
    help="Table layout: long = one row per (task, config) result.",
)
@click.option("--rater-kind", type=click.Choice(["gate", "reviewer", "human"]), default="gate", show_default=True)
@click.option("--rater-name", default=None, help="Rater name (default: the file name without extensions).")
@click.option("--thread", default=None, help="Thread name recorded on each task.opened.")
@click.option("--skip-bad", is_flag=True, help="Dead-letter bad rows instead of failing.")
@fsync_option
@quiet_option
@json_option
@click.argument("file", type=click.Path(dir_okay=False))
@handle_errors
def import_(
    home: str | None,
    fmt: str,
    rater_kind: str,
    rater_name: str | None,
    thread: str | None,
    skip_bad: bool,
    fsync: str,
    quiet: bool,
    as_json: bool,
    file: str,
) -> None:
    """Import a long table (CSV, CSV.gz or Parquet) of past results as events.

    Columns: task_id, config, score, cost_usd, region, at; others become task
    labels. Rows with a blank score are skipped and counted. Ids come from the
    row content, so importing a file twice adds nothing after compaction.
    The table is streamed: every row is checked first (a bad row and nothing
    is appended, unless --skip-bad), then appended in chunks, each one batch.

    \b
    Example:
      ratings import data/routerbench-zero-shot.csv.gz --rater-name routerbench
      ratings import results.parquet --rater-kind human --skip-bad --json
    """
    from .imports import import_table

    with _progress_bar("importing", quiet or as_json) as advance:
        result = import_table(
            home,
            file,
            fmt=fmt,  # type: ignore[arg-type]  # click.Choice checked it
            rater_kind=rater_kind,
            rater_name=rater_name,
            thread=thread,
            skip_bad=skip_bad,
            fsync=fsync,  # type: ignore[arg-type]  # click.Choice checked it
            progress=advance,
        )
    if as_json:
        emit_json(result.summary())
    else:
        click.echo(
            f"imported {result.imported_rows} of {result.rows} row(s) ({result.tasks} task(s)): "
            f"{result.appended} event(s) appended; {result.skipped_blank_score} blank score(s) skipped, "
            f"{result.bad_rows} bad row(s) dead-lettered"
        )


@contextmanager
def _progress_bar(label: str, quiet: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A progress callback ``(done, total)`` drawing click's bar on a terminal; None in pipes or when quiet."""
    if quiet or not sys.stderr.isatty():
        yield None
        return
    bar: Any = None
    shown = 0

    def advance(done: int, total: int) -> None:
        nonlocal bar, shown
        if bar is None:
            bar = click.progressbar(length=total, label=label, file=sys.stderr)
            bar.__enter__()
        bar.update(done - shown)
        shown = done

    try:
        yield advance
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)


# --------------------------------------------------------------------------- smoke
@cli.command()
@click.option(
    "--tasks", type=click.IntRange(min=50), default=300, show_default=True, help="Tasks in the simulated backlog."
)
@click.option(
    "--evidence-tasks",
    type=click.IntRange(min=1),
    default=None,
    help="Tasks of new evidence (default: max(40, tasks / 3)).",
)
@seed_option(0, "Simulator and fit seed.")
@click.option(
    "--keep",
    type=click.Path(file_okay=False),
    default=None,
    help="Run in this empty directory and keep it (default: a temporary directory, removed).",
)
@json_option
@handle_errors
def smoke(tasks: int, evidence_tasks: int | None, seed: int, keep: str | None, as_json: bool) -> None:
    """Prove the loop learns: simulate, fit, route, add evidence for another config, fit, route again.

    Runs in a temporary directory and never touches your home. Prints
    VERDICT: LEARNING OBSERVED (exit 0) or VERDICT: NO CHANGE with why (exit 1).

    \b
    Example:
      ratings smoke
      ratings smoke --tasks 500 --seed 3 --keep /tmp/smoke-home
    """
    from .smoke import smoke as run_smoke

    result = run_smoke(
        tasks=tasks, evidence_tasks=evidence_tasks, seed=seed, keep=keep, say=None if as_json else click.echo
    )
    if as_json:
        emit_json(result.model_dump(mode="json"))
    else:
        click.echo(result.verdict)
        if not result.learned:
            gate = result.after.get("gate") or {}
            click.echo(f"  gate checks after the evidence: {json.dumps(gate, ensure_ascii=False)}")
    if not result.learned:
        sys.exit(1)


# --------------------------------------------------------------------------- simulate
@cli.command()
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False),
    required=True,
    help="Home to write: streams/, fits/shipped.json and the truth file.",
)
@click.option(
    "--preset",
    "preset_name",
    type=click.Choice(["backlog", "scale"]),
    default="backlog",
    show_default=True,
    help="Built-in scenario (ignored with --scenario).",
)
@click.option(
    "--scenario",
    "scenario_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="A scenario as JSON (see pipeline.simulate.Scenario) instead of a preset.",
)
@click.option("--tasks", type=click.IntRange(min=1), default=None, help="Number of tasks (default: the scenario's).")
@seed_option(0, "Same seed, same bytes.")
@click.option(
    "--corrupt",
    type=click.FloatRange(0.0, 0.25),
    default=0.0,
    show_default=True,
    help="Rate per line of torn lines, duplicates, conflicting duplicates and invalid lines each.",
)
@click.option(
    "--gate-noise",
    type=click.FloatRange(0.0, 0.5, max_open=True),
    default=None,
    help="Probability that a gate rating disagrees with the true outcome (default: the scenario's).",
)
@click.option(
    "--truth",
    "truth_path",
    default="truth.json",
    show_default=True,
    help="Where to write the truth, relative to --out (never read by the fitter).",
)
@click.option("--force", is_flag=True, help="Replace existing non-empty streams in --out.")
@json_option
@handle_errors
def simulate(
    out: str,
    preset_name: Literal["backlog", "scale"],
    scenario_file: str | None,
    tasks: int | None,
    seed: int,
    corrupt: float,
    gate_noise: float | None,
    truth_path: str,
    force: bool,
    as_json: bool,
) -> None:
    """Write a simulated backlog with known truth: real v1 streams plus truth.json.

    Deterministic for a seed. The logging policy routed with the shipped
    constants (written to fits/shipped.json), so configurations believed strong
    are over-represented: the selection bias a fit must see through.

    \b
    Example:
      ratings simulate --out /tmp/team --tasks 5000 --seed 1
      ratings simulate --out /tmp/big --preset scale --tasks 3000000 --json
      ratings simulate --out /tmp/broken --corrupt 0.01 --gate-noise 0.2
    """
    from .simulate import load_scenario, preset
    from .simulate import simulate as run_simulation

    scenario = load_scenario(scenario_file) if scenario_file else preset(preset_name)
    update = {k: v for k, v in (("tasks", tasks), ("gate_noise", gate_noise)) if v is not None}
    if update:
        scenario = type(scenario).model_validate({**scenario.model_dump(), **update})
    result = run_simulation(out, scenario, seed=seed, corrupt=corrupt, truth_path=truth_path, overwrite=force)
    if as_json:
        emit_json(result.summary())
    else:
        print_table(result.rows(), ["what", "count"])
        click.echo(
            f"wrote {result.out}/streams and {result.truth_path} in {result.seconds:.2f} s "
            f"({result.events_per_second:,.0f} events/s)"
        )


def main() -> None:
    cli(prog_name="ratings")


def fit_routing_main() -> None:
    """``fit-routing``: the nightly job, the same command as ``ratings fit``."""
    command = cli.commands.get("fit")
    if command is None:  # pragma: no cover - the fitter registers ``fit``
        click.echo("error: the fit command is not available in this build", err=True)
        sys.exit(2)
    command.main(prog_name="fit-routing", help_option_names=["-h", "--help"])


if __name__ == "__main__":
    main()
