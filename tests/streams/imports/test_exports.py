"""OTLP/JSON GenAI traces, Langfuse and LangSmith exports (pipeline/streams/imports/otlp.py, langfuse.py,
langsmith.py), from small export files written by hand in their published shapes (tests/data/imports): the events
field by field, the idempotent re-import, an edited score retracted and replaced, and the dead letters."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.fit.shipped import load_shipped
from pipeline.streams.events import parse_line
from pipeline.streams.imports import ImportOptions, import_source, load_maps

DATA = Path(__file__).parents[2] / "data" / "imports"
OTLP = [DATA / "otlp-genai.json", DATA / "otlp-evaluations.jsonl"]


def _by_type(home: Path) -> dict[str, list]:
    out: dict[str, list] = {}
    for stream in ("tasks", "ratings"):
        path = home / "streams" / f"{stream}.jsonl"
        for line in path.read_bytes().splitlines() if path.exists() else []:
            if not line.startswith(b'{"type":"batch.'):
                event = parse_line(line)
                out.setdefault(event.type, []).append(event)
    return out


def _labels(tmp_path: Path, mapping: dict) -> ImportOptions:
    path = tmp_path / "labels.json"
    path.write_text(json.dumps(mapping))
    return load_maps(None, path)  # type: ignore[return-value]


# --------------------------------------------------------------------------- OTLP
def test_otlp_spans_and_evaluations_field_by_field(home, tmp_path):
    maps = _labels(tmp_path, {"pass": 1, "fail": 0})
    options = ImportOptions(task_key="app.task.id", region_key="app.task.kind", maps=maps, skip_bad=True)
    result = import_source(home, OTLP, options)
    assert result.format == "otlp" and result.detected
    assert result.rows_by_table == {"spans": 6, "evaluations": 3}
    events = _by_type(home)
    [opened] = events["task.opened"]  # two traces of one task (app.task.id T-1): one task, opened by the earlier
    assert (opened.task, opened.region, opened.at) == ("T-1", "support", "2026-05-28T20:26:40Z")
    attempts = {a.extra["source_ref"]: a for a in events["task.attempted"]}
    first = attempts["otlp:trace:5b8efff798038103d269b633813fc60c"]
    assert first.config.key == "triage-bot/openai/gpt-4o/-"  # agent name / provider / request model
    assert (first.status, first.duration_ms, first.tool_calls, first.cost_usd) == ("success", 4500, 1, None)
    second = attempts["otlp:trace:9c6d8f1e2a3b4c5d6e7f8091a2b3c4d5"]
    assert second.config.key == "triage-bot/anthropic/claude-sonnet-4/-"
    assert (second.status, second.cost_usd, second.at) == ("failure", 0.0042, "2026-05-28T20:28:20Z")  # status ERROR
    ratings = sorted((r.config.model, r.rater.name, r.rater.kind, r.score) for r in events["task.rated"])
    assert ratings == [
        ("claude-sonnet-4", "relevance", "reviewer", 0.2),
        ("gpt-4o", "policy", "reviewer", 1.0),
        ("gpt-4o", "relevance", "reviewer", 0.8),
    ]
    [explained] = [r for r in events["task.rated"] if r.extra.get("explanation")]
    assert explained.extra["explanation"] == "answers the question" and explained.at == "2026-05-28T20:26:45Z"
    assert result.costs == {"unknown": 1, "source": 1}  # gpt-4o: tokens, but no price for it in this home
    assert result.bad == {"model": 1}  # the health-check trace has no GenAI span
    [letter] = [json.loads(x) for x in Path(result.deadletter).read_text().splitlines()]
    assert letter["row"] == "trace 77777777777777777777777777777777" and letter["kind"] == "bad"
    again = import_source(home, OTLP, options)
    assert (again.appended, again.unchanged) == (0, result.appended)


def test_otlp_tokens_at_the_homes_prices_and_a_label_without_a_map(home, tmp_path):
    (home / "fits").mkdir()
    prices = [{"selector": "triage-bot/openai/gpt-4o", "input_usd_per_mtok": 2.5, "output_usd_per_mtok": 10}]
    (home / "fits" / "shipped.json").write_text(json.dumps({"prices": prices}))
    options = ImportOptions(fmt="otlp", task_key="app.task.id", skip_bad=True)
    result = import_source(home, OTLP, options, prices=lambda: load_shipped(home / "fits" / "shipped.json").prices)
    assert result.costs == {"tokens": 1, "source": 1}
    gpt = next(a for a in _by_type(home)["task.attempted"] if a.config.model == "gpt-4o")
    assert gpt.cost_usd == pytest.approx(1200 * 2.5 / 1e6 + 300 * 10 / 1e6)
    assert result.bad == {"model": 1, "score policy": 1}  # "pass" has no score without --label-map


def test_the_cli_prices_tokens_at_the_homes_shipped_json_and_reads_it_only_when_needed(home, tmp_path):
    from click.testing import CliRunner

    from pipeline.cli import cli

    (home / "fits").mkdir()
    prices = [{"selector": "triage-bot/openai/gpt-4o", "input_usd_per_mtok": 2.5, "output_usd_per_mtok": 10}]
    (home / "fits" / "shipped.json").write_text(json.dumps({"prices": prices}))
    args = ["import", "--home", str(home), "--format", "otlp", "--task-key", "app.task.id", "--skip-bad", "--json"]
    out = CliRunner().invoke(cli, [*args, *map(str, OTLP)])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["costs"] == {"tokens": 1, "source": 1}
    (home / "fits" / "shipped.json").write_text("{not json")  # a long table needs no price: the file is not read
    table = tmp_path / "t.csv"
    table.write_text("task_id,region,config,score,cost_usd,at\nt1,r,codex/-/gpt-5/-,0.5,0.01,2026-05-01T00:00:00Z\n")
    out = CliRunner().invoke(cli, ["import", "--home", str(home), str(table)])
    assert out.exit_code == 0, out.output


def test_mini_orks_own_otlp_export_is_read(home, tmp_path):
    """mini-ork's otel_export writes llm.* attributes: llm_call spans with tokens and cost under agent spans that
    total them, under a root that totals the run; the cost is counted once, from the leaves."""

    def span(sid: str, parent: str | None, attrs: dict, start: int) -> dict:
        encoded = [
            {"key": k, "value": {"doubleValue": v} if isinstance(v, float) else {"stringValue": v}}
            for k, v in attrs.items()
        ]
        out = {
            "traceId": "ab" * 16,
            "spanId": sid,
            "name": sid,
            "kind": 1,
            "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(start + 10**9),
            "attributes": encoded,
            "status": {"code": 1},
        }
        if parent:
            out["parentSpanId"] = parent
        return out

    spans = [
        span("01" * 8, None, {"mini-ork.task_class": "code_fix", "llm.usage.total_cost_usd": 0.5}, 1780000000 * 10**9),
        span(
            "02" * 8, "01" * 8, {"mini-ork.node_id": "implement", "llm.usage.total_cost_usd": 0.5}, 1780000001 * 10**9
        ),
        span("03" * 8, "02" * 8, {"llm.model_name": "glm-5.1", "llm.usage.total_cost_usd": 0.2}, 1780000002 * 10**9),
        span("04" * 8, "02" * 8, {"llm.model_name": "glm-5.1", "llm.usage.total_cost_usd": 0.3}, 1780000003 * 10**9),
    ]
    path = tmp_path / "mini-ork.json"
    path.write_text(json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": spans}]}]}))
    result = import_source(home, [path], ImportOptions(region_key="mini-ork.task_class"))
    [attempt] = _by_type(home)["task.attempted"]
    assert (attempt.config.key, attempt.cost_usd) == ("otlp/-/glm-5.1/-", 0.5)
    assert _by_type(home)["task.opened"][0].region == "code_fix" and result.costs == {"source": 1}


# --------------------------------------------------------------------------- Langfuse
def _langfuse_options(tmp_path: Path, **more) -> ImportOptions:
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"tone": {"friendly": 1, "rude": 0}}))
    return ImportOptions(task_key="dataset_item", region_key="topic", maps=load_maps(None, labels), **more)


def test_langfuse_traces_observations_scores_field_by_field(home, tmp_path):
    result = import_source(home, [DATA / "langfuse"], _langfuse_options(tmp_path, skip_bad=True))
    assert result.format == "langfuse"
    assert result.rows_by_table == {"traces": 2, "observations": 4, "scores": 5}
    events = _by_type(home)
    [opened] = events["task.opened"]
    assert (opened.task, opened.region, opened.at) == ("Q-1", "billing", "2026-05-28T09:00:00Z")
    attempts = {a.extra["source_ref"]: a for a in events["task.attempted"]}
    one, two = attempts["langfuse:trace:lf-trace-1"], attempts["langfuse:trace:lf-trace-2"]
    assert one.config.key == "support-agent/openai/gpt-4o-mini/-"  # trace name / metadata provider / generation model
    assert (one.status, one.cost_usd, one.tool_calls, one.duration_ms) == ("success", 0.00042, 1, 6100)
    assert two.config.key == "support-agent/anthropic/claude-haiku-4-5/-"
    assert (two.status, two.cost_usd) == ("failure", None)  # a root observation at level ERROR; no cost, no price
    ratings = sorted((r.extra["source_ref"][-10:], r.rater.name, r.rater.kind, r.score) for r in events["task.rated"])
    assert ratings == [
        ("lf-trace-1", "correctness", "reviewer", 0.9),
        ("lf-trace-1", "thumbs", "human", 1.0),
        ("lf-trace-2", "tone", "gate", 1.0),
    ]
    assert result.bad == {"score correctness": 1, "trace": 1}  # a NUMERIC 4 outside [0, 1]; a score of no trace
    letters = {x["row"]: x["reason"] for x in map(json.loads, Path(result.deadletter).read_text().splitlines())}
    assert letters == {
        "score sc-4": "4 is outside [0, 1]: give the scale with --score-range LO:HI",
        "score sc-5": "its trace lf-trace-9 is not in this export (no span of it)",
    }


def test_langfuse_an_edited_score_is_retracted_and_replaced_and_a_newer_export_adds_only_what_is_new(home, tmp_path):
    export = tmp_path / "export"
    shutil.copytree(DATA / "langfuse", export)
    options = _langfuse_options(tmp_path, skip_bad=True)
    first = import_source(home, [export], options)
    scores = json.loads((export / "scores.json").read_text())
    scores[0]["value"] = 0.4  # a reviewer corrected the judge
    scores.append(
        {
            "id": "sc-6",
            "traceId": "lf-trace-2",
            "name": "correctness",
            "value": 0.1,
            "dataType": "NUMERIC",
            "source": "EVAL",
            "timestamp": "2026-05-28T09:30:00.000Z",
        }
    )
    (export / "scores.json").write_text(json.dumps(scores))
    newer = import_source(home, [export], options)
    assert newer.events == {"task.rated": 2, "rating.retracted": 1} and newer.retracted == 1
    assert newer.unchanged == first.appended - 1  # all of the first import but the edited score
    events = _by_type(home)
    [retraction] = events["rating.retracted"]
    old = [r for r in events["task.rated"] if r.id == retraction.rating]
    assert [r.score for r in old] == [0.9]
    assert sorted(r.score for r in events["task.rated"] if r.rater.name == "correctness") == [0.1, 0.4, 0.9]


def test_langfuse_blob_export_in_snake_case(home, tmp_path):
    export = tmp_path / "blob"
    export.mkdir()
    rows = [
        {"id": "t9", "timestamp": "2026-05-28 09:00:00.000000", "name": "agent", "metadata": "{}", "session_id": "s"},
        {
            "id": "o9",
            "trace_id": "t9",
            "type": "GENERATION",
            "start_time": "2026-05-28 09:00:01.000000",
            "end_time": "2026-05-28 09:00:02.500000",
            "provided_model_name": "gpt-4o",
            "usage_details": {"input": 10},
            "total_cost": 0.001,
            "level": "DEFAULT",
        },
        {
            "id": "s9",
            "trace_id": "t9",
            "name": "helpful",
            "value": 1.0,
            "data_type": "NUMERIC",
            "source": "ANNOTATION",
            "timestamp": "2026-05-28 09:05:00.000000",
        },
    ]
    (export / "all.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = import_source(home, [export], ImportOptions())
    assert result.format == "langfuse" and result.bad_rows == 0
    [attempt] = _by_type(home)["task.attempted"]
    assert (attempt.config.key, attempt.cost_usd, attempt.at) == ("agent/-/gpt-4o/-", 0.001, "2026-05-28T09:00:00Z")
    [rating] = _by_type(home)["task.rated"]
    assert (rating.rater.kind, rating.score) == ("human", 1.0)


# --------------------------------------------------------------------------- LangSmith
def test_langsmith_runs_and_feedback_field_by_field(home, tmp_path):
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"unit_tests": {"partial": 0.5, "pass": 1}}))
    options = ImportOptions(task_key="example_id", region_key="suite", maps=load_maps(None, labels))
    result = import_source(home, [DATA / "langsmith"], options)
    assert result.format == "langsmith" and result.rows_by_table == {"runs": 5, "feedback": 4}
    events = _by_type(home)
    [opened] = events["task.opened"]
    assert (opened.task, opened.region) == ("ex-7", "faq")
    attempts = {a.config.key: a for a in events["task.attempted"]}
    good = attempts["qa-chain/openai/gpt-4.1-mini/-"]
    assert (good.status, good.cost_usd, good.tool_calls, good.duration_ms) == ("success", 0.0065, 1, 3500)
    bad = attempts["qa-chain/anthropic/claude-sonnet-4-5/-"]
    assert (bad.status, bad.cost_usd, bad.at) == ("failure", None, "2026-05-28T10:05:00Z")
    ratings = sorted((r.config.model, r.rater.name, r.rater.kind, r.score) for r in events["task.rated"])
    assert ratings == [
        ("claude-sonnet-4-5", "correctness", "reviewer", 0.0),
        ("claude-sonnet-4-5", "unit_tests", "gate", 0.5),
        ("gpt-4.1-mini", "correctness", "reviewer", 1.0),
        ("gpt-4.1-mini", "user_thumbs", "human", 1.0),
    ]
    again = import_source(home, [DATA / "langsmith"], options)
    assert (again.appended, again.unchanged) == (0, result.appended)


def test_langsmith_bulk_export_as_parquet_and_edited_feedback(home, tmp_path):
    runs = [json.loads(line) for line in (DATA / "langsmith" / "runs.jsonl").read_text().splitlines()]
    for run in runs:  # the bulk export writes JSON columns as text
        run["extra"] = json.dumps(run.get("extra") or {})
        for column in ("total_cost", "prompt_tokens", "completion_tokens", "total_tokens"):
            run.setdefault(column, None)
    export = tmp_path / "bulk"
    export.mkdir()
    pq.write_table(pa.Table.from_pylist(runs), export / "runs.parquet")
    feedback = json.loads((DATA / "langsmith" / "feedback.json").read_text())[:3]
    (export / "feedback.json").write_text(json.dumps(feedback))
    options = ImportOptions(task_key="example_id")
    first = import_source(home, [export], options)
    assert first.format == "langsmith" and first.events["task.rated"] == 3
    feedback[2]["score"], feedback[2]["modified_at"] = 0.5, "2026-05-29T08:00:00.000000"
    (export / "feedback.json").write_text(json.dumps(feedback))
    edited = import_source(home, [export], options)
    assert (edited.retracted, edited.events) == (1, {"task.rated": 1, "rating.retracted": 1})
