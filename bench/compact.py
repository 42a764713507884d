"""Compaction throughput and memory against DuckDB's JSON -> Parquet copy and the previous compactor, in one run.

    .venv/bin/python -m bench.compact                        # 1M rating events (with their tasks and attempts)
    .venv/bin/python -m bench.compact --events 5000000
    .venv/bin/python -m bench.compact --baseline-rev none    # without the previous compactor

Writes N ``task.rated`` lines and, for every 4 of them, one ``task.opened`` and two ``task.attempted`` lines
(canonical form as ``append`` writes them; 0.1% of the ratings are exact repeats, a retried append) into a
temp home, then times, each in its own child process (so each peak RSS is its own):

- duckdb: ``COPY (SELECT * FROM read_json(stream)) TO ... (FORMAT parquet)`` of both streams;
- previous: the compactor of ``--baseline-rev`` (Parquet files and manifests), taken from this repository
  with ``git archive`` into a temp directory (default: the last revision before the Delta store);
- ours: ``pipeline.compact.compact`` (validation, dedup against the table, one Delta commit);
- ours on the same events as a dispatcher's own ``json.dumps`` writes them (``", "`` and ``": "`` separators, the
  keys of every object in reverse order, unicode escaped), in a second home: the ratio to the canonical lines
  (target <= 1.2x) says whether every writer's lines take the vectorised path.

Times exclude interpreter start and imports; each runs ``--repeat`` times, interleaved, best kept. Prints
events/s of each, the ratios ours/previous (target >= 1.5x), ours/duckdb and json.dumps/canonical, and each peak RSS
(target < 1.5 GB at 1M events).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASELINE_REV = "d8a58b3"  # the manifest store, before the Delta table
_MODELS = [
    ("claude-code", "anthropic", "opus", "high"),
    ("claude-code", "anthropic", "sonnet", None),
    ("codex", "openai", "gpt-5", "medium"),
    ("qwen-code", None, "480B/A35B", None),
]


def _config(cli: str, route: str | None, model: str, effort: str | None) -> str:
    return json.dumps({"cli": cli, "route": route, "model": model, "effort": effort}, separators=(",", ":"))


def _at(i: int, second: int) -> str:
    return f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:{second:02d}Z"


def write_streams(home: Path, ratings: int) -> int:
    """The two streams of a backlog with ``ratings`` ratings (4 per task, 2 attempts per task); events written."""
    configs = [_config(*m) for m in _MODELS]
    (home / "streams").mkdir(parents=True, exist_ok=True)
    written = 0
    with open(home / "streams" / "tasks.jsonl", "wb") as handle:
        batch: list[str] = []
        for t in range(ratings // 4):
            batch.append(
                f'{{"id":"01KT{t:022d}","type":"task.opened","at":"{_at(t, 0)}","v":1,"task":"T-{t}",'
                f'"region":"région-{t % 7}"}}'
            )
            for a in range(2):
                batch.append(
                    f'{{"id":"01KA{2 * t + a:022d}","type":"task.attempted","at":"{_at(t, 1 + a)}","v":1,'
                    f'"task":"T-{t}","config":{configs[(t + a) % 4]},"status":"success","cost_usd":{(t % 13) / 10}}}'
                )
            if len(batch) >= 100_000:
                handle.write(("\n".join(batch) + "\n").encode())
                written += len(batch)
                batch = []
        if batch:
            handle.write(("\n".join(batch) + "\n").encode())
            written += len(batch)
    with open(home / "streams" / "ratings.jsonl", "wb") as handle:
        batch = []
        previous = ""
        for i in range(ratings):
            if i % 1000 == 999:
                line = previous
            else:
                t = i // 4
                line = (
                    f'{{"id":"01KR{i:022d}","type":"task.rated","at":"{_at(t, 10 + i % 4)}","v":1,"task":"T-{t}",'
                    f'"config":{configs[(t + i % 2) % 4]},"rater":{{"kind":"gate","name":"pytest"}},'
                    f'"score":{(i % 11) / 10}}}'
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


def _reversed(value):
    """A JSON value with the keys of every object (nested ones too) in reverse order."""
    if isinstance(value, dict):
        return {k: _reversed(v) for k, v in reversed(value.items())}
    return value


def write_as_dumps(home: Path, other: Path) -> None:
    """The streams of ``home`` rewritten into ``other`` as ``json.dumps`` writes them (same events, other bytes)."""
    (other / "streams").mkdir(parents=True, exist_ok=True)
    for stream in ("tasks", "ratings"):
        with open(home / "streams" / f"{stream}.jsonl", "rb") as source:
            lines = [json.dumps(_reversed(json.loads(line))) for line in source]
        (other / "streams" / f"{stream}.jsonl").write_text("\n".join(lines) + "\n", encoding="ascii")


def _reset(home: Path) -> None:
    for name in ("store", "deadletter", "duckdb"):
        shutil.rmtree(home / name, ignore_errors=True)


def _phase(phase: str, home: Path) -> None:
    """One measured step, run in a child process; prints its seconds (imports excluded) and outcome."""
    _reset(home)
    if phase == "duckdb":
        import duckdb

        con = duckdb.connect(":memory:")
        (home / "duckdb").mkdir()
        start = time.perf_counter()
        for stream in ("tasks", "ratings"):
            con.execute(
                f"COPY (SELECT * FROM read_json('{home / 'streams' / f'{stream}.jsonl'}', "
                f"format = 'newline_delimited')) TO '{home / 'duckdb' / f'{stream}.parquet'}' (FORMAT parquet)"
            )
        print(json.dumps({"seconds": time.perf_counter() - start}))
        return
    from pipeline.compact import compact  # ours, or the previous compactor (PYTHONPATH set by the parent)

    start = time.perf_counter()
    result = compact(home)
    seconds = time.perf_counter() - start
    streams = result.summary()["streams"]
    stored = sum(s["stored"] for s in streams.values())
    print(json.dumps({"seconds": seconds, "stored": stored, "duplicate": streams["ratings"]["duplicate"]}))


def _run(phase: str, home: Path, pythonpath: str | None) -> tuple[float, int, dict]:
    """(seconds, peak RSS bytes, outcome with the child's CPU seconds) of one phase in a child process."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    bench_dir = Path(__file__).resolve().parent
    child = subprocess.Popen(
        [sys.executable, str(bench_dir / "compact.py"), "--phase", phase, "--home", str(home)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=pythonpath or str(bench_dir.parent),
    )
    assert child.stdout is not None
    out = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"phase {phase} failed with exit code {os.waitstatus_to_exitcode(status)}")
    outcome = json.loads(out)
    outcome["cpu"] = round(usage.ru_utime + usage.ru_stime, 2)  # the whole child: interpreter and imports too
    return outcome.pop("seconds"), usage.ru_maxrss * 1024, outcome


def _checkout(rev: str, target: Path) -> Path:
    """The ``pipeline`` package of revision ``rev`` of this repository, unpacked under ``target``."""
    repo = Path(__file__).resolve().parents[1]
    target.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(repo), "archive", rev, "pipeline"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="Rating events (tasks and attempts added).")
    parser.add_argument("--repeat", type=int, default=2, help="Runs of each, interleaved; the best counts.")
    parser.add_argument(
        "--baseline-rev", default=BASELINE_REV, help="Revision of the previous compactor ('none' to skip)."
    )
    parser.add_argument("--phase", choices=["duckdb", "compact"], help=argparse.SUPPRESS)
    parser.add_argument("--home", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        _phase(args.phase, args.home)
        return
    with tempfile.TemporaryDirectory(prefix="bench-compact-") as tmp:
        home, dumps = Path(tmp) / "home", Path(tmp) / "dumps"
        t0 = time.perf_counter()
        n = write_streams(home, args.events)
        write_as_dumps(home, dumps)
        for where in (home, dumps):
            size = sum((where / "streams" / f"{s}.jsonl").stat().st_size for s in ("tasks", "ratings"))
            print(f"generated {n:,} events ({args.events:,} ratings, {size / 1e6:.0f} MB) in {where.name}/")
        print(f"written in {time.perf_counter() - t0:.1f}s")
        phases: dict[str, tuple[str, Path, str | None]] = {
            "duckdb": ("duckdb", home, None),
            "ours": ("compact", home, None),
            "dumps": ("compact", dumps, None),
        }
        if args.baseline_rev != "none":
            previous = _checkout(args.baseline_rev, Path(tmp) / "previous")
            phases["previous"] = ("compact", home, str(previous))
        runs: dict[str, list[tuple[float, int, dict]]] = {name: [] for name in phases}
        for _ in range(args.repeat):  # interleaved, best of each: a shared machine's noise hits all alike
            for name, (phase, where, path) in phases.items():
                runs[name].append(_run(phase, where, path))
        best = {name: min(r, key=lambda x: x[0]) for name, r in runs.items()}
        if best["dumps"][2]["stored"] != best["ours"][2]["stored"]:
            raise SystemExit(f"the json.dumps lines stored {best['dumps'][2]} against {best['ours'][2]}")
        labels = {"duckdb": "duckdb COPY read_json -> parquet", "previous": f"previous compactor ({args.baseline_rev})"}
        labels["ours"] = "ratings compact (Delta table)"
        labels["dumps"] = "ratings compact, json.dumps lines"
        for name, (seconds, rss, outcome) in best.items():
            extra = f"  {json.dumps(outcome)}" if outcome else ""
            print(
                f"{labels[name]:<34}: {n / seconds:12,.0f} events/s  ({seconds:.2f}s, peak RSS "
                f"{rss / 2**20:,.0f} MiB){extra}"
            )
        ours = best["ours"][0]
        if "previous" in best:
            print(f"throughput ratio ours/previous  : {best['previous'][0] / ours:.2f}x (target >= 1.5x)")
            cpu = {name: min(r[2]["cpu"] for r in runs[name]) for name in ("ours", "previous")}
            print(f"cpu ratio previous/ours         : {cpu['previous'] / cpu['ours']:.2f}x (least CPU seconds of each)")
        print(f"throughput ratio ours/duckdb    : {best['duckdb'][0] / ours:.2f}x")
        cpu_of = {name: min(r[2]["cpu"] for r in runs[name]) for name in ("ours", "dumps")}
        print(f"time json.dumps/canonical lines : {best['dumps'][0] / ours:.2f}x (target <= 1.2x)")
        print(f"cpu json.dumps/canonical lines  : {cpu_of['dumps'] / cpu_of['ours']:.2f}x (least CPU seconds of each)")


if __name__ == "__main__":
    main()
