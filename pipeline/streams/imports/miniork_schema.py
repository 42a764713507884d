"""What the importer knows of mini-ork's ``state.db`` (SourceShift/mini-ork, ``db/migrations``): the tables it
needs, the columns it reads of each (those a later migration added are absent in an older store), statuses and
verdicts, and the shapes of its JSON columns (docs/design.md, Imports, mini-ork). The source is :mod:`.miniork`.
"""

from __future__ import annotations

import json
import sqlite3
import urllib.parse
from pathlib import Path
from typing import Any

from .options import ImportOptions

REQUIRED_TABLES = ("task_runs", "execution_traces")
TRACE_STATUSES = {"success": "success", "failure": "failure", "vacuous": "vacuous", "blocked": "blocked"}
IN_FLIGHT = {"pending", "running"}
APPROVE = {"approve", "approved", "pass", "passed", "accept", "accepted", "lgtm"}
REQUEST_CHANGES = {"request_changes", "reject", "rejected", "needs_revision", "fail", "failed", "changes_requested"}
NO_VERDICT = {"escalate", "escalated"}
task_run_columns = (
    "id",
    "task_class",
    "recipe",
    "workflow_version",
    "kickoff_path",
    "status",
    "verdict",
    "created_at",
    "updated_at",
    "ended_at",
    "dispatch_config_json",
)
trace_columns = (
    "trace_id",
    "run_id",
    "agent_version_id",
    "task_class",
    "prompt_version_hash",
    "verifier_output",
    "reviewer_verdict",
    "cost_usd",
    "duration_ms",
    "status",
    "created_at",
    "process_reward",
    "reward_value",
    "reward_source",
    "reward_primary_metric",
    "validity",
    "route_source",
    "route_explore",
    "route_score",
    "route_margin",
)


def open_readonly(path: Path) -> sqlite3.Connection:
    """``path`` opened read-only (``mode=ro``: sqlite never writes, not even a journal)."""
    uri = f"file:{urllib.parse.quote(str(path.absolute()))}?mode=ro"
    con = sqlite3.connect(uri, uri=True)
    con.row_factory = sqlite3.Row
    return con


def tables_of(con: sqlite3.Connection) -> dict[str, set[str]]:
    names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")]
    return {name: {r[1] for r in con.execute(f'PRAGMA table_info("{name}")')} for name in names}


def _json_text(raw: Any) -> Any:
    """The value of a JSON text column; None when it is not text, blank, or not JSON."""
    if not isinstance(raw, str) or not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def lane_snapshot(raw: Any) -> dict[str, dict[str, Any]]:
    """``dispatch_config_json``: ``{lane: {family, model_id, provider, base_url}}`` (absent before 0022)."""
    data = _json_text(raw)
    if isinstance(data, dict) and isinstance(data.get("lanes"), dict):
        data = data["lanes"]
    return {str(k): v for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}


def json_object(raw: Any) -> dict[str, Any]:
    """A JSON object column, also double-encoded (mini-ork's older rows); {} when it is not one."""
    for _ in range(2):
        if isinstance(raw, dict):
            return raw
        raw = _json_text(raw)
    return raw if isinstance(raw, dict) else {}


def node_of(trace_id: str) -> str | None:
    parts = trace_id.split("-")
    return parts[1] if len(parts) >= 4 and parts[0] == "tr" else None


def json_list(raw: Any) -> list[str]:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return [raw] if raw.strip() else []
    return [str(x) for x in raw] if isinstance(raw, list) else []


def run_outcome(status: str | None, verdict: str | None) -> str | None:
    verdict = (verdict or "").upper()
    if verdict == "ESCALATE":
        return "escalated"
    if status in ("failed", "rolled_back") or (status == "published" and verdict == "CRASH"):
        return "abandoned"
    if status == "published":
        return "done"
    return None


def verdict_score(verdict: str, options: ImportOptions) -> float | None:
    """A reviewer verdict's score: APPROVE 1, REQUEST_CHANGES 0, ESCALATE none; other labels by ``--label-map``."""
    folded = verdict.strip().lower()
    if folded in APPROVE:
        return 1.0
    if folded in REQUEST_CHANGES:
        return 0.0
    if folded in NO_VERDICT:
        return None
    return options.score(None, "reviewer_verdict", label=verdict, name="reviewer_verdict")
