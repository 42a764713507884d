"""``ratings route``: decision JSON, --explain, --log (a route.decided line), errors and exit codes."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from fixtures_routing import A, B, build_table, member

from pipeline.cli import cli
from pipeline.routing.table import publish


@pytest.fixture
def published(home):
    table = build_table(
        {
            "implement": [member(A, 0.9, 1.0, n=9), member(B, 0.6, 0.1, n=9)],
            "*": [member(A, 0.9, 1.0), member(B, 0.6, 0.1)],
        },
        static={"default_config": A},
        exploration=0.5,
    )
    return publish(table, home / "fits" / "routing-table.json")


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_route_prints_the_decision(home, published):
    result = run("route", "--home", str(home), "--region", "implement")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "config": B,
        "policy": "learning_governed",
        "reason": "learned choice in implement: n 9 >= 3, relative advantage 0.5 > 0",
        "explored": False,
        "table_version": published.version,
        "predicted_quality": 0.6,
        "propensity": 1.0,
        "candidates": [B, A],
    }


def test_route_seeded_is_reproducible_and_explain_shows_the_gate(home, published):
    args = ("route", "--home", str(home), "--region", "implement", "--seed", "3", "--explain")
    first, second = run(*args), run(*args)
    assert first.output == second.output
    out = json.loads(first.output)
    assert out["propensity"] in (0.5,)  # eps 0.5 over two members: greedy 1 - .5, the other .5 / 1
    assert [row["config"] for row in out["rows"]] == [B, A]
    assert out["gate"]["region_test"]["passes"] is True


def test_route_log_appends_a_route_decided_event(home, published):
    result = run(
        "route",
        "--home",
        str(home),
        "--region",
        "implement",
        "--pool",
        A,
        "--pool",
        B,
        "--policy",
        "frontier_only",
        "--log",
        "--task",
        "T-9",
    )
    assert result.exit_code == 0, result.output
    lines = (home / "streams" / "tasks.jsonl").read_text().splitlines()
    event = json.loads(lines[-1])
    assert event["id"] == json.loads(result.output)["event_id"]
    assert {
        k: event[k] for k in ("type", "task", "policy", "chosen", "candidates", "propensity", "table", "explored")
    } == {
        "type": "route.decided",
        "task": "T-9",
        "policy": "frontier_only",
        "chosen": A,
        "candidates": [A, B],
        "propensity": 1.0,
        "table": published.version,
        "explored": False,
    }
    assert event["predicted_quality"] == 0.9


@pytest.mark.parametrize(
    "args,code,message",
    [
        (["--log"], 2, "--log needs --task ID"),
        (["--policy", "nope"], 2, "error: unknown policy 'nope'"),
        (["--pool", "x/-/y/-", "--failed", "x/-/y/-", "--policy", "cheap_only"], 0, ""),
    ],
)
def test_route_errors(home, published, args, code, message):
    result = CliRunner().invoke(cli, ["route", "--home", str(home), "--region", "implement", *args])
    assert result.exit_code == code, result.output
    assert message in result.output


def test_route_without_a_table_says_to_fit_first(home):
    result = CliRunner().invoke(cli, ["route", "--home", str(home), "--region", "r"])
    assert result.exit_code == 2
    assert "run `fit-routing` first" in result.output
