"""LangSmith exports (``--format langsmith``; docs/design.md, Imports, LangSmith).

The shapes followed: the Run data format (``id``, ``trace_id``, ``parent_run_id``, ``name``, ``run_type``,
``start_time``, ``end_time``, ``status``, ``error``, ``extra.metadata`` with ``ls_provider`` and ``ls_model_name``,
``extra.invocation_params.model``, ``prompt_tokens``, ``completion_tokens``, ``total_cost``), as the API returns
runs and as the bulk export writes them to Parquet (JSON columns as text), and the Feedback data format (``id``,
``run_id``, ``trace_id``, ``key``, ``score``, ``value``, ``comment``, ``feedback_source.type``, ``created_at``,
``modified_at``). A record's kind is told by its fields.

- a trace (its root run, ``parent_run_id`` null) -> one task (``--task-key``: a metadata key, e.g. the dataset
  example, else the trace id; ``reference_example_id`` when no key is named and the run has one) and one
  attempt: ``cli`` = the root run's name, ``model`` and ``route`` from its first ``llm`` run; ``failure`` when
  the root's ``status`` is ``error``;
- runs -> spans: cost (``total_cost``), tokens, tool calls (``run_type`` ``tool``);
- feedback -> a rating: ``feedback_source.type`` ``model`` -> reviewer (an evaluator), ``app`` -> human
  (annotation in the app), ``api`` -> gate (sent by the application's code); ``score`` (a number or a boolean),
  else ``value`` as a label through ``--label-map``; edited feedback is retracted and replaced on the next import.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .options import ImportOptions
from .prices import Pricer
from .records import field, json_value, records
from .traces import ExportSource, Score
from .values import Clock, amount, seconds

KINDS = {"model": "reviewer", "app": "human", "api": "gate"}


def _metadata(record: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    extra = json_value(field(record, "extra")) or {}
    extra = extra if isinstance(extra, dict) else {}
    metadata = extra.get("metadata") or json_value(field(record, "metadata")) or {}
    params = extra.get("invocation_params") or {}
    return (metadata if isinstance(metadata, dict) else {}), (params if isinstance(params, dict) else {})


class LangSmithSource(ExportSource):
    """A LangSmith export as an import source (pipeline/streams/imports/run.py, Source)."""

    format = "langsmith"
    prefix = "ls"
    tables = ("runs", "feedback")
    rater_kinds = KINDS

    def __init__(self, paths: list[Path], options: ImportOptions, clock: Clock, pricer: Pricer) -> None:
        super().__init__(paths, options, clock, pricer)
        self.run_trace: dict[str, str] = {}  # run id -> trace id (feedback may name only its run)
        self.pending: list[dict[str, Any]] = []

    def read(self, path: Path) -> None:
        for _, record in records(path):
            if field(record, "key") is not None and ("run_id" in record or "feedback_source" in record):
                self.rows_by_table["feedback"] += 1
                self.pending.append(record)  # after every run: feedback may come before its run
            else:
                self.rows_by_table["runs"] += 1
                self._run(record)

    def read_all(self) -> None:
        for record in self.pending:
            self._feedback(record)

    def _run(self, record: dict[str, Any]) -> None:
        run_id = str(field(record, "id") or "")
        trace_id = str(field(record, "trace_id") or run_id)
        self.run_trace[run_id] = trace_id
        trace = self.book.trace(trace_id)
        metadata, params = _metadata(record)
        parent = field(record, "parent_run_id")
        run_type = str(field(record, "run_type") or "")
        model = metadata.get("ls_model_name") or params.get("model") or params.get("model_name")
        if not parent:
            options = self.options
            task = metadata.get(options.task_key) if options.task_key else field(record, "reference_example_id")
            trace.first("task", task)
            if options.region_key is not None:
                trace.first("region", metadata.get(options.region_key))
            trace.first("agent", field(record, "name"))
            trace.first("config", metadata.get("ratings.config"))
        if run_type == "llm":
            trace.first("model", model)
            trace.first("provider", metadata.get("ls_provider"))
        self.book.span(
            trace,
            run_id,
            parent=str(parent) if parent else None,
            start=seconds(field(record, "start_time")),
            end=seconds(field(record, "end_time")),
            cost=amount(field(record, "total_cost")),
            tokens_in=amount(field(record, "prompt_tokens")),
            tokens_out=amount(field(record, "completion_tokens")),
            model=model if run_type == "llm" else None,
            failed=str(field(record, "status") or "").lower() == "error",
            tool=run_type == "tool",
        )

    def _feedback(self, record: dict[str, Any]) -> None:
        run_id = str(field(record, "run_id") or "")
        trace_id = str(field(record, "trace_id") or self.run_trace.get(run_id, run_id))
        trace = self.book.trace(trace_id)
        source = json_value(field(record, "feedback_source")) or {}
        source_type = str(source.get("type") if isinstance(source, dict) else source or "").lower()
        comment = field(record, "comment")
        trace.scores.append(
            Score(
                key=f"feedback:{field(record, 'id')}",
                name=str(field(record, "key")),
                value=field(record, "score"),
                label=field(record, "value"),
                kind=self.rater(source_type),
                span=run_id or None,
                at=seconds(field(record, "modified_at", "created_at")),
                extra={"comment": str(comment)} if comment else None,
            )
        )
