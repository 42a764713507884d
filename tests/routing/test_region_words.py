"""Why the table chose what it chose, per region, in words (``ratings table``, the case-study page): a decision
table over the evidence gate's outcomes, on the hand-made table of test_gate.py."""

from __future__ import annotations

import pytest
from fixtures_routing import A, C, D

from pipeline.routing.summary import summarize
from tests.routing.test_gate import FEW, NOISY, PASS, gate_table

# implement: D ranks first (30 per dollar), the static choice is the cheap C (12 per dollar).
WORDS = [
    ("replaced here", {D: {C: PASS}}, {}, f"Replaced the static choice {C} with {D} here: on the 40 tasks both did"),
    ("replaced in *", {D: {C: FEW}}, {D: {C: PASS}}, "in the global pool (too little evidence here)"),
    ("too few tasks", {D: {C: FEW}}, {}, "the two shared only 2 tasks here, fewer than the 3 needed"),
    ("not clearly", {D: {C: NOISY}}, {}, "higher by 3, but not clearly (the 95% lower bound of the difference, -1"),
    ("never compared", {}, {}, f"{D} never ran on a task {C} ran on here, so nothing compares them"),
]


@pytest.mark.parametrize(("case", "region", "star", "words"), WORDS, ids=[w[0] for w in WORDS])
def test_each_outcome_of_the_gate_in_words(case, region, star, words):
    summary = summarize(gate_table(region, star).table)
    implement = next(r for r in summary.regions if r.region == "implement")
    assert words in implement.words, implement.words
    if case.startswith("replaced"):
        assert implement.choice.config == D
        assert f"The table expects quality 0.300 at $0.0100, 30 per dollar for {D}" in implement.words
    else:
        assert implement.choice.config == C
        assert implement.words.startswith(f"Keeps the static choice {C} (quality 0.600 at $0.0500, 12 per dollar)")
        assert f"although the table ranks {D} first on its estimates (quality 0.300 at $0.0100" in implement.words
    assert A not in implement.words  # only the configs that decided are named
