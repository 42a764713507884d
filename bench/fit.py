"""Full ``fit-routing`` (grid search and every verdict included) on simulated ratings, against one DuckDB
``GROUP BY`` of the same store; and ``fit-routing --no-evaluate`` (the backtest's nightly refit) of a real table.

Run: ``.venv/bin/python -m bench.fit [--events N ...] [--large] [--keep DIR [--reuse]] [--refit TABLE]``.

Sizes: 1M and 10M ratings by default; ``--large`` adds 50M (simulating and compacting it takes a while on 2
cores, so it is not part of ``make bench``, which runs one small size through ``--events``).

For each N (ratings, about 3.4 per task in the ``scale`` preset):
1. simulate the backlog scaled to N ratings and compact it (compaction is timed, but not part of the fit);
2. run ``fit-routing --no-compact`` in a fresh process: wall time, CPU time and peak memory (``ru_maxrss`` of the
   child), and per stage of the fit (the job's progress lines) its wall time, CPU time and peak resident memory
   (sampled every 10 ms), which says what bounds the fit;
3. baseline in the same run: one DuckDB ``GROUP BY config_key, region`` over the store's ratings Parquet
   (joined to the tasks for the region), the cheapest query that touches every rating once.
Prints the fit time, the ratio to the baseline, peak memory, the stages, the seconds per million ratings between
sizes (time growing no faster than linearly keeps that flat) and each target of issue 24 met or missed: 1M
ratings <= 8 s, <= 600 MB and <= 40x the baseline; 10M <= 60 s and <= 2 GB; 50M <= 360 s and <= 6 GB (2 cores).

``--refit TABLE`` (a long table, e.g. ``data/routerbench-zero-shot.csv.gz``): imports it into a scratch home,
compacts, then times ``run_fit(..., FitOptions(evaluate=False, no_compact=True))`` in one process, as the
backtest calls it each night (best of ``--repeat``, after one warm-up run that loads the modules); target
<= 0.5 s for RouterBench (34,736 ratings).
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RATINGS_PER_TASK = 3.4
DEFAULT_SIZES = [1_000_000, 10_000_000]
LARGE = 50_000_000
#: ratings -> (wall seconds, peak MB, ratio to the baseline or None) that issue 24 asks of the full fit.
TARGETS: dict[int, tuple[float, float, float | None]] = {
    1_000_000: (8.0, 600.0, 40.0),
    10_000_000: (60.0, 2048.0, None),
    50_000_000: (360.0, 6144.0, None),
}
#: ``--refit``: the wall time asked of a refit without evaluation of RouterBench.
REFIT_TARGET_S = 0.5

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


def _verdict(row: dict) -> str:
    """The targets of the nearest size at or below this run's, met or missed."""
    sizes = [n for n in TARGETS if n <= row["target"]]
    if not sizes:
        return "no target at this size"
    wall, peak, ratio = TARGETS[max(sizes)]
    checks = [
        f"wall {row['wall_s']:.1f} s <= {wall:g} s: {'met' if row['wall_s'] <= wall else 'MISSED'}",
        f"peak {row['peak_rss_mb']:.0f} MB <= {peak:g} MB: {'met' if row['peak_rss_mb'] <= peak else 'MISSED'}",
    ]
    if ratio is not None:
        checks.append(f"ratio {row['ratio']:.1f}x <= {ratio:g}x: {'met' if row['ratio'] <= ratio else 'MISSED'}")
    return f"targets at {max(sizes):,}: " + "; ".join(checks)


def refit(table: Path, repeat: int) -> None:
    """``fit-routing --no-evaluate`` of ``table`` in one process: best of ``repeat`` after a warm-up run."""
    from pipeline.compact import compact
    from pipeline.nightly.job import run_fit
    from pipeline.nightly.options import FitOptions
    from pipeline.streams.imports import import_table
    from pipeline.workspace import Workspace

    root = Path(tempfile.mkdtemp(prefix="bench-refit-"))
    try:
        ws = Workspace.resolve(root / "home")
        import_table(ws, table)
        compact(ws)
        base = baseline(ws.root)
        options = FitOptions(evaluate=False, no_compact=True)
        result = run_fit(ws, options)  # warm-up: loads the modules and compiles the kernels once
        times, cpus = [], []
        for _ in range(repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            run_fit(ws, options)
            times.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        best = min(times)
        print(
            f"fit-routing --no-evaluate of {table.name} ({result.stats.ratings.total:,} ratings): best {best:.3f} s "
            f"of {repeat} (median {sorted(times)[len(times) // 2]:.3f} s, CPU best {min(cpus):.3f} s) = "
            f"{best / base:.1f}x one DuckDB GROUP BY ({base:.3f} s); target <= {REFIT_TARGET_S} s: "
            f"{'met' if best <= REFIT_TARGET_S else 'MISSED'}"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--events",
        type=int,
        nargs="+",
        default=None,
        help="ratings per run (default: 1,000,000 and 10,000,000; make bench runs one small size)",
    )
    parser.add_argument("--large", action="store_true", help="add a run at 50,000,000 ratings")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, default=None, help="keep the simulated homes under this directory")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="with --keep: fit a home already simulated there for that N (no simulate/compact)",
    )
    parser.add_argument("--refit", type=Path, default=None, metavar="TABLE", help="time --no-evaluate on TABLE only")
    parser.add_argument("--repeat", type=int, default=5, help="--refit: runs timed (the best is reported)")
    args = parser.parse_args(argv)
    if args.refit is not None:
        refit(args.refit, args.repeat)
        return
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
            print(f"    {_verdict(r)}", flush=True)
            for s in r["stages"]:
                print(
                    f"    {s['stage'][:64]:64s} {s['wall_s']:7.2f} s  CPU {s['cpu_s']:7.2f} s  "
                    f"peak {s['peak_rss_mb']:7.0f} MB",
                    flush=True,
                )
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    for first, last in itertools.pairwise(rows):
        growth = (last["wall_s"] / first["wall_s"]) / (last["ratings"] / first["ratings"])
        print(
            f"from {first['ratings']:,} to {last['ratings']:,} ratings: {first['wall_s'] / first['ratings'] * 1e6:.2f}"
            f" -> {last['wall_s'] / last['ratings'] * 1e6:.2f} s per million ratings; time grows {growth:.2f}x as fast"
            " as the ratings (1.0 = linear)"
        )
    print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
