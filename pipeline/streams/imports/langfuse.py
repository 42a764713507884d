"""Langfuse exports (``--format langfuse``; docs/design.md, Imports, Langfuse).

The shapes followed: the public API's objects (``/api/public/traces``, ``/observations``, ``/scores``: camelCase,
as the UI's JSON export writes them) and the blob storage export's files (``traces/``, ``observations/`` or
``observations_v2/``, ``scores/``: snake_case, JSON, JSONL, CSV; timestamps ``YYYY-MM-DD HH:MM:SS.ffffff`` in
UTC). A record's kind is told by its fields, so one file or several, in any order, may hold them all.

- a trace -> one task (``--task-key``: a ``metadata`` key, e.g. a dataset item id, else the trace id) and one
  attempt: ``cli`` = the trace's ``name``, ``model`` = its first generation's model, ``route`` = a ``provider``
  (or ``ls_provider``) metadata value; ``failure`` when an observation has level ERROR at the root;
- observations -> spans of the attempt: cost (``costDetails.total``, ``calculatedTotalCost``, ``totalCost``,
  ``total_cost``), tokens (``usageDetails`` / ``usage_details`` input and output), tool calls (type ``TOOL``);
- a score -> a rating: ``source`` ANNOTATION -> human, EVAL -> reviewer (an LLM-as-judge), API -> gate (a check
  sent by the application); ``dataType`` NUMERIC -> its value, BOOLEAN -> 1 or 0, CATEGORICAL -> its
  ``stringValue`` through ``--label-map``. A score edited at the source (its value changed) is retracted and
  replaced on the next import.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .records import field, json_value, records
from .traces import ExportSource, Score, Trace
from .values import amount, seconds

KINDS = {"ANNOTATION": "human", "EVAL": "reviewer", "API": "gate"}


def kind_of(record: dict[str, Any]) -> str:
    """``score``, ``observation`` or ``trace``, by the fields a Langfuse record of each kind has."""
    if field(record, "dataType", "data_type") is not None or (
        "value" in record
        and "name" in record
        and ("traceId" in record or "trace_id" in record)
        and "type" not in record
    ):
        return "score"
    if field(record, "traceId", "trace_id") is not None:
        return "observation"
    return "trace"


class LangfuseSource(ExportSource):
    """A Langfuse export as an import source (pipeline/streams/imports/run.py, Source)."""

    format = "langfuse"
    prefix = "lf"
    tables = ("traces", "observations", "scores")
    rater_kinds = KINDS

    def read(self, path: Path) -> None:
        for _, record in records(path):
            kind = kind_of(record)
            self.rows_by_table[f"{kind}s"] += 1
            getattr(self, f"_{kind}")(record)

    def _trace(self, record: dict[str, Any]) -> None:
        trace_id = str(field(record, "id") or "")
        trace = self.book.trace(trace_id)
        metadata = json_value(field(record, "metadata")) or {}
        metadata = metadata if isinstance(metadata, dict) else {}
        if self.options.task_key is not None:
            trace.first("task", metadata.get(self.options.task_key) or field(record, self.options.task_key))
        if self.options.region_key is not None:
            trace.first("region", metadata.get(self.options.region_key) or field(record, self.options.region_key))
        trace.first("config", metadata.get("ratings.config"))
        trace.first("agent", field(record, "name"))
        trace.first("provider", metadata.get("provider") or metadata.get("ls_provider"))
        when = seconds(field(record, "timestamp"))
        if "trace" not in trace.spans:  # the trace itself is the root span (observations hang below it)
            self.book.span(trace, "trace", parent=None, start=when, end=None)

    def _observation(self, record: dict[str, Any]) -> None:
        trace = self.book.trace(str(field(record, "traceId", "trace_id")))
        usage = json_value(field(record, "usageDetails", "usage_details", "usage")) or {}
        usage = usage if isinstance(usage, dict) else {}
        costs = json_value(field(record, "costDetails", "cost_details")) or {}
        costs = costs if isinstance(costs, dict) else {}
        cost = amount(costs.get("total")) if costs else None
        if cost is None:
            cost = amount(field(record, "calculatedTotalCost", "totalCost", "total_cost"))
        model = field(record, "model", "provided_model_name", "providedModelName")
        kind = str(field(record, "type") or "").upper()
        if kind == "GENERATION":
            trace.first("model", model)
        level = str(field(record, "level") or "").upper()
        parent = field(record, "parentObservationId", "parent_observation_id") or "trace"
        self.book.span(
            trace,
            str(field(record, "id")),
            parent=str(parent),
            start=seconds(field(record, "startTime", "start_time")),
            end=seconds(field(record, "endTime", "end_time")),
            cost=cost,
            tokens_in=amount(usage.get("input", usage.get("promptTokens"))),
            tokens_out=amount(usage.get("output", usage.get("completionTokens"))),
            model=model if kind == "GENERATION" else None,
            tool=kind == "TOOL",
        )
        if level == "ERROR" and parent == "trace":
            trace.failed = True

    def _score(self, record: dict[str, Any]) -> None:
        trace: Trace = self.book.trace(str(field(record, "traceId", "trace_id") or ""))
        data_type = str(field(record, "dataType", "data_type") or "NUMERIC").upper()
        value, label = field(record, "value"), field(record, "stringValue", "string_value")
        if data_type == "CATEGORICAL":
            value = None  # a category's number is its index in the score config, not a quality
        elif data_type == "BOOLEAN":
            value = {"true": True, "false": False, "1": True, "0": False, "1.0": True, "0.0": False}.get(
                str(value if value is not None else label).lower(), value
            )
            label = None
        source = str(field(record, "source") or "").upper()
        comment = field(record, "comment")
        trace.scores.append(
            Score(
                key=f"score:{field(record, 'id')}",
                name=str(field(record, "name") or "score"),
                value=value,
                label=label,
                kind=self.rater(source),
                span=str(field(record, "observationId", "observation_id") or "") or None,
                at=seconds(field(record, "timestamp", "createdAt", "created_at")),
                extra={"comment": str(comment)} if comment else None,
            )
        )
