"""Long tables (pipeline/streams/imports/long.py, longtable.py): the real samples import cleanly, bad rows are named
with every problem, a re-import adds nothing, and the items of issue 26 (config column, --skip-bad, BOM, delimiters,
NaN, --json) hold."""

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

DATA = Path(__file__).parents[2] / "data"
ROOT = Path(__file__).parents[3]
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


def test_reimport_adds_nothing(home):
    first = import_table(home, DATA / "routerbench-sample.csv.gz")
    compact(home)
    size = (home / "streams" / "ratings.jsonl").stat().st_size
    again = import_table(home, DATA / "routerbench-sample.csv.gz")
    assert (again.appended, again.unchanged) == (0, first.appended)  # the ledger knew every event
    assert (home / "streams" / "ratings.jsonl").stat().st_size == size
    result = compact(home)
    assert result.rows["ratings"] == 44 and not result.files_written


def test_status_follows_the_score_and_config_keys_are_parsed(home, tmp_path):
    keys = _csv(tmp_path, "T1,claude-code/anthropic/opus/high,0.5,0.01,code,2026-01-01T00:00:00Z\n", name="k.csv")
    names = _csv(tmp_path, "T1,Qwen/Qwen2-72B,0.49,,code,2026-01-01T00:00:00Z\n", name="n.csv")
    import_table(home, keys, rater_kind="human", rater_name="ann")
    result = import_table(home, names, rater_kind="human", rater_name="ann")
    assert result.notes[0].startswith("config column read as plain model names")
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
        ("T1,m,inf,0.1,code,2026-01-01T00:00:00Z", "score", "'inf' is not a finite number"),
        ("T1,m,1,1e308,code,2026-01-01T00:00:00Z", "cost_usd", "1e+308 is over the bound of 1e+06 USD"),
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
    assert (letter["row"], letter["field"], letter["raw"]["task_id"]) == (2, "score", "T1")


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
    from pipeline.streams.events import encode_line, parse_line, with_head
    from pipeline.streams.imports import long, longtable
    from pipeline.streams.imports.mapping import canonical, digest24

    cells = [task.strip(), config, repr(score), "" if cost is None else repr(cost), "r", at]
    table = longtable.LongTable.__new__(longtable.LongTable)
    table.positions, table.extra, table.attempt_columns, table.score_range = tuple(range(6)), [], [], None
    table.column, table.clock = longtable.ConfigColumn("auto", longtable.Maps()), longtable.Clock(future=None)
    row, problems = table.check(1, cells)
    assert not problems
    rater = {"kind": rater["kind"], "name": rater["name"]}  # as every source builds it
    for line in long._row_events(row, rater, canonical(rater)):
        event = parse_line(line.line)
        body = event.model_dump(mode="json", exclude_unset=True, exclude={"id", "v"})
        assert line.id == event.id == f"imp-{digest24(canonical([{**body, 'type': event.type}]))}"
        # the bytes every earlier import wrote: the event rendered as append renders a mapping
        fields = {"task": event.task, "config": event.config.model_dump(), **body}
        fields.pop("type")
        expected = encode_line(with_head(fields, type=event.type, v=1, id=event.id, at=event.at))
        assert line.line == expected


def test_a_table_is_appended_in_chunks_each_a_framed_batch(home, tmp_path, monkeypatch):
    from pipeline.streams.imports import run
    from pipeline.streams.log import read
    from pipeline.streams.scan import frame_of

    monkeypatch.setattr(run, "CHUNK_ROWS", 7)
    sizes: list[int] = []
    real = run.write
    monkeypatch.setattr(run, "write", lambda *a, **k: sizes.append(len(a[1])) or real(*a, **k))
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
    assert (
        len(lines) == 101 and "row:1: score: 2 is not in [0, 1] (give the scale with --score-range LO:HI)" in lines[0]
    )
    assert lines[-1].startswith(
        "nothing appended: 150 bad row(s) (the first 100 named above); fix them, or import the rest"
    )
    assert not (home / "streams").exists()


def test_a_file_changed_while_it_is_read_is_named(home, tmp_path, monkeypatch):
    from pipeline.streams.imports import long

    path = _csv(tmp_path, "T0,m,1,0.1,code,2026-01-01T00:00:00Z\n")
    real = long.read_cells

    def then_change(*args):  # type: ignore[no-untyped-def]
        yield from real(*args)
        with open(path, "a") as handle:
            handle.write("T1,m,1,0.1,code,2026-01-01T00:00:00Z\n")

    monkeypatch.setattr(long, "read_cells", then_change)
    with pytest.raises(InvalidEvent, match=r"the file changed while it was imported \(nothing was appended\)"):
        import_table(home, path)
    assert not (home / "streams").exists()


def test_a_full_disk_mid_import_leaves_whole_chunks_and_a_rerun_completes_it(home, tmp_path, monkeypatch):
    import errno
    import os

    from pipeline.streams import framing
    from pipeline.streams.imports import run

    monkeypatch.setattr(run, "CHUNK_ROWS", 10)
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


SAMPLES = ["", " ", "nan", "NaN", "inf", "-0", "0", "1", "0.5", " 0.25 ", "1e308", "1e-7", "7", "-1", "x", "m"]
SAMPLES += ["2026-01-01T00:00:00Z", "2026-01-01T02:00:00+02:00", "2026-01-01t00:00:00z", "2026-02-30T00:00:00Z"]
SAMPLES += ["2999-01-01T00:00:00Z", "c/r/m/-", "/r/m/-", "a/b/c", 'é/ü/"q"/\\\\', "T1", " T1 "]
CELLS = st.one_of(st.sampled_from(SAMPLES), st.text(max_size=5))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(cells=st.lists(CELLS, min_size=6, max_size=6), score_range=st.sampled_from([None, "1:5"]))
def test_the_bulk_lane_accepts_and_renders_exactly_what_the_row_check_does(tmp_path_factory, cells, score_range):
    """The bulk lane reads each distinct cell once and renders from templates; any row it is not sure of goes to
    the row check. Row by row, both give the same verdict (bad, blank, good) and the same events."""
    from pipeline.streams.imports import long
    from pipeline.streams.imports.options import ImportOptions, ScoreRange

    path = tmp_path_factory.mktemp("bulk") / "t.csv"
    path.write_text(HEADER + "\n")
    options = ImportOptions(score_range=ScoreRange.parse(score_range) if score_range else None)
    source = long.LongSource(path, options, long.Clock())
    row, problems = source.table.check(1, cells)
    prepared = long._Fast(source).chunk(1, [cells])
    if problems:
        assert [u.problems for u in prepared.bad] == [problems] and not prepared.items
    elif row is None:
        assert prepared.skipped == {"blank score": 1} and not prepared.items
    else:
        expected = long._row_events(row, source.rater, source.rater_json)
        assert [(i[2], i[1], i[3]) for i in prepared.items] == [(e.id, e.line, e.key) for e in expected]


def test_an_attempt_column_goes_with_the_attempt_and_into_its_id(home, tmp_path):
    """Terminal-Bench's failure_mode: a field of the row's task.attempted (in its id), not a task label; a row
    without one keeps the id it always had."""
    from pipeline.streams.events import parse_line
    from pipeline.streams.imports.mapping import canonical, digest24

    path = _csv(
        tmp_path,
        "T1,m,0,,r,2026-01-01T00:00:00Z,agent_timeout\nT2,m,1,,r,2026-01-01T00:00:00Z,\n",
        header=HEADER + ",failure_mode",
    )
    import_table(home, path)
    lines = [parse_line(x) for x in (home / "streams" / "tasks.jsonl").read_bytes().splitlines() if b'"batch.' not in x]
    attempts = {e.task: e for e in lines if e.type == "task.attempted"}
    assert attempts["T1"].extra == {"failure_mode": "agent_timeout"} and attempts["T2"].extra == {}
    for event in attempts.values():
        body = event.model_dump(mode="json", exclude_unset=True, exclude={"id", "v"})
        assert event.id == f"imp-{digest24(canonical([body]))}"
    assert all(e.labels is None for e in lines if e.type == "task.opened")
