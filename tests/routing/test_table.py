"""routing-table/v1.1: load refuses unknown major schemas clearly, reads v1 tables; publish writes the schema."""

from __future__ import annotations

import json

import pytest
from fixtures_routing import A, build_table, member

from pipeline.errors import TableSchemaError
from pipeline.routing import Router, load
from pipeline.routing.table import canonical_json, publish, table_json_schema


def test_publish_then_load_round_trips_and_writes_the_schema(tmp_path):
    path = tmp_path / "fits" / "routing-table.json"
    table = publish(build_table({"*": [member(A, 0.9, 0.1)]}), path)
    assert load(path) == table
    assert json.loads((path.parent / "routing-table.schema.json").read_text()) == json.loads(
        canonical_json(table_json_schema())
    )
    assert Router.load(path).version == table.version == table.content_hash()


@pytest.mark.parametrize(
    "schema,message",
    [
        ("routing-table/v2", "schema 'routing-table/v2' is not 'routing-table/v1'"),
        (None, "schema None is not 'routing-table/v1'"),
    ],
)
def test_load_refuses_an_unknown_major_schema(tmp_path, schema, message):
    path = tmp_path / "t.json"
    data = build_table({"*": [member(A, 0.9, 0.1)]}).to_json_dict()
    data["schema"] = schema
    path.write_text(json.dumps(data))
    with pytest.raises(TableSchemaError, match=message):
        load(path)


def test_a_minor_schema_version_still_loads(tmp_path):
    path = tmp_path / "t.json"
    data = build_table({"*": [member(A, 0.9, 0.1)]}).to_json_dict()
    data["schema"] = "routing-table/v1.1"
    path.write_text(json.dumps(data))
    assert load(path).regions["*"].members[0].config == A


def test_a_v1_table_without_the_new_fields_still_loads_and_routes(tmp_path):
    # A table as v1 published it: no gate tests per member, no quality floor among the constants.
    path = tmp_path / "t.json"
    data = build_table({"*": [member(A, 0.9, 0.1)]}, schema="routing-table/v1").to_json_dict()
    del data["constants"]["min_quality"]
    for m in data["regions"]["*"]["members"]:
        del m["gate"]
    path.write_text(json.dumps(data))
    table = load(path)
    assert table.schema_ == "routing-table/v1" and table.constants.min_quality is None
    assert Router(table).route("*").config == A


def test_the_published_schema_is_v1_2_and_documents_the_new_fields():
    schema = table_json_schema()
    assert schema["title"] == "routing-table/v1.2"
    assert "gate" in schema["$defs"]["Member"]["properties"]
    assert {"effective_samples", "weighted", "escalations"} <= set(schema["$defs"]["Evidence"]["properties"])
    assert "min_quality" in schema["$defs"]["Constants"]["properties"]


def test_load_names_the_invalid_field(tmp_path):
    path = tmp_path / "t.json"
    data = build_table({"*": [member(A, 0.9, 0.1)]}).to_json_dict()
    data["regions"]["*"]["members"][0]["n_ratings"] = "many"
    path.write_text(json.dumps(data))
    with pytest.raises(TableSchemaError, match=r"regions\.\*\.members\.0\.n_ratings"):
        load(path)


def test_a_missing_table_says_how_to_make_one(tmp_path):
    with pytest.raises(TableSchemaError, match="run `fit-routing` first"):
        load(tmp_path / "absent.json")
