"""OpenTelemetry GenAI traces as OTLP/JSON (``--format otlp``; docs/design.md, Imports, OpenTelemetry).

The encoding followed is the OTLP/JSON mapping of opentelemetry-proto (``ExportTraceServiceRequest``:
``resourceSpans[].scopeSpans[].spans[]``; attributes as ``{key, value: {stringValue|intValue|doubleValue|
boolValue|arrayValue|kvlistValue}}``; ``traceId``/``spanId`` hex; times as unix nanoseconds, integers or decimal
strings; ``status.code`` 2 for an error), one request a file or one a line (JSON Lines, as the collector's file
exporter writes), gzip'd or not; ``ExportLogsServiceRequest`` (``resourceLogs``) for evaluation events sent as
log records. The attributes followed are the GenAI semantic conventions (semantic-conventions v1.37 to v1.41,
``docs/gen-ai``): ``gen_ai.agent.name`` (cli), ``gen_ai.provider.name`` (route; ``gen_ai.system`` before
v1.37), ``gen_ai.request.model`` (model; else ``gen_ai.response.model``), ``gen_ai.usage.input_tokens`` /
``output_tokens``, ``gen_ai.operation.name`` (``execute_tool`` spans are tool calls), and the
``gen_ai.evaluation.result`` event (``gen_ai.evaluation.name``, ``.score.value``, ``.score.label``,
``.explanation``), as a span event or a log record with the span's ``traceId``/``spanId``. mini-ork's own OTLP
export (``llm.model_name``, ``llm.token_count.prompt`` / ``.completion``, ``llm.usage.total_cost_usd``,
``mini-ork.*``) is read too, as are OpenInference's ``llm.cost.total`` and ``gen_ai.usage.cost``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import InvalidEvent
from .records import records
from .traces import ExportSource, Score, Trace
from .values import amount

EVALUATION = "gen_ai.evaluation.result"
MODEL = ("gen_ai.request.model", "gen_ai.response.model", "llm.model_name")
PROVIDER = ("gen_ai.provider.name", "gen_ai.system", "llm.provider")
COST = ("gen_ai.usage.cost", "llm.cost.total", "llm.usage.total_cost_usd")
TOKENS_IN = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt")
TOKENS_OUT = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion")


def value_of(any_value: Any) -> Any:
    """An OTLP ``AnyValue`` as a Python value (``intValue`` comes as a decimal string in JSON)."""
    if not isinstance(any_value, dict):
        return any_value
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in any_value:
            return any_value[key]
    if "intValue" in any_value:
        try:
            return int(any_value["intValue"])
        except (TypeError, ValueError):
            return any_value["intValue"]
    if "arrayValue" in any_value:
        return [value_of(v) for v in (any_value["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in any_value:
        return attributes((any_value["kvlistValue"] or {}).get("values", []))
    if "bytesValue" in any_value:
        return any_value["bytesValue"]
    return None


def attributes(pairs: Any) -> dict[str, Any]:
    """OTLP ``attributes`` (a list of ``{key, value}``) as a dict."""
    out: dict[str, Any] = {}
    for pair in pairs or []:
        if isinstance(pair, dict) and isinstance(pair.get("key"), str):
            out[pair["key"]] = value_of(pair.get("value"))
    return out


def _first(attrs: dict[str, Any], names: tuple[str, ...]) -> Any:
    for name in names:
        value = attrs.get(name)
        if value is not None and value != "":
            return value
    return None


def _seconds(nanos: Any) -> float | None:
    value = amount(nanos)
    return None if not value else value / 1e9


class OtlpSource(ExportSource):
    """OTLP/JSON files as an import source (pipeline/streams/imports/run.py, Source)."""

    format = "otlp"
    prefix = "otel"
    tables = ("spans", "evaluations")

    def finish(self) -> list[str]:
        return [
            "OpenTelemetry GenAI traces carry no routing decisions and no rejections: none are written; "
            f"evaluations are ratings of kind {self.rater()} (--rater-kind to change it)"
        ]

    def read(self, path: Path) -> None:
        seen = False
        for n, request in records(path):
            for resource in request.get("resourceSpans") or request.get("resource_spans") or []:
                seen = True
                self._resource_spans(resource)
            for resource in request.get("resourceLogs") or []:
                seen = True
                self._resource_logs(resource)
            if not seen and n == 1:
                raise InvalidEvent(
                    "not OTLP/JSON: no resourceSpans or resourceLogs in its first object", source=str(path)
                )

    def _resource_spans(self, resource: dict[str, Any]) -> None:
        shared = attributes((resource.get("resource") or {}).get("attributes"))
        for scope in resource.get("scopeSpans") or resource.get("scope_spans") or []:
            for span in scope.get("spans") or []:
                if isinstance(span, dict):
                    self._span(span, shared)

    def _span(self, span: dict[str, Any], shared: dict[str, Any]) -> None:
        self.rows_by_table["spans"] += 1
        trace_id, span_id = str(span.get("traceId") or ""), str(span.get("spanId") or "")
        trace = self.book.trace(trace_id)
        if not trace_id or not span_id:
            trace.problems.append(("traceId", "a span without a traceId or a spanId"))
            return
        attrs = {**shared, **attributes(span.get("attributes"))}
        self._describe(trace, attrs)
        status = (span.get("status") or {}).get("code")
        operation = attrs.get("gen_ai.operation.name")
        self.book.span(
            trace,
            span_id,
            parent=str(span.get("parentSpanId") or "") or None,
            start=_seconds(span.get("startTimeUnixNano")),
            end=_seconds(span.get("endTimeUnixNano")),
            cost=amount(_first(attrs, COST)),
            tokens_in=amount(_first(attrs, TOKENS_IN)),
            tokens_out=amount(_first(attrs, TOKENS_OUT)),
            model=_first(attrs, MODEL),
            failed=status in (2, "STATUS_CODE_ERROR", "2"),
            tool=operation == "execute_tool",
        )
        for event in span.get("events") or []:
            if isinstance(event, dict) and event.get("name") == EVALUATION:
                self._evaluation(trace, span_id, attributes(event.get("attributes")), event.get("timeUnixNano"))

    def _describe(self, trace: Trace, attrs: dict[str, Any]) -> None:
        options = self.options
        if options.task_key is not None:
            trace.first("task", attrs.get(options.task_key))
        if options.region_key is not None:
            trace.first("region", attrs.get(options.region_key))
        trace.first("config", attrs.get("ratings.config"))
        trace.first("agent", attrs.get("gen_ai.agent.name"))
        trace.first("provider", _first(attrs, PROVIDER))
        trace.first("model", _first(attrs, MODEL))

    def _resource_logs(self, resource: dict[str, Any]) -> None:
        for scope in resource.get("scopeLogs") or []:
            for record in scope.get("logRecords") or []:
                if not isinstance(record, dict):
                    continue
                attrs = attributes(record.get("attributes"))
                if record.get("eventName") != EVALUATION and attrs.get("event.name") != EVALUATION:
                    continue
                trace = self.book.trace(str(record.get("traceId") or ""))
                when = record.get("timeUnixNano") or record.get("observedTimeUnixNano")
                self._evaluation(trace, str(record.get("spanId") or "") or None, attrs, when)

    def _evaluation(self, trace: Trace, span_id: str | None, attrs: dict[str, Any], when: Any) -> None:
        self.rows_by_table["evaluations"] += 1
        name = str(attrs.get("gen_ai.evaluation.name") or "evaluation")
        nth = sum(1 for s in trace.scores if s.span == span_id and s.name == name)
        explanation = attrs.get("gen_ai.evaluation.explanation")
        kind = (
            attrs.get("ratings.rater.kind")
            if attrs.get("ratings.rater.kind") in ("gate", "reviewer", "human")
            else self.rater()
        )
        trace.scores.append(
            Score(
                key=f"eval:{trace.id}:{span_id}:{name}:{nth}",
                name=name,
                value=attrs.get("gen_ai.evaluation.score.value"),
                label=attrs.get("gen_ai.evaluation.score.label"),
                kind=str(kind),
                span=span_id,
                at=_seconds(when),
                extra={"explanation": str(explanation)} if explanation else None,
            )
        )
