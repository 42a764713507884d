"""The ``ratings`` command line: a thin layer over the library.

Each command parses its options, calls one library function and turns the
library's exceptions into a message and an exit code (0 ok, 1 failed check,
2 bad input or usage). Heavy libraries (polars, duckdb, pyarrow, scipy,
matplotlib) are imported inside the commands that need them, never here.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any

import click

from .errors import InvalidBatch, PipelineError

# --------------------------------------------------------------------------- shared options
home_option = click.option(
    "--home", "home", type=click.Path(file_okay=False), default=None,
    help="Home directory (default: $RATINGS_HOME, else the current directory).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for programs instead of a table.")
quiet_option = click.option("--quiet", "-q", is_flag=True, help="No progress bar.")


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
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip())
    click.echo("  ".join("-" * w for w in widths))
    for row in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())


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
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except InvalidBatch as exc:
            for err in exc.errors:
                click.echo(err.message(), err=True)
            click.echo(f"nothing appended: {len(exc.errors)} invalid event(s)", err=True)
            sys.exit(2)
        except PipelineError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)

    return wrapper


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
@click.option("--fsync", type=click.Choice(["always", "batch", "never"]), default="batch", show_default=True,
              help="fsync after every line, once per batch, or never.")
@click.option("--max-line-bytes", type=click.IntRange(min=1), default=1 << 20, show_default=True,
              help="Reject lines longer than this.")
@json_option
@click.argument("events", nargs=-1)
@handle_errors
def append(home, fsync, max_line_bytes, as_json, events):
    """Append events (JSON objects) to the task and rating streams.

    Reads NDJSON from stdin when no EVENTS are given. The whole batch is
    validated first: one bad line and nothing is appended (exit 2).

    \b
    Example:
      ratings append '{"type":"task.rated","task":"T-1","config":{"cli":"claude-code","route":"anthropic","model":"opus","effort":"high"},"rater":{"kind":"gate","name":"pytest"},"score":1}'
      cat events.ndjson | ratings append --fsync always --json
    """
    from .errors import InvalidEvent
    from .events import parse_line
    from .streams import append as append_events

    if events:
        source, lines = "<arg>", [e.encode("utf-8", "surrogateescape") for e in events]
    else:
        source, lines = "<stdin>", sys.stdin.buffer.read().split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
    parsed, errors = [], []
    for no, raw in enumerate(lines, start=1):
        try:
            parsed.append(parse_line(raw, line=no, source=source, max_bytes=max_line_bytes))
        except InvalidEvent as exc:
            errors.append(exc)
    if errors:
        raise InvalidBatch(errors)
    result = append_events(home, parsed, fsync=fsync, source=source)
    if as_json:
        emit_json(result.summary())
    else:
        per = ", ".join(f"{n} to {s}" for s, n in result.streams.items()) or "nothing"
        click.echo(f"appended {result.appended} event(s): {per}")


@cli.command()
@home_option
@json_option
@handle_errors
def repair(home, as_json):
    """Move torn tails (bytes after the last newline) of every stream to quarantine/.

    \b
    Example:
      ratings repair --home ./myteam
    """
    from .streams import repair as repair_streams

    moved = repair_streams(home)
    if as_json:
        emit_json({"quarantined": moved})
    elif moved:
        for path in moved:
            click.echo(f"quarantined {path}")
    else:
        click.echo("no torn tails")


# --------------------------------------------------------------------------- route
@cli.command()
@home_option
@click.option("--region", required=True, help="The task's region (unknown regions use the global pool '*').")
@click.option("--pool", "pool", multiple=True, metavar="KEY", help="A candidate config key (repeat; default: the region's members).")
@click.option("--role", default=None, help="The task's role (implementer, reviewer, researcher, ...).")
@click.option("--failed", "failed", multiple=True, metavar="KEY", help="A config that already failed on the task (repeat).")
@click.option("--policy", default=None, help="Routing policy (default: learning_governed).")
@click.option("--seed", type=int, default=None, help="Seed of the exploration draw (default: no exploration, greedy).")
@click.option("--explain", is_flag=True, help="Add the table rows and the gate checks that decided it.")
@click.option("--log", "log", is_flag=True, help="Append the decision as a route.decided event (needs --task).")
@click.option("--task", default=None, help="The task id the logged decision belongs to.")
@click.option("--table", "table", type=click.Path(dir_okay=False), default=None,
              help="Routing table file (default: <home>/fits/routing-table.json).")
@json_option
@handle_errors
def route(home, region, pool, role, failed, policy, seed, explain, log, task, table, as_json):
    """Decide which configuration does a task, from the published routing table.

    Prints the decision as JSON (also without --json): config, policy, reason,
    explored, table_version, predicted_quality, propensity, candidates.

    \b
    Example:
      ratings route --region implement --role implementer
      ratings route --region review --pool codex/openai/gpt-5/medium --pool kimi/moonshot/k2/- --explain
      ratings route --region implement --seed 7 --log --task T-42
    """
    from .routing.decide import decide

    if log and not task:
        raise click.UsageError("--log needs --task ID (the task the decision is logged for)")
    emit_json(decide(home, region=region, pool=pool, role=role, failures=failed, policy=policy, seed=seed,
                     explain=explain, table=table, log_task=task if log else None))


def main() -> None:
    cli(prog_name="ratings")


def fit_routing_main() -> None:
    """``fit-routing``: the nightly job, the same command as ``ratings fit``."""
    command = cli.commands.get("fit")
    if command is None:  # pragma: no cover - the fitter registers ``fit``
        click.echo("error: the fit command is not available in this build", err=True)
        sys.exit(2)
    command(prog_name="fit-routing")


if __name__ == "__main__":
    main()
