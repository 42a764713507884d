"""The fit publishes the same table and stats as the version that wrote ``tests/data/published``, on the default
backlog and the RouterBench and LiveCodeBench samples (:mod:`published_fits` says how the files are written, and
when to write them again). A difference is named field by field (``$.routing.fitted.hit_rate: 0.54 -> 0.55``)."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.nightly.published_fits import CASES, DIGESTS, PUBLISHED, fit_case, json_diff

DIGESTED = json.loads(DIGESTS.read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_fit_publishes_what_it_published_before(case, tmp_path):
    published = fit_case(case, tmp_path)
    for name, body in published.items():
        kept = PUBLISHED / case / name
        if not kept.exists():
            assert hashlib.sha256(body).hexdigest() == DIGESTED[case][name], f"{case}/{name} moved (kept as a digest)"
            continue
        moved = json_diff(json.loads(kept.read_bytes()), json.loads(body))
        shown = "\n".join(moved[:40]) + (f"\n... and {len(moved) - 40} more" if len(moved) > 40 else "")
        assert not moved, f"{case}/{name}: {len(moved)} figure(s) moved:\n{shown}"
        assert body == kept.read_bytes(), f"{case}/{name}: same values, other bytes (key order, floats or spacing)"
    assert sorted(published) == sorted({*DIGESTED.get(case, {}), *(p.name for p in (PUBLISHED / case).glob("*"))})


def test_a_moved_figure_is_named_by_its_path():
    before = {"routing": {"fitted": {"hit_rate": 0.54, "ci95": [0.5, 0.6]}}, "notes": ["a"], "gone": 1}
    after = {"routing": {"fitted": {"hit_rate": 0.55, "ci95": [0.5, 0.61]}}, "notes": ["a", "b"], "new": True}
    assert json_diff(before, after) == [
        "$.gone: 1 -> (missing)",
        "$.new: (missing) -> true",
        "$.notes: 1 items -> 2 items",
        "$.routing.fitted.ci95[1]: 0.6 -> 0.61",
        "$.routing.fitted.hit_rate: 0.54 -> 0.55",
    ]
    assert json_diff({"n": 1}, {"n": 1.0}) == ["$.n: 1 -> 1.0"]  # an int that became a float is a change
