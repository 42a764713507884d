"""The evidence gate's null study (bench.null_study): when no config beats the static choice, the default policy's
gate leaves it in at most 5% of seeds over 20 nights of logged single-config runs (issue 23, item 1)."""

from __future__ import annotations

from bench.null_study import one_seed


def test_on_the_null_the_gate_keeps_the_static_choice_in_at_least_95_percent_of_seeds():
    # 20 seeds, 20 nights of 6 tasks, 3 members of equal quality 0.5 at equal cost, exploration 0.3 logged with its
    # propensities, the tests recomputed on all tasks every night. Counting any member that passes (the router
    # would take only one ranked above the static choice): at most 1 seed of 20 may leave.
    firsts = [one_seed(s, nights=20, tasks=6, members=3, regions=1, exploration=0.3, quality=0.5) for s in range(20)]
    assert sum(f is not None for f in firsts) <= 1, firsts
