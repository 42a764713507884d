"""The references of a backtest: realized values and the best choice per group (Dinkelbach for the ratio of totals),
worked out by hand, and against a brute force over every region-level table."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pipeline.backtest.references import best_choice, realized_value

FLOOR = 1e-6

# Two regions of four tasks, two configs (0 = cheap, 1 = strong), one run each (quality, cost per task):
#   easy: cheap (1.0, $1),  strong (1.0, $10)
#   hard: cheap (0.2, $1),  strong (1.0, $2)
QUALITY = np.array([[1.0, 1.0]] * 4 + [[0.2, 1.0]] * 4)
COST = np.array([[1.0, 10.0]] * 4 + [[1.0, 2.0]] * 4)
REGIONS = np.array([0] * 4 + [1] * 4)


def test_realized_value_of_each_objective() -> None:
    q, c = np.array([1.0, 0.0, 0.5]), np.array([0.1, 0.2, 0.3])
    # ratio of totals 1.5 / 0.6; mean of (2 q - c) = (1.9 - 0.2 + 0.7) / 3; mean q
    assert realized_value(q, c, "quality_per_dollar", None, FLOOR) == pytest.approx(2.5)
    assert realized_value(q, c, "utility", 2.0, FLOOR) == pytest.approx(0.8)
    assert realized_value(q, c, "quality", None, FLOOR) == pytest.approx(0.5)
    # a total cost below the floor is floored
    assert realized_value(np.array([1.0]), np.array([0.0]), "quality_per_dollar", None, FLOOR) == pytest.approx(1e6)


def test_region_best_per_dollar_by_dinkelbach() -> None:
    # Every region-level table, quality total / cost total:
    #   (cheap, cheap)   (4 + 0.8) / (4 + 4)  = 0.6
    #   (cheap, strong)  (4 + 4) / (4 + 8)    = 0.6667   <- the best
    #   (strong, cheap)  (4 + 0.8) / (40 + 4) = 0.109
    #   (strong, strong) (4 + 4) / (40 + 8)   = 0.1667
    # Dinkelbach from rho 0: the highest quality per region (easy ties: cheap, first in key order; hard: strong),
    # rho = 8 / 12; then easy: max(4 - 4 rho, 4 - 40 rho) -> cheap, hard: max(0.8 - 4 rho, 4 - 8 rho) -> strong:
    # the same choice, a fixed point.
    choice = best_choice(QUALITY, COST, REGIONS, 2, "quality_per_dollar", None, FLOOR)
    assert choice.tolist() == [0, 1]
    rows = np.arange(8)
    assert realized_value(
        QUALITY[rows, choice[REGIONS]], COST[rows, choice[REGIONS]], "quality_per_dollar", None, FLOOR
    ) == pytest.approx(8 / 12)
    # The best single per dollar is cheap (0.6 against 0.1667); on quality it is strong (1.0 against 0.6).
    one = np.zeros(8, dtype=np.int64)
    assert best_choice(QUALITY, COST, one, 1, "quality_per_dollar", None, FLOOR).tolist() == [0]
    assert best_choice(QUALITY, COST, one, 1, "quality", None, FLOOR).tolist() == [1]


def test_region_best_on_quality_and_utility() -> None:
    # quality: easy ties at 4 (cheap, key order), hard: strong (4 against 0.8)
    assert best_choice(QUALITY, COST, REGIONS, 2, "quality", None, FLOOR).tolist() == [0, 1]
    # utility with lambda 12.5: easy cheap 12.5 * 4 - 4 = 46 against 50 - 40 = 10; hard strong 50 - 8 = 42 against
    # 10 - 4 = 6; value (46 + 42) / 8 = 11
    choice = best_choice(QUALITY, COST, REGIONS, 2, "utility", 12.5, FLOOR)
    assert choice.tolist() == [0, 1]
    rows = np.arange(8)
    assert realized_value(
        QUALITY[rows, choice[REGIONS]], COST[rows, choice[REGIONS]], "utility", 12.5, FLOOR
    ) == pytest.approx(11.0)


def test_the_oracle_is_the_best_choice_per_task() -> None:
    # Hard tasks 4-6 cost strong $3 and task 7 costs it $0.001 (cheap stays (0.2, $1) there).
    # Region-level tables: (cheap, cheap) 4.8 / 8 = 0.6; (cheap, strong) (4 + 4) / (4 + 9.001) = 0.6153 (the best).
    # The per-task oracle takes strong on task 7 alone: (4 + 0.6 + 1) / (4 + 3 + 0.001) = 0.79989; at that rho,
    # strong's 1 - 3 rho = -1.40 is below cheap's 0.2 - rho = -0.60 on tasks 4-6, and on task 7 strong's
    # 1 - 0.001 rho beats cheap's 0.2 - rho.
    cost = COST.copy()
    cost[4:7, 1] = 3.0
    cost[7, 1] = 0.001
    rows = np.arange(8)
    region = best_choice(QUALITY, cost, REGIONS, 2, "quality_per_dollar", None, FLOOR)
    assert region.tolist() == [0, 1]
    picked = region[REGIONS]
    assert realized_value(
        QUALITY[rows, picked], cost[rows, picked], "quality_per_dollar", None, FLOOR
    ) == pytest.approx(8 / 13.001)
    oracle = best_choice(QUALITY, cost, np.arange(8), 8, "quality_per_dollar", None, FLOOR)
    assert oracle.tolist() == [0, 0, 0, 0, 0, 0, 0, 1]
    value = realized_value(QUALITY[rows, oracle], cost[rows, oracle], "quality_per_dollar", None, FLOOR)
    assert value == pytest.approx(5.6 / 7.001)


@pytest.mark.parametrize("seed", range(25))
def test_dinkelbach_finds_the_best_region_level_table(seed: int) -> None:
    """Against every region-level table (3 regions x 4 configs: 64 tables) on random outcomes."""
    rng = np.random.default_rng(seed)
    n, k, g = 30, 4, 3
    quality = rng.integers(0, 2, (n, k)).astype(float) * rng.random(k)
    cost = rng.lognormal(-5, 1.5, (n, k))
    groups = rng.integers(0, g, n)
    choice = best_choice(quality, cost, groups, g, "quality_per_dollar", None, FLOOR)
    rows = np.arange(n)

    def value(table: tuple[int, ...]) -> float:
        picked = np.array(table)[groups]
        return realized_value(quality[rows, picked], cost[rows, picked], "quality_per_dollar", None, FLOOR)

    best = max(value(t) for t in itertools.product(range(k), repeat=g))
    assert value(tuple(choice.tolist())) == pytest.approx(best, rel=1e-12)
