"""Router throughput: decisions per second in-process, against a dict-lookup loop measured in the same run.

Run: ``.venv/bin/python -m bench.route [--decisions N | --events N] [--configs M] [--regions R]``.

Three workloads on a synthetic table (M configs in each of R regions):
``default`` (region only, the common dispatcher call), ``pool+rng`` (a pool of
5 per call from a rotating set, exploration on, a seeded rng), and
``uncached`` (the same with the memo cleared before every call: the cost of
a first decision). The baseline is a loop of one dict lookup per decision.
Target: >= 200,000 decisions/s for ``default`` and ``pool+rng``.
"""

from __future__ import annotations

import argparse
import os
import random
import time

from pipeline.routing import Router
from pipeline.routing.table import Constants, Member, Region, RoutingTable, Source, Static


def synthetic_table(configs: int, regions: int, seed: int = 0) -> RoutingTable:
    rng = random.Random(seed)
    keys = [f"cli{i % 4}/route{i % 3}/model-{i}/-" for i in range(configs)]

    def members() -> list[Member]:
        out = []
        for key in keys:
            q, cost = rng.random(), rng.uniform(0.01, 2.0)
            out.append(
                Member(
                    config=key,
                    quality=round(q, 9),
                    cost_usd=round(cost, 9),
                    value=round(q / cost, 9),
                    weight=float(rng.randint(0, 50)),
                    n_ratings=rng.randint(0, 50),
                    relative_advantage=round(rng.uniform(-1, 1), 9),
                )
            )
        return out

    regions_map = {f"region-{i}": Region(members=members(), choice=None) for i in range(regions)}
    regions_map["*"] = Region(members=members(), choice=None)
    return RoutingTable(
        fitted_at=None,
        source=Source(),
        objective="quality_per_dollar",
        constants=Constants(exploration=0.1),
        constants_source="shipped",
        static=Static(cheap_config=keys[0], frontier_config=keys[1]),
        regions=regions_map,
    ).with_version()


def _rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--decisions", "--events", dest="decisions", type=int, default=300_000, help="decisions per workload"
    )
    parser.add_argument("--configs", type=int, default=12)
    parser.add_argument("--regions", type=int, default=5)
    args = parser.parse_args(argv)
    n = args.decisions
    table = synthetic_table(args.configs, args.regions)
    router = Router(table)
    regions = [f"region-{i}" for i in range(args.regions)]
    keys = [m.config for m in table.regions["*"].members]
    pools = [tuple(keys[(i + j) % len(keys)] for j in range(5)) for i in range(len(keys))]
    region_seq = [regions[i % len(regions)] for i in range(n)]
    pool_seq = [pools[i % len(pools)] for i in range(n)]

    lookup = dict.fromkeys(regions, keys[0])
    rng = random.Random(0)
    memo = router._memo
    m = max(1, n // 10)

    def baseline_loop():
        for region in region_seq:
            lookup[region]

    def default_loop():
        for region in region_seq:
            router.route(region)

    def pooled_loop():
        for region, pool in zip(region_seq, pool_seq, strict=True):
            router.route(region, pool=pool, role="implementer", rng=rng)

    def uncached_loop():
        for region, pool in zip(region_seq[:m], pool_seq[:m], strict=True):
            memo.clear()
            router.route(region, pool=pool, role="implementer", rng=rng)

    results = [
        ("dict lookup", *_timed(baseline_loop, n), None),
        ("default", *_timed(default_loop, n), True),
        ("pool+rng", *_timed(pooled_loop, n), True),
        ("uncached", *_timed(uncached_loop, m), False),
    ]
    base_cpu = results[0][1]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"table: {args.configs} configs x {args.regions} regions (+ '*'), {n} decisions per workload; "
        f"load average {load:.1f} on {os.cpu_count()} CPUs"
    )
    print(
        "rates per CPU second (process time) and per wall second; the target is judged on CPU time, which "
        "other processes on a shared machine do not dilute"
    )
    print(f"{'workload':<12} {'per CPU s':>12} {'per wall s':>12} {'x dict lookup':>14}  target")
    for name, cpu, wall, target in results:
        verdict = (
            ""
            if target is None
            else (("ok" if cpu >= 200_000 else "MISSED (>= 200,000/s)") if target else "(first decision)")
        )
        print(f"{name:<12} {cpu:>12,.0f} {wall:>12,.0f} {cpu / base_cpu:>14.4f}  {verdict}")


def _timed(loop, count: int) -> tuple[float, float]:
    """(count per CPU second, count per wall second) of one run of ``loop``."""
    cpu, wall = time.process_time(), time.perf_counter()
    loop()
    return _rate(count, time.process_time() - cpu), _rate(count, time.perf_counter() - wall)


if __name__ == "__main__":
    main()
