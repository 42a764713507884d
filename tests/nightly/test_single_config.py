"""The nightly job on single-config data: a dispatcher that runs one configuration per task leaves no held-out task
that two configurations did (no *eligible* task). The job must still exit 0, publish, and render the page, each
section that has nothing to show saying why (issue 26, item 1: it crashed in the frontier section and left the
page stale).

The home: 20 tasks on which x and y both ran, then 30 tasks on which a dispatcher ran one of them, logging its
``route.decided`` (x with propensity 0.75 on three tasks in four, y with 0.25 on the fourth). The last 15 are held
out, all single-config: no hit rate exists, and the logged decisions decide
(docs/design.md, Verdicts on logged data); the 11 validation tasks are single-config too, so the search scores on
their logged decisions.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner
from fixtures_nightly import config

from pipeline.cli import cli
from pipeline.streams.log import append

COST = {"x": 0.1, "y": 0.3}


def _at(i: int, hour: int = 0) -> str:
    return (datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=i - 1, hours=hour)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _events() -> list[dict]:
    events: list[dict] = []
    keys = {m: "c/-/" + m + "/-" for m in ("x", "y")}
    for i in range(1, 51):
        task = f"T{i:02d}"
        events.append({"type": "task.opened", "task": task, "region": "r", "at": _at(i)})
        models = ("x", "y") if i <= 20 else ("y",) if i % 4 == 0 else ("x",)
        if i > 20:
            chosen, p = models[0], 0.25 if models[0] == "y" else 0.75
            events.append(
                {"type": "route.decided", "task": task, "at": _at(i), "policy": "learning_governed",
                 "chosen": keys[chosen], "candidates": sorted(keys.values()), "propensity": p}
            )  # fmt: skip
        for model in models:
            attempt = {"task": task, "config": config(model), "at": _at(i, 1)}
            events.append({"type": "task.attempted", **attempt, "status": "success", "cost_usd": COST[model]})
            score = 1.0 if (model == "x") == (i % 3 != 0) else 0.0
            rater = {"kind": "gate", "name": "pytest"}
            events.append({"type": "task.rated", **attempt, "at": _at(i, 2), "rater": rater, "score": score})
    return events


@pytest.fixture(scope="module")
def single_config_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("single") / "home"
    home.mkdir()
    append(home, _events())
    result = CliRunner().invoke(cli, ["fit", "--home", str(home), "--quiet", "--exploration", "0.1"])
    return home, result


def test_the_job_exits_0_publishes_and_renders_the_page(single_config_home):
    home, result = single_config_home
    assert result.exit_code == 0, result.output
    assert result.exception is None
    stats = json.loads((home / "case-studies" / "routing-by-rating" / "stats.json").read_text())
    table = json.loads((home / "fits" / "routing-table.json").read_text())
    assert stats["split"]["eligible_held_out"] == 0 and stats["table_version"] == table["version"]
    page = (home / "case-studies" / "routing-by-rating" / "README.md").read_text()
    assert table["version"] in page  # the page describes this fit, not a stale one


# section heading -> the sentence it shows instead of a table of n/a
WHY = [
    ("**Routing:**", "no hit rate: none of the 15 held-out tasks was done by two or more configurations"),
    ("## Against the baselines", "No baseline comparison: none of the 15 held-out tasks"),
    ("## Cost and quality", "No cost-quality frontier: none of the 15 held-out tasks"),
    ("## Escalation ladders", "No held-out judgement of the ladders: none of the 15 held-out tasks"),
    ("## Routing policies on the held-out tasks", "No policy comparison: none of the 15 held-out tasks"),
]


@pytest.mark.parametrize("heading,why", WHY, ids=[h.strip("#* :") for h, _ in WHY])
def test_each_section_with_nothing_to_show_says_why(single_config_home, heading, why):
    page = (single_config_home[0] / "case-studies" / "routing-by-rating" / "README.md").read_text()
    section = page.split(heading, 1)[1].split("\n## ", 1)[0]
    assert why in section, section[:400]
    assert "n/a" not in section.split("Replay on the held-out tasks")[0]  # no table or sentence of n/a


def test_no_verdict_adopts_without_eligible_tasks(single_config_home):
    """The replay cannot judge single-config tasks (it adopted on a difference of 8e-15 before); the logged
    decisions can, and here they show no difference: x is every table's greedy choice, and a Thompson draw's share
    of y is below what the published precision shows, so both verdicts stay undecided on the logged estimate."""
    stats = json.loads((single_config_home[0] / "case-studies" / "routing-by-rating" / "stats.json").read_text())
    routing = stats["routing"]
    assert routing["recommendation"] == "insufficient-evidence"
    assert routing["exploration"]["recommendation"] == "insufficient-evidence"
    assert routing["exploration"]["decided_by"] == "logged"
    assert "SNIPS value on the logged held-out decisions (weighted)" in routing["exploration"]["reason"]


def test_the_logged_decisions_decide_and_the_page_says_so(single_config_home):
    home = single_config_home[0]
    routing = json.loads((home / "case-studies" / "routing-by-rating" / "stats.json").read_text())["routing"]
    assert (routing["decided_by"], routing["searched_by"]) == ("logged", "logged")
    logged = routing["logged"]
    assert logged["tasks"] == 15 and logged["decisions"] == 15 and logged["weighted"]
    # held-out tasks 36..50: x on 12 (p 0.75), y on T36, T40, T44, T48 (p 0.25); the greedy target x matches 11
    assert logged["fitted"]["matched"] == 11 and logged["propensity_clip"] == 0.05
    page = (home / "case-studies" / "routing-by-rating" / "README.md").read_text()
    assert "Decided on the logged held-out decisions" in page
    assert "**On the logged decisions:** the self-normalized off-policy estimate (SNIPS)" in page
