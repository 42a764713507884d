"""Import throughput (``ratings import``), against a bare read of the same rows measured in the same run.

Run: ``.venv/bin/python -m bench.imports [--rows N] [--tasks T] [--only long|mini-ork] [--memory K]``.

1. **Long table**: a CSV of N rows (T tasks x configs, scores, costs, times), written once. The baseline is a bare
   ``csv.reader`` pass over the file (parse only: the floor of any CSV import in Python). Measured: a first import
   into a fresh home, then the same file again (every row unchanged: the ledger leaves it out).
2. **mini-ork**: a ``state.db`` of N execution traces (two lanes, task runs of one trace each, verifier outputs and
   reviewer verdicts; N task runs + N traces = 2N source rows), built with the DDL of the tests. The baseline is a
   bare ``sqlite3`` read of the same rows (every column of ``execution_traces`` and ``task_runs``). Measured: a
   first import, then again.

Each import runs in a process of its own (after a tiny warm-up import there, so that loading the modules is not
counted), which reports its CPU time (user + system), wall time and peak RSS (VmHWM). Printed: source rows per CPU
second and per wall second, each with its ratio to the bare read's, and the load average before and after. CPU time
is the steadier figure on a shared machine. The imports take ``--allow-future``: the synthetic mini-ork store's
times run a minute a task run from 2026-05-28, past today's date beyond a few hundred thousand runs. ``--memory K``
imports a second input K times as large (a first import only) and prints both peak RSS figures: memory is bounded by
the chunk (10,000 rows, at most 64 MiB of mapped chunks held before they are spooled to a file, a ledger merge of
65,536 records at a time), so it must not grow with the input. Target: >= 100,000 source rows/s.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET = 100_000
CONFIGS = [f"agent-{a}/provider-{a % 3}/model-{m}/{e}" for a in range(4) for m in range(3) for e in ("high", "-")]
ROOT = Path(__file__).resolve().parents[1]


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


def state_db(path: Path, traces: int) -> int:
    sys.path.insert(0, str(ROOT))
    from tests.streams.imports.miniork_db import build_state_db

    return build_state_db(path, traces=traces, lanes=("glm", "opus"))


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


def cpu() -> float:
    times = os.times()
    return times.user + times.system


def timed(fn: Any, *args: Any) -> tuple[Any, float, float]:
    """(result, wall seconds, CPU seconds: user + system)."""
    start, used = time.perf_counter(), cpu()
    out = fn(*args)
    return out, time.perf_counter() - start, cpu() - used


def peak_mib() -> float:
    """This process's peak resident memory, MiB: the kernel's high-water mark of its memory map (VmHWM), which a
    new program starts afresh; ``ru_maxrss`` keeps the parent's at the fork (here the bench's, that built the
    inputs)."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kib = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
    return kib / 1024


def child(fmt: str, path: Path, home: Path, runs: int) -> None:
    """In a process of its own: a warm-up import, then ``runs`` imports of ``path`` into ``home``; one JSON line
    each (wall, CPU, appended, unchanged, peak RSS)."""
    from pipeline.streams.imports import ImportOptions, import_source

    warm = home.parent / f"warm-{home.name}"
    warm.mkdir(parents=True, exist_ok=True)
    long_table(warm / "warm.csv", 10, 2)
    import_source(warm, [warm / "warm.csv"], ImportOptions(fmt="long"))
    options = ImportOptions(fmt=fmt, future=None)  # type: ignore[arg-type]  # --allow-future: see the docstring
    for _ in range(runs):
        result, wall, used = timed(import_source, home, [path], options)
        peak = peak_mib()
        print(json.dumps({"wall": wall, "cpu": used, "appended": result.appended, "unchanged": result.unchanged,
                          "rss": peak}), flush=True)  # fmt: skip


def imports(fmt: str, path: Path, home: Path, runs: int) -> list[dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.imports", "--child", fmt, str(path), str(home), str(runs)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode:
        raise SystemExit(f"the import of {path} failed:\n{out.stderr}")
    return [json.loads(line) for line in out.stdout.splitlines()]


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def measure(label: str, rows: int, base: tuple[float, float], fmt: str, path: Path, home: Path) -> None:
    for run, m in zip(("first import", "again (all unchanged)"), imports(fmt, path, home, 2), strict=True):
        per_cpu, per_wall = rows / m["cpu"], rows / m["wall"]
        print(
            f"{label} {run}: {rows:,} rows: {per_cpu:,.0f} rows per CPU second ({m['cpu']:.2f} s, "
            f"{m['cpu'] / base[1]:.1f}x the bare read's CPU); {per_wall:,.0f} rows/s wall ({m['wall']:.2f} s, "
            f"{m['wall'] / base[0]:.1f}x the bare read's wall); {m['appended']:,} events appended, "
            f"{m['unchanged']:,} unchanged; peak RSS {m['rss']:.0f} MiB; {'meets' if per_cpu >= TARGET else 'BELOW'} "
            f"the target of {TARGET:,}/s (CPU); load {load()}",
            flush=True,
        )


def memory(label: str, sizes: list[tuple[int, Path]], fmt: str, root: Path) -> None:
    peaks = []
    for rows, path in sizes:
        [m] = imports(fmt, path, root / f"home-mem-{label}-{rows}", 1)
        peaks.append(f"{rows:,} rows: {m['rss']:.0f} MiB ({rows / m['cpu']:,.0f} rows per CPU second)")
    print(f"{label} peak RSS of a first import: " + "; ".join(peaks), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--only", choices=["long", "mini-ork"], default=None)
    parser.add_argument("--memory", type=int, default=0, metavar="K", help="also a first import K times as large")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        fmt, path, home, runs = args.child
        child(fmt, Path(path), Path(home), int(runs))
        return 0
    print(f"load: {load()}", flush=True)
    root = Path(tempfile.mkdtemp(prefix="bench-imports-"))
    try:
        if args.only in (None, "long"):
            table = root / "long.csv"
            long_table(table, args.rows, args.tasks)
            count, wall, used = timed(bare_csv, table)
            print(f"long baseline: bare csv.reader over {count:,} rows: {used:.3f} s CPU ({count / used:,.0f} rows/s)")
            measure("long", args.rows, (wall, used), "long", table, root / "home-long")
            if args.memory > 1:
                big = root / "long-big.csv"
                long_table(big, args.rows * args.memory, args.tasks)
                memory("long", [(args.rows, table), (args.rows * args.memory, big)], "long", root)
        if args.only in (None, "mini-ork"):
            db = root / "state.db"
            n = state_db(db, args.rows)
            count, wall, used = timed(bare_sqlite, db)
            rate = count / used
            print(f"mini-ork baseline: bare sqlite3 read of {count:,} rows: {used:.3f} s CPU ({rate:,.0f} rows/s)")
            measure("mini-ork", n, (wall, used), "mini-ork", db, root / "home-mo")
            if args.memory > 1:
                big = root / "state-big.db"
                m = state_db(big, args.rows * args.memory)
                memory("mini-ork", [(n, db), (m, big)], "mini-ork", root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
