"""mini-ork's ``state.db`` (``--format mini-ork``), read read-only with the standard library's sqlite3
(docs/design.md, Imports, mini-ork). The schema followed is mini-ork's ``db/migrations`` (SourceShift/mini-ork):
0013 ``task_runs``, 0022 its ``dispatch_config_json``, 0010/0014/0019/0054 ``execution_traces`` (0031
``process_reward``, 0042 rewards, 0054 ``route_*``, 0057 ``route_margin``), 0037/0041 ``grounded_rejections``,
0034/0050/0051 ``conductor_decisions``, 0002/0024 ``llm_calls``. A column a migration added later is read as
absent in a store made before it.

- ``task_runs`` -> one task each (``id``; ``--task-key COLUMN`` to group runs, e.g. ``kickoff_path``), region
  ``task_class`` (``--region-key COLUMN``), its ``task.opened`` at ``created_at``, and a ``task.closed`` once
  terminal (``published`` -> done, ``failed``/``rolled_back`` or verdict ``CRASH`` -> abandoned, verdict
  ``ESCALATE`` -> escalated).
- ``execution_traces`` (``run_id`` is the task run) -> one attempt each, the config from the lane
  (``agent_version_id``) and the run's dispatch snapshot ``{lane: {provider, model_id}}``: ``cli`` = lane,
  ``route`` = provider, ``model`` = model id (else the lane); each verifier of ``verifier_output`` a gate rating
  (its ``score``, else ``pass``); ``reviewer_verdict`` a reviewer rating (APPROVE 1, REQUEST_CHANGES 0, ESCALATE
  none); a rubric or human ``reward_value`` a rating; ``process_reward`` and ``route_*`` kept on the attempt.
  Traces still ``pending`` or ``running`` are left for a later import.
- ``grounded_rejections`` -> ``task.rejected`` (``fail``, ``needs_revision``) of the lane its evidence traces ran.
- ``conductor_decisions.realized_score`` -> a gate rating ``mini-ork:realized`` of the chosen implementer lane
  (mini-ork fills it in later: a later import adds it, or retracts and replaces a changed one). mini-ork logs
  no propensity, so no ``route.decided`` is written.
- costs: the trace's ``cost_usd`` when above 0 (mini-ork writes 0 when it recorded none), else its LLM calls'
  (``llm_calls`` by ``metadata_json.trace_id``, else run and node), else their tokens at ``prices``, else a
  per-task price, else unknown.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import InvalidEvent
from .mapping import Attempt, Cfg, Closure, Opened, Rating, Rejection, Unit, config_of
from .miniork_schema import (
    IN_FLIGHT,
    REQUIRED_TABLES,
    TRACE_STATUSES,
    json_list,
    json_object,
    lane_snapshot,
    node_of,
    open_readonly,
    run_outcome,
    tables_of,
    task_run_columns,
    trace_columns,
    verdict_score,
)
from .options import ImportOptions
from .prices import Pricer
from .values import Clock, Problem, cost, count, moment, text

_REMEMBERED = 65_536  # distinct times and snapshots remembered (then it starts again: memory stays bounded)


class MiniOrkSource:
    """A mini-ork ``state.db`` as an import source (pipeline/streams/imports/run.py, Source)."""

    format = "mini-ork"
    prefix = "mo"
    rater_kind = "gate"

    def __init__(self, path: Path, options: ImportOptions, clock: Clock, pricer: Pricer) -> None:
        self.path, self.options, self.clock, self.pricer = path, options, clock, pricer
        self.name = path.name
        self.where = f"{path}"
        try:
            self.con = open_readonly(path)
            self.tables = tables_of(self.con)
        except sqlite3.DatabaseError as exc:
            raise InvalidEvent(f"not a SQLite database mini-ork wrote: {exc}", source=str(path)) from None
        missing = [t for t in REQUIRED_TABLES if t not in self.tables]
        if missing:
            raise InvalidEvent(
                f"a SQLite database without mini-ork's table(s) {', '.join(missing)} (it has "
                f"{', '.join(sorted(self.tables)[:8]) or 'no tables'}): is it a mini-ork .mini-ork/state.db?",
                source=str(path),
            )
        runs = self.tables["task_runs"]
        for option, column in (("--task-key", options.task_key), ("--region-key", options.region_key)):
            if column is not None and column not in runs:
                raise InvalidEvent(
                    f"{option} {column!r} is not a column of task_runs (it has {', '.join(sorted(runs))})",
                    source=str(path),
                )
        self.task_column = options.task_key or "id"
        self.region_column = options.region_key or "task_class"
        self.rows_by_table: dict[str, int] = {}
        self.done = self.total = 0
        self.moments: dict[tuple[type, Any], str] = {}  # times read (most repeat), by their cell

    # ----------------------------------------------------------------- reading
    def _select(self, table: str, columns: tuple[str, ...], alias: str) -> str:
        have = self.tables.get(table, set())
        return ", ".join(f'{alias}."{c}" AS "{c}"' if c in have else f'NULL AS "{c}"' for c in columns)

    def _count(self, table: str) -> int:
        return self.con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0] if table in self.tables else 0

    def progress(self) -> float:
        return self.done / max(self.total, 1)

    def finish(self) -> list[str]:
        self.con.close()
        notes = [
            "mini-ork logs no routing propensity: no route.decided events (route_source, route_explore, "
            "route_score and route_margin are kept on each attempt)"
        ]
        return notes

    def units(self) -> Iterator[Unit]:
        try:
            self.total = sum(self._count(t) for t in ("task_runs", "execution_traces", "grounded_rejections"))
            self.total += self._count("conductor_decisions")
            yield from self._runs()
            yield from self._traces()
            if "grounded_rejections" in self.tables:
                yield from self._rejections()
            if "conductor_decisions" in self.tables:
                yield from self._decisions()
        except sqlite3.DatabaseError as exc:  # a damaged file, or one a writer holds exclusively
            raise InvalidEvent(
                f"cannot read the database: {exc} (nothing was appended)", source=str(self.path)
            ) from None

    def _rows(self, table: str, sql: str) -> Iterator[dict[str, Any]]:
        """The rows of ``sql`` as dicts (a sqlite3.Row finds a column by name with a scan over its names)."""
        cursor = self.con.execute(sql)
        cursor.row_factory = None
        names = [d[0] for d in cursor.description]
        n = 0
        while rows := cursor.fetchmany(1024):
            n += len(rows)
            self.done += len(rows)
            yield from (dict(zip(names, values, strict=False)) for values in rows)  # one cursor: as many as names
        self.rows_by_table[table] = n

    # ----------------------------------------------------------------- task runs
    def _task_of(self, row: dict[str, Any], column: str = "task_key") -> str | None:
        return text(row[column])

    def _runs(self) -> Iterator[Unit]:
        columns = self._select("task_runs", task_run_columns, "r")
        sql = (
            f'SELECT {columns}, r."{self.task_column}" AS task_key, r."{self.region_column}" AS region_key '
            "FROM task_runs r ORDER BY r.rowid"
        )
        for row in self._rows("task_runs", sql):
            yield self._run(row)

    def _run(self, row: dict[str, Any]) -> Unit:
        ref = f"mini-ork:task_runs:{row['id']}"
        problems: list[tuple[str, str]] = []
        task = self._task_of(row)
        if task is None:
            problems.append((self.task_column, "must not be blank (it names the task)"))
        try:
            at = self._moment(row["created_at"], "created_at")
            if at is None:
                raise Problem("created_at", "must not be blank")
            ended = self._moment(row["ended_at"], "ended_at") or self._moment(row["updated_at"], "updated_at") or at
        except Problem as exc:
            problems.append((exc.field, exc.reason))
        if problems:
            return Unit(f"task_runs:{row['id']}", [], problems, [], dict(row))
        labels = {k: v for k in ("recipe", "workflow_version") if (v := text(row[k])) is not None}
        region = text(row["region_key"]) or "general"
        final = self.options.task_key is None  # each run is its own task: no other candidate can come
        records: list[Any] = [
            Opened(f"run:{task}", task, region, at, labels or None, self.options.thread, ref=ref, final=final)  # type: ignore[arg-type]
        ]
        outcome = run_outcome(text(row["status"]), text(row["verdict"]))
        skipped = []
        if outcome is None:
            skipped.append("task run still open (no task.closed yet)")
        else:
            records.append(Closure(f"closed:{row['id']}", task, outcome, ended, ref=ref))  # type: ignore[arg-type]
        return Unit(f"task_runs:{row['id']}", records, [], skipped)

    def _moment(self, value: Any, field: str) -> str | None:
        key = (type(value), value)  # by type too: True == 1, and moment() reads them apart
        at = self.moments.get(key)
        if at is None:
            at = moment(value, field, naive_utc=True, unix_numbers=True)
            if at is None:
                return None
            if len(self.moments) >= _REMEMBERED:
                self.moments.clear()
            self.moments[key] = at
        return self.clock.check(at, field)

    # ----------------------------------------------------------------- traces
    def _calls_join(self) -> tuple[str, str]:
        """The LLM calls' cost and tokens per trace (``metadata_json.trace_id``) and per run and node (the node
        is what follows the last ``:`` of ``feature_name``; a trace's node is the second part of its id,
        ``tr-<node>-<ts>-<pid>``, as mini-ork's own OTLP export pairs them)."""
        if "llm_calls" not in self.tables:
            return (
                "NULL AS by_trace_cost, NULL AS by_trace_in, NULL AS by_trace_out, NULL AS by_node_cost, "
                "NULL AS by_node_in, NULL AS by_node_out",
                "",
            )
        suffix = "replace(c.feature_name, rtrim(c.feature_name, replace(c.feature_name, ':', '')), '')"
        calls = (
            "SELECT json_extract(CASE WHEN json_valid(c.metadata_json) THEN c.metadata_json END, '$.trace_id') AS tid, "
            f"CAST(c.run_id AS TEXT) AS rid, {suffix} AS node, sum(c.cost_usd) AS cost, "
            "sum(c.input_tokens) AS tin, sum(c.output_tokens) AS tout FROM llm_calls c GROUP BY 1, 2, 3"
        )
        node = (
            "CASE WHEN t.trace_id LIKE 'tr-%-%' THEN substr(t.trace_id, 4, instr(substr(t.trace_id, 4), '-') - 1) END"
        )
        select = (
            "bt.cost AS by_trace_cost, bt.tin AS by_trace_in, bt.tout AS by_trace_out, "
            "bn.cost AS by_node_cost, bn.tin AS by_node_in, bn.tout AS by_node_out"
        )
        join = (
            f"LEFT JOIN (SELECT tid, sum(cost) AS cost, sum(tin) AS tin, sum(tout) AS tout FROM ({calls}) "
            "WHERE tid IS NOT NULL GROUP BY tid) bt ON bt.tid = t.trace_id "
            f"LEFT JOIN (SELECT rid, node, sum(cost) AS cost, sum(tin) AS tin, sum(tout) AS tout FROM ({calls}) "
            f"WHERE tid IS NULL GROUP BY rid, node) bn ON bn.rid = CAST(t.run_id AS TEXT) AND bn.node = {node}"
        )
        return select, join

    def _traces(self) -> Iterator[Unit]:
        columns = self._select("execution_traces", trace_columns, "t")
        counts = ", ".join(
            f"CASE WHEN json_valid(t.{c}) AND json_type(t.{c}) = 'array' THEN json_array_length(t.{c}) END AS n_{c}"
            if c in self.tables["execution_traces"]
            else f"NULL AS n_{c}"
            for c in ("tool_calls", "files_read", "files_written")
        )
        snapshot = "r.dispatch_config_json" if "dispatch_config_json" in self.tables["task_runs"] else "NULL"
        calls_select, calls_join = self._calls_join()
        sql = (
            f'SELECT {columns}, {counts}, {snapshot} AS snapshot, r."{self.task_column}" AS task_key, '
            f"r.id AS run_known, {calls_select} FROM execution_traces t "
            f"LEFT JOIN task_runs r ON r.id = CAST(t.run_id AS TEXT) {calls_join} ORDER BY t.run_id, t.rowid"
        )
        last_run: Any = None
        lanes: dict[str, dict[str, Any]] = {}
        snapshots: dict[str, dict[str, dict[str, Any]]] = {}  # runs share their dispatch snapshot's text
        for row in self._rows("execution_traces", sql):
            if row["run_id"] != last_run:
                last_run, raw = row["run_id"], row["snapshot"]
                if not isinstance(raw, str):
                    lanes = lane_snapshot(raw)
                elif raw in snapshots:
                    lanes = snapshots[raw]
                else:
                    if len(snapshots) >= _REMEMBERED:
                        snapshots.clear()
                    lanes = snapshots[raw] = lane_snapshot(raw)
            yield self._trace(row, lanes)

    def lane_config(self, lane: str, lanes: dict[str, dict[str, Any]]) -> Cfg:
        """The config of a lane: ``--config-map`` by lane name, else lane / provider / model id from the run's
        dispatch snapshot, else the lane alone (``lane/-/lane/-``)."""
        mapped = self.options.maps.config(lane)
        if mapped is not None:
            return mapped
        snap = lanes.get(lane, {})
        model = text(snap.get("model_id")) or text(snap.get("model")) or lane
        return config_of(lane, text(snap.get("provider")), model, None)

    def _trace(self, row: dict[str, Any], lanes: dict[str, dict[str, Any]]) -> Unit:
        trace_id = row["trace_id"]
        name = f"execution_traces:{trace_id}"
        problems: list[tuple[str, str]] = []
        skipped: list[str] = []
        status_text = (text(row["status"]) or "").lower()
        if status_text in IN_FLIGHT:
            return Unit(name, [], [], [f"trace {status_text}: imported once it finishes"])
        status = TRACE_STATUSES.get(status_text) or ("escalated" if status_text == "escalated" else None)
        if status is None:
            problems.append(
                (
                    "status",
                    f"{row['status']!r} is not a status mini-ork writes (success, failure, "
                    "vacuous, blocked, pending, running)",
                )
            )
        task = self._task_of(row)
        if row["run_known"] is None or task is None:
            problems.append(("run_id", f"{row['run_id']!r} names no task run of this database"))
        lane = text(row["agent_version_id"])
        config = None
        if lane is None:
            mapped = self.options.maps.config("")
            if mapped is None:
                problems.append(
                    (
                        "agent_version_id",
                        "is empty: no lane to attribute the trace to (map '' with "
                        "--config-map to give such traces a config)",
                    )
                )
            config = mapped
        else:
            try:
                config = self.lane_config(lane, lanes)
            except ValueError as exc:
                problems.append(("agent_version_id", str(exc)))
        try:
            at = self._moment(row["created_at"], "created_at")
            if at is None:
                raise Problem("created_at", "must not be blank")
            details, extra = self._trace_values(row)
            spent, cost_from = self._cost(row, config) if config is not None else (None, "unknown")
        except Problem as exc:
            problems.append((exc.field, exc.reason))
        if problems:
            return Unit(name, [], problems, [], row)
        assert config is not None and task is not None and status is not None  # else a problem above
        verifier = json_object(row["verifier_output"])
        details["node"] = text(verifier.get("node_type")) or node_of(trace_id)
        ref = f"mini-ork:execution_traces:{trace_id}"
        attempt = Attempt(
            f"trace:{trace_id}",
            task,
            config,
            status,
            spent,
            cost_from,
            at,  # type: ignore[arg-type]
            details=details,
            extra=extra or None,
            ref=ref,
        )
        records: list[Any] = [attempt]
        if (text(row["validity"]) or "valid") == "invalid":
            skipped.append("trace marked invalid: its ratings are left out")
            return Unit(name, records, [], skipped)
        try:
            records += self._trace_ratings(row, trace_id, task, config, at, verifier, ref, skipped)  # type: ignore[arg-type]
        except Problem as exc:
            return Unit(name, [], [(exc.field, exc.reason)], [], row)
        return Unit(name, records, [], skipped)

    def _trace_values(self, row: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """A trace row's attempt details (by the event's field names, the node aside) and its extra fields."""
        duration = count(row["duration_ms"], "duration_ms")
        extra: dict[str, Any] = {}
        if (reward := row["process_reward"]) is not None:
            extra["process_reward"] = min(max(float(reward), 0.0), 1.0)
        if (source := text(row["route_source"])) is not None:
            extra["route_source"] = source
        if row["route_explore"] is not None:
            extra["route_explore"] = bool(row["route_explore"])
        for column in ("route_score", "route_margin"):
            value = row[column]
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                extra[column] = float(value)
        details = {
            "duration_ms": duration or None,  # 0 is mini-ork's default for no duration recorded
            "prompt_version": text(row["prompt_version_hash"]),
            "reviewer_verdict": text(row["reviewer_verdict"]),
            "tool_calls": row["n_tool_calls"],
            "files_read": row["n_files_read"],
            "files_written": row["n_files_written"],
        }
        return details, extra

    def _cost(self, row: dict[str, Any], config: Cfg) -> tuple[float | None, str]:
        """(cost, where it came from): the trace's, its calls', their tokens at the prices, a per-task price."""
        own = cost(row["cost_usd"])
        if own:
            return own, "source"
        for prefix in ("by_trace", "by_node"):
            spent = cost(row[f"{prefix}_cost"], "llm_calls.cost_usd")
            if spent:
                return spent, "source"
            tokens_in, tokens_out = row[f"{prefix}_in"], row[f"{prefix}_out"]
            if tokens_in or tokens_out:
                priced = self.pricer.tokens(config.key, tokens_in or 0, tokens_out or 0)
                if priced is not None:
                    return priced, "tokens"
        return self.pricer.per_task(config.key)

    def _trace_ratings(
        self,
        row: dict[str, Any],
        trace_id: str,
        task: str,
        config: Cfg,
        at: str,
        verifier: dict[str, Any],
        ref: str,
        skipped: list[str],
    ) -> list[Rating]:
        out: list[Rating] = []
        for name, result in sorted(verifier.items()):
            if not isinstance(result, dict) or ("pass" not in result and "score" not in result):
                continue
            score = self.options.score(result.get("score"), f"verifier_output.{name}.score")
            if score is None:
                score = self.options.score(result.get("pass"), f"verifier_output.{name}.pass")
            if score is None:
                skipped.append("verifier without a pass or a score")
                continue
            rater = {"kind": "gate", "name": str(name)}
            out.append(Rating(f"trace:{trace_id}:verifier:{name}", task, config, rater, score, at, ref=ref))
        verdict = text(row["reviewer_verdict"])
        if verdict is not None:
            score = verdict_score(verdict, self.options)
            if score is None:
                skipped.append("reviewer escalated (not a verdict on quality)")
            else:
                rater = {"kind": "reviewer", "name": "mini-ork:reviewer"}
                out.append(Rating(f"trace:{trace_id}:reviewer", task, config, rater, score, at, ref=ref))
        source = (text(row["reward_source"]) or "").lower()
        if row["reward_value"] is not None and source.startswith(("rubric", "human")):
            score = self.options.score(row["reward_value"], "reward_value")
            if score is not None:
                kind = "human" if source.startswith("human") else "reviewer"
                rater = {"kind": kind, "name": f"mini-ork:{source}"}
                out.append(Rating(f"trace:{trace_id}:reward", task, config, rater, score, at, ref=ref))
        return out

    # ----------------------------------------------------------------- rejections and decisions
    def _trace_lanes(self, trace_ids: list[str]) -> list[tuple[str, str | None]]:
        marks = ", ".join("?" for _ in trace_ids)
        sql = f"SELECT agent_version_id, run_id FROM execution_traces WHERE trace_id IN ({marks})"
        return [(r[0], r[1]) for r in self.con.execute(sql, trace_ids)]

    def _run_info(self, run_id: Any) -> tuple[str | None, dict[str, dict[str, Any]], list[str]]:
        """(task, lane snapshot, the lanes of its traces) of a task run."""
        snapshot = "dispatch_config_json" if "dispatch_config_json" in self.tables["task_runs"] else "NULL"
        found = self.con.execute(
            f'SELECT "{self.task_column}", {snapshot} FROM task_runs WHERE id = ?',
            (run_id,),
        ).fetchone()
        if found is None:
            return None, {}, []
        lanes = [
            r[0]
            for r in self.con.execute(
                "SELECT DISTINCT agent_version_id FROM execution_traces WHERE run_id = ? AND agent_version_id <> ''",
                (run_id,),
            )
        ]
        return text(found[0]), lane_snapshot(found[1]), lanes

    def _rejections(self) -> Iterator[Unit]:
        columns = self._select(
            "grounded_rejections",
            (
                "id",
                "ts",
                "run_id",
                "gate_name",
                "verdict",
                "concern",
                "evidence_trace_ids",
                "evidence_summary",
                "suggestion",
            ),
            "g",
        )
        for row in self._rows("grounded_rejections", f"SELECT {columns} FROM grounded_rejections g ORDER BY g.rowid"):
            yield self._rejection(row)

    def _rejection(self, row: dict[str, Any]) -> Unit:
        name = f"grounded_rejections:{row['id']}"
        verdict = (text(row["verdict"]) or "").lower()
        if verdict == "indeterminate":
            return Unit(name, [], [], ["grounded rejection indeterminate (not a rejection)"])
        problems: list[tuple[str, str]] = []
        if verdict not in ("fail", "needs_revision"):
            problems.append(("verdict", f"{row['verdict']!r} is not fail, needs_revision or indeterminate"))
        evidence = json_list(row["evidence_trace_ids"])
        task, lanes, run_lanes = self._run_info(row["run_id"])
        if task is None:
            problems.append(("run_id", f"{row['run_id']!r} names no task run: a rejection must name its task"))
        claim = text(row["concern"])
        if claim is None:
            problems.append(("concern", "must not be blank (it is the rejection's claim)"))
        try:
            at = self._moment(row["ts"], "ts")
            if at is None:
                raise Problem("ts", "must not be blank")
        except Problem as exc:
            problems.append((exc.field, exc.reason))
        chosen = sorted({lane for lane, _ in self._trace_lanes(evidence) if lane}) if evidence else []
        chosen = chosen or run_lanes
        if task is not None and len(chosen) != 1:
            problems.append(
                (
                    "evidence_trace_ids",
                    f"cannot tell which lane it rejects: its evidence names "
                    f"{len(chosen)} lanes ({', '.join(chosen) or 'none'})",
                )
            )
        if problems:
            return Unit(name, [], problems, [], row)
        config = self.lane_config(chosen[0], lanes)
        items = [*evidence, *(f"{k}: {v}" for k in ("evidence_summary", "suggestion") if (v := text(row[k])))]
        rater = {"kind": "gate", "name": text(row["gate_name"]) or "mini-ork:gate"}
        ref = f"mini-ork:grounded_rejections:{row['id']}"
        record = Rejection(f"rejection:{row['id']}", task, config, rater, claim, items, at, ref=ref)  # type: ignore[arg-type]
        return Unit(name, [record], [], [])

    def _decisions(self) -> Iterator[Unit]:
        columns = self._select(
            "conductor_decisions",
            ("id", "decided_at", "task_run_id", "chosen_lane_hints", "realized_score", "outcome", "decided_by"),
            "d",
        )
        for row in self._rows("conductor_decisions", f"SELECT {columns} FROM conductor_decisions d ORDER BY d.rowid"):
            yield self._decision(row)

    def _decision(self, row: dict[str, Any]) -> Unit:
        name = f"conductor_decisions:{row['id']}"
        if row["task_run_id"] is None:
            return Unit(name, [], [], ["conductor decision names no task run (written before migration 0050)"])
        if row["realized_score"] is None:
            return Unit(name, [], [], ["conductor decision not realized yet (realized_score is null)"])
        task, lanes, _ = self._run_info(row["task_run_id"])
        problems: list[tuple[str, str]] = []
        if task is None:
            problems.append(("task_run_id", f"{row['task_run_id']!r} names no task run of this database"))
        hints = json_object(row["chosen_lane_hints"])
        lane = next((str(hints[k]) for k in ("implementer", "worker") if isinstance(hints.get(k), str)), None)
        if lane is None and len({str(v) for v in hints.values()}) == 1:
            lane = str(next(iter(hints.values())))
        if lane is None:
            problems.append(
                ("chosen_lane_hints", "names no implementer lane: cannot tell which lane the outcome rates")
            )
        try:
            score = self.options.score(row["realized_score"], "realized_score")
            at = self._moment(row["decided_at"], "decided_at")
            if at is None:
                raise Problem("decided_at", "must not be blank")
        except Problem as exc:
            problems.append((exc.field, exc.reason))
        if problems:
            return Unit(name, [], problems, [], row)
        config = self.lane_config(lane, lanes)  # type: ignore[arg-type]
        rater = {"kind": "gate", "name": "mini-ork:realized"}
        ref = f"mini-ork:conductor_decisions:{row['id']}"
        record = Rating(f"decision:{row['id']}", task, config, rater, score, at, ref=ref)  # type: ignore[arg-type]
        return Unit(name, [record], [], [])
