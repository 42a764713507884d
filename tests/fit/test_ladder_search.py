"""The beam search against the exhaustive one (its reference, docs/design.md, The search): on seeded random
full-information matrices (3 to 7 configs, gates that disagree with the value on a fifth of the cells), every
ladder the beam scores is scored as the exhaustive search scores it, the exhaustive front weakly dominates the
beam's, and every front ladder of one or two rungs is found by the beam (its two-rung level is complete once the
dominated configs are pruned, and the prune is safe). Three-rung ladders are where the beam is a heuristic: it
extends only the Pareto two-rung prefixes, and the test counts what that costs instead of hiding it."""

from __future__ import annotations

import numpy as np
import pytest
from fixtures_ladders import frame

from pipeline.fit.ladder_search import Score, _pareto, search_ladders, task_matrix

SEEDS = range(40)
EPS = 1e-12


def random_matrix(seed: int):
    rng = np.random.default_rng(seed)
    n_configs = 3 + seed % 5
    skill, cost = rng.random(n_configs), rng.random(n_configs) * 0.01 + 0.0005
    rows = []
    for i in range(60):
        hard = rng.random()
        for j in range(n_configs):
            s = float(rng.random() < skill[j] * (1.2 - hard))
            gate = s if rng.random() > 0.2 else 1.0 - s
            rows.append((f"t{i:04d}", "g", f"c{j}", s, gate, float(cost[j])))
    return task_matrix(frame(rows))


def covered(point: Score, front: list[tuple[tuple[int, ...], Score]]) -> bool:
    """Whether a ladder of ``front`` spends no more than ``point`` and reaches its quality."""
    assert point.quality is not None
    return any(s.spend <= point.spend + EPS and (s.quality or 0.0) >= point.quality - EPS for _, s in front)


@pytest.fixture(scope="module")
def searched():
    out = []
    for seed in SEEDS:
        m = random_matrix(seed)
        rows = np.ones(len(m.tasks), dtype=bool)
        out.append((search_ladders(m, rows, 0.5, strategy="beam"), search_ladders(m, rows, 0.5, strategy="exhaustive")))
    return out


def test_the_beam_scores_each_ladder_as_the_exhaustive_search_does(searched):
    for beam, exhaustive in searched:
        reference = dict(exhaustive.candidates)
        for ladder, score in beam.candidates:
            if ladder in reference:
                assert score == reference[ladder]
        assert all(covered(s, _pareto(exhaustive.candidates)) for _, s in _pareto(beam.candidates))


def test_the_beam_finds_every_front_ladder_of_up_to_two_rungs(searched):
    for beam, exhaustive in searched:
        front = _pareto(beam.candidates)
        assert all(covered(s, front) for ladder, s in _pareto(exhaustive.candidates) if len(ladder) <= 2)


def test_what_the_beam_misses_is_three_rung_ladders_only_and_it_is_counted(searched):
    missed = [
        (
            len(ladder),
            s.quality - max((b.quality or 0.0) for _, b in _pareto(beam.candidates) if b.spend <= s.spend + EPS),
        )
        for beam, exhaustive in searched
        for ladder, s in _pareto(exhaustive.candidates)
        if not covered(s, _pareto(beam.candidates))
    ]
    assert {rungs for rungs, _ in missed} <= {3}
    same = sum(
        [(s.spend, s.quality) for _, s in _pareto(b.candidates)]
        == [(s.spend, s.quality) for _, s in _pareto(e.candidates)]
        for b, e in searched
    )
    # Measured on these seeds: the fronts are the same on 20 of 40 matrices; 32 three-rung front ladders are
    # missed, the worst by 0.067 in quality over the best beam ladder that spends no more. A beam that gets
    # worse than that fails here.
    assert same >= 20 and max((gap for _, gap in missed), default=0.0) <= 0.07
