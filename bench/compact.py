"""Compaction throughput and memory against DuckDB's own JSON -> Parquet copy, measured in one run.

    .venv/bin/python -m bench.compact                  # 1M rating events
    .venv/bin/python -m bench.compact --events 5000000

Writes N ``task.rated`` lines (canonical form, 0.1% exact duplicates) to a temp
home, then times, each in its own child process (so peak RSS is its own):

- baseline: ``COPY (SELECT * FROM read_json(stream)) TO store.parquet (FORMAT parquet)``;
- ours: ``pipeline.compact.compact`` (validation, dedupe, id index, partitioned Parquet, manifest).

Times exclude interpreter start and imports; each runs ``--repeat`` times, interleaved, best kept.
Prints events/s of both, the ratio (target >= 0.5) and the peak RSS of each (target < 1.5 GB at 1M).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_MODELS = [
    ("claude-code", "anthropic", "opus", "high"),
    ("claude-code", "anthropic", "sonnet", None),
    ("codex", "openai", "gpt-5", "medium"),
    ("qwen-code", None, "480B/A35B", None),
]


def _config(cli: str, route: str | None, model: str, effort: str | None) -> str:
    return json.dumps({"cli": cli, "route": route, "model": model, "effort": effort}, separators=(",", ":"))


def write_stream(path: Path, events: int) -> int:
    """N rating lines like ``append`` writes them; every 1000th line repeats the one before (a retried append)."""
    configs = [_config(*m) for m in _MODELS]
    path.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with open(path, "wb") as handle:
        batch: list[str] = []
        previous = ""
        for i in range(events):
            if i % 1000 == 999:
                line = previous
            else:
                line = (
                    f'{{"id":"01K{i:023d}","type":"task.rated","at":"2026-{1 + i % 12:02d}-{1 + i % 28:02d}T'
                    f'{i % 24:02d}:{i % 60:02d}:{(i // 60) % 60:02d}Z","v":1,"task":"T-{i // 4}",'
                    f'"config":{configs[i % 4]},"rater":{{"kind":"gate","name":"pytest"}},"score":{(i % 11) / 10}}}'
                )
            previous = line
            batch.append(line)
            if len(batch) >= 100_000:
                handle.write(("\n".join(batch) + "\n").encode())
                written += len(batch)
                batch = []
        if batch:
            handle.write(("\n".join(batch) + "\n").encode())
            written += len(batch)
    return written


def _phase(phase: str, home: Path) -> None:
    """One measured step, run in a child process; prints its seconds (imports excluded) and outcome."""
    if phase == "duckdb":
        import duckdb

        con = duckdb.connect(":memory:")
        start = time.perf_counter()
        con.execute(
            f"COPY (SELECT * FROM read_json('{home / 'streams' / 'ratings.jsonl'}', "
            f"format = 'newline_delimited')) TO '{home / 'duckdb.parquet'}' (FORMAT parquet)"
        )
        print(json.dumps({"seconds": time.perf_counter() - start}))
    else:
        import shutil

        from pipeline.compact import compact

        shutil.rmtree(home / "store", ignore_errors=True)
        shutil.rmtree(home / "deadletter", ignore_errors=True)
        start = time.perf_counter()
        result = compact(home)
        print(json.dumps({"seconds": time.perf_counter() - start, **result.summary()["streams"]["ratings"]}))


def _run(phase: str, home: Path) -> tuple[float, int, dict]:
    """(seconds, peak RSS bytes, outcome) of one phase in a child process."""
    child = subprocess.Popen(
        [sys.executable, "-m", "bench.compact", "--phase", phase, "--home", str(home)],
        stdout=subprocess.PIPE,
        text=True,
    )
    out = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"phase {phase} failed with exit code {os.waitstatus_to_exitcode(status)}")
    outcome = json.loads(out)
    return outcome.pop("seconds"), usage.ru_maxrss * 1024, outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2, help="Runs of each, interleaved; the best counts.")
    parser.add_argument("--phase", choices=["duckdb", "compact"], help=argparse.SUPPRESS)
    parser.add_argument("--home", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        _phase(args.phase, args.home)
        return
    with tempfile.TemporaryDirectory(prefix="bench-compact-") as tmp:
        home = Path(tmp)
        t0 = time.perf_counter()
        n = write_stream(home / "streams" / "ratings.jsonl", args.events)
        size = (home / "streams" / "ratings.jsonl").stat().st_size
        print(f"generated {n:,} events ({size / 1e6:.0f} MB) in {time.perf_counter() - t0:.1f}s")
        runs = {"duckdb": [], "compact": []}
        for _ in range(args.repeat):  # interleaved, best of each: a shared machine's noise hits both alike
            for phase in runs:
                runs[phase].append(_run(phase, home))
        base_s, base_rss, _ = min(runs["duckdb"])
        ours_s, ours_rss, outcome = min(runs["compact"], key=lambda r: r[0])
        index = sum(p.stat().st_size for p in (home / "store" / "_index").glob("*.parquet"))
        print(
            f"duckdb COPY read_json -> parquet: {n / base_s:12,.0f} events/s  ({base_s:.2f}s, "
            f"peak RSS {base_rss / 2**20:,.0f} MiB)"
        )
        print(
            f"ratings compact                 : {n / ours_s:12,.0f} events/s  ({ours_s:.2f}s, "
            f"peak RSS {ours_rss / 2**20:,.0f} MiB)  outcomes {json.dumps(outcome)}"
        )
        print(f"throughput ratio compact/duckdb : {base_s / ours_s:.2f}x (target >= 0.5x)")
        print(f"id index on disk                : {index / 2**20:.1f} MiB ({index / max(n, 1):.1f} bytes/event)")


if __name__ == "__main__":
    main()
