"""The study of the verdicts (``python -m bench.verdicts``), small: two seeds of the null, late-config and
exploration families. It fails when a verdict says ``adopt`` always or never: the prior family must adopt on
some late-config run and the exploration family on some exploration run, and neither on a null run (where no
change of constants routes better); an adopted prior family must route new tasks drawn from the truth better
than the shipped constants. (Whether an adopted exploration does is measured by the study and reported: the
published table is refit on all tasks, which may already know what exploring found.)"""

from __future__ import annotations

import pytest

from bench.verdicts import run_one, summarize


def test_each_verdict_adopts_on_its_effect_and_not_under_the_null(tmp_path):
    runs = {
        family: [run_one(family, seed, 900, tmp_path) for seed in (1, 2)] for family in ("null", "prior", "exploration")
    }
    every = [o for outcomes in runs.values() for o in outcomes]
    for verdict in ("prior", "exploration"):
        adopted = [getattr(o, verdict) == "adopt" for o in every]
        assert any(adopted) and not all(adopted), f"the {verdict} verdict adopts {sum(adopted)} of {len(adopted)}"
    assert summarize("null", runs["null"])["adopt_either"] == 0
    assert summarize("prior", runs["prior"])["adopt_prior"] >= 1
    assert summarize("exploration", runs["exploration"])["adopt_exploration"] >= 1
    checked = [o.closer for o in runs["prior"] if o.prior == "adopt"]
    assert checked and all(checked)


def test_clopper_pearson_matches_the_exact_binomial_interval():
    from bench.verdicts import clopper_pearson

    # Tabulated exact intervals: 0/100 -> (0, 0.0362), 5/10 -> (0.1871, 0.8129), 9/100 -> (0.0420, 0.1640)
    assert clopper_pearson(0, 100) == pytest.approx((0.0, 0.0362), abs=1e-4)
    assert clopper_pearson(5, 10) == pytest.approx((0.1871, 0.8129), abs=1e-4)
    assert clopper_pearson(9, 100) == pytest.approx((0.0420, 0.1640), abs=1e-4)
    assert clopper_pearson(100, 100) == pytest.approx((0.9638, 1.0), abs=1e-4)
