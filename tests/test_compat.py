"""Compatibility code is fenced in ``pipeline/compat`` with the version that may drop it, and it still works:
a v1 table in the history pins and routes with the gate it was published with, and orders by its ``manifest``
(a v1 store is rebuilt: ``tests/test_store_engines.py``)."""

from __future__ import annotations

import json
from pathlib import Path

from fixtures_routing import A, C, D, build_table, member

import pipeline
import pipeline.compat
from pipeline.commands.pin import pin
from pipeline.compat import DROP_IN, table_v1
from pipeline.routing import Router
from pipeline.routing.table import canonical_json, load
from pipeline.workspace import Workspace


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_every_shim_names_the_release_that_may_drop_it_and_that_release_is_ahead():
    """Reaching that version fails this test: drop the shim, or move its version on, knowingly."""
    modules = {p.stem for p in Path(pipeline.compat.__path__[0]).glob("*.py")}
    assert set(DROP_IN) == modules - {"__init__"}
    assert all(_version(pipeline.__version__) < _version(drop) for drop in DROP_IN.values())


def test_a_v1_table_in_the_history_still_pins_and_routes_with_its_gate(tmp_path):
    ws = Workspace.resolve(tmp_path)
    members = [member(A, 0.9, 1.0, n=40), member(C, 0.6, 0.05, n=40), member(D, 0.3, 0.01, n=40, ra=0.5)]
    static = {"cheap_config": C, "frontier_config": A, "default_config": A}
    old = build_table({"implement": members, "*": members}, static=static, schema="routing-table/v1").with_version()
    ws.write(ws.history_of(old.version), canonical_json(old.to_json_dict()))
    assert pin(ws, old.version)["pinned"] == old.version
    routed = Router(load(ws.table)).route("implement")
    assert (routed.config, routed.reason) == (D, "learned choice in implement: n 40 >= 3, relative advantage 0.5 > 0")
    explained = Router(load(ws.table)).describe(routed, "implement")
    assert json.loads(json.dumps(explained["gate"]["region_test"]))["rule"].startswith("v1:")


def test_a_table_before_the_delta_store_names_its_snapshot_manifest():
    assert table_v1.store_version({"manifest": 7}) == 7
    assert table_v1.store_version({"version": 3, "manifest": 7}) == 3
    assert table_v1.store_version({}) is None
