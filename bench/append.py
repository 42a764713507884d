"""Batch append throughput, four ways, against the bare ``os.write`` floor measured in the same run.

Run: ``.venv/bin/python -m bench.append [--events N] [--batch B] [--sample S] [--cli-runs R]``.

1. N ``task.rated`` events with ``fsync=batch``, each way:
   - in-process, dicts as a dispatcher passes them (batches of B), without and with their own ``id``, ``at``, ``v``;
   - ``ratings append`` reading the N lines from stdin (one batch), without and with their own ``id``, ``at``, ``v``.
   Events/s of wall time and of CPU time (the machine may be shared: CPU time is the steadier figure), and how many
   times the floor's wall time each takes: N bare ``os.write`` calls of a finished line (one syscall per event, the
   cost of the simplest possible writer). Target: >= 100,000 events/s; moonshot 150,000.
2. The same events through the per-line path alone (``pipeline.streams.events`` models, one call per event): the
   baseline the batch validator replaces, in the same run.
3. Where the time goes, per event on a sample of raw lines with their own ids: the fast validator, the rest of the
   validation and rendering, and the write of the framed batch.
4. One ``ratings append EVENT`` in a fresh process against ``python -c pass`` (median of R runs). Target: <= 15x.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pipeline.streams import batch, framing
from pipeline.streams.log import append, prepare
from pipeline.workspace import Workspace

CONFIGS = [
    {"cli": "claude-code", "route": "anthropic", "model": m, "effort": e}
    for m in ("opus", "sonnet", "haiku")
    for e in ("high", None)
]
TARGET, MOONSHOT = 100_000, 150_000


def rating(i: int, own: bool) -> dict:
    """A rating as a dispatcher sends it: with ``own``, its own ULID-like id, a time with microseconds and ``v``."""
    event = {
        "type": "task.rated",
        "task": f"T-{i // 3}",
        "config": CONFIGS[i % len(CONFIGS)],
        "rater": {"kind": "gate", "name": "pytest"},
        "score": (i % 5) / 4,
    }
    if not own:
        return event
    at = f"2026-01-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:{(i // 60) % 60:02d}.{1 + i % 999_999:06d}Z"
    return {"id": f"01J{i:023d}", **event, "at": at, "v": 1}


def lines_of(events: int, own: bool) -> bytes:
    return b"".join(json.dumps(rating(i, own), separators=(",", ":")).encode() + b"\n" for i in range(events))


def in_process(home: Path, events: int, size: int, own: bool) -> dict:
    wall = cpu = 0.0
    for start in range(0, events, size):
        items = [rating(i, own) for i in range(start, min(events, start + size))]
        w0, c0 = time.perf_counter(), time.process_time()
        append(home, items, fsync="batch")
        wall += time.perf_counter() - w0
        cpu += time.process_time() - c0
    return {"wall_s": wall, "cpu_s": cpu}


def through_cli(home: Path, data: bytes) -> dict:
    """One ``ratings append`` reading ``data`` from stdin: wall time and the child's CPU time."""
    ratings = shutil.which("ratings", path=str(Path(sys.executable).parent)) or "ratings"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.perf_counter()
    subprocess.run([ratings, "append", "--home", str(home)], input=data, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - w0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu}


def bare_writes(home: Path, events: int) -> float:
    """Seconds for ``events`` bare ``os.write`` calls of a finished line (the syscall floor)."""
    line = prepare([rating(0, True)]).lines["ratings"][0]
    home.mkdir(parents=True, exist_ok=True)
    fd = os.open(home / "floor.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        t0 = time.perf_counter()
        for _ in range(events):
            os.write(fd, line)
        return time.perf_counter() - t0
    finally:
        os.close(fd)


def per_line_path(events: int, own: bool) -> float:
    """CPU seconds of validating and rendering ``events`` raw lines one by one (the per-line path)."""
    items = lines_of(events, own).splitlines()
    c0 = time.process_time()
    batch.render(items, fast_from=len(items) + 1)
    return time.process_time() - c0


def stages(home: Path, sample: int) -> dict[str, float]:
    """CPU microseconds per event of each stage of a batch append of raw lines with their own ids."""
    items = lines_of(sample, True).splitlines()
    out: dict[str, float] = {}

    def timed(name, fn):
        c0 = time.process_time()
        result = fn()
        out[name] = (time.process_time() - c0) / sample * 1e6
        return result

    validator = batch.fast_validator()
    chunks = [b"[" + b",".join(items[i : i + 4096]) + b"]" for i in range(0, sample, 4096)]
    with batch.collector_paused():  # as prepare runs it
        timed("fast validator (pydantic-core)", lambda: [validator.validate_json(chunk) for chunk in chunks])
    prepared = timed("whole validation + rendering", lambda: prepare(items))
    out["  of which the rest"] = out["whole validation + rendering"] - out["fast validator (pydantic-core)"]
    home_ = Workspace.of(home)

    def write():
        with framing.hold(home_, ["ratings"]) as held:
            framing.recover_all(home_, held)
            framing.write_batch(held, prepared.lines, "batch")

    timed("framed write + fsync", write)
    return out


def median_wall(cmd: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def cli_startup(home: Path, runs: int) -> dict:
    ratings = shutil.which("ratings", path=str(Path(sys.executable).parent)) or "ratings"
    event = json.dumps(rating(0, False))
    median_wall([sys.executable, "-c", "pass"], 2)  # warm the page cache
    base = median_wall([sys.executable, "-c", "pass"], runs)
    one = median_wall([ratings, "append", "--home", str(home), event], runs)
    return {"python_c_pass_s": base, "cli_append_s": one, "ratio": one / base}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=10_000, help="Events per in-process append call.")
    parser.add_argument("--sample", type=int, default=50_000, help="Events in the per-stage profile.")
    parser.add_argument("--cli-runs", type=int, default=10)
    args = parser.parse_args(argv)
    n = args.events
    root = Path(tempfile.mkdtemp(prefix="bench-append-"))
    try:
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"machine: {os.cpu_count()} CPUs, load average {load} (wall figures suffer when it exceeds the CPUs)")
        runs = {}
        for own in (False, True):
            runs[("in-process dicts", own)] = in_process(root / f"dicts-{own}", n, args.batch, own)
            runs[("ratings append < stdin", own)] = through_cli(root / f"cli-{own}", lines_of(n, own))
        floor = bare_writes(root, n)
        print(f"append {n:,} task.rated events, fsync=batch; floor: {n / floor:,.0f} bare os.write/s ({floor:.2f} s)")
        print(f"  {'way':<24}{'own id/at/v':<13}{'events/s wall':>14}{'events/s CPU':>14}{'x floor':>9}  target")
        for (way, own), run in runs.items():
            rate = n / run["wall_s"]
            verdict = "moonshot met" if rate >= MOONSHOT else ("met" if rate >= TARGET else "NOT met")
            print(
                f"  {way:<24}{'yes' if own else 'no':<13}{rate:>14,.0f}{n / run['cpu_s']:>14,.0f}"
                f"{run['wall_s'] / floor:>8.1f}x  {verdict}"
            )
        size = min(n, 200_000)
        print(f"the per-line path alone (one model per event), CPU, {size:,} raw lines:")
        for own in (False, True):
            rate = size / per_line_path(size, own)
            label = "yes" if own else "no"
            print(f"  own id/at/v {label:<4} {rate:>10,.0f} events/s CPU (validation and rendering only)")
        parts = stages(root / "profile", args.sample)
        print(f"where the time goes (CPU us/event, raw lines with their own ids, sample of {args.sample:,}):")
        for name, us in parts.items():
            print(f"  {name:<34}{us:7.2f}")
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
