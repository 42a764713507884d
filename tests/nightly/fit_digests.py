"""Digests of what a fit publishes (the routing table and the case-study stats) on three stores: the embedded
default backlog and the RouterBench and LiveCodeBench samples of ``tests/data``.

``tests/nightly/test_byte_identity.py`` compares them with ``tests/data/fit-digests.json``, written by an
earlier version of the fit: a change to how the fit loads or computes (not to what it computes) must publish the
same bytes. After a change that means to publish other numbers, write the file again and say so in the commit:

    .venv/bin/python tests/nightly/fit_digests.py > tests/data/fit-digests.json
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
#: case -> the table imported into a fresh home (None: the repository's own streams and shipped priors).
CASES: dict[str, Path | None] = {
    "default": None,
    "routerbench-sample": DATA / "routerbench-sample.csv.gz",
    "livecodebench-sample": DATA / "livecodebench-sample.csv",
}


def fit_digests(case: str, root: Path) -> dict[str, str]:
    """Fit ``case`` in a new home under ``root``; sha256 of its published table and stats."""
    from pipeline.nightly.job import run_fit
    from pipeline.nightly.options import FitOptions
    from pipeline.streams.imports import import_table

    home = root / case
    table = CASES[case]
    if table is None:
        shutil.copytree(REPO / "streams", home / "streams")
        (home / "fits").mkdir()
        shutil.copy(REPO / "fits" / "shipped.json", home / "fits" / "shipped.json")
    else:
        import_table(home, table)
    run_fit(home, FitOptions(), command="fit-routing")
    published = [home / "fits" / "routing-table.json", home / "case-studies" / "routing-by-rating" / "stats.json"]
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in published}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        digests = {case: fit_digests(case, Path(tmp)) for case in CASES}
    print(json.dumps(digests, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
