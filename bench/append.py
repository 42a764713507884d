"""Append throughput in-process and the start-up cost of one CLI append, with baselines from the same run.

Run: ``.venv/bin/python -m bench.append [--events N] [--batch B] [--cli-runs R]``.

1. In-process: N ``task.rated`` events, prepared as dicts (what a dispatcher passes), appended in
   batches of B with ``fsync=batch`` (one fsync per batch). Reported as events/s of wall time and of
   CPU time (the machine may be shared), against the floor of the same number of bare ``os.write``
   calls of the finished lines. Target: >= 100,000 events/s.
2. Where the time goes, per event on a sample: validation (pydantic), id, line rendering
   (``pydantic_core.to_json`` and the reader's checks), ``os.write``; the rest is the loop and the lock.
3. One ``ratings append EVENT`` in a fresh process against ``python -c pass`` (median of R runs each).
   Target: <= 15x.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pipeline.events import encode_line, validate_object, with_head
from pipeline.streams import append, new_id, prepare

CONFIGS = [
    {"cli": "claude-code", "route": "anthropic", "model": m, "effort": e}
    for m in ("opus", "sonnet", "haiku")
    for e in ("high", None)
]


def rating(i: int) -> dict:
    return {
        "type": "task.rated",
        "task": f"T-{i // 3}",
        "config": CONFIGS[i % len(CONFIGS)],
        "rater": {"kind": "gate", "name": "pytest"},
        "score": (i % 5) / 4,
    }


def in_process(home: Path, events: int, batch: int) -> dict:
    wall = cpu = 0.0
    for start in range(0, events, batch):
        items = [rating(i) for i in range(start, min(events, start + batch))]
        w0, c0 = time.perf_counter(), time.process_time()
        append(home, items, fsync="batch")
        wall += time.perf_counter() - w0
        cpu += time.process_time() - c0
    return {"wall_s": wall, "cpu_s": cpu, "events_per_s": events / wall, "cpu_events_per_s": events / cpu}


def bare_writes(home: Path, events: int) -> float:
    """Seconds for ``events`` bare ``os.write`` calls of a finished line (the syscall floor)."""
    line = prepare([rating(0)]).lines["ratings"][0]
    home.mkdir(parents=True, exist_ok=True)
    fd = os.open(home / "floor.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        t0 = time.perf_counter()
        for _ in range(events):
            os.write(fd, line)
        return time.perf_counter() - t0
    finally:
        os.close(fd)


def stages(home: Path, sample: int) -> dict[str, float]:
    """CPU microseconds per event of each stage of ``append``, measured one stage at a time.

    CPU time, not wall time: on a shared machine it is the steadier of the two. Results are
    dropped as they come (as ``append`` does), so no stage pays for keeping objects alive.
    """
    items = [rating(i) for i in range(sample)]
    event = validate_object(items[0])
    out: dict[str, float] = {}

    def timed(name, fn):
        t0 = time.process_time()
        fn()
        out[name] = (time.process_time() - t0) / sample * 1e6

    def validate():
        for d in items:
            validate_object(d)

    def ids():
        for _ in items:
            new_id()

    def render():
        for d in items:
            encode_line(with_head(d, event, id="01J00000000000000000000000", at="2026-01-01T00:00:00Z"))

    timed("validate (pydantic)", validate)
    timed("id (ULID)", ids)
    timed("render (to_json + checks)", render)
    timed("os.write", lambda: bare_writes(home, sample))
    timed("whole append", lambda: append(home, items, fsync="batch"))
    out["loop, lock, fsync (rest)"] = out["whole append"] - sum(v for k, v in out.items() if k != "whole append")
    return out


def median_wall(cmd: list[str], runs: int, env: dict | None = None) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def cli_startup(home: Path, runs: int) -> dict:
    import json

    ratings = shutil.which("ratings", path=str(Path(sys.executable).parent)) or "ratings"
    event = json.dumps(rating(0))
    median_wall([sys.executable, "-c", "pass"], 2)  # warm the page cache
    base = median_wall([sys.executable, "-c", "pass"], runs)
    one = median_wall([ratings, "append", "--home", str(home), event], runs)
    return {"python_c_pass_s": base, "cli_append_s": one, "ratio": one / base}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=10_000, help="Events per append call (one fsync each).")
    parser.add_argument("--sample", type=int, default=50_000, help="Events in the per-stage profile.")
    parser.add_argument("--cli-runs", type=int, default=10)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="bench-append-"))
    try:
        rate = in_process(root / "home", args.events, args.batch)
        floor = bare_writes(root, args.events)
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"machine: {os.cpu_count()} CPUs, load average {load} (wall figures suffer when it exceeds the CPUs)")
        print(f"in-process append, {args.events:,} task.rated dicts, batches of {args.batch:,}, fsync=batch")
        print(f"  {rate['events_per_s']:>12,.0f} events/s wall   ({rate['wall_s']:.2f} s)")
        print(f"  {rate['cpu_events_per_s']:>12,.0f} events/s CPU    ({rate['cpu_s']:.2f} s)")
        print(f"  {args.events / floor:>12,.0f} bare os.write/s (floor; append is {rate['wall_s'] / floor:.1f}x it)")
        print(f"  target >= 100,000 events/s: {'met' if rate['events_per_s'] >= 100_000 else 'NOT met'}")
        parts = stages(root / "profile", args.sample)
        whole = parts["whole append"]
        print(f"where the time goes (CPU us/event, sample of {args.sample:,}):")
        for name, us in parts.items():
            share = "" if name == "whole append" else f"  {us / whole:6.1%}"
            print(f"  {name:<28}{us:7.2f}{share}")
        cli = cli_startup(root / "cli", args.cli_runs)
        print(f"one CLI append vs `python -c pass` (median of {args.cli_runs}):")
        print(f"  python -c pass {cli['python_c_pass_s'] * 1000:7.1f} ms")
        print(
            f"  ratings append {cli['cli_append_s'] * 1000:7.1f} ms   ratio {cli['ratio']:.1f}x "
            f"(target <= 15x: {'met' if cli['ratio'] <= 15 else 'NOT met'})"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
