"""``ratings route``: the decision for people and as JSON, --explain, --log (a route.decided line, a warning for a
task the home has never seen), unknown pool keys, errors and exit codes."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from fixtures_routing import A, B, build_table, member

from pipeline.cli import cli
from pipeline.routing.table import publish

# B (6 per dollar) ranks above the static default A (0.9 per dollar); B's test against A in implement passes:
# 12 shared tasks, difference +5.1 per dollar, one-sided 95% lower bound +3.2 > 0.
TEST = {A: (12, 5.1, 3.2)}


@pytest.fixture
def published(home):
    table = build_table(
        {
            "implement": [member(A, 0.9, 1.0, n=9), member(B, 0.6, 0.1, n=9, gate=TEST)],
            "*": [member(A, 0.9, 1.0), member(B, 0.6, 0.1, gate=TEST)],
        },
        static={"default_config": A},
        exploration=0.5,
    )
    return publish(table, home / "fits" / "routing-table.json")


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


REASON = (
    f"learned choice in implement: quality per dollar (total quality / total cost) of {B} vs {A} on 12 shared "
    "tasks: difference +5.1, one-sided 95% lower bound +3.2 > 0"
)


def test_route_prints_the_decision_for_people(home, published):
    result = run("route", "--home", str(home), "--region", "implement")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"route to {B}",
        "  policy      learning_governed",
        f"  why         {REASON}",
        "  quality     0.6 (the table's estimate for this config)",
        "  propensity  1 (greedy, no exploration draw)",
        f"  table       {published.version}",
        f"  candidates  {B}, {A}",
    ]


def test_route_json_prints_the_decision_for_programs(home, published):
    result = run("route", "--home", str(home), "--region", "implement", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "config": B,
        "policy": "learning_governed",
        "reason": REASON,
        "explored": False,
        "table_version": published.version,
        "predicted_quality": 0.6,
        "propensity": 1.0,
        "candidates": [B, A],
        "after": [],
    }


def test_route_seeded_is_reproducible_and_explain_shows_the_gate(home, published):
    args = ("route", "--home", str(home), "--region", "implement", "--seed", "3", "--explain", "--json")
    first, second = run(*args), run(*args)
    assert first.output == second.output
    out = json.loads(first.output)
    assert out["propensity"] in (0.5,)  # eps 0.5 over two members: greedy 1 - .5, the other .5 / 1
    assert [row["config"] for row in out["rows"]] == [B, A]
    assert out["gate"]["region_test"]["tests"][0]["test"]["passes"] is True
    words = run("route", "--home", str(home), "--region", "implement", "--explain").output.splitlines()
    assert f"  in implement: {B} vs {A}: 12 shared tasks, difference 5.1, lower bound 3.2, passes yes" in words
    assert "rows of region implement (best first by quality_per_dollar):" in words


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
        "--json",
    )
    assert result.exit_code == 0, result.output
    # nothing of T-9 was ever appended to this home: the logged decision can never be resolved, and it says so
    assert result.stderr == (
        f"warning: task 'T-9' has no event in {home} (neither in the streams nor in the store): the logged "
        "decision cannot be resolved until the task's events are appended\n"
    )
    lines = (home / "streams" / "tasks.jsonl").read_text().splitlines()
    event = json.loads(lines[-1])
    assert event["id"] == json.loads(result.stdout)["event_id"]
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
        (
            ["--pool", "x/-/y/-", "--pool", A],
            2,
            "error: unknown config 'x/-/y/-' in --pool: the routing table has no row for it "
            "(2 configs known; `ratings table` lists them)\n",
        ),
    ],
)
def test_route_errors(home, published, args, code, message):
    result = CliRunner().invoke(cli, ["route", "--home", str(home), "--region", "implement", *args])
    assert result.exit_code == code, result.output
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_route_log_for_a_task_the_home_has_seen_does_not_warn(home, published):
    from pipeline.compact import compact
    from pipeline.streams.log import append

    append(home, [{"type": "task.opened", "task": "T-1", "region": "implement"}])
    uncompacted = run("route", "--home", str(home), "--region", "implement", "--log", "--task", "T-1")
    assert uncompacted.exit_code == 0 and uncompacted.stderr == ""
    compact(home)
    compacted = run("route", "--home", str(home), "--region", "implement", "--log", "--task", "T-1")
    assert compacted.exit_code == 0 and compacted.stderr == ""
    assert compacted.stdout.splitlines()[-1].startswith("logged as route.decided event ")


def test_route_without_a_table_says_to_fit_first(home):
    (home / "fits").mkdir()
    result = CliRunner().invoke(cli, ["route", "--home", str(home), "--region", "r"])
    assert result.exit_code == 2
    assert "run `fit-routing` first" in result.output
