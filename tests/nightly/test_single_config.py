"""The nightly job on single-config data: a dispatcher that runs one configuration per task leaves no held-out task
that two configurations did (no *eligible* task). The job must still exit 0, publish, and render the page, each
section that has nothing to show saying why (issue 26, item 1: it crashed in the frontier section and left the
page stale).

The home: 20 tasks on which x and y both ran, then 10 tasks that only x ran (the last 9 are held out).
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from fixtures_nightly import at, config

from pipeline.cli import cli
from pipeline.streams.log import append

COST = {"x": 0.1, "y": 0.3}


def _events() -> list[dict]:
    events: list[dict] = []
    for i in range(1, 31):
        task, day = f"T{i:02d}", f"2026-01-{i:02d}"
        events.append({"type": "task.opened", "task": task, "region": "r", "at": f"{day}T00:00:00Z"})
        for model in ("x", "y") if i <= 20 else ("x",):
            attempt = {"task": task, "config": config(model), "at": at(i, 1)}
            events.append({"type": "task.attempted", **attempt, "status": "success", "cost_usd": COST[model]})
            score = 1.0 if (model == "x") == (i % 3 != 0) else 0.0
            rater = {"kind": "gate", "name": "pytest"}
            events.append({"type": "task.rated", **attempt, "at": at(i, 2), "rater": rater, "score": score})
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
    ("**Routing:**", "no hit rate: none of the 9 held-out tasks was done by two or more configurations"),
    ("## Against the baselines", "No baseline comparison: none of the 9 held-out tasks"),
    ("## Cost and quality", "No cost-quality frontier: none of the 9 held-out tasks"),
    ("## Escalation ladders", "No held-out judgement of the ladders: none of the 9 held-out tasks"),
    ("## Routing policies on the held-out tasks", "No policy comparison: none of the 9 held-out tasks"),
]


@pytest.mark.parametrize("heading,why", WHY, ids=[h.strip("#* :") for h, _ in WHY])
def test_each_section_with_nothing_to_show_says_why(single_config_home, heading, why):
    page = (single_config_home[0] / "case-studies" / "routing-by-rating" / "README.md").read_text()
    section = page.split(heading, 1)[1].split("\n## ", 1)[0]
    assert why in section, section[:400]
    assert "n/a" not in section.split("Replay on the held-out tasks")[0]  # no table or sentence of n/a


def test_no_verdict_adopts_without_eligible_tasks(single_config_home):
    """Exploration, like the prior family, needs 10 eligible held-out tasks: a replay where no task had two
    configurations cannot show one exploration beating another (it adopted on a difference of 8e-15 before)."""
    stats = json.loads((single_config_home[0] / "case-studies" / "routing-by-rating" / "stats.json").read_text())
    routing = stats["routing"]
    assert routing["recommendation"] == "insufficient-evidence"
    assert routing["exploration"]["recommendation"] == "insufficient-evidence"
    assert routing["exploration"]["reason"].startswith("only 0 eligible held-out task(s)")
