"""The store: views over one version of the events table, with the column contract, empty or not."""

from __future__ import annotations

import json
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest

from pipeline.compact import compact
from pipeline.store import open_store
from pipeline.store.families import COLUMNS, VIEWS
from pipeline.streams.log import append
from tests.fixtures_store import CONFIG, live_files, opened, rating, table_version


def test_empty_home_has_every_view_with_its_columns_and_no_rows(home):
    assert table_version(home) is None
    with open_store(home) as store:
        assert store.version is None and store.files() == [] and store.inputs_sha256() is None
        for view in VIEWS:
            cursor = store.con.execute(f'SELECT * FROM "{view}"')
            assert [d[0] for d in cursor.description] == [c for c, _ in COLUMNS[view]]
            assert cursor.fetchall() == []
        assert store.event_counts() == dict.fromkeys(VIEWS, 0)


def test_views_have_the_contract_columns_and_types(home):
    append(
        home,
        [
            opened(1),
            rating(1),
            {
                "id": "A-1",
                "type": "task.attempted",
                "at": "2026-01-01T09:30:00Z",
                "task": "T-1",
                "config": CONFIG,
                "status": "success",
                "cost_usd": None,
            },
        ],
    )
    compact(home)
    with open_store(home) as store:
        for view in VIEWS:
            described = store.con.execute(f'DESCRIBE "{view}"').fetchall()
            assert [(r[0], r[1]) for r in described] == COLUMNS[view]
        assert store.event_counts()["ratings"] == 1
        assert (
            store.con.execute('SELECT config_key, "at" FROM ratings').fetchall()[0][0]
            == "claude-code/anthropic/opus/high"
        )


def test_the_store_reads_the_live_files_never_a_glob(home):
    append(home, [rating(1)])
    compact(home)
    (home / "store" / "events" / "family=ratings" / "stray.parquet").write_bytes(b"junk")
    live = live_files(home, "ratings")
    shutil.copy(live[0], live[0].with_name("part-copy.parquet"))  # a file no commit names: invisible
    with open_store(home) as store:
        assert store.con.execute("SELECT count(*) FROM ratings").fetchall() == [(1,)]
        assert [p.name for p in map(Path, store.files("ratings"))] == [live[0].name]


def test_an_older_version_stays_readable_by_number_and_by_time(home):
    append(home, [rating(1)])
    compact(home)
    time.sleep(0.05)
    between = datetime.now(UTC).isoformat()
    time.sleep(0.05)
    append(home, [rating(2)])
    compact(home)
    assert table_version(home) == 2
    with open_store(home, as_of="1") as old, open_store(home, as_of=between) as then, open_store(home) as new:
        assert old.con.execute("SELECT count(*) FROM ratings").fetchall() == [(1,)]
        assert then.version == 1 and then.con.execute("SELECT id FROM ratings").fetchall() == [("R-1",)]
        assert new.con.execute("SELECT count(*) FROM ratings").fetchall() == [(2,)] and new.version == 2


def test_an_older_version_names_the_inputs_it_had_then(home):
    """``source.sha256`` of a fit at ``--as-of`` is the hash that version had (delta-rs numbers the history of a
    table loaded at an older version from that version down: read naively, the newer commits' ranges count)."""
    append(home, [rating(1)])
    compact(home)
    with open_store(home) as first:
        then = first.inputs_sha256()
    append(home, [rating(2)])
    compact(home)
    with open_store(home, as_of="1") as old, open_store(home) as new:
        assert old.inputs_sha256() == then != new.inputs_sha256()


@pytest.mark.parametrize(
    "as_of, message",
    [
        ("9", "--as-of 9: the table's newest version is 2"),
        ("2001-01-01", "--as-of 2001-01-01T00:00:00+00:00: the table did not exist yet"),
        ("last tuesday", "--as-of 'last tuesday': give a table version (a number) or a time"),
    ],
)
def test_an_unknown_version_or_time_is_bad_input(home, as_of, message):
    from click.testing import CliRunner

    from pipeline.cli import cli

    append(home, [rating(1)])
    compact(home)
    append(home, [rating(2)])
    compact(home)
    out = CliRunner().invoke(cli, ["sql", "--home", str(home), "--as-of", as_of, "SELECT 1"])
    assert out.exit_code == 2 and len(out.output.splitlines()) == 1
    assert out.output.startswith(f"error: {message}")


def test_read_only_store_cannot_write_files_or_read_outside_the_store(home, tmp_path):
    append(home, [rating(1)])
    compact(home)
    with open_store(home, read_only=True) as store:
        assert store.con.execute("SELECT count(*) FROM ratings").fetchall() == [(1,)]
        with pytest.raises(duckdb.Error, match=r"disabled|not allowed|Permission"):
            store.con.execute(f"COPY ratings TO '{tmp_path / 'out.csv'}'")
        with pytest.raises(duckdb.Error, match=r"disabled|not allowed|Permission"):
            store.con.execute("SELECT * FROM read_csv('/etc/passwd')")
        with pytest.raises(duckdb.Error):
            store.con.execute("SET enable_external_access = true")
    assert not (tmp_path / "out.csv").exists()


def test_cli_sql_prints_json_rows_with_rfc3339_times(home):
    from click.testing import CliRunner

    from pipeline.cli import cli

    append(home, [rating(1), rating(2, day=2)])
    compact(home)
    out = CliRunner().invoke(
        cli, ["sql", "--home", str(home), "--json", 'SELECT id, "at", score, config_key FROM ratings ORDER BY id']
    )
    assert out.exit_code == 0, out.output
    assert json.loads(out.output) == [
        {"id": "R-1", "at": "2026-01-01T10:00:01Z", "score": 1.0, "config_key": "claude-code/anthropic/opus/high"},
        {"id": "R-2", "at": "2026-01-02T10:00:02Z", "score": 1.0, "config_key": "claude-code/anthropic/opus/high"},
    ]
    table = CliRunner().invoke(cli, ["sql", "--home", str(home), "SELECT count(*) AS n FROM ratings"])
    assert table.output.splitlines() == ["n", "-", "2"]


@pytest.mark.parametrize(
    "query, message",
    [
        ("COPY ratings TO '{out}'", "this is a COPY statement"),
        ("SELECT * FROM read_csv('/etc/passwd')", "query failed: Permission Error"),
        ("SELECT * FROM read_parquet('{out}')", "query failed: Permission Error"),
    ],
)
def test_cli_sql_cannot_write_or_read_outside_the_store(home, tmp_path, query, message):
    from click.testing import CliRunner

    from pipeline.cli import cli

    append(home, [rating(1)])
    compact(home)
    out = CliRunner().invoke(cli, ["sql", "--home", str(home), query.format(out=tmp_path / "x.parquet")])
    assert out.exit_code == 2
    assert message in out.output
    assert not (tmp_path / "x.parquet").exists()


@pytest.mark.parametrize(
    "query, message",
    [
        ("SELEC 1", 'error: query failed: Parser Error: syntax error at or near "SELEC"'),
        ("SELECT x FROM ratings", 'error: query failed: Binder Error: Referenced column "x" not found in FROM clause!'),
    ],
)
def test_cli_sql_a_bad_query_is_one_line(home, query, message):
    from click.testing import CliRunner

    from pipeline.cli import cli

    append(home, [rating(1)])
    compact(home)
    out = CliRunner().invoke(cli, ["sql", "--home", str(home), query])
    assert out.exit_code == 2
    assert len(out.output.splitlines()) == 1 and out.output.startswith(message)
