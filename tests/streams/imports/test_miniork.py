"""mini-ork's state.db (pipeline/streams/imports/miniork.py), built in the test from the DDL of miniork_db.py
(mini-ork's migrations 0002, 0013, 0022, 0024, 0034/0050/0051, 0037, 0054, 0057): the events field by field, the
idempotent re-import, a realized_score filled in later and then changed, rows from before migrations, dead
letters; then a small run of two lanes on three task classes imported, compacted, fitted, read back as lanes."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from pipeline.errors import InvalidBatch, InvalidEvent
from pipeline.fit.shipped import Price, load_shipped
from pipeline.streams.events import parse_line
from pipeline.streams.imports import ImportOptions, import_source, load_maps

from .miniork_db import OLD_DDL, build_state_db, connect

SNAP = json.dumps({"glm": {"family": "glm", "model_id": "glm-5.1", "provider": "zhipu"}})


def _events(home: Path) -> list:
    out = []
    for stream in ("tasks", "ratings"):
        path = home / "streams" / f"{stream}.jsonl"
        if path.exists():
            out += [parse_line(x) for x in path.read_bytes().splitlines() if not x.startswith(b'{"type":"batch.')]
    return out


def _by_type(home: Path) -> dict[str, list]:
    out: dict[str, list] = {}
    for event in _events(home):
        out.setdefault(event.type, []).append(event)
    return out


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """One task run with one finished trace of every kind of signal, one in flight, a rejection and a decision."""
    path = tmp_path / "state.db"
    con = connect(path)
    con.execute(
        "INSERT INTO task_runs (id, task_class, recipe, kickoff_path, status, verdict, created_at, updated_at, "
        "ended_at, dispatch_config_json) VALUES ('run-1', 'code_fix', 'code-fix', 'k/1.md', 'published', NULL, "
        "1780000000, 1780000100, 1780000090, ?)",
        (SNAP,),
    )
    con.execute(
        "INSERT INTO execution_traces (trace_id, run_id, agent_version_id, task_class, prompt_version_hash, "
        "tool_calls, files_read, files_written, verifier_output, reviewer_verdict, cost_usd, duration_ms, status, "
        "created_at, process_reward, route_source, route_explore, route_score) VALUES ('tr-implement-1780000010-7', "
        "'run-1', 'glm', 'code_fix', 'p-abc', '[{\"tool\":\"bash\"},{\"tool\":\"edit\"}]', '[\"a.py\"]', '[]', ?, "
        "'APPROVE', 0.12, 4200, 'success', '2026-05-28T20:26:50.123Z', 0.85, 'thompson', 1, 0.7)",
        (json.dumps({"node_type": "implementer", "pytest": {"pass": True}, "ruff": {"pass": False, "score": 0.25}}),),
    )
    con.execute(
        "INSERT INTO execution_traces (trace_id, run_id, agent_version_id, task_class, status, created_at) "
        "VALUES ('tr-verify-1780000050-7', 'run-1', 'glm', 'code_fix', 'running', '2026-05-28T20:27:30.000Z')"
    )
    con.execute(
        "INSERT INTO grounded_rejections (id, ts, run_id, gate_name, verdict, concern, evidence_trace_ids, "
        "evidence_summary, suggestion) VALUES ('gr-1', 1780000080, 'run-1', 'refute_or_promote', 'fail', "
        "'the fix masks the failing test', '[\"tr-implement-1780000010-7\"]', 'test skipped', 'fix the cause')"
    )
    con.execute(
        "INSERT INTO conductor_decisions (decided_at, task_run_id, chosen_lane_hints, predicted_score, outcome, "
        'realized_score) VALUES (1780000001, \'run-1\', \'{"implementer": "glm", "reviewer": "opus"}\', 0.8, '
        "'pending', NULL)"
    )
    con.commit()
    con.close()
    return path


def test_every_table_maps_to_its_events_field_by_field(home, store):
    result = import_source(home, [store], ImportOptions(fmt="mini-ork"))
    assert result.rows_by_table == {
        "task_runs": 1,
        "execution_traces": 2,
        "grounded_rejections": 1,
        "conductor_decisions": 1,
    }
    assert result.skipped == {
        "trace running: imported once it finishes": 1,
        "conductor decision not realized yet (realized_score is null)": 1,
    }
    events = _by_type(home)
    [opened] = events["task.opened"]
    assert (opened.task, opened.region, opened.at, opened.labels) == (
        "run-1",
        "code_fix",
        "2026-05-28T20:26:40Z",
        {"recipe": "code-fix", "workflow_version": "latest"},
    )  # created_at 1780000000 (unix seconds)
    [closed] = events["task.closed"]
    assert (closed.task, closed.outcome, closed.at) == ("run-1", "done", "2026-05-28T20:28:10Z")
    [attempt] = events["task.attempted"]
    assert attempt.config.key == "glm/zhipu/glm-5.1/-"  # cli = lane, route = provider, model = model id
    assert (attempt.status, attempt.cost_usd, attempt.duration_ms, attempt.node) == (
        "success",
        0.12,
        4200,
        "implementer",
    )
    assert (attempt.tool_calls, attempt.files_read, attempt.files_written) == (2, 1, 0)
    assert (attempt.prompt_version, attempt.reviewer_verdict, attempt.at) == (
        "p-abc",
        "APPROVE",
        "2026-05-28T20:26:50.123000Z",
    )
    assert attempt.extra == {
        "process_reward": 0.85,
        "route_source": "thompson",
        "route_explore": True,
        "route_score": 0.7,
        "source_ref": "mini-ork:execution_traces:tr-implement-1780000010-7",
    }
    ratings = {(r.rater.kind, r.rater.name): r.score for r in events["task.rated"]}
    assert ratings == {("gate", "pytest"): 1.0, ("gate", "ruff"): 0.25, ("reviewer", "mini-ork:reviewer"): 1.0}
    [rejection] = events["task.rejected"]
    assert (rejection.config.key, rejection.rater.name, rejection.claim) == (
        "glm/zhipu/glm-5.1/-",
        "refute_or_promote",
        "the fix masks the failing test",
    )
    assert rejection.evidence == [
        "tr-implement-1780000010-7",
        "evidence_summary: test skipped",
        "suggestion: fix the cause",
    ]
    assert all(e.id.startswith("mo-") and len(e.id) == 27 for e in _events(home))
    assert result.costs == {"source": 1}


def test_reimport_adds_nothing_then_a_later_realized_score_and_a_change_of_it(home, store):
    first = import_source(home, [store], ImportOptions(fmt="mini-ork"))
    again = import_source(home, [store], ImportOptions(fmt="mini-ork"))
    assert (again.appended, again.unchanged) == (0, first.appended)
    con = sqlite3.connect(store)
    con.execute("UPDATE conductor_decisions SET outcome = 'success', realized_score = 1.0")
    con.execute(
        "UPDATE execution_traces SET status = 'success', verifier_output = '{\"e2e\": {\"pass\": true}}' "
        "WHERE trace_id = 'tr-verify-1780000050-7'"
    )
    con.commit()
    later = import_source(home, [store], ImportOptions(fmt="mini-ork"))
    assert later.events == {"task.attempted": 1, "task.rated": 2} and later.retracted == 0
    [realized] = [r for r in _by_type(home)["task.rated"] if r.rater.name == "mini-ork:realized"]
    assert (realized.score, realized.config.key, realized.at) == (1.0, "glm/zhipu/glm-5.1/-", "2026-05-28T20:26:41Z")
    con.execute("UPDATE conductor_decisions SET outcome = 'failure', realized_score = 0.0")
    con.commit()
    con.close()
    changed = import_source(home, [store], ImportOptions(fmt="mini-ork"))
    assert (changed.retracted, changed.events) == (1, {"task.rated": 1, "rating.retracted": 1})
    [retraction] = _by_type(home)["rating.retracted"]
    assert retraction.rating == realized.id and "updated at the source" in retraction.reason
    final = import_source(home, [store], ImportOptions(fmt="mini-ork"))
    assert final.appended == 0


def test_a_store_from_before_the_migrations_and_odd_rows(home, tmp_path):
    """task_runs without a dispatch snapshot (before 0022), execution_traces as 0019 left them (no process_reward,
    no route_* columns), no rejection or decision tables; ISO and unix times, an empty run, odd statuses."""
    path = tmp_path / "old.db"
    con = connect(path, OLD_DDL)
    con.executemany(
        "INSERT INTO task_runs (id, task_class, kickoff_path, status, verdict, created_at, updated_at) "
        "VALUES (?,?,?,?,?,?,?)",
        [
            ("run-a", "research", "k/a", "failed", None, "2026-05-01T10:00:00.000Z", 1777600000),
            ("run-b", "research", "k/b", "verifying", None, 1777600000000, 1777600000),  # unix milliseconds
            ("run-empty", "review", "k/c", "published", "ESCALATE", 1777600000, 1777600000),
        ],
    )
    con.execute("PRAGMA ignore_check_constraints = ON")  # a status no CHECK allows: written by a writer without it
    con.executemany(
        "INSERT INTO execution_traces (trace_id, run_id, agent_version_id, task_class, status, cost_usd, "
        "duration_ms, created_at, tool_calls) VALUES (?,?,?,?,?,?,?,?,?)",
        [
            ("tr-plan-1-1", "run-a", "sonnet", "research", "failure", 0.0, 0, "2026-05-01 10:00:05", "not json"),
            ("tr-plan-2-1", "run-b", "sonnet", "research", "crashed", 0.3, 10, "2026-05-01T10:00:05Z", "[]"),
            ("tr-plan-3-1", "run-b", "", "research", "success", 0.3, 10, "2026-05-01T10:00:05Z", "[]"),
            ("tr-plan-4-1", "run-gone", "sonnet", "research", "success", 0.3, 10, "2026-05-01T10:00:05Z", "[]"),
        ],
    )
    con.commit()
    con.close()
    with pytest.raises(InvalidBatch) as caught:
        import_source(home, [path], ImportOptions())
    assert {e.field for e in caught.value.errors} == {"status", "agent_version_id", "run_id"}
    assert not (home / "streams").exists()
    result = import_source(home, [path], ImportOptions(skip_bad=True))
    assert result.format == "mini-ork" and result.detected
    assert result.bad == {"status": 1, "agent_version_id": 1, "run_id": 1}
    events = _by_type(home)
    assert sorted(e.at for e in events["task.opened"]) == [
        "2026-05-01T01:46:40Z",
        "2026-05-01T01:46:40Z",
        "2026-05-01T10:00:00Z",
    ]
    assert sorted((e.task, e.outcome) for e in events["task.closed"]) == [
        ("run-a", "abandoned"),
        ("run-empty", "escalated"),
    ]
    [attempt] = events["task.attempted"]
    assert attempt.config.key == "sonnet/-/sonnet/-"  # no dispatch snapshot: the lane alone
    assert (attempt.cost_usd, attempt.duration_ms, attempt.tool_calls) == (None, None, None)  # mini-ork's 0: unknown
    assert (attempt.status, attempt.at) == ("failure", "2026-05-01T10:00:05Z")  # naive sqlite text is UTC
    assert result.costs == {"unknown": 1}
    letters = [json.loads(x) for x in Path(result.deadletter).read_text().splitlines()]
    assert {x["row"] for x in letters} == {
        "execution_traces:tr-plan-2-1",
        "execution_traces:tr-plan-3-1",
        "execution_traces:tr-plan-4-1",
    }
    assert all(x["raw"]["trace_id"] == x["row"].split(":")[1] for x in letters)


def _one_run(path: Path) -> sqlite3.Connection:
    """A store with one published task run ``r`` of the glm lane's snapshot, open for the test's traces."""
    con = connect(path)
    con.execute(
        "INSERT INTO task_runs (id, task_class, kickoff_path, status, created_at, updated_at, "
        "dispatch_config_json) VALUES ('r', 'code_fix', 'k', 'published', 1780000000, 1780000000, ?)",
        (SNAP,),
    )
    return con


def test_costs_from_llm_calls_then_tokens_at_prices_then_a_per_task_price(home, tmp_path):
    path = tmp_path / "state.db"
    con = _one_run(path)
    for trace in ("tr-a-1-1", "tr-b-1-1", "tr-c-1-1", "tr-d-1-1"):
        con.execute(
            "INSERT INTO execution_traces (trace_id, run_id, agent_version_id, task_class, status, created_at) "
            "VALUES (?, 'r', 'glm', 'code_fix', 'success', '2026-05-28T00:00:00Z')",
            (trace,),
        )
    calls = [
        ("mini-orch:a", 0.05, 0, 0, "{}"),
        ("mini-orch:b", 0.0, 1000, 500, "{}"),
        ("x", 0.0, 2000, 0, json.dumps({"trace_id": "tr-c-1-1"})),
    ]
    con.executemany(
        "INSERT INTO llm_calls (provider, model_id, tier, feature_name, run_id, cost_usd, input_tokens, "
        "output_tokens, status, metadata_json) VALUES ('zhipu', 'glm-5.1', 'default', ?, 'r', ?, ?, ?, "
        "'success', ?)",
        calls,
    )
    con.commit()
    con.close()
    (home / "fits").mkdir()
    (home / "fits" / "shipped.json").write_text(
        json.dumps({"prices": [{"selector": "glm/zhipu", "input_usd_per_mtok": 1.0, "output_usd_per_mtok": 4.0}]})
    )
    result = import_source(home, [path], ImportOptions(), prices=load_shipped(home / "fits" / "shipped.json").prices)
    costs = {e.extra["source_ref"].rsplit(":", 1)[1]: e.cost_usd for e in _by_type(home)["task.attempted"]}
    assert costs == {"tr-a-1-1": 0.05, "tr-b-1-1": 0.003, "tr-c-1-1": 0.002, "tr-d-1-1": None}
    assert result.costs == {"source": 1, "tokens": 2, "unknown": 1}
    per_task = [Price(selector="glm", usd_per_task=0.2)]  # no token prices: the tokens tell nothing
    assert import_source(tmp_path / "h2", [path], ImportOptions(), prices=per_task).costs == {"source": 1, "price": 3}
    assert import_source(tmp_path / "h3", [path], ImportOptions()).costs == {"source": 1, "unknown": 3}  # no prices


def test_wrong_files_and_options_are_one_clear_line(tmp_path, store):
    text = tmp_path / "t.db"
    text.write_text("task_id,config\n")
    with pytest.raises(InvalidEvent, match="not a mini-ork source: it is a long table"):
        import_source(tmp_path / "h", [text], ImportOptions(fmt="mini-ork"))
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE x (a)").connection.close()
    with pytest.raises(InvalidEvent, match="a SQLite database without mini-ork's table"):
        import_source(tmp_path / "h", [other], ImportOptions())
    with pytest.raises(InvalidEvent, match="--task-key 'nope' is not a column of task_runs"):
        import_source(tmp_path / "h", [store], ImportOptions(task_key="nope"))
    build_state_db(big := tmp_path / "big.db", traces=400)
    cut = tmp_path / "cut.db"
    cut.write_bytes(big.read_bytes()[: big.stat().st_size // 2])  # a copy cut short: its pages end mid-table
    with pytest.raises(InvalidEvent, match=r"cannot read the database|SQLite database"):
        import_source(tmp_path / "h", [cut], ImportOptions())


def test_read_only_even_for_a_locked_or_read_only_file(home, store):
    before = store.read_bytes()
    store.chmod(0o444)
    result = import_source(home, [store], ImportOptions())
    assert result.appended and store.read_bytes() == before
    assert sorted(p.name for p in store.parent.iterdir()) == ["home", "state.db"]  # no journal, no wal


def test_a_run_of_two_lanes_imported_compacted_fitted_and_read_back_as_lanes(home, tmp_path):
    """Each kickoff dispatched to both lanes (two task runs): grouped into one task by --task-key kickoff_path.
    glm passes code_fix more often and costs far less; opus wins research; the fit routes by lane per class."""
    from pipeline.nightly.job import run_fit
    from pipeline.nightly.options import FitOptions
    from pipeline.routing.table import RoutingTable

    path = tmp_path / "state.db"
    build_state_db(path, traces=240)
    result = import_source(home, [path], ImportOptions(task_key="kickoff_path"))
    assert (result.tasks, result.events["task.attempted"]) == (120, 240)
    pinned = FitOptions(objective="quality", prior_weight=3, exploration=0.1, half_life_days="inf", min_samples=3)
    run_fit(home, pinned, command="fit-routing")
    table = RoutingTable.model_validate_json((home / "fits" / "routing-table.json").read_text())
    lanes = {region: row.choice.split("/")[0] for region, row in table.regions.items() if region != "*"}
    assert lanes == {"code_fix": "glm", "research": "opus", "review": lanes["review"]}
    map_file = tmp_path / "lanes.json"
    map_file.write_text(json.dumps({"glm": "claude-code/zhipu/glm-5.1/-"}))
    mapped = import_source(
        tmp_path / "h2", [path], ImportOptions(task_key="kickoff_path", maps=load_maps(map_file, None))
    )
    assert mapped.appended == result.appended
    keys = {e.config.key for e in _by_type(tmp_path / "h2")["task.attempted"]}
    assert keys == {"claude-code/zhipu/glm-5.1/-", "opus/anthropic/claude-opus-4-7/-"}


def test_a_cost_out_of_bounds_is_a_bad_row_not_a_traceback(home, tmp_path):
    """A trace's cost_usd below 0 (or over the events' bound) names the row and the field (it raised before)."""
    path = tmp_path / "state.db"
    con = _one_run(path)
    con.execute(
        "INSERT INTO execution_traces (trace_id, run_id, agent_version_id, task_class, status, cost_usd, "
        "created_at) VALUES ('tr-a-1-1', 'r', 'glm', 'code_fix', 'success', -1.0, '2026-05-28T00:00:00Z')"
    )
    con.commit()
    con.close()
    with pytest.raises(InvalidBatch) as caught:
        import_source(home, [path], ImportOptions())
    assert [(e.field, e.reason) for e in caught.value.errors] == [("cost_usd", "-1 is not in [0, 1e+06]")]
    result = import_source(home, [path], ImportOptions(skip_bad=True))
    assert result.bad == {"cost_usd": 1} and result.events == {"task.opened": 1, "task.closed": 1}
    [letter] = [json.loads(x) for x in Path(result.deadletter).read_text().splitlines()]
    assert (letter["row"], letter["field"]) == ("execution_traces:tr-a-1-1", "cost_usd")
