"""``ratings compact``, ``sql``, ``verify`` and ``vacuum``: the Delta table of events."""

from __future__ import annotations

import sys
from datetime import timedelta
from typing import TextIO

import click

from ..workspace import Workspace
from .common import (
    Finite,
    cli,
    emit_json,
    future_options,
    handle_errors,
    json_option,
    print_table,
    quiet_option,
    workspace,
)


# --------------------------------------------------------------------------- compact / sql / verify / vacuum / import
@cli.command()
@workspace(store=True, writer=True)
@click.option(
    "--merge-threshold",
    type=click.IntRange(2, 1_000_000),
    default=16,
    show_default=True,
    help="Merge a family's small files into files of up to 128 MiB (Delta's optimize) when it holds more than this "
    "many.",
)
@click.option(
    "--buffer-rows",
    type=click.IntRange(min=1),
    default=1_000_000,
    show_default=True,
    help="Rows held in memory before they are written out (one file per family each time): lower it to bound memory.",
)
@click.option(
    "--rebuild",
    is_flag=True,
    help="Move the local table aside and rebuild it from the streams (after `ratings verify` found damage).",
)
@future_options
@json_option
@quiet_option
@handle_errors
def compact(
    ws: Workspace,
    merge_threshold: int,
    buffer_rows: int,
    rebuild: bool,
    as_json: bool,
    quiet: bool,
    future: timedelta | None,
) -> None:
    """Compact the new lines of the streams into the store's events table: one Delta commit per run.

    Incremental and idempotent: a run with no new input commits nothing, and a
    rerun after a crash lands every event exactly once. Invalid lines and id
    conflicts go to deadletter/<stream>.jsonl, and so do lines dated more
    than --skew after the run (unless --allow-future). A store in the old
    manifest format is moved aside and rebuilt from the streams on the first
    run; a store partitioned by event date (an earlier layout) is migrated,
    in a commit of its own that changes no data. --rebuild builds a new table
    from the streams and moves the old one aside only once the new one is whole.

    \b
    Example:
      ratings compact --home ./myteam
      ratings compact --json -q
      ratings compact --store s3://team-ratings/store --writer ci-runner-7
      ratings verify && ratings compact --rebuild
    """
    from ..compact import compact as compact_store

    result = compact_store(
        ws,
        progress=not quiet and sys.stderr.isatty(),
        merge_threshold=merge_threshold,
        buffer_rows=buffer_rows,
        rebuild=rebuild,
        future=future,
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
@workspace(store=True, as_of=True, optional=lambda ws, kwargs: kwargs["schema"] or ws.store_uri is not None)
@click.option("--schema", "schema", is_flag=True, help="List the views and their columns instead of running a query.")
@click.option(
    "--file",
    "query_file",
    type=click.File("r", encoding="utf-8"),
    default=None,
    metavar="FILE",
    help="Read the query from FILE ('-': stdin), for a query longer than a command line.",
)
@click.option(
    "--timeout",
    type=Finite(0, 86_400, min_open=True),
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="Stop the query after this many seconds.",
)
@json_option
@click.argument("query", required=False)
@handle_errors
def sql(
    ws: Workspace,
    schema: bool,
    query_file: TextIO | None,
    timeout: float,
    as_json: bool,
    query: str | None,
) -> None:
    """Run one read-only SQL query on the store's views, at one table version.

    Views: tasks, attempts, ratings, rejections, retractions, decisions,
    closures, other (one row per event id; --schema lists their columns).
    One statement (SELECT, WITH, FROM, DESCRIBE, SHOW, EXPLAIN), given as
    QUERY, with --file FILE, or on stdin (QUERY '-'); it can read the table's
    live files and nothing else, cannot write files, and stops after
    --timeout seconds. An error in the query exits 2 with DuckDB's message.
    Note: quote the column "at" (a DuckDB keyword).

    \b
    Example:
      ratings sql 'SELECT config_key, avg(score) AS q, count(*) AS n FROM ratings GROUP BY 1 ORDER BY q DESC'
      ratings sql --json 'SELECT task, "at" FROM tasks LIMIT 5'
      ratings sql --as-of 1 'SELECT count(*) FROM ratings'
      ratings sql --as-of 2026-01-31T00:00:00Z 'SELECT count(*) FROM ratings'
      ratings sql --file explain.sql --timeout 300
      ratings sql --schema
    """
    given = [what for what, on in (("QUERY", query is not None), ("--file", query_file is not None)) if on]
    if schema and given:
        raise click.UsageError(f"give either --schema or a query ({' and '.join(given)}), not both")
    if not schema and len(given) != 1:
        raise click.UsageError("give one query: QUERY, QUERY '-' for stdin, or --file FILE; or --schema")
    if schema:
        from ..store.families import schema_rows

        rows = schema_rows()
    else:
        from ..store import run_sql

        text = query_file.read() if query_file is not None else sys.stdin.read() if query == "-" else query
        rows = run_sql(ws, text or "", timeout_s=timeout)
    if as_json:
        emit_json(rows)
    else:
        print_table(rows)


@cli.command()
@workspace(store=True, as_of=True)
@json_option
@handle_errors
def verify(ws: Workspace, as_json: bool) -> None:
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
    from ..commands.verify import verify as verify_store

    result = verify_store(ws)
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
@workspace(store=True)
@click.option(
    "--retain-hours",
    type=click.IntRange(0, 1_000_000),
    default=168,
    show_default=True,
    help="Keep the files every version of the last H hours needs (time travel that far back keeps working).",
)
@json_option
@handle_errors
def vacuum(ws: Workspace, retain_hours: int, as_json: bool) -> None:
    """Remove files of the store no retained version needs, and files no version references.

    Prints the store's size before and after.

    \b
    Example:
      ratings vacuum --home ./myteam
      ratings vacuum --retain-hours 0 --json
    """
    from ..store.upkeep import vacuum as vacuum_store

    result = vacuum_store(ws, retain_hours=retain_hours)
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
