"""A backtest's speed: where one nightly refit of the product's path spends its time, against one fit of the model
on the same store measured in the same run, and a whole backtest.

Run: ``.venv/bin/python -m bench.backtest [--table FILE] [--seeds N] [--jobs J] [--policy P]``.

The backtest runs ``--seeds`` seeds of one policy from the frontier start (``--jobs`` processes); in-process
(``--jobs 1``) each refit is timed by stage: the night's append, the compaction, the refit (``run_fit`` without
evaluation: reading the store, the model, the gate's tests, the ladders). The baseline is the aggregation and the
model alone on the whole table's store (the cheapest part of a refit, on the most data any refit sees), so a ratio
says how much of a refit is the product path around the model. Issue 23 needs 20-seed backtests of several
policies on RouterBench.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _baseline(table: Path, scratch: Path) -> float:
    """Seconds of one fit of the model over the whole table (the aggregation and the model: imported and
    compacted once, not timed)."""
    from pipeline.compact import compact
    from pipeline.fit.aggregate import Spec
    from pipeline.fit.context import FitContext, Part
    from pipeline.fit.engine import DuckDBEngine
    from pipeline.fit.model import load_shipped
    from pipeline.store import open_store
    from pipeline.store.views import reading
    from pipeline.streams.imports import import_table

    home = scratch / "baseline"
    import_table(home, table, fsync="never")
    compact(home)
    shipped = load_shipped(None)
    constants = shipped.to_constants()
    seconds = []
    with open_store(home) as store, reading(store):
        for _ in range(2):  # the first warms numba and polars
            began = time.perf_counter()
            ctx = FitContext.build(DuckDBEngine(store.con), Spec(), shipped=shipped)
            ctx.model(Part.FULL, constants)
            seconds.append(time.perf_counter() - began)
    return seconds[-1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", default=str(ROOT / "data" / "terminal-bench.csv.gz"))
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--policy", default="learning_governed")
    args = parser.parse_args(argv)
    import pipeline.compact
    import pipeline.nightly.job
    import pipeline.streams.log
    from pipeline.backtest.run import BacktestOptions, run_backtest

    stages: dict[str, list[float]] = defaultdict(list)

    def timed(module: object, name: str, label: str) -> None:
        original = getattr(module, name)

        def wrapper(*a: object, **k: object) -> object:
            began = time.perf_counter()
            try:
                return original(*a, **k)
            finally:
                stages[label].append(time.perf_counter() - began)

        setattr(module, name, wrapper)

    scratch = Path(tempfile.mkdtemp(prefix="bench-backtest-"))
    try:
        baseline = _baseline(Path(args.table), scratch)
        if args.jobs == 1:  # the refit's stages, timed where the refit calls them
            timed(pipeline.streams.log, "append", "append")
            timed(pipeline.compact, "compact", "compact")
            timed(pipeline.nightly.job, "run_fit", "refit")
        options = BacktestOptions(policies=(args.policy,), seeds=args.seeds, jobs=args.jobs)
        began = time.perf_counter()
        report = run_backtest(scratch / "out", table=args.table, options=options)
        wall = time.perf_counter() - began
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    a = report.about
    refits = args.seeds * (a.nights - 1) + (a.nights - 1)  # each seed's loop, and the full-information loop once
    name = Path(args.table).name
    print(f"table {name}: {a.tasks:,} tasks x {len(a.configs)} configs, {a.nights} nights, {refits} refits")
    print(f"baseline fit (aggregation and model) on the whole table: {baseline * 1000:.1f} ms")
    if stages:
        stages["compact"] = stages["compact"][1:]  # the first compaction is the input table's, not a night's
        per = {label: sum(times) / len(times) for label, times in stages.items() if times}
        total = sum(per.values())
        for label, seconds in per.items():
            print(f"  {label:12s} {seconds * 1000:8.1f} ms per night ({seconds / baseline:.1f}x baseline)")
        print(f"  one refit    {total * 1000:8.1f} ms ({total / baseline:.1f}x baseline)")
    print(
        f"whole backtest: {wall:.1f} s wall for {args.seeds} seed(s), jobs {args.jobs} "
        f"({wall / max(refits, 1) * 1000:.0f} ms per refit, {wall / baseline:.0f}x baseline); "
        f"second half {report.runs[0].second_half.vs_region_best} of the best region-level table; "
        f"load {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
