"""The evidence gate's null study (issue 23, item 1): how often does the gate leave the static choice when no config
beats it?

A simulated dispatcher logs one config per task, night after night, in each region: the static choice s with
probability 1 - eps (propensity 1 - eps), else a uniformly chosen other member (eps / (m - 1)); every config's
quality is a Bernoulli(q) draw of the same q at the same cost (the null: no config better than s). Every night
the gate's tests (:func:`pipeline.fit.gate.gate_evidence`, with the logged decisions) are recomputed on all the
tasks so far; a seed **leaves the static choice** when any member passes its test against s in any region on any
night. That counts every pass, while the router takes a passing member only when it also ranks above s: an upper
bound on the default policy's rate.

    .venv/bin/python -m bench.null_study --seeds 200 --nights 20

Prints the share of seeds that left, with its 95% Wilson interval (the issue's bound: at most 5%).
"""

from __future__ import annotations

import argparse
import math
import time
from datetime import datetime, timedelta

import numpy as np
import polars as pl

from pipeline.fit.gate import DECISIONS_SCHEMA, VALUES_SCHEMA, gate_evidence, logged_runs
from pipeline.routing.table import Constants

DAY0 = datetime(2026, 1, 1)


def configs(m: int) -> list[str]:
    return [f"c{k}/-/m/-" for k in range(m)]


def one_seed(
    seed: int, *, nights: int, tasks: int, members: int, regions: int, exploration: float, quality: float
) -> int | None:
    """The first night (1-based) on which some member passes against the static choice, else None."""
    rng = np.random.default_rng(seed)
    keys = configs(members)
    static = keys[0]
    values: list[tuple] = []
    decisions: list[tuple] = []
    for night in range(1, nights + 1):
        for region in range(regions):
            for i in range(tasks):
                task = f"n{night}-r{region}-t{i}"
                at = DAY0 + timedelta(days=night, seconds=i)
                explored = rng.random() < exploration
                chosen = keys[1 + int(rng.integers(members - 1))] if explored else static
                p = exploration / (members - 1) if explored else 1.0 - exploration
                values.append((task, f"r{region}", chosen, float(rng.random() < quality), 0.1, at))
                decisions.append((f"d-{task}", task, at, chosen, keys, p, None))
        tests = gate_evidence(
            pl.DataFrame(values, schema=VALUES_SCHEMA, orient="row"),
            against=[static],
            objective="quality_per_dollar",
            constants=Constants(),
            logged=logged_runs(pl.DataFrame(decisions, schema=DECISIONS_SCHEMA, orient="row")),
            seed=seed,
        )
        if tests["passes"].any():
            return night
    return None


def wilson(k: int, n: int) -> tuple[float, float]:
    """The 95% Wilson interval of k successes in n."""
    z = 1.959964
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--nights", type=int, default=20)
    parser.add_argument("--tasks", type=int, default=20, help="tasks per night and region")
    parser.add_argument("--members", type=int, default=6)
    parser.add_argument("--regions", type=int, default=3)
    parser.add_argument("--exploration", type=float, default=0.3)
    parser.add_argument("--quality", type=float, default=0.5)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    firsts = [
        one_seed(
            s,
            nights=args.nights,
            tasks=args.tasks,
            members=args.members,
            regions=args.regions,
            exploration=args.exploration,
            quality=args.quality,
        )
        for s in range(args.seeds)
    ]
    left = sum(f is not None for f in firsts)
    low, high = wilson(left, args.seeds)
    print(
        f"null study: {left} of {args.seeds} seeds left the static choice within {args.nights} nights "
        f"({100 * left / args.seeds:.1f}%, 95% CI {100 * low:.1f}%-{100 * high:.1f}%); {args.members} members, "
        f"{args.regions} regions, {args.tasks} tasks a night and region, exploration {args.exploration}; "
        f"first nights {sorted(f for f in firsts if f is not None)}; {time.perf_counter() - started:.1f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
