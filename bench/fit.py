"""Full ``fit-routing`` (grid search included) on simulated ratings, against one DuckDB scan of the same store.

Run: ``.venv/bin/python -m bench.fit [--events N ...] [--large] [--keep DIR [--reuse]]``.

Sizes: 1M and 5M ratings by default; ``--large`` adds 10M (about 10 minutes to simulate and compact on 2 cores,
so it is not part of ``make bench``, which runs one small size through ``--events``).

For each N (ratings, about 3.4 per task in the ``scale`` preset):
1. simulate the backlog scaled to N ratings and compact it (compaction is timed, but not part of the fit);
2. run ``fit-routing --no-compact`` in a fresh process: wall time, CPU time and peak memory (``ru_maxrss`` of the
   child), and per stage of the fit (the job's progress lines) its wall time, CPU time and peak resident memory
   (sampled every 10 ms), which says what bounds the fit;
3. baseline in the same run: one DuckDB ``GROUP BY config_key, region`` over the store's ratings Parquet
   (joined to the tasks for the region), the cheapest query that touches every rating once.
Prints the fit time, the ratio to the baseline, peak memory, the stages, and the time per million ratings between
sizes (time growing no faster than linearly keeps that flat). Targets: 5M ratings under 4 GB peak; 10M under 6 GB
and under 120 s wall on 2 cores.
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
DEFAULT_SIZES = [1_000_000, 5_000_000]
LARGE = 10_000_000

_FIT = """
import json, resource, sys, threading, time
from pipeline.nightly import job
from pipeline.nightly.options import FitOptions

def rss_mb():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS"))

class Stages:
    def __init__(self, enabled):
        self.rows, self.name, self.peak = [], "start", rss_mb()
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        threading.Thread(target=self.sample, daemon=True).start()
    def sample(self):
        while True:
            self.peak = max(self.peak, rss_mb())
            time.sleep(0.01)
    def __call__(self, stage):
        wall, cpu, now = time.perf_counter(), time.process_time(), rss_mb()
        self.rows.append({"stage": self.name, "wall_s": wall - self.wall, "cpu_s": cpu - self.cpu,
                          "peak_rss_mb": max(self.peak, now)})
        self.name, self.wall, self.cpu, self.peak = stage, wall, cpu, now

stages = []
job._Progress = lambda enabled: stages.append(Stages(enabled)) or stages[-1]
t0, c0 = time.perf_counter(), time.process_time()
result = job.run_fit(sys.argv[1], FitOptions(no_compact=True), progress=True)
stages[-1]("end")
print(json.dumps({"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
                  "ratings": result.stats.ratings.total,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "recommendation": result.stats.routing.recommendation, "stages": stages[-1].rows[1:]}))
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
    command = [sys.executable, "-c", _FIT, str(home)]
    out = subprocess.run(command, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--events",
        type=int,
        nargs="+",
        default=None,
        help="ratings per run (default: 1,000,000 and 5,000,000; make bench runs one small size)",
    )
    parser.add_argument("--large", action="store_true", help="add a run at 10,000,000 ratings")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, default=None, help="keep the simulated homes under this directory")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="with --keep: fit a home already simulated there for that N (no simulate/compact)",
    )
    args = parser.parse_args(argv)
    sizes = list(args.events or DEFAULT_SIZES) + ([LARGE] if args.large else [])
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-fit-"))
    rows = []
    try:
        for n in sizes:
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
                f"{r['ratings']:>10,} ratings: fit-routing {r['wall_s']:7.2f} s (CPU {r['cpu_s']:.1f} s) = "
                f"{r['ratio']:6.1f}x one DuckDB GROUP BY scan ({base:.3f} s)  peak {r['peak_rss_mb']:7.0f} MB  "
                f"{r['wall_s'] / r['ratings'] * 1e6:6.2f} s per million ratings  "
                f"(simulate {r['simulate_s']:.1f} s, compact {r['compact_s']:.1f} s; {r['recommendation']})",
                flush=True,
            )
            for s in r["stages"]:
                print(
                    f"    {s['stage'][:64]:64s} {s['wall_s']:7.2f} s  CPU {s['cpu_s']:7.2f} s  "
                    f"peak {s['peak_rss_mb']:7.0f} MB",
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
