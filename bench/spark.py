"""The fit's aggregation on Spark (``fit-routing --engine spark``) against DuckDB on the same store, same run.

Run: ``.venv/bin/python -m bench.spark [--events N] [--master local[2]] [--keep DIR [--reuse]]``.

Simulates the backlog scaled to N ratings (``bench.fit``'s ``scale`` preset) and compacts it, then times on the
same store version: the DuckDB aggregation (the baseline), a Spark session's start, the store's views registered
in it, and the Spark aggregation twice (cold: the JVM's first run of the statements; warm: again in the same
session). The aggregation is the only stage the engines do not share (everything after it works on its rows in
this process), so a full ``fit-routing --engine spark`` costs the DuckDB fit plus the difference. Checks that the
two engines' rows are equal, and prints each Spark time as a ratio to DuckDB's.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from fractions import Fraction
from pathlib import Path

from bench.fit import prepare
from pipeline.fit.aggregate import Spec

#: The fit's half-lives when none is pinned (pipeline.defaults.HALF_LIVES, the finite ones) and its split.
SPEC = Spec(prm=True, half_lives=(90.0, 30.0, 14.0), fraction=Fraction(7, 10))


def _plain(table) -> list[dict]:
    return [
        {k: int(v) if hasattr(v, "as_integer_ratio") and not isinstance(v, float) else v for k, v in r.items()}
        for r in table.to_pylist()
    ]


def run(home: Path, master: str) -> dict[str, float]:
    from pipeline.fit.aggregate import DuckDBEngine, aggregate
    from pipeline.fit.spark import SparkEngine
    from pipeline.store import open_store
    from pipeline.store.spark import register_views, session
    from pipeline.workspace import Workspace

    spec = SPEC
    out: dict[str, float] = {}
    with open_store(home) as store:
        t0 = time.perf_counter()
        ours = aggregate(DuckDBEngine(store), spec)
        out["duckdb_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        spark = session(Workspace.of(home).spark_scratch, master)
        out["session_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        register_views(spark, store.location, store.table)
        out["views_s"] = time.perf_counter() - t0
        for run_name in ("cold", "warm"):
            t0 = time.perf_counter()
            theirs = aggregate(SparkEngine(spark), spec)
            out[f"spark_{run_name}_s"] = time.perf_counter() - t0
        out["ratings"] = float(sum(r["live"] + r["retracted"] for r in ours.counts))
        out["pairs"] = float(ours.pairs.num_rows)
    for name in ("configs", "tasks", "pairs", "scores", "decisions", "candidates", "closures"):
        if _plain(getattr(theirs, name)) != _plain(getattr(ours, name)):
            raise SystemExit(f"the engines' {name} rows differ")
    spark.stop()
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000, help="ratings to simulate (default 20,000)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, default=None, help="keep the simulated home under this directory")
    parser.add_argument("--reuse", action="store_true", help="with --keep: use a home already simulated there")
    args = parser.parse_args(argv)
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-spark-"))
    home = root / f"ratings-{args.events}"
    try:
        if not (args.reuse and args.keep is not None and (home / "store").is_dir()):
            if home.exists():
                shutil.rmtree(home)
            prepare(home, args.events, args.seed)
        r = run(home, args.master)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    base = r["duckdb_s"]
    print(f"{r['ratings']:,.0f} ratings, {r['pairs']:,.0f} aggregated rows; the engines' rows are equal")
    print(f"  duckdb aggregation       {base:8.2f} s  (1.0x, the baseline)")
    for key, label in (
        ("session_s", "spark session start"),
        ("views_s", "spark views registered"),
        ("spark_cold_s", "spark aggregation, cold"),
        ("spark_warm_s", "spark aggregation, warm"),
    ):
        print(f"  {label:24s} {r[key]:8.2f} s  ({r[key] / base:.1f}x duckdb)")


if __name__ == "__main__":
    main()
