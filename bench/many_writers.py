"""Many writers into one shared store on a local S3 server, and the fit on the result, against the same fit on a
local copy of the table, measured in one run.

    .venv/bin/python -m bench.many_writers                         # 4 writers x 25,000 events (make bench)
    .venv/bin/python -m bench.many_writers --events 1000000        # 4 writers x 1M events

Simulates one backlog (``scale`` preset) of about ``writers x events`` events and deals its tasks out to
``writers`` homes (every event of a task goes to one home, as one dispatcher host would have written it). Starts
moto's S3 server on 127.0.0.1 in its own process, then compacts all homes into ``s3://bench/store`` at once (one
``ratings compact --writer host-K`` process each) and reports events/s ingested (all events over the wall time
of the whole run) and each writer's time. Then runs ``fit-routing --no-compact`` on the bucket, copies the table
to a local directory and runs the same fit on it: the ratio is the cost of reading through S3.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

EVENTS_PER_TASK = 7.4  # the scale preset: an opened, about 2 attempts, 3.4 ratings, a route decision, a closure


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def deal(source: Path, homes: list[Path]) -> int:
    """Split ``source``'s streams by task over ``homes`` (a task's events stay together, in order); events dealt."""
    import zlib

    total = 0
    for stream in ("tasks", "ratings"):
        outs = []
        for home in homes:
            (home / "streams").mkdir(parents=True, exist_ok=True)
            outs.append(open(home / "streams" / f"{stream}.jsonl", "wb"))  # noqa: SIM115 - closed below
        try:
            with open(source / "streams" / f"{stream}.jsonl", "rb") as handle:
                for line in handle:
                    event = json.loads(line)
                    key = event.get("task") or event.get("rating") or event.get("id", "")
                    outs[zlib.crc32(key.encode()) % len(homes)].write(line)
                    total += 1
        finally:
            for out in outs:
                out.close()
    return total


def _time(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--events", type=int, default=25_000, help="events per writer (about)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    from pipeline.simulate import preset, simulate

    ratings_cli = [sys.executable, "-m", "pipeline.cli"]
    with tempfile.TemporaryDirectory(prefix="bench-many-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        tasks = max(20, int(args.writers * args.events / EVENTS_PER_TASK))
        simulate(root / "source", preset("scale", tasks=tasks), seed=args.seed)
        homes = [root / f"host-{k}" for k in range(args.writers)]
        events = deal(root / "source", homes)
        print(
            f"simulated {tasks:,} tasks, dealt {events:,} events to {args.writers} homes "
            f"in {time.perf_counter() - t0:.1f}s"
        )
        port = _free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            endpoint = f"http://127.0.0.1:{port}"
            for _ in range(200):
                try:
                    urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1)
                    break
                except OSError:
                    time.sleep(0.05)
            env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
            env.update(
                AWS_ENDPOINT_URL=endpoint,
                AWS_ALLOW_HTTP="true",
                AWS_ACCESS_KEY_ID="bench",
                AWS_SECRET_ACCESS_KEY="bench",
                AWS_REGION="us-east-1",
                AWS_METADATA_ENDPOINT=f"http://127.0.0.1:{_free_port()}",
            )
            import boto3  # type: ignore[import-untyped]  # moto's dependency (the test extra); no stubs

            s3 = boto3.client(
                "s3",
                endpoint_url=endpoint,
                region_name="us-east-1",
                aws_access_key_id="bench",
                aws_secret_access_key="bench",
            )
            s3.create_bucket(Bucket="bench")
            store = "s3://bench/store"
            start = time.perf_counter()
            children = [
                (
                    subprocess.Popen(
                        [
                            *ratings_cli,
                            "compact",
                            "-q",
                            "--json",
                            "--home",
                            str(h),
                            "--store",
                            store,
                            "--writer",
                            h.name,
                        ],
                        env=env,
                        stdout=subprocess.PIPE,
                        text=True,
                    ),
                    time.perf_counter(),
                )
                for h in homes
            ]
            ends = []
            stored = 0
            for child, _ in children:
                out, _ = child.communicate()
                ends.append(time.perf_counter())
                if child.returncode:
                    raise SystemExit(f"a compaction failed (exit {child.returncode})")
                stored += sum(s["stored"] for s in json.loads(out)["streams"].values())
            wall = time.perf_counter() - start
            per = ", ".join(f"{e - s:.1f}s" for (_, s), e in zip(children, ends, strict=True))
            print(
                f"{args.writers} writers compacting at once : {events / wall:12,.0f} events/s ingested "
                f"({wall:.1f}s wall; {stored:,} stored; each {per})"
            )
            fit = [*ratings_cli, "fit", "--no-compact", "--no-render", "--quiet", "--case-study", "bench"]
            on_bucket = _time([*fit, "--home", str(homes[0]), "--store", store], env)
            local_table = root / "local-store" / "events"
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket="bench", Prefix="store/events/"):
                for item in page.get("Contents", []):
                    target = local_table / item["Key"][len("store/events/") :]
                    target.parent.mkdir(parents=True, exist_ok=True)
                    s3.download_file("bench", item["Key"], str(target))
            shutil.copytree(homes[0], root / "fit-local")
            on_local = _time([*fit, "--home", str(root / "fit-local"), "--store", str(root / "local-store")], env)
            print(f"fit-routing on the bucket          : {on_bucket:.1f}s")
            print(f"fit-routing on a local copy        : {on_local:.1f}s  (bucket/local {on_bucket / on_local:.2f}x)")
        finally:
            server.kill()
            server.wait()


if __name__ == "__main__":
    main()
