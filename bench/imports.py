"""Import throughput (``ratings import``), against a bare read of the same rows measured in the same run.

Run: ``.venv/bin/python -m bench.imports [--rows N] [--tasks T] [--only long|mini-ork]``.

1. **Long table**: a CSV of N rows (T tasks x configs, scores, costs, times), written once. The baseline is a bare
   ``csv.reader`` pass over the file (parse only: the floor of any CSV import in Python). Measured: a first import
   into a fresh home, then the same file again (every row unchanged: the ledger leaves it out). Rows/s of wall
   time, and how many times the baseline's wall time each takes.
2. **mini-ork**: a ``state.db`` of N execution traces (two lanes, task runs of four traces, verifier outputs and
   reviewer verdicts), built with the DDL of the tests. The baseline is a bare ``sqlite3`` read of the same rows
   (every column of ``execution_traces`` and ``task_runs``). Measured: a first import, then again.

Peak RSS is printed after each (memory is bounded by the chunk: it must not grow with N). Target: >= 100,000
source rows/s for both. The machine may be shared: the ratios to the baseline are the steadier figures; say the
load (``uptime``) with any figure you quote.
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import resource
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from pipeline.streams.imports import ImportOptions, import_source

TARGET = 100_000
CONFIGS = [f"agent-{a}/provider-{a % 3}/model-{m}/{e}" for a in range(4) for m in range(3) for e in ("high", "-")]


def long_table(path: Path, rows: int, tasks: int) -> None:
    rng = random.Random(7)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["task_id", "config", "score", "cost_usd", "region", "at", "suite"])
        for i in range(rows):
            task = i % tasks
            writer.writerow(
                [
                    f"task-{task:07d}",
                    CONFIGS[(i // tasks) % len(CONFIGS)],
                    rng.choice(("0.0", "1.0", "0.5", "0.25")),
                    f"{rng.random() * 0.05:.6f}",
                    f"region-{task % 8}",
                    f"2026-0{1 + i * 9 // rows}-{1 + (i // 97) % 28:02d}T{(i // 7) % 24:02d}:{i % 60:02d}:00Z",
                    f"s{task % 5}",
                ]
            )


def bare_csv(path: Path) -> int:
    with path.open(newline="", encoding="utf-8-sig") as handle:
        return sum(1 for _ in csv.reader(handle)) - 1


def bare_sqlite(path: Path) -> int:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        n = 0
        for table in ("task_runs", "execution_traces"):
            for _ in con.execute(f"SELECT * FROM {table}"):  # our own table names
                n += 1
        return n
    finally:
        con.close()


def timed(fn, *args):
    """(result, wall seconds, CPU seconds): on a shared machine the CPU time is the steadier figure."""
    start, cpu = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, time.perf_counter() - start, time.process_time() - cpu


def warm_up(root: Path) -> None:
    """One tiny import first, so that what is measured is the rows, not loading the modules (once a process)."""
    small = root / "warm.csv"
    long_table(small, 10, 2)
    import_source(root / "home-warm", [small], ImportOptions(fmt="long"))


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(label: str, rows: int, base: tuple[float, float], home: Path, path: Path, fmt: str) -> None:
    options = ImportOptions(fmt=fmt)  # type: ignore[arg-type]
    for run in ("first import", "again (all unchanged)"):
        result, seconds, cpu = timed(import_source, home, [path], options)
        print(
            f"{label} {run}: {rows:,} rows in {seconds:.2f} s wall = {rows / seconds:,.0f} rows/s "
            f"({seconds / base[0]:.1f}x the bare read); {cpu:.2f} s CPU = {rows / cpu:,.0f} rows per CPU second "
            f"({cpu / base[1]:.1f}x the bare read's CPU); {result.appended:,} events appended, "
            f"{result.unchanged:,} unchanged; peak RSS {peak_mib():.0f} MiB; "
            f"{'meets' if rows / seconds >= TARGET else 'BELOW'} the target of {TARGET:,}/s (wall)",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--only", choices=["long", "mini-ork"], default=None)
    args = parser.parse_args(argv)
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}", flush=True)
    root = Path(tempfile.mkdtemp(prefix="bench-imports-"))
    try:
        if args.only in (None, "long"):
            table = root / "long.csv"
            long_table(table, args.rows, args.tasks)
            count, base, cpu = timed(bare_csv, table)
            print(f"long baseline: bare csv.reader over {count:,} rows: {base:.3f} s ({count / base:,.0f} rows/s)")
            warm_up(root)
            measure("long", args.rows, (base, cpu), root / "home-long", table, "long")
        if args.only in (None, "mini-ork"):
            sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
            from tests.streams.imports.miniork_db import build_state_db

            db = root / "state.db"
            n = build_state_db(db, traces=args.rows, lanes=("glm", "opus"))
            count, base, cpu = timed(bare_sqlite, db)
            print(f"mini-ork baseline: bare sqlite3 read of {count:,} rows: {base:.3f} s ({count / base:,.0f} rows/s)")
            warm_up(root)
            measure("mini-ork", n, (base, cpu), root / "home-mo", db, "mini-ork")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
