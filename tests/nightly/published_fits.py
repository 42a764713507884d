"""What a fit publishes (the routing table and the case-study stats) on three small stores: the embedded default
backlog and the RouterBench and LiveCodeBench samples of ``tests/data``, kept as the canonical JSON files
themselves in ``tests/data/published/<case>/`` (a file over :data:`LARGEST` bytes would be kept as its sha256 in
``tests/data/published/digests.json`` instead).

``tests/nightly/test_published_fits.py`` fits each store again and compares field by field, then byte for byte:
a change to how the fit loads or computes (not to what it computes) must publish the same bytes. After a change
that means to publish other numbers, write the files again and say in the commit which figures moved (the test's
failure lists them; ``git diff tests/data/published`` shows them too):

    .venv/bin/python tests/nightly/published_fits.py
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
PUBLISHED = DATA / "published"
DIGESTS = PUBLISHED / "digests.json"
#: Files larger than this are compared by digest only (a readable diff of them would not be read).
LARGEST = 256 << 10
#: case -> the table imported into a fresh home (None: the repository's own streams and shipped priors).
CASES: dict[str, Path | None] = {
    "default": None,
    "routerbench-sample": DATA / "routerbench-sample.csv.gz",
    "livecodebench-sample": DATA / "livecodebench-sample.csv",
}


def fit_case(case: str, root: Path, *, engine: str = "duckdb") -> dict[str, bytes]:
    """Fit ``case`` in a new home under ``root`` (the aggregation on ``engine``; Spark in local mode on 2 cores):
    file name -> the bytes of its published table and stats."""
    from pipeline.nightly.job import run_fit
    from pipeline.nightly.options import FitOptions
    from pipeline.streams.imports import import_table
    from pipeline.workspace import Workspace

    ws = Workspace.resolve(root / case)
    table = CASES[case]
    if table is None:
        shutil.copytree(REPO / "streams", ws.streams)
        ws.write(ws.shipped, Workspace.resolve(REPO).shipped.read_bytes())
    else:
        import_table(ws, table)
    options = FitOptions(engine=engine, spark_master="local[2]" if engine == "spark" else None)
    run_fit(ws, options, command="fit-routing")
    return {path.name: path.read_bytes() for path in (ws.table, ws.stats(options.case_study))}


def json_diff(expected: Any, actual: Any, path: str = "$") -> list[str]:
    """Every leaf where two JSON values differ, ``path: expected -> actual`` (keys in order, lists by index)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        out = []
        for key in sorted(set(expected) | set(actual)):
            if key not in actual:
                out.append(f"{path}.{key}: {_short(expected[key])} -> (missing)")
            elif key not in expected:
                out.append(f"{path}.{key}: (missing) -> {_short(actual[key])}")
            else:
                out += json_diff(expected[key], actual[key], f"{path}.{key}")
        return out
    if isinstance(expected, list) and isinstance(actual, list):
        pairs = enumerate(zip(expected, actual, strict=False))  # the longer list's tail is counted below
        out = [d for i, (e, a) in pairs for d in json_diff(e, a, f"{path}[{i}]")]
        if len(expected) != len(actual):
            out.append(f"{path}: {len(expected)} items -> {len(actual)} items")
        return out
    return (
        []
        if expected == actual and type(expected) is type(actual)
        else [f"{path}: {_short(expected)} -> {_short(actual)}"]
    )


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def main() -> None:
    digests: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            for name, body in fit_case(case, Path(tmp)).items():
                target = PUBLISHED / case / name
                target.unlink(missing_ok=True)
                if len(body) > LARGEST:
                    digests.setdefault(case, {})[name] = hashlib.sha256(body).hexdigest()
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(body)
    DIGESTS.write_text(json.dumps(digests, indent=2, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
