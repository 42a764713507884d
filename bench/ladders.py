"""Ladder search: the Pareto beam against exhaustive enumeration, measured in the same run.

Run: ``.venv/bin/python -m bench.ladders [--tasks N] [--configs M] [--big-configs B]``.

A synthetic table (N tasks, 0/1 scores, gate = score, configs of rising skill and cost with task-specific
luck so that complementarity matters) is split 70/30 like the fit (docs/design.md, Evaluation; the rule
cross-validates inside the 70). For M configs (at most 12) both strategies fit the best-single ladder; the bench
prints each one's ladders scored and seconds, the beam's speed-up, and whether the two choose ladders of equal
held-out quality and cost. Then the beam alone on B configs (30 by default), where exhaustive enumeration would
score B^3 ladders.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import polars as pl

from pipeline.evaluate.ladders import ladders_section
from pipeline.fit.ladders import fit_ladders


def synthetic(tasks: int, configs: int, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    skill = np.linspace(0.35, 0.85, configs)
    cost = 0.0002 * np.exp(np.linspace(0.0, 4.0, configs))
    hard = rng.random((tasks, 1))
    luck = rng.random((tasks, configs))
    score = (luck < skill[None, :] * (1.3 - hard)).astype(float)
    task = np.repeat([f"t{i:07d}" for i in range(tasks)], configs)
    return pl.DataFrame(
        {
            "task": task,
            "region": np.repeat([["a", "b", "c"][i % 3] for i in range(tasks)], configs),
            "config_key": np.tile([f"bench/-/m{j:02d}/-" for j in range(configs)], tasks),
            "value": score.ravel(),
            "gate": score.ravel(),
            "cost_usd": np.tile(cost, tasks),
        }
    )


def _parts(frame: pl.DataFrame, tasks: int):
    learned = int(tasks * 0.7)
    names = frame["task"].unique().sort()
    pick = lambda lo, hi: frame.filter(pl.col("task").is_in(names[lo:hi].implode()))  # noqa: E731
    return pick(0, learned), pick(learned, tasks)


def _run(frame: pl.DataFrame, tasks: int, strategy: str) -> tuple[float, dict, dict]:
    learned, held = _parts(frame, tasks)
    start = time.perf_counter()
    fit = fit_ladders(learned, strategy=strategy)
    seconds = time.perf_counter() - start
    return seconds, fit.search, ladders_section(fit, held)["summary"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--configs", type=int, default=12)
    parser.add_argument("--big-configs", type=int, default=30)
    args = parser.parse_args(argv)
    frame = synthetic(args.tasks, min(args.configs, 12))
    ex_s, ex_search, ex = _run(frame, args.tasks, "exhaustive")
    be_s, be_search, be = _run(frame, args.tasks, "beam")
    print(f"{args.tasks} tasks x {min(args.configs, 12)} configs (per region and '*')")
    print(
        f"  exhaustive: {ex_search['evaluated']:>6} ladders scored in '*', {ex_s:7.2f} s, held-out quality "
        f"{ex['held_out_quality']:.4f} at {ex['held_out_cost_usd']:.6f} USD (cost ratio {ex['cost_ratio']:.3f})"
    )
    print(
        f"  beam:       {be_search['evaluated']:>6} ladders scored in '*', {be_s:7.2f} s, held-out quality "
        f"{be['held_out_quality']:.4f} at {be['held_out_cost_usd']:.6f} USD (cost ratio {be['cost_ratio']:.3f})"
    )
    scored = be_search["evaluated"] / ex_search["evaluated"]
    print(
        f"  beam / exhaustive: time x{be_s / ex_s:.3f}, ladders x{scored:.3f}, "
        f"held-out quality x{be['held_out_quality'] / ex['held_out_quality']:.4f}, "
        f"cost x{be['held_out_cost_usd'] / ex['held_out_cost_usd']:.4f}"
    )
    big = synthetic(args.tasks, args.big_configs, seed=1)
    big_s, big_search, big_sum = _run(big, args.tasks, "beam")
    n = args.big_configs
    print(
        f"{args.tasks} tasks x {n} configs, beam only: {big_search['evaluated']} ladders scored in '*' "
        f"(exhaustive would score {n + n * (n - 1) + n * (n - 1) * (n - 2)}), {big_s:.2f} s, "
        f"{len(big_search['pruned'])} configs pruned by dominance; held-out quality "
        f"{big_sum['held_out_quality']:.4f} vs best single {big_sum['best_single_quality']:.4f} at cost ratio "
        f"{big_sum['cost_ratio']:.3f}"
    )


if __name__ == "__main__":
    main()
