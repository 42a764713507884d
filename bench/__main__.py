"""Every benchmark at a small default size, one after another: ``make bench`` (``python -m bench``).

    .venv/bin/python -m bench                      # all, small sizes (a few minutes on 2 cores)
    .venv/bin/python -m bench fit route            # only these
    .venv/bin/python -m bench --events 1000000     # the event-sized ones at this size

Each benchmark runs in its own process (``python -m bench.<name>``, so each one's peak memory is its own)
and prints its figures and its ratio against the baseline it measures in the same run. ``--events``
sets the size of the benchmarks measured in events (append, compact, fit, route, simulate); ladders
keeps its task count. The exit code is the number of benchmarks that failed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

#: name -> its arguments at the small default size ({events} is replaced by the event count).
SMALL: dict[str, list[str]] = {
    "append": ["--events", "{events}", "--sample", "20000", "--cli-runs", "3"],
    "compact": ["--events", "{events}", "--repeat", "1"],
    "fit": ["--events", "{events}"],
    "route": ["--decisions", "{events}"],
    "simulate": ["--events", "{events}", "--sample", "20000"],
    "ladders": ["--tasks", "3000"],
    "layout": ["--events", "{events}", "--repeat", "1"],  # the daily layout against files near the target size
    "verdicts": ["--seeds", "2", "--tasks", "600"],  # the study of the verdicts, 2 seeds a family (100: the study)
    "many_writers": ["--events", "25000"],  # 4 writers x 25,000 events into a local S3 server (the issue: 1M each)
    "null_study": ["--seeds", "5", "--nights", "10"],  # the gate on the null (the issue: 20 seeds, 20 nights)
    "backtest": ["--seeds", "1"],  # Terminal-Bench, one seed; RouterBench at 20 seeds: --table data/routerbench-...
    "imports": ["--rows", "{events}"],  # a long table and a mini-ork store of this many rows
    "spark": ["--events", "20000"],  # the aggregation on Spark against DuckDB (the issue: 1M: --events 1000000)
}
DEFAULT_EVENTS = 100_000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "names",
        nargs="*",
        choices=[[], *SMALL],
        metavar="NAME",
        help=f"benchmarks to run (default: all of {', '.join(SMALL)})",
    )
    parser.add_argument(
        "--events",
        type=int,
        default=DEFAULT_EVENTS,
        help=f"size of the event-sized benchmarks (default {DEFAULT_EVENTS:,})",
    )
    args = parser.parse_args(argv)
    failed = []
    for name in args.names or list(SMALL):
        command = [
            sys.executable,
            "-m",
            f"bench.{name}",
            *(a.replace("{events}", str(args.events)) for a in SMALL[name]),
        ]
        print(f"== bench.{name}: {' '.join(command[1:])}", flush=True)
        start = time.perf_counter()
        code = subprocess.run(command, check=False).returncode
        print(
            f"== bench.{name}: {'ok' if code == 0 else f'FAILED (exit {code})'} in "
            f"{time.perf_counter() - start:.1f}s\n",
            flush=True,
        )
        if code:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return len(failed)


if __name__ == "__main__":
    sys.exit(main())
