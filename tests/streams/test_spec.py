"""The event spec: every fact of an event type is read off its model, and a field added there reaches the batch
validator, the store, its views, the JSON Schema and the simulator's writer with no other edit."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pipeline.simulate.lines import template
from pipeline.store.families import COLUMNS, DEFAULTS
from pipeline.streams.events import FAMILY, KNOWN, RATING_TYPES
from pipeline.streams.spec import FAMILIES, FIELDS, field_specs

ROOT = Path(__file__).resolve().parents[2]


def test_the_models_say_the_family_stream_kind_column_and_default_of_every_field():
    assert (
        FAMILY["route.decided"] == "decisions" and {"task.rated", "task.rejected", "rating.retracted"} == RATING_TYPES
    )
    decided = {f.name: f for f in FIELDS["route.decided"]}
    assert decided["table"].columns == (("table_version", "VARCHAR"),)  # the Column marker renames it
    assert (decided["candidates"].kind, decided["explored"].default, decided["propensity"].required) == (
        "strings",
        False,
        True,
    )
    rated = {f.name: f for f in FIELDS["task.rated"]}
    assert [c for c, _ in rated["config"].columns] == ["cli", "route", "model", "effort", "config_key"]
    assert [c for c, _ in rated["rater"].columns] == ["rater_kind", "rater_name"]
    assert {f.name: f.kind for f in FIELDS["task.opened"]}["labels"] == "json"
    assert DEFAULTS["tasks"] == {"region": "general"} and DEFAULTS["decisions"] == {"explored": False, "reason": ""}
    assert list(COLUMNS) == list(FAMILIES) and COLUMNS["other"] == [
        ("id", "VARCHAR"),
        ("type", "VARCHAR"),
        ("at", "TIMESTAMP"),
        ("v", "BIGINT"),
        ("extra", "VARCHAR"),
    ]
    assert set(KNOWN) == set(FIELDS)


def test_a_field_of_a_type_the_spec_cannot_store_is_refused():
    from pydantic import BaseModel

    class Odd(BaseModel):
        when: complex

    with pytest.raises(TypeError, match="no store kind"):
        field_specs(Odd)


def test_the_simulators_writer_refuses_a_field_the_spec_does_not_have():
    assert template("task.closed", id='"x"', at='"%s"', task='"t"', outcome='"done"').startswith('{"id":"x","type"')
    with pytest.raises(ValueError, match=r"task\.closed has no field result"):
        template("task.closed", result='"done"')


#: The one edit: two optional fields added to the spec (issue 22's ``failure_mode`` on attempts, a ``lanes`` list on
#: decisions like issue 23's ``after``), each one line in pipeline/streams/events.py.
EDITS = [
    ("    files_written: Count | None = None\n", "    failure_mode: str | None = None\n"),
    ("    predicted_quality: Unit | None = None\n", "    lanes: list[NonEmpty] | None = None\n"),
]

#: Run with the edited package: append (the fast batch lane and the slow one), compact (the vectorised path and
#: the reference rows), read the views, the JSON Schema and the simulator's template.
CHECK = textwrap.dedent(
    """
    import json, sys
    import pipeline
    from pipeline.compact import compact
    from pipeline.simulate.lines import template
    from pipeline.store import run_sql
    from pipeline.streams import append
    from pipeline.streams.events import events_json_schema

    home = sys.argv[1]
    config = {"cli": "c", "model": "m"}
    fast = [
        {"id": f"A-{i}", "type": "task.attempted", "at": "2026-01-01T00:00:00Z", "task": f"T-{i}", "config": config,
         "status": "failure", "failure_mode": "timeout"}
        for i in range(80)
    ]
    slow = [{"id": "A-slow", "type": "task.attempted", "at": "2026-01-01T02:00:00+02:00", "task": "T-x",
             "config": config, "status": "failure", "failure_mode": "crash", "note": "an unknown field: slow lane"}]
    decided = [{"id": "D-1", "type": "route.decided", "task": "T-1", "policy": "p", "chosen": "c/-/m/-",
                "candidates": ["c/-/m/-"], "propensity": 1.0, "lanes": ["c/-/m/-"]}]
    append(home, fast + slow + decided)
    compact(home)
    modes = run_sql(home, "SELECT failure_mode, count(*) AS n FROM attempts GROUP BY 1 ORDER BY 1")
    extra = run_sql(home, "SELECT extra FROM attempts WHERE id = 'A-slow'")
    after = run_sql(home, "SELECT lanes FROM decisions")
    schema = events_json_schema()["$defs"]["TaskAttempted"]["properties"]
    line = template("task.attempted", id='"a"', failure_mode='"%s"')
    print(json.dumps({"package": pipeline.__file__, "modes": modes, "extra": extra, "after": after,
                      "schema": "failure_mode" in schema, "template": line}))
    """
)


def test_adding_a_field_to_the_spec_is_the_only_edit_for_it_to_reach_the_store_and_the_views(tmp_path):
    package = tmp_path / "src" / "pipeline"
    shutil.copytree(ROOT / "pipeline", package, ignore=shutil.ignore_patterns("__pycache__"))
    events = package / "streams" / "events.py"
    text = events.read_text(encoding="utf-8")
    for anchor, added in EDITS:
        assert text.count(anchor) == 1
        text = text.replace(anchor, anchor + added)
    events.write_text(text, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", CHECK, str(tmp_path / "home")],
        check=False,
        cwd=tmp_path,
        env={"PYTHONPATH": str(package.parent), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert Path(seen["package"]).is_relative_to(package)  # the edited copy, not the installed package
    assert seen["modes"] == [{"failure_mode": "crash", "n": 1}, {"failure_mode": "timeout", "n": 80}]
    assert seen["extra"] == [{"extra": '{"note":"an unknown field: slow lane"}'}]  # the new field is not extra
    assert seen["after"] == [{"lanes": ["c/-/m/-"]}]
    assert seen["schema"] and '"failure_mode":"%s"' in seen["template"]
