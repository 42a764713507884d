"""``simulate``: write a home's streams, its ``fits/shipped.json`` and the truth behind them.

Streams are generated chunk by chunk and written to temporary files beside the
targets, fsync'd and renamed at the end, so memory stays bounded by a chunk
and a failed run leaves no half-written stream.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
from pydantic import BaseModel

from ..errors import PipelineError
from ..streams.events import KNOWN
from ..utc import parse_timestamp, utc_timestamp
from ..workspace import StrPath, Workspace, fsync_dir, temp_beside
from . import corrupt as damage_mod
from .generate import Static, draw_chunk
from .lines import Fragments, assignment_rows, format_chunk, timestamps
from .scenario import Scenario
from .truth import build_truth, write_truth

#: Tasks per chunk: about 130k events, a few tens of MB of text at a time.
CHUNK_TASKS = 16384
#: Keys of the corruption generator's seed: the damage never changes the clean lines.
_CORRUPT_STREAM = 0xC0
MAX_CORRUPT = 0.25


class SimResult(BaseModel):
    """What a simulation wrote: counts per event type and rater kind, injected damage, where things are."""

    out: str
    truth_path: str
    scenario: str
    seed: int
    tasks: int
    events: dict[str, int]
    ratings_by_rater_kind: dict[str, int]
    corruption: dict[str, int]
    corruption_by_stream: dict[str, dict[str, int]]
    expected_compaction: dict[str, int]
    lines: dict[str, int]
    bytes: dict[str, int]
    seconds: float
    events_per_second: float

    def summary(self) -> dict[str, Any]:
        return self.model_dump()

    def rows(self) -> list[dict[str, Any]]:
        """One row per event type, then per rater kind and injected damage, for a table."""
        rows = [{"what": t, "count": n} for t, n in self.events.items()]
        rows += [{"what": f"task.rated by {k}", "count": n} for k, n in self.ratings_by_rater_kind.items()]
        rows += [{"what": f"injected {k}", "count": n} for k, n in self.corruption.items() if n]
        return rows


def _expected(counts: dict[str, int]) -> dict[str, int]:
    """What compaction must report for the injected damage (docs/design.md, Events; docs/design.md, Storage)."""
    return {
        "dead_letters": counts["torn"] + counts["conflicts"] + counts["invalid"],
        "duplicates": counts["duplicates"],
        "quarantined": counts["torn_tail"],
    }


def _task_id_format(seed: int, tasks: int) -> str:
    return f"T{seed}-{{:0{max(6, len(str(tasks)))}d}}"


def _start_seconds(start: str) -> int:
    """Epoch seconds of the scenario's start (a validated RFC 3339 time), sub-seconds dropped."""
    return int(parse_timestamp(utc_timestamp(start)).timestamp())


@dataclass
class _Written:
    """What the streams of one simulation hold so far: events per type and rater kind, lines, bytes, damage."""

    st: Static
    id_format: str
    events: dict[str, int]
    by_kind: dict[str, int]
    damage: damage_mod.Damage
    lines: dict[str, int]
    bytes: dict[str, int]
    last_line: dict[str, str]
    drift_at: str | None = None

    @classmethod
    def of(cls, scenario: Scenario, seed: int) -> _Written:
        streams = ("tasks", "ratings")
        return cls(
            st=Static.of(scenario, _start_seconds(scenario.start)),
            id_format=_task_id_format(seed, scenario.tasks),
            events=dict.fromkeys(KNOWN, 0),
            by_kind={"gate": 0, "reviewer": 0, "human": 0},
            damage=damage_mod.Damage(),
            lines=dict.fromkeys(streams, 0),
            bytes=dict.fromkeys(streams, 0),
            last_line=dict.fromkeys(streams, ""),
        )

    def counts(self) -> dict[str, Any]:
        """The counts the truth file records."""
        return {
            "events": self.events,
            "ratings_by_rater_kind": self.by_kind,
            "corruption": self.damage.counts,
            "corruption_by_stream": self.damage.by_stream,
            "expected_compaction": _expected(self.damage.counts),
            "lines": self.lines,
        }


def _create(ws: Workspace, path: Path) -> BinaryIO:
    """A new file of the home to write (truncated if it exists), never through a symbolic link."""
    return os.fdopen(ws.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb")


def _write_streams(
    ws: Workspace,
    scenario: Scenario,
    seed: int,
    corrupt: float,
    chunk_tasks: int,
    targets: dict[str, Path],
    rows_tmp: Path,
    w: _Written,
) -> None:
    """Generate the streams chunk by chunk into temporary files beside ``targets`` (the truth's assignment rows
    into ``rows_tmp``), fsync them and rename them into place; on any failure no target is touched."""
    st, fragments = w.st, Fragments.of(w.st, w.id_format)
    rng = np.random.Generator(np.random.PCG64(seed))
    crng = np.random.Generator(np.random.PCG64([seed, _CORRUPT_STREAM]))
    tmp = {name: temp_beside(path, "simulate") for name, path in targets.items()}
    try:
        # Every file opened is closed on the way out, whatever fails (an open, a write, an fsync).
        with ExitStack() as opened:
            files = {name: opened.enter_context(_create(ws, path)) for name, path in tmp.items()}
            rows = opened.enter_context(_create(ws, rows_tmp))
            for first in range(0, scenario.tasks, chunk_tasks):
                chunk = draw_chunk(st, rng, first, min(chunk_tasks, scenario.tasks - first))
                task_part, rating_part, kinds = format_chunk(chunk, fragments)
                rows.write(((",\n" if first else "") + ",\n".join(assignment_rows(chunk))).encode("utf-8"))
                if first <= st.drift_first < first + chunk.n and scenario.drift is not None:
                    w.drift_at = timestamps(chunk.open_s[st.drift_first - first : st.drift_first - first + 1])[0]
                for part in (task_part, rating_part):
                    for t, n in part.counts.items():
                        w.events[t] += n
                for k, n in kinds.items():
                    w.by_kind[k] += n
                for name, part in (("tasks", task_part), ("ratings", rating_part)):
                    _write_part(files[name], name, part.lines, corrupt, crng, w)
            if corrupt > 0:
                for name in targets:
                    if w.last_line[name]:
                        tail = damage_mod.torn_tail(w.last_line[name], float(crng.random())).encode("utf-8")
                        files[name].write(tail)
                        w.bytes[name] += len(tail)
                        w.damage.by_stream[name]["torn_tail"] += 1
            for f in files.values():
                f.flush()
                os.fsync(f.fileno())
    except BaseException:
        for path in tmp.values():
            path.unlink(missing_ok=True)
        raise
    for name, path in tmp.items():
        os.replace(path, targets[name])


def _write_part(
    handle: Any, name: str, lines: list[str], corrupt: float, crng: np.random.Generator, w: _Written
) -> None:
    """One stream's lines of a chunk, damaged as ``corrupt`` asks."""
    if lines:
        w.last_line[name] = lines[-1]
    if corrupt > 0:
        lines = damage_mod.inject(lines, corrupt, crng, w.damage.by_stream[name])
    data = "".join(lines).encode("utf-8", "surrogateescape")
    handle.write(data)
    w.lines[name] += len(lines)
    w.bytes[name] += len(data)


def simulate(
    out_dir: Workspace | StrPath,
    scenario: Scenario,
    *,
    seed: int = 0,
    corrupt: float = 0.0,
    truth_path: str | os.PathLike | None = None,
    overwrite: bool = False,
    chunk_tasks: int = CHUNK_TASKS,
) -> SimResult:
    """Generate ``scenario`` with ``seed`` into the home ``out_dir``.

    Writes ``streams/tasks.jsonl`` and ``streams/ratings.jsonl`` (valid v1 events,
    plus injected damage when ``corrupt`` > 0), ``fits/shipped.json`` (the logging
    policy's shipped constants and priors) and ``truth.json`` (``truth_path``,
    relative to ``out_dir``; never read by the fitter). Refuses to replace
    non-empty streams unless ``overwrite``.
    """
    if not 0.0 <= corrupt <= MAX_CORRUPT:
        raise PipelineError(f"--corrupt must be between 0 and {MAX_CORRUPT} (a rate per line), got {corrupt}")
    if chunk_tasks < 1:
        raise PipelineError("chunk_tasks must be at least 1")
    home = Workspace.of(out_dir)
    targets = {name: home.stream(name) for name in ("tasks", "ratings")}
    for path in targets.values():
        if path.exists() and path.stat().st_size > 0 and not overwrite:
            raise PipelineError(
                f"{path} exists and is not empty; simulate writes a fresh home (use --force to replace it)"
            )
    home.root.mkdir(parents=True, exist_ok=True)  # simulate may create its home (docs/design.md, A home)
    truth_file = home.confine(home.root / truth_path if truth_path is not None else home.truth)
    home.folder(home.streams)
    began = time.perf_counter()
    written = _Written.of(scenario, seed)
    rows_tmp = temp_beside(truth_file, "rows")
    try:
        _write_streams(home, scenario, seed, corrupt, chunk_tasks, targets, rows_tmp, written)
        fsync_dir(home.streams)
        truth = build_truth(
            scenario,
            written.st.policy,
            seed=seed,
            corrupt=corrupt,
            drift_first=written.st.drift_first if scenario.drift is not None else None,
            drift_at=written.drift_at,
            task_id_format=written.id_format,
        )
        truth["counts"] = written.counts()
        write_truth(truth_file, truth, rows_tmp)
    finally:
        rows_tmp.unlink(missing_ok=True)
    home.write(
        home.shipped,
        (json.dumps(scenario.policy.shipped_json(), indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode(
            "utf-8"
        ),
    )
    seconds = time.perf_counter() - began
    total = sum(written.events.values())
    return SimResult(
        out=str(home.root),
        truth_path=str(truth_file),
        scenario=scenario.name,
        seed=seed,
        tasks=scenario.tasks,
        events=written.events,
        ratings_by_rater_kind=written.by_kind,
        corruption=written.damage.counts,
        corruption_by_stream=written.damage.by_stream,
        expected_compaction=_expected(written.damage.counts),
        lines=written.lines,
        bytes=written.bytes,
        seconds=round(seconds, 3),
        events_per_second=round(total / seconds, 1) if seconds > 0 else 0.0,
    )
