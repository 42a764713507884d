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
            out.append(Member(config=key, quality=round(q, 9), cost_usd=round(cost, 9), value=round(q / cost, 9),
                              weight=float(rng.randint(0, 50)), n_ratings=rng.randint(0, 50),
                              relative_advantage=round(rng.uniform(-1, 1), 9)))
        return out

    regions_map = {f"region-{i}": Region(members=members(), choice=None) for i in range(regions)}
    regions_map["*"] = Region(members=members(), choice=None)
    return RoutingTable(fitted_at=None, source=Source(manifest=None), objective="quality_per_dollar",
                        constants=Constants(exploration=0.1), constants_source="shipped",
                        static=Static(cheap_config=keys[0], frontier_config=keys[1]),
                        regions=regions_map).with_version()


def _rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", "--events", dest="decisions", type=int, default=300_000,
                        help="decisions per workload")
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

    lookup = {r: keys[0] for r in regions}
    start = time.perf_counter()
    for region in region_seq:
        lookup[region]
    baseline = _rate(n, time.perf_counter() - start)

    start = time.perf_counter()
    for region in region_seq:
        router.route(region)
    default = _rate(n, time.perf_counter() - start)

    rng = random.Random(0)
    start = time.perf_counter()
    for region, pool in zip(region_seq, pool_seq):
        router.route(region, pool=pool, role="implementer", rng=rng)
    pooled = _rate(n, time.perf_counter() - start)

    m = max(1, n // 10)
    memo = router._memo
    start = time.perf_counter()
    for region, pool in zip(region_seq[:m], pool_seq[:m]):
        memo.clear()
        router.route(region, pool=pool, role="implementer", rng=rng)
    uncached = _rate(m, time.perf_counter() - start)

    print(f"table: {args.configs} configs x {args.regions} regions (+ '*'), {n} decisions per workload")
    print(f"{'workload':<12} {'decisions/s':>14} {'x dict lookup':>14}  target")
    print(f"{'dict lookup':<12} {baseline:>14,.0f} {1.0:>14.3f}")
    for name, rate, target in (("default", default, True), ("pool+rng", pooled, True), ("uncached", uncached, False)):
        verdict = ("ok" if rate >= 200_000 else "MISSED (>= 200,000/s)") if target else "(first decision)"
        print(f"{name:<12} {rate:>14,.0f} {rate / baseline:>14.3f}  {verdict}")


if __name__ == "__main__":
    main()
