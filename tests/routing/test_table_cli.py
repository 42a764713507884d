"""``ratings table``: the published routing table in words for people, and as JSON; exact output on a hand-made
table whose decisions are worked out in the comments."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from fixtures_routing import A, B, C, build_table, member

from pipeline.cli import cli
from pipeline.routing.table import publish

# implement: A (0.9 at $1.00: 0.9 per dollar), B (0.6 at $0.10: 6), C (0.5 at $0.05: 10). Static: cheap C and
#   frontier A, so C for every role but reviewer. C ranks first: it is the learned choice too; runner-up B.
# review: A (0.95 at $1.00), B (0.2 at $0.10: 2): B ranks first. C did no review task, so the static choice C is
#   not in the region's pool: the pool member with the most ratings in '*' is A (60 > 20), ranked second. B's
#   test against A passes (20 shared tasks, lower bound +0.4): B, by the region's test; runner-up A.
# *: C (10) first, the static choice: C. Each region's "why" says so in words, its "gate" line in the router's own
#   terms (the gate's numbers).
LADDER = [C, A]


@pytest.fixture
def published(home):
    table = build_table(
        {
            "implement": [member(A, 0.9, 1.0, n=30), member(B, 0.6, 0.1, n=12), member(C, 0.5, 0.05, n=40)],
            "review": [member(A, 0.95, 1.0, n=30), member(B, 0.2, 0.1, n=8, gate={A: (20, 1.1, 0.4)})],
            "*": [member(A, 0.92, 1.0, n=60), member(B, 0.4, 0.1, n=20), member(C, 0.5, 0.05, n=40)],
        },
        static={"cheap_config": C, "frontier_config": A, "pinned": {"reviewer": A}},
        ladders={"*": LADDER},
        exploration=0.3,
    )
    return publish(table, home / "fits" / "routing-table.json")


def test_table_for_people(home, published):
    result = CliRunner().invoke(cli, ["table", "--home", str(home)])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"routing table {published.version} (routing-table/v1.2), fitted at 2026-01-01T00:00:00Z",
        "objective quality_per_dollar; shipped constants: prior weight 3, exploration 0.3, min samples 3, "
        "no quality floor",
        f"static choice: cheap {C}; frontier {A}; pinned roles: reviewer -> {A}",
        "what learning_governed does for a task of each region (no role):",
        "",
        "implement",
        f"  choice     {C}  quality 0.500  cost $0.0500  n 40",
        f"  runner-up  {B}  quality 0.600  cost $0.100  n 12",
        f"  ladder     {C} > {A} (the global ladder, pass mark 0.5)",
        f"  why        Keeps the static choice {C}, which also has the best quality per dollar the table expects "
        f"here: quality 0.500 at $0.0500, 10 per dollar; the runner-up {B} has quality 0.600 at $0.100, 6 per dollar.",
        f"  gate       learned choice in implement is the static choice: static_hybrid cheap {C}",
        "",
        "review",
        f"  choice     {B}  quality 0.200  cost $0.100  n 8",
        f"  runner-up  {A}  quality 0.950  cost $1.00  n 30",
        f"  ladder     {C} > {A} (the global ladder, pass mark 0.5)",
        f"  why        Replaced the static choice {A} with {B} here: on the 20 tasks both did, {B}'s quality per "
        f"dollar was higher by 1.1 (at least 0.4 with 95% confidence). The table expects quality 0.200 at $0.100, 2 "
        f"per dollar for {B}, against quality 0.950 at $1.00, 0.95 per dollar for {A}.",
        "  gate       learned choice in review: quality per dollar (total quality / total cost) of "
        f"{B} vs {A} on 20 shared tasks: difference +1.1, one-sided 95% lower bound +0.4 > 0",
        "",
        "* (any other region)",
        f"  choice     {C}  quality 0.500  cost $0.0500  n 40",
        f"  runner-up  {B}  quality 0.400  cost $0.100  n 20",
        f"  ladder     {C} > {A} (the global ladder, pass mark 0.5)",
        f"  why        Keeps the static choice {C}, which also has the best quality per dollar the table expects "
        f"here: quality 0.500 at $0.0500, 10 per dollar; the runner-up {B} has quality 0.400 at $0.100, 4 per dollar.",
        f"  gate       learned choice in * is the static choice: static_hybrid cheap {C}",
    ]


def test_table_json_for_programs(home, published):
    result = CliRunner().invoke(cli, ["table", "--home", str(home), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["version"] == published.version and data["policy"] == "learning_governed"
    assert [(r["region"], r["choice"]["config"], (r["runner_up"] or {}).get("config")) for r in data["regions"]] == [
        ("implement", C, B),
        ("review", B, A),
        ("*", C, B),
    ]
    assert data["regions"][1]["ladder"] == {"rungs": LADDER, "source": "global", "pass_threshold": 0.5}


def test_table_without_a_published_table_says_to_fit_first(home):
    (home / "fits").mkdir()
    result = CliRunner().invoke(cli, ["table", "--home", str(home)])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and "run `fit-routing` first" in result.stderr
    assert "Traceback" not in result.output
