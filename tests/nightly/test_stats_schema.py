"""``case-studies/stats.schema.json`` is the JSON Schema of the stats model, kept in sync by this test.

Regenerate it with ``python -m pipeline.nightly.stats`` after changing :class:`pipeline.nightly.stats.Stats`.
"""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.nightly.stats import STATS_SCHEMA, stats_json_schema, write_stats_schema
from pipeline.routing.table import canonical_json
from pipeline.workspace import Workspace

ROOT = Path(__file__).parents[2]


def test_the_committed_schema_is_the_models():
    committed = Workspace.resolve(ROOT).stats_schema.read_bytes()
    assert committed == canonical_json(stats_json_schema()), (
        "case-studies/stats.schema.json is out of date: run `python -m pipeline.nightly.stats`"
    )


def test_the_schema_names_the_stats_keys_and_requires_what_the_model_requires(tmp_path):
    schema = json.loads(write_stats_schema(tmp_path).read_text())
    assert schema["title"] == STATS_SCHEMA and schema["$id"] == "stats.schema.json"
    # a nightly job's stats or a refit's (fit-routing --no-evaluate), each a definition of its own
    assert schema["anyOf"] == [{"$ref": "#/$defs/Stats"}, {"$ref": "#/$defs/RefitStats"}]
    nightly, refit = schema["$defs"]["Stats"], schema["$defs"]["RefitStats"]
    keys = {"schema", "name", "table_version", "routing", "replay", "calibration", "split"}
    assert keys <= set(nightly["properties"])
    assert {"name", "routing", "split", "constants"} <= set(nightly["required"])
    assert "evaluated" in refit["properties"] and "routing" not in refit["properties"]
    # Every key of a real stats.json is a property of the schema (extra keys would be unknown to readers), and
    # every section is closed: a key a reader does not know is an error, not a spelling to guess at
    stats = json.loads((ROOT / "case-studies" / "routing-by-rating" / "stats.json").read_text())
    assert set(stats) <= set(nightly["properties"])
    assert all(d.get("additionalProperties") is False for d in schema["$defs"].values() if "properties" in d)
