"""``ratings append``, ``repair``, ``init`` and ``import``: writing to the streams of a home."""

from __future__ import annotations

import sys
from datetime import timedelta

import click

from ..workspace import Workspace
from .common import (
    cli,
    emit_json,
    fsync_option,
    future_options,
    handle_errors,
    json_errors,
    json_option,
    progress_bar,
    quiet_option,
    workspace,
)


# --------------------------------------------------------------------------- append / repair
@cli.command()
@workspace(rule="append")
@fsync_option
@click.option(
    "--max-line-bytes",
    type=click.IntRange(1, 1 << 30),
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
@future_options
@json_option
@click.argument("events", nargs=-1)
@handle_errors
def append(
    ws: Workspace,
    fsync: str,
    max_line_bytes: int,
    allow_types: tuple[str, ...],
    as_json: bool,
    events: tuple[str, ...],
    future: timedelta | None,
) -> None:
    """Append events (JSON objects) to the task and rating streams.

    Reads NDJSON from stdin when no EVENTS are given. The whole batch is
    validated first: one bad line and nothing is appended (exit 2, one
    message per bad line naming each of its problems). Events without `id`
    or `at` get a ULID and the current time; each goes to the tasks or
    ratings stream by its type; the fields it filled are recorded in the
    line (`filled`), so a retry with the same id is recognised. A type one
    edit away from a v1 type (task.opend, Task.Opened) is refused as a typo
    unless --allow-type names it; other unknown types are kept. A time more
    than --skew (1 day) after now is refused unless --allow-future. Blank
    lines are skipped and counted. With --json, the result or the errors as
    JSON.

    \b
    Example:
      ratings append '{"type":"task.rated","task":"T-1","config":{"cli":"claude-code","route":"anthropic","model":"opus","effort":"high"},"rater":{"kind":"gate","name":"pytest"},"score":1}'
      cat events.ndjson | ratings append --fsync always
    """  # noqa: E501  # the example event is one line, as a reader copies it into a shell
    from ..streams.events import nearest_type
    from ..streams.log import append as append_events

    if events:
        source, lines = "<arg>", [e.encode("utf-8", "surrogateescape") for e in events]
    else:
        source, lines = "<stdin>", sys.stdin.buffer.read().split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
    with json_errors(as_json, appended=0):
        result = append_events(
            ws,
            lines,
            fsync=fsync,  # type: ignore[arg-type]  # click.Choice checked it
            source=source,
            max_bytes=max_line_bytes,
            allow_types=allow_types,
            future=future,
        )
    if result.blank and not as_json:
        click.echo(f"note: skipped {result.blank} blank line(s)", err=True)
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
@workspace()
@json_option
@handle_errors
def repair(ws: Workspace, as_json: bool) -> None:
    """Recover every stream: move torn tails and batches cut short to quarantine/.

    A batch whose writer died is completed when all of it is on disk (only
    its end line missing), else moved whole to quarantine/ (all or nothing).

    \b
    Example:
      ratings repair --home ./myteam
    """
    from ..streams.log import repair as repair_streams

    done = repair_streams(ws)
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
@workspace(rule="init")
@json_option
@handle_errors
def init(ws: Workspace, as_json: bool) -> None:
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
    from ..commands.init_home import init_home

    result = init_home(ws)
    if as_json:
        emit_json(result.summary())
    else:
        click.echo(result.text())


@cli.command(name="import")
@workspace(rule="create")
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
@future_options
@quiet_option
@json_option
@click.argument("file", type=click.Path(dir_okay=False))
@handle_errors
def import_(
    ws: Workspace,
    fmt: str,
    rater_kind: str,
    rater_name: str | None,
    thread: str | None,
    skip_bad: bool,
    fsync: str,
    quiet: bool,
    as_json: bool,
    file: str,
    future: timedelta | None,
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
    from ..streams.imports import import_table

    with progress_bar("importing", quiet or as_json) as advance:
        result = import_table(
            ws,
            file,
            fmt=fmt,  # type: ignore[arg-type]  # click.Choice checked it
            rater_kind=rater_kind,
            rater_name=rater_name,
            thread=thread,
            skip_bad=skip_bad,
            fsync=fsync,  # type: ignore[arg-type]  # click.Choice checked it
            progress=advance,
            future=future,
        )
    if as_json:
        emit_json(result.summary())
    else:
        click.echo(
            f"imported {result.imported_rows} of {result.rows} row(s) ({result.tasks} task(s)): "
            f"{result.appended} event(s) appended; {result.skipped_blank_score} blank score(s) skipped, "
            f"{result.bad_rows} bad row(s) dead-lettered"
        )
