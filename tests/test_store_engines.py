"""Any engine reads the store: polars, pyarrow and DuckDB over the table's files get exactly ``ratings sql``'s rows,
after incremental compactions, optimize merges and a vacuum; and an old manifest store is upgraded in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.commands.verify import verify
from pipeline.compact import compact
from pipeline.store.families import COLUMNS
from pipeline.store.upkeep import vacuum
from pipeline.streams.log import append
from tests.fixtures_store import CONFIG, opened, rating


def _sql_rows(home: Path, family: str) -> list[tuple]:
    cols = ", ".join(f'"{c}"' for c, _ in COLUMNS[family])
    out = CliRunner().invoke(cli, ["sql", "--home", str(home), "--json", f'SELECT {cols} FROM "{family}" ORDER BY id'])
    assert out.exit_code == 0, out.output
    return [tuple(row.values()) for row in json.loads(out.output)]


def _plain_rows(rows: list[dict], family: str) -> list[tuple]:
    """Rows of another engine in ``ratings sql --json``'s form (times as RFC 3339 UTC)."""
    from pipeline.store import plain

    return sorted(tuple(plain(r[c]) for c, _ in COLUMNS[family]) for r in rows)


@pytest.fixture
def busy_home(home):
    attempt = {"type": "task.attempted", "task": "T-1", "config": CONFIG, "status": "success", "cost_usd": 0.5}
    for i in range(6):
        append(
            home,
            [
                opened(i, day=1 + i % 2),
                rating(i, day=1 + i % 2),
                {**attempt, "id": f"A-{i}", "at": "2026-01-01T09:30:00Z"},
            ],
        )
        compact(home, merge_threshold=2)  # merges the partitions as they fill
    decision = {"type": "route.decided", "task": "T-1", "policy": "p", "chosen": "c/-/m/-", "propensity": 0.5}
    rejection = {"type": "task.rejected", "task": "T-1", "config": CONFIG, "rater": {"kind": "gate", "name": "g"}}
    append(
        home,
        [
            {"id": "X-1", "type": "custom.kind", "at": "2026-01-02T00:00:00Z", "n": [1, 2]},
            {**decision, "id": "D-1", "at": "2026-01-02T00:00:00Z", "candidates": ["c/-/m/-", "d/-/m/-"]},
            {**rejection, "id": "J-1", "at": "2026-01-02T00:00:00Z", "claim": "x", "evidence": ["e", "f"]},
            {**rejection, "id": "J-2", "at": "2026-01-02T00:00:00Z", "claim": "y", "evidence": []},
        ],
    )
    compact(home, merge_threshold=2)
    removed = vacuum(home, retain_hours=0)
    assert removed.files_removed > 0 and verify(home).ok
    return home


@pytest.mark.parametrize("family", ["tasks", "attempts", "ratings", "decisions", "rejections", "other"])
def test_polars_pyarrow_and_duckdb_read_exactly_the_rows_of_ratings_sql(busy_home, family):
    import duckdb
    import polars as pl
    import pyarrow.dataset as ds
    from deltalake import DeltaTable

    table_uri = str(busy_home / "store" / "events")
    expected = _sql_rows(busy_home, family)
    assert expected
    names = [c for c, _ in COLUMNS[family]]

    by_polars = pl.scan_delta(table_uri).filter(pl.col("family") == family).select(names).collect().to_dicts()
    assert _plain_rows(by_polars, family) == sorted(expected)

    dataset = DeltaTable(table_uri).to_pyarrow_dataset()
    by_arrow = dataset.to_table(filter=ds.field("family") == family, columns=names).to_pylist()
    assert _plain_rows(by_arrow, family) == sorted(expected)

    files = DeltaTable(table_uri).file_uris()  # the live files of the newest version, never a glob
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    columns = ", ".join(f'"{n}"' for n in names)
    cursor = con.execute(
        f"SELECT {columns} FROM read_parquet(?, hive_partitioning = true, union_by_name = true) WHERE family = ?",
        [files, family],
    )
    by_duckdb = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    assert _plain_rows(by_duckdb, family) == sorted(expected)


def test_an_old_manifest_store_is_moved_aside_and_rebuilt_in_one_line(home, snapshot):
    append(home, [opened(1), rating(1), rating(2, day=2)])
    with open(home / "streams" / "ratings.jsonl", "ab") as handle:
        handle.write(b"not json\n")
    old = home / "store"
    (old / "_manifests").mkdir(parents=True)
    (old / "_manifests" / f"{1:020d}.json").write_text('{"schema": "store-manifest/v1", "number": 1}')
    (old / "ratings" / "date=2026-01-01").mkdir(parents=True)
    (old / "ratings" / "date=2026-01-01" / "00000000000000000001-X-00001.parquet").write_bytes(b"PAR1 old")
    (old / "_index").mkdir()
    (home / "deadletter").mkdir()
    (home / "deadletter" / "ratings.jsonl").write_text('{"from": "the old store"}\n')
    out = CliRunner().invoke(cli, ["compact", "--home", str(home), "-q", "--json"])
    assert out.exit_code == 0, out.output
    note = [line for line in out.output.splitlines() if line.startswith("upgraded the store")]
    assert len(note) == 1 and "store.v1-" in note[0]
    aside = next(home.glob("store.v1-*"))
    assert (aside / "_manifests" / f"{1:020d}.json").exists() and (aside / "ratings").is_dir()
    assert (aside / "deadletter" / "ratings.jsonl").read_text() == '{"from": "the old store"}\n'
    assert sorted(p.name for p in old.iterdir()) == [".compact.lock", "events", "writer.json"]
    assert verify(home).ok
    assert snapshot(home)["counts"]["ratings"] == 2 and snapshot(home)["counts"]["tasks"] == 1
    again = CliRunner().invoke(cli, ["compact", "--home", str(home), "-q"])
    assert "upgraded" not in again.output and len(list(home.glob("store.v1-*"))) == 1
