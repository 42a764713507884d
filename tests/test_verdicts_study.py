"""The study of the verdicts (``python -m bench.verdicts``), small: one seed of each of the null, late-config and
exploration families (a pilot seed: the study's own start at bench.verdicts.FIRST_SEED). It fails when a verdict
says ``adopt`` always or never: the prior family must adopt on the late-config run and the exploration family on
the exploration run, and neither on the null run; an adopted verdict of the right family must beat the shipped
table by its truth check (the late config's table routes new tasks better against the truth, the exploring loop
realizes more), and under the null the fitted constants must not beat the shipped ones."""

from __future__ import annotations

import pytest

from bench.verdicts import RIGHT, VERDICTS, Check, run_one, summarize, summarize_checks


def test_each_verdict_adopts_on_its_effect_and_not_under_the_null(tmp_path):
    runs = {
        family: [run_one(family, 1, tmp_path)]  # seed 2 gives the same verdicts and signs (each 3-4 s of CPU)
        for family in ("null", "late-config", "exploration")
    }
    every = [o for outcomes in runs.values() for o in outcomes]
    for verdict in VERDICTS:
        adopted = [o.adopted(verdict) for o in every]
        assert any(adopted) and not all(adopted), f"the {verdict} verdict adopts {sum(adopted)} of {len(adopted)}"
    assert summarize("null", runs["null"])["either"] == 0
    for family in ("late-config", "exploration"):
        right = RIGHT[family]
        assert summarize(family, runs[family])["adopts"][right] >= 1
        checked = [o.checks[right].sign for o in runs[family] if o.adopted(right)]
        assert checked and set(checked) == {"better"}, f"{family}: {checked}"
    premise = [o.checks[v].sign for o in runs["null"] for v in VERDICTS]
    assert len(premise) == 2 and "better" not in premise
    assert not list(tmp_path.iterdir())  # each run's scratch home is removed


def test_a_check_counts_ties_apart_and_the_mean_difference_has_an_interval():
    checks = [Check(2.0, 1.5), Check(1.5, 1.5), Check(1.0, 1.5), Check(3.0, 1.5)]
    assert [c.sign for c in checks] == ["better", "equal", "worse", "better"]
    s = summarize_checks(checks)
    assert (s["n"], s["better"], s["equal"], s["worse"]) == (4, 2, 1, 1)
    assert s["mean_difference"] == pytest.approx((0.5 + 0 - 0.5 + 1.5) / 4)
    low, high = s["ci95"]
    assert -0.5 <= low < s["mean_difference"] < high <= 1.5  # inside the range of the differences
    assert summarize_checks([])["ci95"] is None


def test_clopper_pearson_matches_the_exact_binomial_interval():
    from bench.verdicts import clopper_pearson

    # Tabulated exact intervals: 0/100 -> (0, 0.0362), 5/10 -> (0.1871, 0.8129), 9/100 -> (0.0420, 0.1640)
    assert clopper_pearson(0, 100) == pytest.approx((0.0, 0.0362), abs=1e-4)
    assert clopper_pearson(5, 10) == pytest.approx((0.1871, 0.8129), abs=1e-4)
    assert clopper_pearson(9, 100) == pytest.approx((0.0420, 0.1640), abs=1e-4)
    assert clopper_pearson(100, 100) == pytest.approx((0.9638, 1.0), abs=1e-4)
