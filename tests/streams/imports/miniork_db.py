"""A mini-ork ``state.db`` built for the tests (and ``bench.imports``), from DDL written here after mini-ork's public
migrations (SourceShift/mini-ork ``db/migrations``; the columns this importer reads, with their types, defaults and
CHECKs):

- ``task_runs``: 0013_task_runs.sql, plus 0022_dispatch_config_snapshot.sql (``dispatch_config_json``,
  ``agents_yaml_sha``);
- ``execution_traces``: the table as 0054_execution_traces_status_blocked.sql rebuilds it (0010 + 0014 + 0019 +
  0031 ``process_reward`` + 0042 rewards + 0044 ``code_region`` + ``route_*``), plus 0057 ``route_margin``;
- ``grounded_rejections``: 0037_grounded_rejection.sql (the shape 0041 reconciles to);
- ``conductor_decisions``: 0051_conductor_epic_optional.sql (0034 + 0050);
- ``llm_calls``: 0002_mini_orch_sessions.sql, plus 0018 ``session_id`` and 0024's cache columns.

``OLD_DDL`` is a store from before 0022 and 0031: ``task_runs`` without a dispatch snapshot, ``execution_traces``
as 0019 left it, and no rejection or decision tables.
"""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path

TASK_RUNS = """
CREATE TABLE task_runs (
  id TEXT PRIMARY KEY, task_class TEXT NOT NULL, recipe TEXT, workflow_version TEXT NOT NULL DEFAULT 'latest',
  kickoff_path TEXT NOT NULL, plan_path TEXT, plan_hash TEXT, artifact_path TEXT, artifact_hash TEXT,
  status TEXT NOT NULL DEFAULT 'classified'
    CHECK (status IN ('classified','planned','executing','verifying','reviewing','published','rolled_back','failed')),
  verdict TEXT CHECK (verdict IN ('APPROVE','REQUEST_CHANGES','ESCALATE','CRASH') OR verdict IS NULL),
  cost_usd REAL NOT NULL DEFAULT 0, duration_ms INTEGER NOT NULL DEFAULT 0, trace_id TEXT,
  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, ended_at INTEGER, parent_epic_id TEXT, notes TEXT
  {snapshot}
);
"""
SNAPSHOT = ", dispatch_config_json TEXT NULL, agents_yaml_sha TEXT NULL"

TRACES_0019 = """
  trace_id TEXT PRIMARY KEY, run_id INTEGER, workflow_version_id TEXT, agent_version_id TEXT NOT NULL DEFAULT '',
  task_class TEXT NOT NULL, prompt_version_hash TEXT NOT NULL DEFAULT '', context_bundle_hash TEXT NOT NULL DEFAULT '',
  tool_calls TEXT NOT NULL DEFAULT '[]', files_read TEXT NOT NULL DEFAULT '[]',
  files_written TEXT NOT NULL DEFAULT '[]',
  verifier_output TEXT NOT NULL DEFAULT '{{}}', reviewer_verdict TEXT, cost_usd REAL NOT NULL DEFAULT 0.0,
  duration_ms INTEGER NOT NULL DEFAULT 0, final_artifact_ref TEXT,
  status TEXT NOT NULL CHECK (status IN ('success','failure','pending','running','vacuous'{blocked})),
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
"""
TRACES_0054_MORE = """,
  process_reward REAL DEFAULT NULL, objective_domain TEXT NOT NULL DEFAULT 'code-delivery', segment TEXT DEFAULT NULL,
  reward_primary_metric TEXT DEFAULT NULL, reward_direction TEXT NOT NULL DEFAULT 'higher_is_better',
  reward_value REAL DEFAULT NULL, reward_anchor REAL DEFAULT NULL, reward_g REAL DEFAULT NULL,
  reward_vector_json TEXT DEFAULT NULL, reward_source TEXT NOT NULL DEFAULT 'verifier@v1',
  validity TEXT NOT NULL DEFAULT 'valid', code_region TEXT DEFAULT NULL, route_source TEXT DEFAULT NULL,
  route_explore INTEGER DEFAULT NULL, route_score REAL DEFAULT NULL, route_margin REAL DEFAULT NULL
"""
REJECTIONS = """
CREATE TABLE grounded_rejections (
  id TEXT PRIMARY KEY, ts INTEGER NOT NULL DEFAULT (strftime('%s','now')), run_id TEXT, gate_name TEXT NOT NULL,
  verdict TEXT NOT NULL CHECK (verdict IN ('fail','needs_revision','indeterminate')), concern TEXT NOT NULL,
  evidence_trace_ids TEXT NOT NULL, evidence_summary TEXT NOT NULL, suggestion TEXT NOT NULL,
  consumed_by_reflector_ts INTEGER
);
"""
DECISIONS = """
CREATE TABLE conductor_decisions (
  id INTEGER PRIMARY KEY AUTOINCREMENT, decided_at INTEGER, epic_id TEXT, task_class TEXT, task_run_id TEXT,
  proposed_topology TEXT, proposed_recipe TEXT, proposed_lane_hints TEXT, chosen_topology TEXT, chosen_recipe TEXT,
  chosen_lane_hints TEXT, decided_by TEXT NOT NULL DEFAULT 'conductor', override_reason TEXT,
  predicted_score REAL, budget_pct_used REAL, rationale TEXT, outcome TEXT, realized_score REAL
);
"""
LLM_CALLS = """
CREATE TABLE llm_calls (
  id INTEGER PRIMARY KEY AUTOINCREMENT, provider TEXT NOT NULL, model_id TEXT NOT NULL, tier TEXT NOT NULL,
  feature_name TEXT NOT NULL, actor TEXT, epic_id TEXT, dispatch_id INTEGER, run_id INTEGER, iter INTEGER,
  input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT NULL DEFAULT 0,
  total_tokens INTEGER NOT NULL DEFAULT 0, cost_usd REAL NOT NULL DEFAULT 0, duration_ms INTEGER NOT NULL DEFAULT 0,
  status TEXT NOT NULL CHECK (status IN ('success','failed')), finish_reason TEXT, error_message TEXT,
  traceparent TEXT, metadata_json TEXT NOT NULL DEFAULT '{{}}',
  ts TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')){later}
);
"""
LLM_LATER = (
    ", session_id TEXT, cached_input_tokens INTEGER DEFAULT 0, cache_creation_input_tokens INTEGER DEFAULT 0, "
    "cost_input_uncached_usd REAL DEFAULT 0, cost_input_cached_usd REAL DEFAULT 0, cost_cache_write_usd REAL DEFAULT 0"
)
MIGRATIONS = "CREATE TABLE schema_migrations (filename TEXT PRIMARY KEY, applied_at TEXT, checksum TEXT);"

DDL = "\n".join(
    [
        MIGRATIONS,
        TASK_RUNS.format(snapshot=SNAPSHOT),
        "CREATE TABLE execution_traces (" + TRACES_0019.format(blocked=",'blocked'") + TRACES_0054_MORE + ");",
        REJECTIONS,
        DECISIONS,
        LLM_CALLS.format(later=LLM_LATER),
    ]
)
OLD_DDL = "\n".join(
    [
        MIGRATIONS,
        TASK_RUNS.format(snapshot=""),
        "CREATE TABLE execution_traces (" + TRACES_0019.format(blocked="") + ");",
        LLM_CALLS.format(later=""),
    ]
)

#: The lanes of the tests: cli = lane, route = provider, model = model id (docs/design.md, Imports, mini-ork).
LANE_SNAPSHOT = {
    "glm": {"family": "glm", "model_id": "glm-5.1", "provider": "zhipu", "base_url": "https://example.invalid/glm"},
    "opus": {"family": "opus", "model_id": "claude-opus-4-7", "provider": "anthropic", "base_url": ""},
}
#: Each lane's chance to pass its gate per task class, and its cost per trace.
PASS_RATE = {
    ("glm", "code_fix"): 0.85,
    ("opus", "code_fix"): 0.55,
    ("glm", "research"): 0.35,
    ("opus", "research"): 0.9,
    ("glm", "review"): 0.6,
    ("opus", "review"): 0.65,
}
COST = {"glm": 0.04, "opus": 0.6}
CLASSES = ("code_fix", "research", "review")
T0 = 1_780_000_000  # unix seconds: 2026-05-28


def connect(path: Path, ddl: str = DDL) -> sqlite3.Connection:
    con = sqlite3.connect(path)
    con.executescript(ddl)
    return con


def build_state_db(path: Path, *, traces: int = 120, lanes: tuple[str, ...] = ("glm", "opus"), seed: int = 3) -> int:
    """A store of a small run: each kickoff of each task class dispatched once per lane (one task run each, with
    one implementer trace: a verifier, a reviewer verdict, a cost, trace counts). Returns the source rows (task
    runs + traces)."""
    rng = random.Random(seed)
    con = connect(path)
    snapshot = json.dumps({lane: LANE_SNAPSHOT.get(lane, {"model_id": lane}) for lane in lanes})
    runs, rows = [], []
    for k in range(max(traces // len(lanes), 1)):
        task_class = CLASSES[k % len(CLASSES)]
        for j, lane in enumerate(lanes):
            run_id = f"run-{T0 + k}-{j}"
            created = T0 + 60 * k + j
            passed = rng.random() < PASS_RATE.get((lane, task_class), 0.5)
            runs.append(
                (
                    run_id,
                    task_class,
                    "code-fix",
                    f"kickoffs/{task_class}-{k}.md",
                    "published",
                    None,
                    created,
                    created + 30,
                    created + 30,
                    snapshot,
                )
            )
            verifier = {"node_type": "implementer", "pytest": {"pass": passed, "evidence_path": f"e/{k}.log"}}
            rows.append(
                (
                    f"tr-implement-{created}-{j}",
                    run_id,
                    lane,
                    task_class,
                    json.dumps(verifier),
                    "APPROVE" if passed else "REQUEST_CHANGES",
                    round(COST.get(lane, 0.1) * (0.8 + 0.4 * rng.random()), 6),
                    1000 + rng.randrange(60_000),
                    "success" if passed else "failure",
                    f"2026-05-28T{(created // 3600) % 24:02d}:{(created // 60) % 60:02d}:{created % 60:02d}.000Z",
                    json.dumps([{"tool": "bash"}] * rng.randrange(1, 6)),
                    json.dumps(["a.py"]),
                    json.dumps([{"path": "a.py", "hash": "x"}]),
                )
            )
    con.executemany(
        "INSERT INTO task_runs (id, task_class, recipe, kickoff_path, status, verdict, created_at, updated_at, "
        "ended_at, dispatch_config_json) VALUES (?,?,?,?,?,?,?,?,?,?)",
        runs,
    )
    con.executemany(
        "INSERT INTO execution_traces (trace_id, run_id, agent_version_id, task_class, verifier_output, "
        "reviewer_verdict, cost_usd, duration_ms, status, created_at, tool_calls, files_read, files_written) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
        rows,
    )
    con.commit()
    con.close()
    return len(runs) + len(rows)
