"""The store's file layout: files and reads of one simulated store in the old layout (partitioned by family and
event date) against the current one (by family, files near the target size), in one run.

    .venv/bin/python -m bench.layout                         # 1M ratings (the ``scale`` preset, 365 days)
    .venv/bin/python -m bench.layout --events 200000 --spark # also Spark (local[2]) reads, when pyspark is there

One simulated backlog, compacted three ways, each in its own child process:

- old: the compactor of ``--old-rev`` (the last revision of the daily layout), taken from this repository with
  ``git archive``;
- migrated: a copy of the old store compacted by this version (its first compaction migrates it; timed);
- new: the same streams compacted by this version.

Per store: live files, their mean and total size. Per reader, best of ``--repeat`` interleaved runs, each opening
the table afresh (so the listing and the footers are paid every time, as a nightly job pays them): DuckDB through
``open_store`` (the product's reader), polars through ``scan_delta``, and with ``--spark`` Spark SQL over the files
the Delta log lists; two queries each: every rating grouped by config, and one week of ratings (file skipping by
the ``at`` statistics against partition pruning by day). Prints the times and the ratio new/old of each.
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

OLD_REV = "8d0589c"  # the last revision partitioned by family and event date
RATINGS_PER_TASK = 3.4
WEEK = ("2026-03-02", "2026-03-09")  # inside the scale preset's year

_COMPACT = """
import json, sys, time
from pipeline.compact import compact
t0 = time.perf_counter()
result = compact(sys.argv[1])
print(json.dumps({"seconds": time.perf_counter() - t0, "notes": result.notes}))
"""


def _compact(home: Path, pythonpath: str | None = None) -> dict:
    env = None
    if pythonpath is not None:
        import os

        env = {**os.environ, "PYTHONPATH": pythonpath}
    command = [sys.executable, "-c", _COMPACT, str(home)]
    # run outside the repository: ``-c`` puts the working directory first on the path, before PYTHONPATH
    out = subprocess.run(command, check=True, capture_output=True, text=True, env=env, cwd=home.parent)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _files(home: Path) -> dict:
    import pyarrow as pa
    from deltalake import DeltaTable

    sizes = pa.table(DeltaTable(str(home / "store" / "events")).get_add_actions(flatten=True))["size_bytes"].to_pylist()
    return {"files": len(sizes), "mean_kb": sum(sizes) / len(sizes) / 1024, "total_mb": sum(sizes) / 2**20}


def _duckdb(home: Path, week: bool) -> float:
    from pipeline.store import open_store

    where = f"WHERE \"at\" >= TIMESTAMPTZ '{WEEK[0]} 00:00:00Z' AND \"at\" < TIMESTAMPTZ '{WEEK[1]} 00:00:00Z'"
    where = where if week else ""
    t0 = time.perf_counter()
    with open_store(home) as store:
        store.con.execute(f"SELECT config_key, count(*), sum(score) FROM ratings {where} GROUP BY 1").fetchall()
    return time.perf_counter() - t0


def _polars(home: Path, week: bool) -> float:
    from datetime import UTC, datetime

    import polars as pl

    t0 = time.perf_counter()
    frame = pl.scan_delta(str(home / "store" / "events")).filter(pl.col("family") == "ratings")
    if week:
        low, high = (datetime.fromisoformat(d).replace(tzinfo=UTC) for d in WEEK)
        frame = frame.filter((pl.col("at") >= low) & (pl.col("at") < high))
    frame.group_by("config_key").agg(pl.len(), pl.col("score").sum()).collect()
    return time.perf_counter() - t0


def _spark_reader(root: Path):  # -> Callable[[Path, bool], float]
    from pipeline.store.spark import register_views, session
    from pipeline.store.table import open_table
    from pipeline.workspace import SparkScratch, Workspace

    spark = session(SparkScratch.under(root / "spark-scratch"), "local[2]")

    def read(home: Path, week: bool) -> float:
        t0 = time.perf_counter()
        location = Workspace.of(home).store
        register_views(spark, location, open_table(location))
        where = f"WHERE \"at\" >= TIMESTAMP '{WEEK[0]} 00:00:00' AND \"at\" < TIMESTAMP '{WEEK[1]} 00:00:00'"
        where = where if week else ""
        spark.sql(f"SELECT config_key, count(*), sum(score) FROM ratings {where} GROUP BY 1").collect()
        return time.perf_counter() - t0

    return read


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="ratings in the store")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--old-rev", default=OLD_REV)
    parser.add_argument("--spark", action="store_true", help="also read with Spark (local[2])")
    args = parser.parse_args(argv)

    from pipeline.simulate import preset, simulate

    root = Path(tempfile.mkdtemp(prefix="bench-layout-"))
    try:
        old_code = root / "old-code"
        old_code.mkdir()
        archive = subprocess.run(["git", "archive", args.old_rev, "pipeline"], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(old_code)], input=archive.stdout, check=True)
        homes = {name: root / name for name in ("old", "migrated", "new")}
        t0 = time.perf_counter()
        simulate(homes["new"], preset("scale", tasks=max(10, int(args.events / RATINGS_PER_TASK))), seed=args.seed)
        print(f"simulated in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        shutil.copytree(homes["new"], homes["old"])
        compacted = {"old": _compact(homes["old"], str(old_code)), "new": _compact(homes["new"])}
        shutil.copytree(homes["old"], homes["migrated"])
        compacted["migrated"] = _compact(homes["migrated"])
        print(f"{'store':<9} {'files':>7} {'mean KB':>9} {'total MB':>9} {'compact s':>10}")
        for name, home in homes.items():
            f, seconds = _files(home), compacted[name]["seconds"]
            print(f"{name:<9} {f['files']:>7,} {f['mean_kb']:>9,.0f} {f['total_mb']:>9,.1f} {seconds:>10.1f}")
        for note in compacted["migrated"]["notes"]:
            print(f"  migrated: {note}")

        readers = {"duckdb": _duckdb, "polars": _polars}
        if args.spark:
            readers["spark"] = _spark_reader(root)
        best: dict[tuple[str, str, bool], float] = {}
        for _ in range(args.repeat):
            for reader, read in readers.items():
                for week in (False, True):
                    for name in ("old", "new"):
                        key = (reader, name, week)
                        best[key] = min(best.get(key, float("inf")), read(homes[name], week))
        print(f"\n{'reader':<8} {'query':<12} {'old s':>8} {'new s':>8} {'new/old':>8}")
        for reader in readers:
            for week in (False, True):
                old, new = best[(reader, "old", week)], best[(reader, "new", week)]
                query = "one week" if week else "all ratings"
                print(f"{reader:<8} {query:<12} {old:>8.3f} {new:>8.3f} {new / old:>8.2f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
