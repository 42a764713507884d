"""Traces of spans and their scores, as one attempt each (docs/design.md, Imports): the mapping OTLP, Langfuse and
LangSmith share. A source fills a :class:`TraceBook` with spans (OTLP spans, Langfuse observations, LangSmith
runs) and scores (evaluation events, scores, feedback), then each trace becomes one :class:`~.mapping.Unit`:

- the task: the ``--task-key`` attribute (the first span carrying it), else the trace id; the region: the
  ``--region-key`` attribute, else ``general``; the task's ``task.opened`` at the trace's start;
- the config: a ``ratings.config`` attribute holding a config key wins; else ``--config-map`` of the agent name,
  then the model; else ``cli`` = the agent (or application) name, ``route`` = the provider, ``model`` = the model
  (each from the first span carrying it);
- one ``task.attempted``: ``failure`` when the root span failed, else ``success``; duration from the root span;
  ``tool_calls`` = the tool spans; the cost: the sum over the spans that carry one and have no descendant that does
  (an agent span that totals its calls is not counted twice); else their tokens at ``prices``; else a per-task
  price; else unknown;
- one ``task.rated`` per score, of the scored span's config when that span names another model, else of the
  trace's; a score edited at the source is a new rating (Imports, Updates).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ...errors import InvalidEvent
from ..events import Config
from .mapping import Attempt, Cfg, Opened, Rating, Unit, config_of
from .options import ImportOptions
from .prices import Pricer
from .records import files_of
from .values import Clock, Problem


@dataclass
class _Span:
    parent: str | None
    start: float | None  # unix seconds
    end: float | None
    cost: float | None = None
    tokens_in: float | None = None
    tokens_out: float | None = None
    model: str | None = None


@dataclass
class Score:
    key: str
    name: str
    value: Any
    label: Any
    kind: str
    span: str | None
    at: float | None
    extra: dict[str, Any] | None


@dataclass
class Trace:
    """What a trace's spans and scores say, gathered in any order (a score may come before its spans)."""

    id: str
    task: str | None = None
    region: str | None = None
    agent: str | None = None
    provider: str | None = None
    model: str | None = None
    config: str | None = None  # an explicit config key (ratings.config)
    root: str | None = None  # the root span's id
    failed: bool = False
    tools: int = 0
    spans: dict[str, _Span] = field(default_factory=dict)
    scores: list[Score] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)

    def first(self, name: str, value: Any) -> None:
        """Set ``name`` from the first span that carries it."""
        if value is not None and value != "" and getattr(self, name) is None:
            setattr(self, name, str(value))


class ExportSource(ABC):
    """What the sources of export files (OTLP, Langfuse, LangSmith) share: their files, names, the book of their
    traces, and progress by files read. A subclass sets ``format``, ``prefix``, ``tables`` and its ``read``."""

    format: str
    prefix: str
    rater_kind = "reviewer"
    #: The source's own types of rater (a score's source, a feedback's type) -> rater kinds.
    rater_kinds: ClassVar[dict[str, str]] = {}
    tables: tuple[str, ...] = ()

    def __init__(self, paths: list[Path], options: ImportOptions, clock: Clock, pricer: Pricer) -> None:
        self.files = files_of(paths)
        if not self.files:
            raise InvalidEvent(f"no {self.format} export file to read", source=str(paths[0]))
        self.options = options
        self.name = paths[0].name
        self.where = str(paths[0])
        self.book = TraceBook(self.format, self.prefix, options, pricer, clock)
        self.rows_by_table: dict[str, int] = dict.fromkeys(self.tables, 0)
        self.done = 0

    def progress(self) -> float:
        return self.done / len(self.files)

    def finish(self) -> list[str]:
        return [f"{self.format} exports carry no routing decisions and no rejections: none are written"]

    def rater(self, source_type: str = "") -> str:
        """The rater kind of a score: ``--rater-kind``, else the kind of the source's type of rater, else the
        source's default."""
        return self.options.rater_kind or self.rater_kinds.get(source_type, self.rater_kind)

    def units(self) -> Iterator[Unit]:
        for path in self.files:
            self.read(path)
            self.done += 1
        self.read_all()
        yield from self.book.units()

    def read_all(self) -> None:  # noqa: B027 (a hook: most sources have nothing left to do)
        """What a source does once every file is read (LangSmith: the feedback it held back)."""

    @abstractmethod
    def read(self, path: Path) -> None:
        """Read one export file into ``self.book`` (each source's own format)."""


class TraceBook:
    """Every trace of one import, by id, and the score rows whose trace the export does not hold."""

    def __init__(self, source: str, prefix: str, options: ImportOptions, pricer: Pricer, clock: Clock) -> None:
        self.source, self.prefix, self.options, self.pricer, self.clock = source, prefix, options, pricer, clock
        self.traces: dict[str, Trace] = {}

    def trace(self, trace_id: str) -> Trace:
        found = self.traces.get(trace_id)
        if found is None:
            found = self.traces[trace_id] = Trace(trace_id)
        return found

    def span(
        self,
        trace: Trace,
        span_id: str,
        *,
        parent: str | None,
        start: float | None,
        end: float | None,
        cost: float | None = None,
        tokens_in: float | None = None,
        tokens_out: float | None = None,
        model: str | None = None,
        failed: bool = False,
        tool: bool = False,
    ) -> None:
        trace.spans[span_id] = _Span(parent or None, start, end, cost, tokens_in, tokens_out, model)
        if not parent:
            trace.root = trace.root or span_id
        trace.failed |= failed and not parent
        trace.tools += tool

    def units(self) -> Iterator[Unit]:
        """Per trace: its unit (task, attempt), then one unit per score (a bad score is a bad row of its own)."""
        for trace in self.traces.values():
            unit, context = self.unit(trace)
            if trace.spans:
                yield unit
            for score in trace.scores:
                yield self.score_unit(trace, score, unit, context)

    # ----------------------------------------------------------------- one trace
    def _config(self, trace: Trace, model: str | None = None) -> Cfg:
        if trace.config is not None and model is None:
            config = Config.from_key(trace.config)
            return config_of(config.cli, config.route, config.model, config.effort)
        model = model or trace.model
        mapped = self.options.maps.config(trace.agent, model)
        if mapped is not None:
            return mapped
        if model is None:
            raise Problem(
                "model",
                "no span names a model (gen_ai.request.model or the source's model field): "
                "give the agent a config with --config-map",
            )
        return config_of(trace.agent or self.source, trace.provider, model, None)

    def _times(self, trace: Trace) -> tuple[float, float | None]:
        root = trace.spans.get(trace.root or "")
        starts = [s.start for s in trace.spans.values() if s.start is not None]
        start = root.start if root is not None and root.start is not None else min(starts, default=None)
        if start is None:
            raise Problem("start", "no span of the trace has a start time")
        ends = [s.end for s in trace.spans.values() if s.end is not None]
        end = root.end if root is not None and root.end is not None else max(ends, default=None)
        return start, end

    def _leaf_sum(self, trace: Trace, name: str) -> float | None:
        """The sum of ``name`` over the spans carrying it that have no descendant carrying it."""
        carrying = {sid for sid, s in trace.spans.items() if getattr(s, name) is not None}
        if not carrying:
            return None
        covered: set[str] = set()
        for sid in carrying:
            parent, hops = trace.spans[sid].parent, 0
            while parent is not None and parent not in covered and hops < 10_000:
                covered.add(parent)
                span = trace.spans.get(parent)
                parent, hops = (span.parent if span is not None else None), hops + 1
        return sum(getattr(trace.spans[sid], name) for sid in carrying - covered)

    def _cost(self, trace: Trace, config: Cfg) -> tuple[float | None, str]:
        spent = self._leaf_sum(trace, "cost")
        if spent is not None:
            return min(spent, 1e6), "source"
        tokens_in, tokens_out = self._leaf_sum(trace, "tokens_in"), self._leaf_sum(trace, "tokens_out")
        if tokens_in is not None or tokens_out is not None:
            priced = self.pricer.tokens(config.key, tokens_in or 0, tokens_out or 0)
            if priced is not None:
                return priced, "tokens"
        return self.pricer.per_task(config.key)

    def unit(self, trace: Trace) -> tuple[Unit, tuple[str, Cfg, str, str] | None]:
        """The trace's unit, and what its scores need (task, config, time, source ref) when it is good."""
        name = f"trace {trace.id}"
        problems = list(trace.problems)
        try:
            config = self._config(trace)
            start, end = self._times(trace)
            at = self.clock.check(_unix_text(start), "start")
        except (Problem, ValueError) as exc:
            field_, reason = (exc.field, exc.reason) if isinstance(exc, Problem) else ("config", str(exc))
            problems.append((field_, reason))
        if problems:
            return Unit(name, [], problems, [], {"trace": trace.id, "spans": len(trace.spans)}), None
        task = trace.task or trace.id
        ref = f"{self.source}:trace:{trace.id}"
        spent, cost_from = self._cost(trace, config)
        duration = None if end is None or end < start else round((end - start) * 1000)
        attempt = Attempt(
            f"trace:{trace.id}",
            task,
            config,
            "failure" if trace.failed else "success",
            spent,
            cost_from,
            at,
            details={"duration_ms": duration, "tool_calls": trace.tools},
            ref=ref,
        )
        final = trace.task is None  # the trace is its own task: no other candidate can come
        opened = Opened(
            f"task:{task}", task, trace.region or "general", at, None, self.options.thread, ref=ref, final=final
        )
        return Unit(name, [opened, attempt], [], []), (task, config, at, ref)

    def score_unit(self, trace: Trace, score: Score, unit: Unit, context: tuple[str, Cfg, str, str] | None) -> Unit:
        """A score as a rating of the trace's config (or of the scored span's, when that span names another
        model), or a bad row naming the score."""
        name = f"score {score.key.partition(':')[2]}"
        raw = {"trace": trace.id, "score": score.name, "value": score.value, "label": score.label}
        if not trace.spans:
            return Unit(name, [], [("trace", f"its trace {trace.id} is not in this export (no span of it)")], [], raw)
        if context is None:
            return Unit(name, [], [("trace", f"its trace {trace.id} is a bad row: {unit.problems[0][1]}")], [], raw)
        task, config, at, ref = context
        try:
            value = self.options.score(score.value, f"score {score.name}", label=score.label, name=score.name)
            if value is None:
                return Unit(name, [], [], ["score without a value or a label"])
            span = trace.spans.get(score.span or "")
            rated = config
            if span is not None and span.model is not None and span.model != trace.model and trace.config is None:
                rated = self._config(trace, span.model)
            when = at if score.at is None else self.clock.check(_unix_text(score.at), "score time")
        except Problem as exc:
            return Unit(name, [], [(exc.field, exc.reason)], [], raw)
        rater = {"kind": score.kind, "name": score.name}
        return Unit(name, [Rating(score.key, task, rated, rater, value, when, extra=score.extra, ref=ref)], [], [])


def _unix_text(seconds: float) -> str:
    from .values import unix

    return unix(seconds)
