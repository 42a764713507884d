"""The imports write the bytes they always wrote: streams, ledger, dead letters and summaries of a varied long table
and a varied mini-ork store, imported, then imported again after changes (retractions, new rows), in chunks of 7
rows spooled to a file and in chunks of the default size held in memory, pinned as SHA-256 digests of what the
per-row code (before the bulk lanes of pipeline/streams/imports/long.py) wrote. A change that moves a digest
changes the ids or lines of every user's earlier imports: it must not land without a migration.

To see what moved, run the same scenario with the old code and diff the homes (the scenario writes them under
pytest's temporary folder).
"""

from __future__ import annotations

import csv
import hashlib
import json
import random
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.fit.shipped import Price
from pipeline.streams.imports import ImportOptions, import_source, run
from pipeline.streams.imports import values as import_values

from .miniork_db import build_state_db

NOW = datetime(2027, 1, 1, tzinfo=UTC)  # retractions carry the import's time: fixed here

TIMES = [
    "2026-01-{d:02d}T{h:02d}:{m:02d}:00Z",  # the plain form
    "2026-01-{d:02d}T{h:02d}:{m:02d}:00.250Z",
    "2026-01-{d:02d}T{h:02d}:{m:02d}:00+02:00",
    "2026-01-{d:02d}t{h:02d}:{m:02d}:00z",
    "2026-02-{d:02d}T{h:02d}:{m:02d}:59.5-01:30",
]
ODD = ["", " ", "nan", "x", "2999-01-01T00:00:00Z", "2026-02-30T00:00:00Z", "-1", "1e308", "7"]
CONFIGS = ["agent/prov/model/high", "agent/-/model/-", "c/r/m%2Fx/%2D", 'é/ü/"q"/\\\\', " a/b/c/d ", "/r/m/-"]


def long_rows(seed: int, n: int) -> list[list[str]]:
    """Rows of a long table with a label column and a failure_mode column: most good, some blank, some bad, some
    read only by the row check (times with offsets, odd spacing), tasks that repeat across chunks."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        at = rng.choice(TIMES).format(d=1 + rng.randrange(28), h=rng.randrange(24), m=rng.randrange(60))
        score = rng.choice(["0", "1", "0.5", " 0.25 ", "1.0", "0.3333333333333333", "NaN", "", "1e-7"])
        cost = rng.choice(["", "0.01", f"{rng.random() * 0.05:.6f}", "0", "nan", "1e-05", "12.5"])
        task = rng.choice([f"task-{rng.randrange(40)}", f"T é {rng.randrange(5)}", 'q"uote', "tab\there"])
        row = [task, rng.choice(CONFIGS), score, cost, rng.choice(["r1", "", "r2"]), at]
        if rng.random() < 0.06:  # a bad cell somewhere
            row[rng.choice([0, 1, 2, 3, 5])] = rng.choice(ODD)
        suite = rng.choice(["", "s1", "s2"])
        failure = rng.choice(["", "", "", "agent_timeout"])
        rows.append([*row, suite, failure])
    return rows


HEADER = ["task_id", "config", "score", "cost_usd", "region", "at", "suite", "failure_mode"]


def write_csv(path: Path, rows: list[list[str]], header: list[str] = HEADER) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([header, *rows])
    return path


def digest_home(home: Path) -> dict[str, str]:
    """The SHA-256 of every file the imports wrote (streams, ledger runs, dead letters), by path; the dead letters
    name the source by its path, here written ``<root>``."""
    root = str(home.parent).encode()
    return {
        str(path.relative_to(home)): hashlib.sha256(path.read_bytes().replace(root, b"<root>")).hexdigest()
        for folder in ("streams", "imports/ledger", "deadletter")
        for path in sorted((home / folder).glob("*"))
        if path.is_file() and not path.name.startswith(".")
    }


def summary(result: object) -> str:
    data = result.summary()  # type: ignore[attr-defined]
    data.pop("deadletter", None)  # the home's path
    data.pop("source", None)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


@pytest.fixture
def fixed_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(import_values, "utc_now", lambda: NOW)


def small_chunks(monkeypatch: pytest.MonkeyPatch, chunk: int | None) -> None:
    """Chunks of ``chunk`` rows, spooled to the home's spool file from the second on (None: the defaults)."""
    if chunk is not None:
        monkeypatch.setattr(run, "CHUNK_ROWS", chunk)
        monkeypatch.setattr(run, "SPOOL_MEMORY", 1024)


def long_scenario(root: Path, chunk: int | None, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    root.mkdir(parents=True, exist_ok=True)
    small_chunks(monkeypatch, chunk)
    first = long_rows(1, 160)
    second = [list(r) for r in first]
    for r in second[::9]:  # changed scores: retracted and replaced
        r[2] = "0.75"
    second += long_rows(2, 40)
    home = root / "home"
    out = {}
    options = ImportOptions(skip_bad=True, fmt="long")
    out["first"] = summary(import_source(home, [write_csv(root / "table.csv", first)], options))
    out["again"] = summary(import_source(home, [write_csv(root / "table.csv", first)], options))
    out["changed"] = summary(import_source(home, [write_csv(root / "table.csv", second)], options))
    parquet = root / "table.parquet"
    pq.write_table(pa.table({name: [r[i] for r in second] for i, name in enumerate(HEADER)}), parquet)
    out["parquet"] = summary(import_source(root / "home-pq", [parquet], options))
    plain = [r[:6] for r in long_rows(3, 60)]
    out["plain"] = summary(import_source(root / "home-plain", [write_csv(root / "p.csv", plain, HEADER[:6])], options))
    return {**out, **digest_home(home), **{f"pq/{k}": v for k, v in digest_home(root / "home-pq").items()}} | {
        f"plain/{k}": v for k, v in digest_home(root / "home-plain").items()
    }


def mini_ork_store(path: Path, traces: int, seed: int) -> None:
    """A run of two lanes (the bench's store) plus every odd kind of row the importer reads."""
    build_state_db(path, traces=traces, lanes=("glm", "opus"), seed=seed)
    con = sqlite3.connect(path)
    con.execute("PRAGMA ignore_check_constraints = ON")
    rng = random.Random(seed)
    for i in range(30):
        run_id = f"odd-{i}"
        con.execute(
            "INSERT INTO task_runs (id, task_class, recipe, kickoff_path, status, verdict, created_at, updated_at, "
            "ended_at, dispatch_config_json) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                run_id,
                rng.choice(["code_fix", "research", ""]),
                rng.choice([None, "code-fix"]),
                f"k/{i % 4}",
                rng.choice(["published", "failed", "verifying", "rolled_back"]),
                rng.choice([None, "ESCALATE", "CRASH", "APPROVE"]),
                rng.choice([1780000000 + i, "2026-05-28T10:00:00.000Z", 1780000000000 + i, "bad time"]),
                1780000100,
                rng.choice([None, 1780000200]),
                rng.choice([None, '{"glm": {"model_id": "glm-5.1", "provider": "zhipu"}}', "not json"]),
            ),
        )
        for j in range(rng.randrange(0, 4)):
            verifier = rng.choice(
                [
                    "{}",
                    '{"pytest": {"pass": true}, "ruff": {"pass": false, "score": 0.25}}',
                    '{"node_type": "reviewer", "x": {"score": 7}}',
                    "not json",
                ]
            )
            con.execute(
                "INSERT INTO execution_traces (trace_id, run_id, agent_version_id, task_class, verifier_output, "
                "reviewer_verdict, cost_usd, duration_ms, status, created_at, process_reward, reward_value, "
                "reward_source, validity, route_source, route_explore, route_score, tool_calls) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    f"tr-odd-{i}-{j}",
                    rng.choice([run_id, run_id, "gone"]),
                    rng.choice(["glm", "opus", "", "sonnet"]),
                    "code_fix",
                    verifier,
                    rng.choice([None, "APPROVE", "ESCALATE", "REQUEST_CHANGES"]),
                    rng.choice([0.0, 0.12, 0.3]),
                    rng.choice([0, 4200]),
                    rng.choice(["success", "failure", "pending", "crashed", "blocked", "vacuous"]),
                    rng.choice(["2026-05-28T20:26:50.123Z", "2026-05-28 20:26:50", "1780000000", ""]),
                    rng.choice([None, 0.85, 1.5]),
                    rng.choice([None, 0.6, 3.0]),
                    rng.choice(["verifier@v1", "rubric:x", "human"]),
                    rng.choice(["valid", "valid", "invalid"]),
                    rng.choice([None, "thompson"]),
                    rng.choice([None, 0, 1]),
                    rng.choice([None, 0.7]),
                    rng.choice(["[]", '[{"tool": "bash"}]', "not json"]),
                ),
            )
        con.execute(
            "INSERT INTO grounded_rejections (id, ts, run_id, gate_name, verdict, concern, evidence_trace_ids, "
            "evidence_summary, suggestion) VALUES (?,?,?,?,?,?,?,?,?)",
            (
                f"gr-{i}",
                1780000080 + i,
                rng.choice([run_id, "gone"]),
                "gate",
                rng.choice(["fail", "needs_revision", "indeterminate", "odd"]),
                rng.choice(["the fix masks the test", ""]),
                rng.choice(["[]", f'["tr-odd-{i}-0"]']),
                "summary",
                "",
            ),
        )
        con.execute(
            "INSERT INTO conductor_decisions (decided_at, task_run_id, chosen_lane_hints, realized_score) "
            "VALUES (?,?,?,?)",
            (1780000001 + i, rng.choice([run_id, None]), '{"implementer": "glm"}', rng.choice([None, 0.5, 1.0])),
        )
        con.execute(
            "INSERT INTO llm_calls (provider, model_id, tier, feature_name, run_id, cost_usd, input_tokens, "
            "output_tokens, status, metadata_json) VALUES ('zhipu', 'glm-5.1', 'default', ?, ?, ?, ?, ?, "
            "'success', ?)",
            (
                f"mini-orch:{rng.choice(['odd', 'implement'])}",
                run_id,
                rng.choice([0.0, 0.05]),
                rng.choice([0, 1000]),
                500,
                rng.choice(["{}", json.dumps({"trace_id": f"tr-odd-{i}-0"})]),
            ),
        )
    con.commit()
    con.close()


def mini_ork_scenario(root: Path, chunk: int | None, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    root.mkdir(parents=True, exist_ok=True)
    small_chunks(monkeypatch, chunk)
    db = root / "state.db"
    mini_ork_store(db, 60, seed=5)
    home = root / "home"
    prices = [Price(selector="glm/zhipu", input_usd_per_mtok=1.0, output_usd_per_mtok=4.0)]
    options = ImportOptions(skip_bad=True, fmt="mini-ork")
    out = {"first": summary(import_source(home, [db], options, prices=prices))}
    out["again"] = summary(import_source(home, [db], options, prices=prices))
    con = sqlite3.connect(db)
    con.execute("UPDATE conductor_decisions SET realized_score = 0.25 WHERE realized_score IS NOT NULL AND id % 2")
    con.execute("UPDATE execution_traces SET reviewer_verdict = 'APPROVE' WHERE rowid % 5 = 0")
    con.execute("UPDATE execution_traces SET cost_usd = 0.5 WHERE rowid % 7 = 0")  # an attempt: changed, kept
    con.commit()
    con.close()
    out["changed"] = summary(import_source(home, [db], options, prices=prices))
    grouped = ImportOptions(skip_bad=True, fmt="mini-ork", task_key="kickoff_path", region_key="recipe")
    out["grouped"] = summary(import_source(root / "home-grouped", [db], grouped, prices=prices))
    return {**out, **digest_home(home), **{f"g/{k}": v for k, v in digest_home(root / "home-grouped").items()}}


def test_long_table_imports_write_the_pinned_bytes(tmp_path, monkeypatch, fixed_now):
    assert _short(long_scenario(tmp_path / "7", 7, monkeypatch)) == LONG_7
    monkeypatch.undo()
    monkeypatch.setattr(import_values, "utc_now", lambda: NOW)
    assert _short(long_scenario(tmp_path / "default", None, monkeypatch)) == LONG_DEFAULT


def test_mini_ork_imports_write_the_pinned_bytes(tmp_path, monkeypatch, fixed_now):
    assert _short(mini_ork_scenario(tmp_path / "7", 7, monkeypatch)) == MINI_ORK_7
    monkeypatch.undo()
    monkeypatch.setattr(import_values, "utc_now", lambda: NOW)
    assert _short(mini_ork_scenario(tmp_path / "default", None, monkeypatch)) == MINI_ORK_DEFAULT


def _short(digests: dict[str, str]) -> dict[str, str]:
    return {k: v[:16] for k, v in digests.items()}


LONG_7 = {
    "first": "da9d55edf808ab1b",
    "again": "dc188573e3132046",
    "changed": "5702adb3974bd980",
    "parquet": "8573dbdc3ba52543",
    "plain": "466938a8444268b0",
    "streams/ratings.jsonl": "334717b490649b19",
    "streams/tasks.jsonl": "893523958bbba318",
    "imports/ledger/imp.00000044.npy": "2bf484c7f950a818",
    "deadletter/import-table.csv.jsonl": "4773b946ad28b9fb",
    "pq/streams/ratings.jsonl": "610fe2e8a2a090da",
    "pq/streams/tasks.jsonl": "d86dea93099d8ac0",
    "pq/imports/ledger/imp.00000029.npy": "871b7f6d58ec3683",
    "pq/deadletter/import-table.parquet.jsonl": "412405dc5a50e871",
    "plain/streams/ratings.jsonl": "695ae48209d8ac1f",
    "plain/streams/tasks.jsonl": "316bd893f7b259a2",
    "plain/imports/ledger/imp.00000009.npy": "772390410dc13602",
    "plain/deadletter/import-p.csv.jsonl": "c8cba13500c50d41",
}
LONG_DEFAULT = {
    "first": "da9d55edf808ab1b",
    "again": "dc188573e3132046",
    "changed": "5702adb3974bd980",
    "parquet": "8573dbdc3ba52543",
    "plain": "466938a8444268b0",
    "streams/ratings.jsonl": "658b907a8597a016",
    "streams/tasks.jsonl": "c1067e53a99a09ee",
    "imports/ledger/imp.00000002.npy": "2bf484c7f950a818",
    "deadletter/import-table.csv.jsonl": "76c8924b837c069a",
    "pq/streams/ratings.jsonl": "6ad24cdd345273db",
    "pq/streams/tasks.jsonl": "2241692b7598da31",
    "pq/imports/ledger/imp.00000000.npy": "871b7f6d58ec3683",
    "pq/deadletter/import-table.parquet.jsonl": "412405dc5a50e871",
    "plain/streams/ratings.jsonl": "ebd1b534936d8f72",
    "plain/streams/tasks.jsonl": "f5522636c2e096aa",
    "plain/imports/ledger/imp.00000000.npy": "772390410dc13602",
    "plain/deadletter/import-p.csv.jsonl": "c8cba13500c50d41",
}
MINI_ORK_7 = {
    "first": "3a2944976aa662f7",
    "again": "e1511dc74bbcd33f",
    "changed": "8a4ca7b267572026",
    "grouped": "ea4e5d6910b37ecc",
    "streams/ratings.jsonl": "cc6d300898437568",
    "streams/tasks.jsonl": "a69742b5b372b6e8",
    "imports/ledger/mo.00000049.npy": "16a1f16348499ee9",
    "deadletter/import-state.db.jsonl": "0f593ec7f4bdca45",
    "g/streams/ratings.jsonl": "a18448bcfd73a29a",
    "g/streams/tasks.jsonl": "773be8b86199fd64",
    "g/imports/ledger/mo.00000035.npy": "5f944a4d93b07742",
    "g/deadletter/import-state.db.jsonl": "d66597e827944409",
}
MINI_ORK_DEFAULT = {
    "first": "3a2944976aa662f7",
    "again": "e1511dc74bbcd33f",
    "changed": "8a4ca7b267572026",
    "grouped": "ea4e5d6910b37ecc",
    "streams/ratings.jsonl": "ba00ca699e17a45e",
    "streams/tasks.jsonl": "02afbefa9eed2548",
    "imports/ledger/mo.00000002.npy": "16a1f16348499ee9",
    "deadletter/import-state.db.jsonl": "5d87f7719fe549ad",
    "g/streams/ratings.jsonl": "ef12aa436b8f3a87",
    "g/streams/tasks.jsonl": "757a9f59dda42f94",
    "g/imports/ledger/mo.00000000.npy": "5f944a4d93b07742",
    "g/deadletter/import-state.db.jsonl": "d66597e827944409",
}
