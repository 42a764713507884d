"""Compaction into the Delta events table: incremental, idempotent, deduplicating, crash- and fault-safe."""

from __future__ import annotations

import base64
import json

import pytest

from pipeline.compact import compact, files
from pipeline.store import open_store
from pipeline.store.table import commits, open_table, txn_ids
from pipeline.streams.log import append
from pipeline.workspace import Workspace
from tests.fixtures_store import CONFIG, live_files, opened, rating, table_version


def _files(home):
    return {p.relative_to(home).as_posix(): p.read_bytes() for p in sorted((home / "store").rglob("*")) if p.is_file()}


def _table(home):
    return open_table(Workspace.of(home).store)


def test_compact_twice_without_new_input_commits_nothing(home):
    append(home, [opened(1), rating(1), rating(2, day=2)])
    first = compact(home)
    assert first.created and first.version == 1  # version 0 created the table
    before = _files(home)
    second = compact(home)
    assert not second.created and second.version == 1 and second.files_written == 0
    assert _files(home) == before


def test_one_commit_per_run_carries_the_ranges_and_transactions(home):
    append(home, [opened(1), rating(1), rating(2, day=2)])
    with open(home / "streams" / "ratings.jsonl", "ab") as handle:
        handle.write(b"not json\n")
    result = compact(home)
    table = _table(home)
    record = commits(table, Workspace.of(home).store)[-1]["ratings.compaction"]
    ratings = (home / "streams" / "ratings.jsonl").read_bytes()
    import hashlib

    assert record["writer"] == result.writer and record["event_schema_version"] == 1 and record["read_version"] == 0
    assert record["streams"]["ratings"]["start"] == 0 and record["streams"]["ratings"]["end"] == len(ratings)
    assert record["streams"]["ratings"]["sha256"] == hashlib.sha256(ratings).hexdigest()
    assert record["streams"]["ratings"]["outcomes"] == {
        "lines": 5,  # two events framed as one batch (begin, 2 lines, end), then a bad line
        "stored": 2,
        "duplicate": 0,
        "conflict": 0,
        "invalid": 1,
        "frames": 2,
    }
    end_id, line_id, dl_id = txn_ids(result.writer, "ratings")
    assert table.transaction_version(end_id) == len(ratings) and table.transaction_version(line_id) == 6
    assert table.transaction_version(dl_id) == (home / "deadletter" / "ratings.jsonl").stat().st_size


def test_id_less_lines_get_writer_qualified_ids(home):
    stream = home / "streams" / "tasks.jsonl"
    append(home, [opened(1)])
    offset = stream.stat().st_size
    with open(stream, "ab") as handle:
        handle.write(b'{"type":"task.opened","task":"T-2"}\n')
    result = compact(Workspace.resolve(home, writer="host-a"))
    with open_store(home) as store:
        ids = [r[0] for r in store.con.execute("SELECT id FROM tasks ORDER BY id").fetchall()]
    assert result.writer == "host-a" and ids == ["O-1", f"host-a:tasks@{offset}"]


def test_incremental_equals_one_compaction(tmp_path, snapshot):
    batches = [[opened(i), rating(i, day=1 + i % 3)] for i in range(6)]
    one, inc = tmp_path / "one", tmp_path / "inc"
    for batch in batches:
        append(one, batch)
        append(inc, batch)
        compact(inc)
    compact(one)
    assert table_version(inc) == 6 and table_version(one) == 1
    assert snapshot(inc) == snapshot(one)


def test_rows_are_partitioned_by_family_in_one_file_per_family_whatever_the_days(home):
    import pyarrow as pa

    append(home, [rating(1, day=1), rating(2, day=2), rating(3, day=9), opened(4, day=2), opened(5, day=30)])
    compact(home)
    actions = pa.table(_table(home).get_add_actions(flatten=True)).to_pylist()
    assert sorted((a["partition.family"], a["num_records"]) for a in actions) == [("ratings", 3), ("tasks", 2)]
    assert all(a["path"].startswith(f"family={a['partition.family']}/part-") for a in actions)
    assert _table(home).metadata().partition_columns == ["family"]


def test_a_file_is_cut_in_row_groups_that_readers_read_in_parallel(home, monkeypatch):
    monkeypatch.setattr("pipeline.compact.files.PARQUET_OPTIONS", {**files.PARQUET_OPTIONS, "row_group_size": 4})
    append(home, [rating(i) for i in range(10)])
    compact(home)
    (path,) = live_files(home, "ratings")
    assert [pq.ParquetFile(path).metadata.row_group(g).num_rows for g in range(3)] == [4, 4, 2]


def test_merges_stop_at_the_target_size_and_leave_full_files_alone(home, monkeypatch):
    """Small files of a family are merged into files of up to the target size; a file at the target is never
    rewritten again, so a merge rewrites only what the recent runs added."""
    sizes = []
    for i in range(3):
        append(home, [rating(i)])
        compact(home)
        sizes.append(live_files(home, "ratings")[-1].stat().st_size)
    target = 2 * max(sizes) + 100  # two of these files fit, three do not
    monkeypatch.setattr("pipeline.compact.commit.TARGET_FILE_BYTES", target)
    append(home, [rating(3)])
    assert compact(home, merge_threshold=3).files_merged == 4  # in bins of two (by the sizes of their inputs)
    merged = {p.name: p.stat().st_size for p in live_files(home, "ratings")}
    full = {name for name, size in merged.items() if size >= target}
    assert len(merged) == 2 and full  # each file of the store's columns is bigger than its two inputs together
    for i in range(4, 8):
        append(home, [rating(i)])
        compact(home, merge_threshold=3)
    assert full <= {p.name for p in live_files(home, "ratings")}  # files near the target stay as they are
    with open_store(home) as store:
        assert store.con.execute("SELECT count(*) FROM ratings").fetchall() == [(8,)]


def test_duplicates_are_dropped_once_and_conflicts_dead_lettered(home):
    append(home, [rating(1), rating(1), rating(2)])  # duplicate within a batch
    result = compact(home)
    assert result.streams["ratings"].duplicate == 1 and result.streams["ratings"].stored == 2
    append(home, [rating(1), rating(2, score=0.0)])  # duplicate across runs, and a conflict
    result = compact(home)
    assert result.streams["ratings"].model_dump() == {
        "lines": 4,  # the two events and the two frame lines of their batch
        "stored": 0,
        "duplicate": 1,
        "conflict": 1,
        "invalid": 0,
        "frames": 2,
    }
    with open_store(home) as store:
        assert store.con.execute("SELECT id, score FROM ratings ORDER BY id").fetchall() == [("R-1", 1.0), ("R-2", 1.0)]
    letters = [json.loads(x) for x in (home / "deadletter" / "ratings.jsonl").read_text().splitlines()]
    assert [(d["line_no"], d["reason"].split(":")[0:2]) for d in letters] == [(8, ["id", " conflict"])]


def test_invalid_lines_go_to_the_dead_letters_with_position_and_raw_bytes(home):
    append(home, [rating(1)])
    stream = home / "streams" / "ratings.jsonl"
    good = stream.read_bytes()
    bad = [b'{"type":"task.rated","task":"T"}', b"not json", b'{"type":"task.rated","score":NaN}', b"\xff\xfe"]
    stream.write_bytes(good + b"".join(b + b"\n" for b in bad))
    result = compact(home)
    assert result.streams["ratings"].invalid == 4 and result.streams["ratings"].stored == 1
    letters = [json.loads(x) for x in (home / "deadletter" / "ratings.jsonl").read_text().splitlines()]
    assert [d["line_no"] for d in letters] == [2, 3, 4, 5]
    assert [base64.b64decode(d["raw_b64"]) for d in letters] == bad
    assert letters[0]["byte_offset"] == len(good) and letters[0]["stream"] == "ratings"
    assert letters[0]["reason"].startswith("config: required field is missing")
    assert "UTF-8" in letters[3]["reason"]


def test_unknown_fields_and_types_are_kept(home):
    append(
        home,
        [
            rating(1, note={"why": "x"}),
            {"id": "X-1", "type": "custom.event", "at": "2026-01-01T00:00:00Z", "payload": [1, 2]},
        ],
    )
    compact(home)
    with open_store(home) as store:
        assert store.con.execute("SELECT extra FROM ratings").fetchone() == ('{"note":{"why":"x"}}',)
        assert store.con.execute("SELECT type, extra FROM other").fetchone() == ("custom.event", '{"payload":[1,2]}')


def test_a_torn_tail_is_not_consumed(home):
    append(home, [rating(1)])
    stream = home / "streams" / "ratings.jsonl"
    with open(stream, "ab") as handle:
        handle.write(b'{"id":"R-9","type":"task.rat')
    size = stream.stat().st_size
    result = compact(home)
    assert result.streams["ratings"].lines == 1
    consumed = _table(home).transaction_version(txn_ids(result.writer, "ratings")[0])
    assert consumed == size - len(b'{"id":"R-9","type":"task.rat') == stream.stat().st_size
    (fragment,) = (home / "quarantine").iterdir()  # the consistent cut recovered the stream first
    assert fragment.read_bytes() == b'{"id":"R-9","type":"task.rat'


def test_small_files_are_merged_by_optimize(home):
    merged = 0
    for i in range(5):
        append(home, [rating(i)])
        merged += compact(home, merge_threshold=3).files_merged
    assert merged == 4 and len(live_files(home, "ratings")) <= 3
    assert [c["operation"] for c in commits(_table(home), Workspace.of(home).store)].count("OPTIMIZE") == 1
    with open_store(home) as store:
        assert store.con.execute("SELECT count(*) FROM ratings").fetchall() == [(5,)]


def test_config_columns_are_flattened_with_the_key(home):
    config = {"cli": "a/b", "route": None, "model": "480B/A35B", "effort": "-"}
    append(home, [{**rating(1), "config": config}])
    compact(home)
    with open_store(home) as store:
        row = store.con.execute("SELECT cli, route, model, effort, config_key FROM ratings").fetchone()
    assert row == ("a/b", None, "480B/A35B", "-", "a%2Fb/-/480B%2FA35B/%2D")


# --------------------------------------------------------------------------- fast path == line-by-line path
TRICKY = [
    rating(1),
    {**rating(2), "precision": 0.5, "confidence": 1, "importance": 0},
    {**rating(3), "at": "2026-01-01T10:00:00.123456Z"},
    {**rating(4), "at": "2026-01-01T12:00:00+02:00"},  # another zone: the slow path normalises it
    {**rating(5), "id": None},
    opened(6),
    opened(7, labels={"b": "2", "a": "1"}),
    opened(8, title=None, thread="t"),
    {
        "id": "A-1",
        "type": "task.attempted",
        "at": "2026-01-01T09:30:00Z",
        "task": "T-1",
        "status": "failure",
        "config": {"cli": "c", "route": None, "model": "m/x", "effort": "-"},
        "cost_usd": 0,
        "tool_calls": 3,
    },
    {
        "id": "D-1",
        "type": "route.decided",
        "at": "2026-01-01T09:00:00Z",
        "task": "T-1",
        "policy": "p",
        "chosen": "a/b/c/d",
        "candidates": ["a/b/c/d", "x/-/y/-"],
        "propensity": 1,
        "table": None,
        "explored": True,
    },
    {"id": "C-1", "type": "task.closed", "at": "2026-01-01T09:00:00Z", "task": "T-1", "outcome": "done"},
    {
        "id": "J-1",
        "type": "task.rejected",
        "at": "2026-01-01T09:00:00Z",
        "task": "T-1",
        "config": CONFIG,
        "rater": {"kind": "human", "name": "ann"},
        "claim": "wrong",
        "evidence": [],
    },
    {"id": "X-1", "type": "rating.retracted", "at": "2026-01-01T09:00:00Z", "rating": "R-1", "reason": "typo"},
    {"id": "U-1", "type": "mystery", "at": "2026-01-01T09:00:00Z", "z": 1},
]
BAD_LINES = [
    b'{"id":"B-1","type":"task.rated","at":"2026-01-01T10:00:00Z","task":"T","config":{"cli":"c","model":"m"},'
    b'"rater":{"kind":"gate","name":"g"},"score":1.5}',
    b'{"id":"B-2","type":"task.rated","at":"2026-02-30T10:00:00Z","task":"T","config":{"cli":"c","model":"m"},'
    b'"rater":{"kind":"gate","name":"g"},"score":1}',
    b'{"id":"B-3","type":"task.rated","precision":null,"task":"T","config":{"cli":"c","model":"m"},'
    b'"rater":{"kind":"gate","name":"g"},"score":1}',
    b'{"id":"B-4","type":"task.rated","task":"T","config":{"cli":"c","model":"m"},'
    b'"rater":{"kind":"bot","name":"g"},"score":1}',
    b'{"id":"B-5","type":"task.rated","task":"T","config":{"cli":"c","model":"m","x":1},'
    b'"rater":{"kind":"gate","name":"g"},"score":1}',
    b'{"id":"B-6","type":"task.rated","task":"T","config":{"cli":"c","model":"m"},'
    b'"rater":{"kind":"gate","name":"g"},"score":NaN}',
    b'{"id":"B-7","type":"task.rated","task":"","config":{"cli":"c","model":"m"},'
    b'"rater":{"kind":"gate","name":"g"},"score":"1"}',
    b'{"id":"B-8","type":"task.attempted","task":"T","config":{"cli":"c","model":"m"},"status":"ok"}',
    b'{"id":"B-9","type":"task.attempted","task":"T","config":{"cli":"c","model":"m"},"status":"success",'
    b'"duration_ms":1.0}',
    b'{"id":"B-10","type":"route.decided","task":"T","policy":"p","chosen":"c","candidates":["c",""],"propensity":0}',
    b'{"id":"B-11","type":"task.closed","task":"T","outcome":"done","outcome":"done"}',  # valid: the last key wins
    b'{"id":"B-12","type":"task.closed","task":"T","outcome":"done"} trailing',
    b"",
    b"   ",
    b"[1,2]",
    b'{"type":"task.closed","task":"T","outcome":"done","at":"2026-01-01 10:00:00Z"}',  # valid
    b'{"id":"B-13","type":"task.rated","task":"T","config":{"cli":"c","model":"m"},"rater":{"kind":"gate",'
    b'"name":"g"},"score":1,"importance":1e400}',
    b'{"type":"task.closed","task":"T","outcome":"done","v":0}',
]


def _lines_of(events, bad, form="append"):
    """The events as ``append`` writes them (``form="append"``) or as ``json.dumps`` would (spaced separators,
    keys sorted, unicode escaped), with the bad lines between them."""
    from pipeline.streams.events import to_json_line, validate_object

    good = [to_json_line(validate_object(dict(e.items()))) for e in events]
    if form == "json.dumps":
        good = [(json.dumps(json.loads(line), sort_keys=True) + "\n").encode() for line in good]
    mixed = []
    for i, line in enumerate(good):
        mixed.append(line)
        if i < len(bad):
            mixed.append(bad[i] + b"\n")
    mixed += [b + b"\n" for b in bad[len(good) :]]
    return b"".join(mixed)


@pytest.mark.parametrize("form", ["append", "json.dumps"])
def test_fast_path_gives_the_rows_and_reasons_of_the_line_by_line_parser(form):
    import numpy as np
    import pyarrow as pa

    from pipeline.compact.fastpath import lines_array, parse_fast
    from pipeline.compact.parse import Chunk, parse_chunk, parse_lines_slow

    block = _lines_of(TRICKY, BAD_LINES, form) + _lines_of([rating(i) for i in range(100, 400)], [], form)
    chunk = Chunk.of("ratings", block, 1000, 7, "w")
    fast = parse_chunk(chunk, 1 << 20)
    slow = parse_lines_slow(chunk, list(range(len(chunk))), 1 << 20)
    lines = lines_array(chunk.block, chunk.starts)
    left = parse_fast(lines, np.arange(len(chunk)), "w:ratings", chunk.offsets, chunk.block)
    assert sum(len(s) for s in left.slow) < 40  # the 300 plain ratings took the vectorised path
    assert sorted(fast.invalid) == sorted(slow.invalid)
    assert len(slow.invalid) == len(BAD_LINES) - 2  # two of them are valid, in an unusual form
    assert sorted(fast.tables) == sorted(slow.tables)
    for family in slow.tables:
        assert fast.tables[family].to_pylist() == slow.tables[family].to_pylist(), family
        decoded = [
            pa.field(f.name, f.type.value_type if pa.types.is_dictionary(f.type) else f.type)
            for f in fast.tables[family].schema
        ]  # the vectorised rows keep some columns dictionary-encoded
        assert pa.schema(decoded) == slow.tables[family].schema


def test_vectorised_config_key_equals_config_key():
    import pyarrow as pa

    from pipeline.compact.fastpath import config_keys
    from pipeline.streams.events import config_key

    parts = [("a/b", None, "480B/A35B", "-"), ("%2F", "-", "%", None), ("c", "r", "m", "e"), ("-", "--", "/-/", "%-")]
    array = pa.array([dict(zip(("cli", "route", "model", "effort"), p, strict=True)) for p in parts])
    assert config_keys(array).to_pylist() == [config_key(*p) for p in parts]


def _plain_ratings(n, start=0):
    from pipeline.streams.events import to_json_line, validate_object

    return [to_json_line(validate_object(dict(rating(i).items()))) for i in range(start, start + n)]


def test_bad_utf8_sends_only_its_own_line_to_the_parser():
    import numpy as np

    from pipeline.compact.fastpath import lines_array, parse_fast
    from pipeline.compact.parse import Chunk, parse_chunk, parse_lines_slow

    good = _plain_ratings(200)
    bad = good[50].replace(b'"name":"', b'"name":"\xff')  # Arrow's JSON reader would take it as a string
    block = b"".join([*good[:100], bad, *good[100:]])
    chunk = Chunk.of("ratings", block, 0, 1, "w")
    left = parse_fast(lines_array(chunk.block, chunk.starts), np.arange(len(chunk)), "w:ratings", chunk.offsets, block)
    assert np.concatenate(left.slow).tolist() == [100]
    fast, slow = parse_chunk(chunk, 1 << 20), parse_lines_slow(chunk, list(range(len(chunk))), 1 << 20)
    assert fast.invalid == slow.invalid and fast.invalid[0][0] == 100
    assert fast.tables["ratings"].to_pylist() == slow.tables["ratings"].to_pylist()


def test_the_lean_reading_of_defaulted_fields_gives_the_parsers_rows_and_follows_the_stream():
    """Ratings without precision are read with a schema that leaves it out; a chunk where some line names it
    (with a value, or an invalid explicit null) is read whole, and the hint follows what the chunks show."""
    from pipeline.compact.parse import Chunk, parse_chunk, parse_lines_slow

    plain = b"".join(_plain_ratings(300))
    valued = b"".join(_plain_ratings(100, 300)).replace(b'"score":', b'"precision":0.5,"score":', 7)
    null = b"".join(_plain_ratings(100, 400)).replace(b'"score":', b'"confidence":null,"score":', 1)
    lean: dict[str, bool] = {}
    invalid = []
    for block, hint in ((plain, True), (valued, False), (plain, True), (null, False), (plain, True)):
        chunk = Chunk.of("ratings", block, 0, 1, "w")
        fast, slow = parse_chunk(chunk, 1 << 20, lean), parse_lines_slow(chunk, list(range(len(chunk))), 1 << 20)
        assert lean["task.rated"] is hint
        assert fast.invalid == slow.invalid
        assert fast.tables["ratings"].to_pylist() == slow.tables["ratings"].to_pylist()
        invalid.append([r for r, _ in fast.invalid])
    assert invalid == [[], [], [], [0], []]  # the explicit null, alone among 100


def test_file_statistics_are_the_columns_min_max_and_nulls():
    """The commit's statistics are read off the Parquet writer's; they equal those computed from the data
    (zero is 0.0, times in milliseconds rounded outwards, long strings and list columns left out)."""
    import io
    from datetime import UTC, datetime

    import pyarrow as pa
    import pyarrow.compute as pc

    from pipeline.compact.files import STATS_COLUMNS, file_stats, parquet_options

    at = [datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC), None, datetime(2025, 12, 31, tzinfo=UTC)]
    table = pa.table(
        {
            "id": ["b", "a" * 40, "c"],
            "at": pa.array(at, pa.timestamp("us", tz="UTC")),
            "score": [0.0, None, 0.5],
            "task": ["t2", "t1", None],
            "explored": [True, None, False],
            "candidates": pa.array([["x"], None, []], pa.list_(pa.string())),
            "_offset": pa.array([7, 3, 9], pa.int64()),
        }
    )
    written: list = []
    pq.write_table(table, io.BytesIO(), metadata_collector=written, **{**parquet_options(table), "row_group_size": 2})
    stats = json.loads(file_stats(written[0]))
    assert stats["numRecords"] == 3
    assert stats["nullCount"] == {c: table[c].null_count for c in table.column_names if c != "candidates"}
    assert stats["minValues"] == {
        "at": "2025-12-31T00:00:00.000Z",
        "score": 0.0,
        "task": "t1",
        "_offset": 3,
    }
    assert stats["maxValues"] == {"at": "2026-01-02T03:04:05.124Z", "score": 0.5, "task": "t2", "_offset": 9}
    assert str(stats["minValues"]["score"]) == "0.0"  # not the -0.0 Parquet keeps
    for column in ("task", "_offset", "score"):
        assert column in STATS_COLUMNS
        low, high = pc.min_max(table[column]).values()
        assert (stats["minValues"][column], stats["maxValues"][column]) == (low.as_py(), high.as_py())


# --------------------------------------------------------------------------- crashes, faults, races
import errno  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import threading  # noqa: E402
from contextlib import nullcontext  # noqa: E402

import pyarrow.parquet as pq  # noqa: E402
import pytest  # noqa: E402

import pipeline.compact.run as run_module  # noqa: E402
from pipeline.commands.verify import verify  # noqa: E402
from pipeline.errors import PipelineError, StoreConflict  # noqa: E402


class Crash(Exception):
    """Stands for the process dying at a step (the process-level kills are in test_compact_crash.py)."""


def _base(tmp_path):
    """A home with one compaction done and new input waiting (valid, duplicate, conflict and invalid lines)."""
    home = tmp_path / "base"
    append(home, [opened(1), rating(1), rating(2, day=2)])
    compact(home)
    append(home, [opened(2), rating(3, day=3), rating(1), rating(2, day=2, score=0.0), rating(4, day=4)])
    with open(home / "streams" / "ratings.jsonl", "ab") as handle:
        handle.write(b'{"type":"task.rated"}\n')
    return home


@pytest.fixture
def base(tmp_path):
    home = _base(tmp_path)
    reference = tmp_path / "reference"
    shutil.copytree(home, reference)
    compact(reference)
    return home, reference


def _fresh(base_home, tmp_path, name):
    target = tmp_path / name
    shutil.copytree(base_home, target)
    return target


@pytest.mark.parametrize("step", ["after-files", "before-commit", "after-commit", "after-optimize"])
def test_a_crash_at_any_step_resumes_to_the_fault_free_store(base, tmp_path, monkeypatch, snapshot, step):
    home_base, reference = base
    home = _fresh(home_base, tmp_path, "crashed")

    def hook(at):
        if at == step:
            raise Crash(at)

    monkeypatch.setattr(run_module, "fault_hook", hook)
    with pytest.raises(Crash):
        compact(home, merge_threshold=2)
    monkeypatch.undo()
    assert verify(home).ok
    compact(home, merge_threshold=2)
    assert verify(home).ok
    assert snapshot(home) == snapshot(reference)


def test_files_of_a_crashed_run_stay_invisible_and_vacuum_removes_them(base, tmp_path, snapshot):
    from pipeline.store.upkeep import vacuum

    home_base, reference = base
    home = _fresh(home_base, tmp_path, "torn")
    part = home / "store" / "events" / "family=ratings"
    part.mkdir(parents=True, exist_ok=True)
    (part / "part-00001-CRASHED.snappy.parquet").write_bytes(b"PAR1 half a file")
    shutil.copy(live_files(reference, "ratings")[-1], part / "part-00002-CRASHED.snappy.parquet")
    with open(home / "deadletter" / "ratings.jsonl", "ab") as handle:
        handle.write(b'{"stream":"ratings","byte_offset":1,"line_no":1,"reason":"from a crashed run"')
    assert snapshot(home)["counts"]["ratings"] == 2  # nothing of the crashed run is visible
    assert verify(home).unreferenced_files == 2
    compact(home)
    assert verify(home).ok
    assert snapshot(home) == snapshot(reference)
    removed = vacuum(home, retain_hours=0)
    assert removed.files_removed == 2 and removed.bytes_after < removed.bytes_before
    assert not list(part.glob("*CRASHED*")) and verify(home).unreferenced_files == 0
    assert snapshot(home) == snapshot(reference)


def _count_calls(home, target, attr):
    calls = [0]
    original = getattr(target, attr)

    def counting(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    setattr(target, attr, counting)
    try:
        compact(home)
    finally:
        setattr(target, attr, original)
    return calls[0]


# The Python side of a run (dead letters, Parquet files); delta-rs's own I/O is reached in test_compact_crash.py.
FAULT_TARGETS = [(os, "write"), (os, "fsync"), (pq.ParquetWriter, "write_table")]


@pytest.mark.parametrize("target, attr", FAULT_TARGETS, ids=[a for _, a in FAULT_TARGETS])
def test_io_faults_on_the_kth_call_leave_a_verifiable_store_and_a_clean_rerun(base, tmp_path, snapshot, target, attr):
    home_base, reference = base
    expected = snapshot(reference)
    calls = _count_calls(_fresh(home_base, tmp_path, "count"), target, attr)
    assert calls >= 1
    for k in range(1, calls + 1):
        for code in (errno.ENOSPC, errno.EIO) if k == 1 else (errno.ENOSPC,):
            home = _fresh(home_base, tmp_path, f"fault-{k}-{code}")
            original = getattr(target, attr)
            seen = [0]

            def faulty(*args, seen=seen, k=k, code=code, original=original, **kwargs):
                seen[0] += 1
                if seen[0] == k:
                    raise OSError(code, os.strerror(code))
                return original(*args, **kwargs)

            setattr(target, attr, faulty)
            try:
                with pytest.raises((OSError, PipelineError)):
                    compact(home)
            finally:
                setattr(target, attr, original)
            assert verify(home).ok, (attr, k, verify(home).problems)
            compact(home)
            assert verify(home).ok
            assert snapshot(home) == expected, (attr, k)


def test_racing_compactors_take_turns_on_the_lock(base, tmp_path, snapshot):
    home_base, reference = base
    home = _fresh(home_base, tmp_path, "race")
    results = []
    threads = [threading.Thread(target=lambda: results.append(compact(home))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r.created for r in results) == [False, True]
    assert table_version(home) == 2
    assert snapshot(home) == snapshot(reference)


def test_without_the_lock_a_second_compaction_of_one_writer_is_refused(base, tmp_path, monkeypatch, snapshot):
    home_base, reference = base
    home = _fresh(home_base, tmp_path, "nolock")
    monkeypatch.setattr(Workspace, "lock", lambda ws, path, busy=None: nullcontext())
    original = run_module.fault_hook
    raced = []

    def hook(step):
        if step == "before-commit" and not raced:
            raced.append(True)
            compact(home)  # the other compactor of this writer commits first
        original(step)

    monkeypatch.setattr(run_module, "fault_hook", hook)
    with pytest.raises(StoreConflict, match="committed tasks meanwhile; nothing of this run is visible"):
        compact(home)
    monkeypatch.undo()
    assert table_version(home) == 2
    assert verify(home).ok
    assert snapshot(home) == snapshot(reference)


def test_a_second_home_claiming_the_writer_name_is_refused(tmp_path):
    shared = str(tmp_path / "shared")
    first, second = tmp_path / "a", tmp_path / "b"
    append(first, [rating(1)])
    append(second, [rating(2)])
    compact(Workspace.resolve(first, store=shared, writer="same"))
    with pytest.raises(StoreConflict, match=r"writer 'same' already commits to .* from another home"):
        compact(Workspace.resolve(second, store=shared, writer="same"))
    other = compact(Workspace.resolve(second, store=shared, writer="other"))
    with open_store(Workspace.resolve(second, store=shared)) as store:
        assert other.created and store.con.execute("SELECT id FROM ratings ORDER BY id").fetchall() == [
            ("R-1",),
            ("R-2",),
        ]


def test_a_home_remembers_its_writer_name(home, monkeypatch):
    from pipeline.errors import PipelineError

    append(home, [rating(1)])
    assert compact(Workspace.resolve(home, writer="first-name")).writer == "first-name"
    append(home, [rating(2)])
    monkeypatch.setattr("socket.gethostname", lambda: "renamed-host")
    assert compact(home).writer == "first-name"  # a renamed host is not a second writer
    with pytest.raises(PipelineError, match="this home writes to the store as 'first-name'"):
        compact(Workspace.resolve(home, writer="another"))


def test_duplicates_are_counted_once_across_files_runs_and_reimports(home, tmp_path):
    from pipeline.streams.imports import import_table

    path = tmp_path / "t.csv"
    path.write_text(
        "task_id,config,score,cost_usd,region,at\nT1,m,1,0.1,r,2026-01-01T00:00:00Z\n"
        "T2,m,0,0.1,r,2026-01-01T00:00:00Z\n"
    )
    copy = tmp_path / "copy.csv"
    copy.write_bytes(path.read_bytes())
    import_table(home, path, rater_name="x")
    again = import_table(home, copy, rater_name="x")  # the same rows from another file: the ledger knows them
    assert (again.appended, again.unchanged) == (0, 6)
    first = compact(home)
    (home / "imports" / "ledger").rename(home / "ledger-gone")  # without the ledger, the repeats reach the streams
    import_table(home, path, rater_name="x")
    second = compact(home)
    assert first.rows["ratings"] == 2 and first.streams["ratings"].duplicate == 0
    assert second.rows == first.rows and second.streams["ratings"].duplicate == 2
    assert second.streams["tasks"].duplicate == 4  # 2 opened + 2 attempted


def test_the_same_event_written_differently_is_a_duplicate_not_a_conflict(home):
    append(home, [rating(1)])
    compact(home)
    with open(home / "streams" / "ratings.jsonl", "ab") as handle:  # same event: other key order, other zone
        handle.write(
            b'{"score":1.0,"type":"task.rated","id":"R-1","at":"2026-01-01T12:00:01+02:00","task":"T-1",'
            b'"config":{"cli":"claude-code","route":"anthropic","model":"opus","effort":"high"},'
            b'"rater":{"kind":"gate","name":"pytest"}}\n'
        )
    result = compact(home)
    assert result.streams["ratings"].duplicate == 1 and result.streams["ratings"].conflict == 0


def test_the_id_hash_is_pinned():
    """The table stores these hashes (_id_hash): they must never change."""
    import pyarrow as pa

    from pipeline.compact.ids import hash_ids

    ids = pa.array(["a", "R-1", "abcdefghi", "é" * 40, "01K00000000000000000000000"])
    assert [hex(int(h)) for h in hash_ids(ids)] == [
        "0x405337e338614e91",
        "0x44b7bffbfde83935",
        "0x950763e0dd50ae4b",
        "0xd0541298974f156c",
        "0x8e2486e716b0abd6",
    ]
    assert hash_ids(ids.take(pa.array([4, 0]))).tolist() == hash_ids(ids).tolist()[4::-4]


def test_argsort_stable_is_numpys_stable_argsort():
    """Hashes with runs of equal values (repeats) keep their input order within each run, as numpy's stable sort."""
    import numpy as np

    from pipeline.compact.ids import argsort_stable

    rng = np.random.default_rng(7)
    for n, repeats in [(0, 0), (1, 0), (2, 2), (1000, 0), (1000, 5), (5000, 2000)]:
        h = rng.integers(0, 2**63, n).astype(np.uint64)
        if repeats:
            h[rng.integers(0, n, repeats)] = h[rng.integers(0, n, repeats)]
        assert argsort_stable(h).tolist() == np.argsort(h, kind="stable").tolist()
    same = np.full(50, 9, np.uint64)
    assert argsort_stable(same).tolist() == list(range(50))


def test_small_chunks_and_buffers_give_the_same_store(tmp_path, snapshot):
    events = [opened(i) for i in range(30)] + [rating(i % 40, day=1 + i % 5) for i in range(60)]
    events += [rating(7, score=0.0), {"type": "task.rated"}]  # a conflict and an invalid event, late
    small, big = tmp_path / "small", tmp_path / "big"
    for home in (small, big):
        append(home, events[:-1])
        with open(home / "streams" / "ratings.jsonl", "ab") as handle:
            handle.write(b'{"type":"task.rated"}\n')
    one = compact(big)
    many = compact(small, chunk_bytes=600, buffer_rows=7, merge_threshold=3)
    assert many.streams == one.streams
    assert one.streams["ratings"].model_dump() == {
        "lines": 64,
        "stored": 40,
        "duplicate": 20,
        "conflict": 1,
        "invalid": 1,
        "frames": 2,
    }
    assert snapshot(small) == snapshot(big)
    assert verify(small).ok


def test_cli_compact_prints_a_table_or_json(home):
    from click.testing import CliRunner

    from pipeline.cli import cli

    append(home, [rating(1), rating(1)])
    runner = CliRunner()
    first = runner.invoke(cli, ["compact", "--home", str(home), "-q", "--writer", "ci-1"])
    assert first.exit_code == 0, first.output
    assert first.output.splitlines() == [
        "stream   lines  stored  duplicate  conflict  invalid  frames",
        "-------  -----  ------  ---------  --------  -------  ------",
        "tasks    0      0       0          0         0        0",
        "ratings  4      1       1          0         0        2",
        "version 1 (writer ci-1); 1 file(s) written, 0 merged; store: ratings 1",
    ]
    again = runner.invoke(cli, ["compact", "--home", str(home), "--json"])
    assert json.loads(again.output)["created"] is False


def test_a_line_over_the_limit_is_streamed_past_and_dead_lettered(home, snapshot):
    import tracemalloc

    append(home, [rating(1)])
    stream = home / "streams" / "ratings.jsonl"
    offset = stream.stat().st_size
    long_line = b'{"type":"task.rated","title":"' + b"x" * (24 << 20) + b'"}'
    with open(stream, "ab") as handle:
        handle.write(long_line + b"\n")
    append(home, [rating(2)])
    tracemalloc.start()
    result = compact(home, chunk_bytes=1 << 16)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 8 << 20  # the 24 MiB line was never held whole
    assert result.streams["ratings"].model_dump() == {
        "lines": 3,
        "stored": 2,
        "duplicate": 0,
        "conflict": 0,
        "invalid": 1,
        "frames": 0,
    }
    (letter,) = [json.loads(x) for x in (home / "deadletter" / "ratings.jsonl").read_text().splitlines()]
    assert letter["byte_offset"] == offset and letter["line_no"] == 2 and letter["raw_bytes"] == len(long_line)
    assert letter["reason"] == f"-: line is {len(long_line)} bytes, over the limit of {1 << 20}"
    assert base64.b64decode(letter["raw_b64"]) == long_line[:4096]
    assert verify(home).ok
    big = home.parent / "big-chunks"
    shutil.copytree(home / "streams", big / "streams")
    compact(big)  # the line inside one 32 MiB chunk: the same verdict, by the per-line parser
    (same,) = [json.loads(x) for x in (big / "deadletter" / "ratings.jsonl").read_text().splitlines()]
    assert same["reason"] == letter["reason"] and snapshot(big)["views"] == snapshot(home)["views"]
