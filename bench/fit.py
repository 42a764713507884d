"""Full ``fit-routing`` (grid search included) on simulated ratings, against one DuckDB scan of the same store.

Run: ``.venv/bin/python -m bench.fit [--events N ...] [--keep DIR]``.

For each N (ratings, about 3.4 per task in the ``scale`` preset):
1. simulate the backlog scaled to N ratings and compact it (compaction is timed, but not part of the fit);
2. run ``fit-routing --no-compact`` in a fresh process: wall time and peak memory (``ru_maxrss`` of the child);
3. baseline in the same run: one DuckDB ``GROUP BY config_key, region`` over the store's ratings Parquet
   (joined to the tasks for the region), the cheapest query that touches every rating once.
Prints the fit time, the ratio to the baseline, peak memory, and the time per million ratings between sizes
(time growing no faster than linearly keeps that flat). Targets (issue 5): 1M ratings under 30 s, peak memory
under 4 GB at 5M.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RATINGS_PER_TASK = 3.4

_FIT = """
import json, resource, sys, time
from pipeline.nightly.job import run_fit
from pipeline.nightly.options import FitOptions
t0 = time.perf_counter()
result = run_fit(sys.argv[1], FitOptions(no_compact=True))
wall = time.perf_counter() - t0
print(json.dumps({"wall_s": wall, "ratings": result.stats.ratings.total,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "recommendation": result.stats.routing.recommendation}))
"""

_BASELINE = """
SELECT r.config_key, t.region, count(*) AS n, sum(r.score) AS s
FROM ratings r JOIN (SELECT task, any_value(region) AS region FROM tasks GROUP BY task) t USING (task)
GROUP BY r.config_key, t.region
"""


def prepare(home: Path, ratings: int, seed: int) -> dict:
    from pipeline.compact import compact
    from pipeline.simulate import preset, simulate

    t0 = time.perf_counter()
    simulate(home, preset("scale", tasks=max(10, int(ratings / RATINGS_PER_TASK))), seed=seed)
    simulated = time.perf_counter() - t0
    t0 = time.perf_counter()
    compact(home)
    return {"simulate_s": simulated, "compact_s": time.perf_counter() - t0}


def baseline(home: Path, repeats: int = 3) -> float:
    """Best of ``repeats`` runs of the GROUP BY scan (a fresh connection on the same manifest each time)."""
    from pipeline.store import open_store

    best = float("inf")
    for _ in range(repeats):
        with open_store(home) as store:
            t0 = time.perf_counter()
            store.con.execute(_BASELINE).fetchall()
            best = min(best, time.perf_counter() - t0)
    return best


def fit(home: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", _FIT, str(home)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--events",
        type=int,
        nargs="+",
        default=[200_000],
        help="ratings per run (default 200,000; issue 5 asks for 1,000,000 and 5,000,000)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, default=None, help="keep the simulated homes under this directory")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="with --keep: fit a home already simulated there for that N (no simulate/compact)",
    )
    args = parser.parse_args(argv)
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-fit-"))
    rows = []
    try:
        for n in args.events:
            home = root / f"ratings-{n}"
            if args.reuse and args.keep is not None and (home / "store").is_dir():
                prep = {"simulate_s": 0.0, "compact_s": 0.0}
            else:
                if home.exists():
                    shutil.rmtree(home)
                prep = prepare(home, n, args.seed)
            base = baseline(home)
            result = fit(home)
            rows.append({"target": n, **prep, "baseline_s": base, **result, "ratio": result["wall_s"] / base})
            r = rows[-1]
            print(
                f"{r['ratings']:>10,} ratings: fit-routing {r['wall_s']:7.2f} s  = {r['ratio']:6.1f}x one DuckDB "
                f"GROUP BY scan ({base:.3f} s)  peak {r['peak_rss_mb']:7.0f} MB  "
                f"{r['wall_s'] / r['ratings'] * 1e6:6.2f} s per million ratings  "
                f"(simulate {r['simulate_s']:.1f} s, compact {r['compact_s']:.1f} s; {r['recommendation']})",
                flush=True,
            )
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    if len(rows) > 1:
        first, last = rows[0], rows[-1]
        growth = (last["wall_s"] / first["wall_s"]) / (last["ratings"] / first["ratings"])
        print(
            f"time grows {growth:.2f}x as fast as the ratings from {first['ratings']:,} to {last['ratings']:,} "
            "(1.0 = linear)"
        )
    print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
