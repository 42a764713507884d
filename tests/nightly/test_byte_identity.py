"""The fit publishes the same bytes as the version that wrote ``tests/data/fit-digests.json``: the routing table
and the stats of the default backlog and of the RouterBench and LiveCodeBench samples (:mod:`fit_digests` says
how the file is written, and when to write it again)."""

from __future__ import annotations

import json

import pytest

from tests.nightly.fit_digests import CASES, DATA, fit_digests

EXPECTED = json.loads((DATA / "fit-digests.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_fit_publishes_the_bytes_it_published_before(case, tmp_path):
    assert fit_digests(case, tmp_path) == EXPECTED[case]
