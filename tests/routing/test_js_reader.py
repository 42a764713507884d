"""The JavaScript reader of the README (taken from the README's one ```js block) agrees with the Python router's
default policy on the embedded default data, region by region, with and without a quality floor. Skipped when
node is not installed (said in the skip reason)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pipeline.routing import Router
from pipeline.routing.table import RoutingTable, canonical_json

REPO = Path(__file__).resolve().parents[2]
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed: the JavaScript reader is not checked")


@pytest.fixture(scope="module")
def reader(tmp_path_factory) -> Path:
    """The README's JavaScript, as printed there, in a file node can run."""
    blocks = re.findall(r"^```js\n(.*?)^```$", (REPO / "README.md").read_text(), flags=re.M | re.S)
    assert len(blocks) == 1, "the README holds one ```js block: the reader"
    path = tmp_path_factory.mktemp("js") / "route.mjs"
    path.write_text(blocks[0])
    return path


@pytest.fixture(scope="module")
def default_table(tmp_path_factory) -> Path:
    """The embedded default backlog (streams/ and fits/shipped.json of the repository) fitted in a scratch home."""
    from pipeline.nightly.job import run_fit
    from pipeline.nightly.options import FitOptions

    home = tmp_path_factory.mktemp("default") / "home"
    shutil.copytree(REPO / "streams", home / "streams")
    (home / "fits").mkdir()
    shutil.copy(REPO / "fits" / "shipped.json", home / "fits" / "shipped.json")
    pinned = {"prior_source": "shipped", "prior_weight": 3.0, "exploration": 0.3, "half_life_days": "inf"}
    run_fit(home, FitOptions(**pinned))
    return home / "fits" / "routing-table.json"


def js_route(reader: Path, path: Path, region: str) -> tuple[str, str]:
    out = subprocess.run([NODE, str(reader), str(path), region], capture_output=True, text=True, check=True)
    config, version = out.stdout.split()
    return config, version


def regions(table: RoutingTable) -> list[str]:
    return [*sorted(table.regions), "a-region-the-table-does-not-know"]


def test_the_reader_agrees_with_the_router_on_the_default_data(reader, default_table, tmp_path):
    table = RoutingTable.model_validate_json(default_table.read_text())
    if len({Router(table).route(r).config for r in regions(table)}) == 1:
        # the default backlog's gate keeps every region on the static choice: let one region's best-ranked
        # contender pass, so that the comparison can tell a reader that ignores the tests
        table, default_table = _one_gate_opened(table, tmp_path)
    router = Router(table)
    decisions = {r: router.route(r).config for r in regions(table)}
    assert len(set(decisions.values())) > 1  # the regions do not all route alike: the comparison can tell
    for region, config in decisions.items():
        assert js_route(reader, default_table, region) == (config, table.version), region


def _one_gate_opened(table: RoutingTable, tmp_path: Path) -> tuple[RoutingTable, Path]:
    data = table.to_json_dict()
    router = Router(table)
    for name, region in data["regions"].items():
        static, _ = router.static_choice(router.view(name), router.view(name).members, None)
        ranked = router.view(name).ranked(router.view(name).members)
        if name != "*" and ranked[0] != static:
            member = next(m for m in region["members"] if m["config"] == ranked[0])
            member["gate"][static]["passes"] = True
            break
    opened = RoutingTable.model_validate(data).with_version()
    path = tmp_path / "opened.json"
    path.write_bytes(canonical_json(opened.to_json_dict()))
    return opened, path


@pytest.mark.parametrize("floor", [0.5, 0.8, 0.99])
def test_the_reader_honours_the_quality_floor_as_the_router_does(reader, default_table, tmp_path, floor):
    data = json.loads(default_table.read_text())
    data["constants"]["min_quality"] = floor
    table = RoutingTable.model_validate(data).with_version()
    path = tmp_path / "floored.json"
    path.write_bytes(canonical_json(table.to_json_dict()))
    router = Router(table)
    for region in regions(table):
        assert js_route(reader, path, region) == (router.route(region).config, table.version), (floor, region)


def test_the_reader_refuses_a_table_without_gate_tests(reader, default_table, tmp_path):
    data = json.loads(default_table.read_text())
    data["schema"] = "routing-table/v1"
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(data))
    out = subprocess.run([NODE, str(reader), str(path), "implement"], capture_output=True, text=True, check=False)
    assert out.returncode != 0 and "unsupported table schema routing-table/v1 (this reader needs v1.1" in out.stderr
