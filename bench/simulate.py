"""Simulator throughput on the ``scale`` preset, against two baselines measured in the same run.

Run: ``.venv/bin/python -m bench.simulate [--events N] [--sample S]``.

1. ``simulate``: the ``scale`` preset with enough tasks for about N ratings (default 1,000,000), streamed to
   disk in chunks (temp files, fsync, rename) with truth.json. Reported: events/s (all event types) of wall
   and of CPU time, ratings, bytes, peak memory (max RSS). Target: >= 100,000 events/s.
2. Baseline ``pydantic``: the per-event path the fast writer replaces, on S generated lines: validate each
   event with the v1 models and write it with ``to_json_line`` (events/s, and the ratio of the simulator's rate).
3. Baseline ``raw write``: the same bytes written with one ``write`` per MB chunk and an fsync (the disk floor),
   as the share of that rate the simulator reaches.
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

from pipeline.simulate import preset, simulate
from pipeline.streams.events import parse_line, to_json_line

#: Ratings per task of the backlog scenario (task.rated only), measured: about 3.47.
RATINGS_PER_TASK = 3.45


def pydantic_rate(lines: list[bytes]) -> float:
    """Events/s of validating each line into a v1 model and serialising it with ``to_json_line``."""
    events = [parse_line(line) for line in lines[:100]]  # warm the lazily built models
    began = time.perf_counter()
    out = bytearray()
    for line in lines:
        out += to_json_line(parse_line(line))
    seconds = time.perf_counter() - began
    assert len(events) and len(out) > 0
    return len(lines) / seconds


def raw_rate(paths: list[Path], events: int, scratch: Path) -> float:
    """Events/s of copying the simulator's bytes with 1 MiB writes and one fsync (the disk floor)."""
    began = time.perf_counter()
    with open(scratch, "wb") as out:
        for path in paths:
            with open(path, "rb") as src:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
        out.flush()
        os.fsync(out.fileno())
    return events / (time.perf_counter() - began)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="target number of ratings (task.rated)")
    parser.add_argument("--sample", type=int, default=50_000, help="lines for the pydantic baseline")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    root = Path(tempfile.mkdtemp(prefix="bench-simulate-"))
    try:
        tasks = max(1, int(args.events / RATINGS_PER_TASK))
        cpu0 = time.process_time()
        result = simulate(root / "home", preset("scale", tasks), seed=args.seed)
        cpu = time.process_time() - cpu0
        events = sum(result.events.values())
        rate = events / result.seconds
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"simulate scale: {tasks:,} tasks, {events:,} events ({result.events['task.rated']:,} ratings), "
            f"{sum(result.bytes.values()) / 1e6:,.0f} MB in {result.seconds:.2f} s"
        )
        print(
            f"  {rate:,.0f} events/s of wall time (target >= 100,000: {'met' if rate >= 100_000 else 'NOT met'}), "
            f"{events / cpu:,.0f} events/s of CPU time (the machine may be shared), peak RSS {peak_mb:,.0f} MB"
        )

        streams = [root / "home" / "streams" / f"{s}.jsonl" for s in ("tasks", "ratings")]
        sample: list[bytes] = []
        for path in streams:
            with open(path, "rb") as handle:
                sample.extend(itertools.islice(handle, args.sample // 2))
        base = pydantic_rate(sample)
        print(
            f"baseline pydantic validate + to_json_line: {base:,.0f} events/s on {len(sample):,} lines; "
            f"simulator / pydantic = {rate / base:.1f}x"
        )
        floor = raw_rate(streams, events, root / "copy.jsonl")
        print(
            f"baseline raw write of the same bytes: {floor:,.0f} events/s; simulator reaches {rate / floor:.1%} of it"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
