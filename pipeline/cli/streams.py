"""``ratings append``, ``repair``, ``init`` and ``import``: writing to the streams of a home."""

from __future__ import annotations

import sys
from datetime import timedelta
from typing import Any

import click

from ..workspace import Workspace
from .common import (
    cli,
    config_format_option,
    emit_json,
    fsync_option,
    future_options,
    handle_errors,
    json_errors,
    json_option,
    option,
    progress_bar,
    quiet_option,
    workspace,
)


# --------------------------------------------------------------------------- append / repair
@cli.command()
@workspace(rule="append")
@fsync_option
@option(
    "--max-line-bytes",
    click.IntRange(1, 1 << 30),
    1 << 20,
    "Reject lines (as given and as stored, with id and at) longer than this.",
)
@option(
    "--allow-type",
    None,
    None,
    "Keep events of this unknown type although it is one edit away from a v1 type (repeat).",
    dest="allow_types",
    multiple=True,
    metavar="NAME",
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
@option(
    "--format",
    click.Choice(["auto", "long", "mini-ork", "otlp", "langfuse", "langsmith"]),
    "auto",
    "The source: a long table, mini-ork's state.db, OTLP/JSON GenAI traces, a Langfuse or LangSmith export; "
    "auto detects it (and says which).",
    dest="fmt",
)
@option(
    "--task-key",
    None,
    None,
    "The attribute (or mini-ork task_runs column) naming the task; default: the source's own "
    "(a mini-ork task run, an OTLP or Langfuse trace, a LangSmith root run).",
    metavar="NAME",
)
@option(
    "--region-key",
    None,
    None,
    "The attribute (or task_runs column) naming the region; default: mini-ork's task_class, else 'general'.",
    metavar="NAME",
)
@option(
    "--config-map",
    click.Path(dir_okay=False),
    None,
    "JSON: source name (config cell, lane, agent or model) -> config key cli/route/model/effort.",
    metavar="FILE",
)
@config_format_option(
    "Long tables: the config column holds config keys, model names, or auto: model names when no cell "
    "is a 4-part key (a mixed column is refused)."
)
@option(
    "--score-range",
    None,
    None,
    "Scores of the source lie in [LO, HI]: mapped linearly onto [0, 1] (else a score outside [0, 1] is a bad row).",
    metavar="LO:HI",
)
@option(
    "--label-map",
    click.Path(dir_okay=False),
    None,
    "JSON: categorical label -> score in [0, 1] (optionally per evaluation name).",
    metavar="FILE",
)
@option(
    "--rater-kind",
    click.Choice(["gate", "reviewer", "human"]),
    None,
    "Kind of the ratings whose source does not say (default: gate for long tables, reviewer for OTLP evaluations).",
)
@click.option(
    "--rater-name", default=None, help="Rater name of a long table (default: the file name without extensions)."
)
@click.option("--thread", default=None, help="Thread name recorded on each task.opened.")
@click.option(
    "--skip-bad", is_flag=True, help="Dead-letter bad rows (deadletter/import-<file>.jsonl) and import the rest."
)
@click.option("--dry-run", is_flag=True, help="Read, check and count everything; write nothing.")
@fsync_option
@future_options
@quiet_option
@json_option
@click.argument("files", nargs=-1, required=True, type=click.Path())
@handle_errors
def import_(
    ws: Workspace,
    fmt: str,
    task_key: str | None,
    region_key: str | None,
    config_map: str | None,
    config_column_format: str,
    score_range: str | None,
    label_map: str | None,
    rater_kind: str | None,
    rater_name: str | None,
    thread: str | None,
    skip_bad: bool,
    dry_run: bool,
    fsync: str,
    quiet: bool,
    as_json: bool,
    files: tuple[str, ...],
    future: timedelta | None,
) -> None:
    """Import ratings from where they already live, as events.

    FILES: a long table (CSV, CSV.gz or Parquet: task_id, config, score,
    cost_usd, region, at), a mini-ork .mini-ork/state.db (read-only), an
    OTLP/JSON(L) export of GenAI traces, or the files (or folder) of a
    Langfuse or LangSmith export. Ids come from the source's own ids, so
    importing again (or a newer export) adds only what is new; a rating the
    source changed is retracted and replaced. Every row is checked first:
    a bad row and nothing is appended, unless --skip-bad. A time more than
    --skew (1 day) after now is a bad row unless --allow-future.

    \b
    Example:
      ratings import data/routerbench-zero-shot.csv.gz --rater-name routerbench
      ratings import .mini-ork/state.db --task-key kickoff_path --dry-run
      ratings import traces.jsonl --format otlp --task-key app.task.id --region-key app.task.kind
      ratings import langfuse-export/ --label-map labels.json --json
    """
    from ..fit.shipped import load_shipped
    from ..streams.imports import ImportOptions, ScoreRange, import_source, load_maps

    with json_errors(as_json, appended=0), progress_bar("importing", quiet or as_json) as advance:
        options = ImportOptions(
            fmt=fmt,  # type: ignore[arg-type]  # click.Choice checked it
            rater_kind=rater_kind,  # type: ignore[arg-type]
            rater_name=rater_name,
            thread=thread,
            task_key=task_key,
            region_key=region_key,
            config_column_format=config_column_format,  # type: ignore[arg-type]
            maps=load_maps(config_map, label_map),
            score_range=ScoreRange.parse(score_range) if score_range is not None else None,
            skip_bad=skip_bad,
            dry_run=dry_run,
            future=future,
        )
        prices = lambda: load_shipped(ws.shipped).prices  # noqa: E731  # tokens to costs (docs/design.md, Imports)
        result = import_source(ws, files, options, prices=prices, fsync=fsync, progress=advance)  # type: ignore[arg-type]
    if as_json:
        emit_json(result.summary())
        return
    for line in summary_lines(result):
        click.echo(line)


def summary_lines(result: Any) -> list[str]:
    """The import summary for people: what was read, appended, left out and why (``ratings import``)."""
    detected = " (detected)" if result.detected else ""
    verb = "would append" if result.dry_run else "appended"
    lines = [
        f"{result.format}{detected}: {result.rows} row(s) read from {result.source}"
        + (
            f" ({', '.join(f'{t} {n}' for t, n in result.rows_by_table.items())})"
            if len(result.rows_by_table) > 1
            else ""
        ),
        f"{verb} {result.appended} event(s) for {result.tasks} task(s)"
        + (f": {', '.join(f'{n} {t}' for t, n in sorted(result.events.items()))}" if result.events else ""),
    ]
    if result.unchanged or result.retracted or result.changed_kept:
        lines.append(
            f"already imported: {result.unchanged} unchanged; {result.retracted} rating(s) changed at the source "
            f"(retracted and replaced); {result.changed_kept} other record(s) changed (the first import stands)"
        )
    if result.costs:
        where = {"source": "from the source", "tokens": "from tokens at prices", "price": "per-task prices"}
        lines.append("costs: " + ", ".join(f"{n} {where.get(k, k)}" for k, n in sorted(result.costs.items())))
    for reason, n in sorted(result.skipped.items()):
        lines.append(f"left out: {n} {reason}")
    if result.bad_rows:
        kinds = ", ".join(f"{n} on {f}" for f, n in sorted(result.bad.items()))
        lines.append(
            f"bad rows: {result.bad_rows} ({kinds})"
            + (f", dead-lettered to {result.deadletter}" if result.deadletter else "")
        )
    lines += [f"note: {note}" for note in result.notes]
    return lines
