"""Backfill import of long tables: the real samples import cleanly; bad rows are named; re-import adds nothing."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.cli import cli
from pipeline.compact import compact
from pipeline.errors import InvalidBatch, InvalidEvent
from pipeline.store import open_store
from pipeline.streams.imports import import_table

DATA = Path(__file__).parents[1] / "data"
ROOT = Path(__file__).parents[2]
HEADER = "task_id,config,score,cost_usd,region,at"


def _csv(tmp_path: Path, body: str, name: str = "table.csv", header: str = HEADER) -> Path:
    path = tmp_path / name
    path.write_text(header + "\n" + body)
    return path


def test_routerbench_sample_imports_cleanly(home):
    result = import_table(home, DATA / "routerbench-sample.csv.gz")
    assert (result.rows, result.imported_rows, result.bad_rows) == (44, 44, 0)
    assert result.appended == 44 * 2 + result.tasks
    compact(home)
    with open_store(home) as store:
        assert store.event_counts()["ratings"] == 44
        row = store.con.execute("SELECT config_key, rater_kind, rater_name FROM ratings LIMIT 1").fetchone()
        assert row[0].startswith("import/-/") and row[1:] == ("gate", "routerbench-sample")
        assert store.con.execute("SELECT count(*) FROM attempts WHERE cost_usd IS NULL").fetchone() == (0,)


def test_livecodebench_sample_blank_costs_and_labels(home):
    result = import_table(home, DATA / "livecodebench-sample.csv", thread="lcb")
    assert result.bad_rows == 0 and result.imported_rows == 42
    compact(home)
    with open_store(home) as store:
        assert store.con.execute("SELECT count(*) FROM attempts WHERE cost_usd IS NOT NULL").fetchone() == (0,)
        labels, thread = store.con.execute("SELECT labels, thread FROM tasks LIMIT 1").fetchone()
        assert json.loads(labels)["platform"] in {"leetcode", "atcoder", "codeforces"} and thread == "lcb"
        statuses = dict(
            store.con.execute("SELECT status, count(*) FROM attempts a JOIN ratings r USING (id) GROUP BY 1").fetchall()
            or []
        )
    assert statuses == {}  # attempt and rating ids differ: one event each


def test_the_full_livecodebench_file_imports_cleanly(home):
    result = import_table(home, ROOT / "data" / "livecodebench.csv.gz", fsync="never")
    assert (result.rows, result.imported_rows, result.bad_rows, result.tasks) == (16880, 16880, 0, 1055)
    assert result.appended == 2 * 16880 + 1055


def test_reimport_adds_nothing_after_compaction(home):
    first = import_table(home, DATA / "routerbench-sample.csv.gz")
    compact(home)
    again = import_table(home, DATA / "routerbench-sample.csv.gz")
    assert again.appended == first.appended
    result = compact(home)
    assert result.streams["ratings"].duplicate == 44 and result.streams["ratings"].stored == 0
    assert result.streams["tasks"].stored == 0 and not result.files_written
    assert result.rows["ratings"] == 44


def test_status_follows_the_score_and_config_keys_are_parsed(home, tmp_path):
    path = _csv(
        tmp_path,
        "T1,claude-code/anthropic/opus/high,0.5,0.01,code,2026-01-01T00:00:00Z\n"
        "T1,Qwen/Qwen2-72B,0.49,,code,2026-01-01T00:00:00Z\n",
    )
    import_table(home, path, rater_kind="human", rater_name="ann")
    compact(home)
    with open_store(home) as store:
        rows = store.con.execute("SELECT cli, route, model, effort, status, cost_usd FROM attempts ORDER BY model")
        assert rows.fetchall() == [
            ("import", None, "Qwen/Qwen2-72B", None, "failure", None),
            ("claude-code", "anthropic", "opus", "high", "success", 0.01),
        ]
        assert store.con.execute("SELECT DISTINCT rater_kind, rater_name FROM ratings").fetchall() == [("human", "ann")]


def test_blank_scores_are_skipped_and_counted(home, tmp_path):
    path = _csv(tmp_path, "T1,m,,0.1,code,2026-01-01T00:00:00Z\nT2,m,1,0.1,,2026-01-01T00:00:00Z\n")
    result = import_table(home, path)
    assert (result.skipped_blank_score, result.imported_rows, result.tasks) == (1, 1, 1)
    compact(home)
    with open_store(home) as store:
        assert store.con.execute("SELECT task, region FROM tasks").fetchall() == [("T2", "general")]


@pytest.mark.parametrize(
    "row, column, reason",
    [
        ("T1,m,1.5,0.1,code,2026-01-01T00:00:00Z", "score", "1.5 is not in [0, 1]"),
        ("T1,m,abc,0.1,code,2026-01-01T00:00:00Z", "score", "'abc' is not a number"),
        ("T1,m,1,-2,code,2026-01-01T00:00:00Z", "cost_usd", "-2 is not >= 0"),
        ("T1,m,1,0.1,code,yesterday", "at", "not an RFC 3339 timestamp"),
        (",m,1,0.1,code,2026-01-01T00:00:00Z", "task_id", "must not be blank"),
        ("T1,,1,0.1,code,2026-01-01T00:00:00Z", "config", "must not be blank"),
        ("T1,/route/model/effort,1,0.1,code,2026-01-01T00:00:00Z", "config", None),  # a key with an empty cli
        ("T1,m,nan,0.1,code,2026-01-01T00:00:00Z", "score", "'nan' is not a finite number"),
    ],
)
def test_a_bad_row_names_row_and_column_and_nothing_is_appended(home, tmp_path, row, column, reason):
    path = _csv(tmp_path, f"T0,m,1,0.1,code,2026-01-01T00:00:00Z\n{row}\n")
    with pytest.raises(InvalidBatch) as caught:
        import_table(home, path)
    [error] = caught.value.errors
    assert (error.line, error.field) == (2, column)
    if reason:
        assert reason in error.reason
    assert not (home / "streams").exists()


def test_skip_bad_dead_letters_bad_rows(home, tmp_path):
    path = _csv(tmp_path, "T0,m,1,0.1,code,2026-01-01T00:00:00Z\nT1,m,7,0.1,code,2026-01-01T00:00:00Z\n")
    result = import_table(home, path, skip_bad=True)
    assert (result.imported_rows, result.bad_rows) == (1, 1)
    [letter] = [json.loads(x) for x in Path(result.deadletter).read_text().splitlines()]
    assert (letter["row"], letter["column"], letter["raw"]["task_id"]) == (2, "score", "T1")


def test_missing_columns_are_named(home, tmp_path):
    path = _csv(tmp_path, "T0,m,1\n", header="task_id,config,score")
    with pytest.raises(InvalidEvent, match="missing column\\(s\\) cost_usd, region, at"):
        import_table(home, path)


def test_parquet_input(home, tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(
        pa.table(
            {
                "task_id": ["T1"],
                "config": ["m"],
                "score": [1.0],
                "cost_usd": [None],
                "region": ["r"],
                "at": ["2026-01-01T00:00:00Z"],
                "suite": [7],
            }
        ),
        path,
    )
    result = import_table(home, path)
    assert result.imported_rows == 1
    compact(home)
    with open_store(home) as store:
        assert store.con.execute("SELECT labels FROM tasks").fetchone() == ('{"suite":"7"}',)


def test_cli_import_exit_codes(home, tmp_path):
    runner = CliRunner()
    good = runner.invoke(cli, ["import", "--home", str(home), str(DATA / "livecodebench-sample.csv"), "--json"])
    assert good.exit_code == 0, good.output
    assert json.loads(good.output)["imported_rows"] == 42
    bad = _csv(tmp_path, "T1,m,2,0.1,code,2026-01-01T00:00:00Z\n")
    result = runner.invoke(cli, ["import", "--home", str(home), str(bad)])
    assert result.exit_code == 2
    assert f"{bad} row:1: score: 2 is not in [0, 1]" in result.output


def _truncated_gzip(path: Path) -> None:
    import gzip

    rows = "".join(f"T{i},m,1,0.1,code,2026-01-01T00:00:00Z\n" for i in range(2000))
    whole = gzip.compress((HEADER + "\n" + rows).encode())
    path.write_bytes(whole[: len(whole) // 2])


@pytest.mark.parametrize(
    "name, write, reason",
    [
        ("plain.csv.gz", lambda p: p.write_bytes(b"task_id,config\n"), "Not a gzipped file"),
        ("cut.csv.gz", _truncated_gzip, "Compressed file ended before the end-of-stream marker was reached"),
        (
            "latin.csv",
            lambda p: p.write_bytes((HEADER + "\nT\xe9,m,1,0.1,code,2026-01-01T00:00:00Z\n").encode("latin-1")),
            "'utf-8' codec can't decode byte 0xe9",
        ),
        ("text.parquet", lambda p: p.write_bytes(b"not parquet at all"), "Parquet"),
    ],
)
def test_an_unreadable_file_is_bad_input_not_a_traceback(home, tmp_path, name, write, reason):
    path = tmp_path / name
    write(path)
    result = CliRunner().invoke(cli, ["import", "--home", str(home), str(path)])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.output.startswith(f"error: {path}: -: cannot read the table: ")
    assert reason in result.output and len(result.output.splitlines()) == 1
    assert not (home / "streams" / "ratings.jsonl").exists() or (home / "streams" / "ratings.jsonl").stat().st_size == 0


# --------------------------------------------------------------------------- streamed in chunks
@settings(max_examples=200, deadline=None)
@given(
    task=st.text(min_size=1, max_size=12).filter(str.strip),
    config=st.sampled_from(["m", "Qwen/Qwen2-72B", "c/r/m/-", "c/-/m%2Fx/%2D", 'é/ü/"q"/\\\\']),
    score=st.floats(0, 1),
    cost=st.none() | st.floats(0, 1e6),
    at=st.sampled_from(["2026-01-01T00:00:00Z", "2026-01-01T00:00:00.5+02:00", "0999-12-31T23:59:59Z"]),
    rater=st.fixed_dictionaries({"kind": st.sampled_from(["gate", "human"]), "name": st.text(min_size=1, max_size=8)}),
)
def test_row_ids_are_the_digests_of_their_events(task, config, score, cost, at, rater):
    """The row events' ids are written from a template, fast: they equal the generic digest of each event, so the
    ids of every earlier import stay the same (re-importing adds nothing after compaction)."""
    from pipeline.streams import imports

    cells = [task.strip(), config, repr(score), "" if cost is None else repr(cost), "r", at]
    row = imports._check(cells, imports._Columns.of(list(imports.REQUIRED)))
    for event in imports._row_events(row, rater, imports._canonical(rater)):
        body = {k: v for k, v in event.items() if k != "id"}
        assert event["id"] == f"imp-{imports._digest(body)}"


def test_a_table_is_appended_in_chunks_each_a_framed_batch(home, tmp_path, monkeypatch):
    from pipeline.streams import imports
    from pipeline.streams.log import read
    from pipeline.streams.scan import frame_of

    monkeypatch.setattr(imports, "CHUNK_ROWS", 7)
    sizes: list[int] = []
    real = imports.append
    monkeypatch.setattr(imports, "append", lambda *a, **k: sizes.append(len(a[1])) or real(*a, **k))
    rows = "".join(
        f"T{i % 5},m{i % 4},{i % 2},0.1,r{i % 5},2026-01-{1 + (i * 7) % 28:02d}T00:00:00Z\n" for i in range(30)
    )
    result = import_table(home, _csv(tmp_path, rows))
    assert result.tasks == 5 and result.appended == 30 * 2 + 5
    assert len(sizes) == 5 and max(sizes) <= 7 * 2 + 5  # 30 rows in chunks of 7: five batches, none bigger
    frames = [frame_of(x) for x in (home / "streams" / "ratings.jsonl").read_bytes().splitlines()]
    assert sum(f is not None and f.type == "batch.begin" for f in frames) == 5
    opened = [e for e in read(home, "tasks") if e.type == "task.opened"]
    assert sorted(e.task for e in opened) == [f"T{i}" for i in range(5)]  # one each, dated by its earliest row
    earliest = {f"T{t}": min(f"2026-01-{1 + (i * 7) % 28:02d}T00:00:00Z" for i in range(t, 30, 5)) for t in range(5)}
    assert {e.task: e.at for e in opened} == earliest


def test_too_many_bad_rows_are_counted_and_the_first_hundred_named(home, tmp_path):
    rows = "".join(f"T{i},m,{2 + i},0.1,code,2026-01-01T00:00:00Z\n" for i in range(150))
    result = CliRunner().invoke(cli, ["import", "--home", str(home), str(_csv(tmp_path, rows))])
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 101 and lines[0].endswith("row:1: score: 2 is not in [0, 1]")
    assert lines[-1] == "nothing appended: 150 invalid event(s) (the first 100 named above)"
    assert not (home / "streams").exists()


def test_a_file_changed_between_the_passes_is_named(home, tmp_path, monkeypatch):
    from pipeline.streams import imports

    path = _csv(tmp_path, "T0,m,1,0.1,code,2026-01-01T00:00:00Z\n")
    real = imports._first_pass

    def then_change(*args, **kwargs):
        checked = real(*args, **kwargs)
        with open(path, "a") as handle:
            handle.write("T1,m,1,0.1,code,2026-01-01T00:00:00Z\n")
        return checked

    monkeypatch.setattr(imports, "_first_pass", then_change)
    with pytest.raises(InvalidEvent, match=r"the file changed while it was imported .* import it again"):
        import_table(home, path)


def test_a_full_disk_mid_import_leaves_whole_chunks_and_a_rerun_completes_it(home, tmp_path, monkeypatch):
    import errno
    import os

    from pipeline.streams import framing, imports

    monkeypatch.setattr(imports, "CHUNK_ROWS", 10)
    rows = "".join(f"T{i},m{i % 3},1,0.1,code,2026-01-01T00:00:{i % 60:02d}Z\n" for i in range(45))
    path = _csv(tmp_path, rows)
    clean = tmp_path / "clean"
    import_table(clean, path)
    real, calls = os.write, [0]

    def write(fd, data):
        calls[0] += 1
        if calls[0] == 8:  # two chunks written (three writes each: tasks lines, ratings part, tasks end), then full
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(framing.os, "write", write)
    result = CliRunner().invoke(cli, ["import", "--home", str(home), str(path)])
    monkeypatch.setattr(framing.os, "write", real)
    assert result.exit_code == 4 and result.stderr.startswith("error: No space left on device (")
    assert "the batch was rolled back: nothing of it was appended" in result.stderr
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.output
    with open_store_after_compaction(home) as partial:
        assert partial == {"tasks": 20, "attempts": 20, "ratings": 20}  # two chunks of ten rows, whole
    import_table(home, path)
    with open_store_after_compaction(home) as done, open_store_after_compaction(clean) as expected:
        assert done == expected == {"tasks": 45, "attempts": 45, "ratings": 45}


@contextlib.contextmanager
def open_store_after_compaction(home: Path):
    compact(home)
    with open_store(home) as store:
        counts = store.event_counts()
    yield {k: v for k, v in counts.items() if k in ("tasks", "attempts", "ratings")}


# --------------------------------------------------------------------------- attempt columns, config formats
def test_failure_mode_goes_with_its_attempt(home, tmp_path):
    path = _csv(
        tmp_path,
        "t1,a/-/m/-,0,,general,2026-01-01T00:00:00Z,agent_timeout\nt1,a/-/m/-,1,,general,2026-01-01T00:01:00Z,\n",
        header=HEADER + ",failure_mode",
    )
    import_table(home, path)
    compact(home)
    with open_store(home) as store:
        rows = store.con.execute(
            "SELECT json_extract_string(extra, '$.failure_mode') FROM attempts ORDER BY \"at\""
        ).fetchall()
        labels = store.con.execute("SELECT labels FROM tasks").fetchall()
    assert rows == [("agent_timeout",), (None,)]  # a blank failure_mode is none
    assert labels == [(None,)]  # not a task label


def test_attempt_ids_hash_the_failure_mode_and_no_other_id_moves():
    from pipeline.streams import imports

    columns = imports._Columns.of([*imports.REQUIRED, "failure_mode"])
    rater = {"kind": "gate", "name": "x"}
    for mode in ("agent_timeout", ""):
        row = imports._check(["t", "m", "0", "", "r", "2026-01-01T00:00:00Z", mode], columns)
        attempted = imports._row_events(row, rater, imports._canonical(rater))[0]
        body = {k: v for k, v in attempted.items() if k != "id"}
        assert attempted["id"] == f"imp-{imports._digest(body)}"
        assert ("failure_mode" in attempted) == bool(mode)


@pytest.mark.parametrize(
    ("fmt", "cell", "expected"),
    [
        ("auto", "codex/openai/gpt-5/high", {"cli": "codex", "route": "openai", "model": "gpt-5", "effort": "high"}),
        ("auto", "Qwen/Qwen2-72B", {"cli": "import", "route": None, "model": "Qwen/Qwen2-72B", "effort": None}),
        ("model", "a/b/c/d", {"cli": "import", "route": None, "model": "a/b/c/d", "effort": None}),
        ("key", "a/b/c/-", {"cli": "a", "route": "b", "model": "c", "effort": None}),
    ],
)
def test_config_column_formats(fmt, cell, expected):
    from pipeline.streams import imports

    row = imports._check(
        ["t", cell, "1", "", "r", "2026-01-01T00:00:00Z"], imports._Columns.of(list(imports.REQUIRED)), fmt
    )
    assert row.config == expected


def test_the_key_format_refuses_a_model_name():
    from pipeline.streams import imports

    with pytest.raises(ValueError, match="config"):
        imports._check(
            ["t", "gpt-4", "1", "", "r", "2026-01-01T00:00:00Z"], imports._Columns.of(list(imports.REQUIRED)), "key"
        )
