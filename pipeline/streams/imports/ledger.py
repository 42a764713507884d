"""What earlier imports appended, per source record (docs/design.md, Imports, The ledger).

The ledger is how an import knows the id of an old rating it must retract, and which source records it already
appended: ``imports/ledger/<namespace>.<n>.npy`` in the home, sorted runs of fixed-width records, memory-mapped
when read (memory stays bounded whatever the ledger's size)::

    key      uint64    the source record's identity (blake2b-64 of its ledger key, e.g. a trace id)
    id       24 bytes  the digest that ends the event's id (<prefix>-<24 hex digits>), as its ASCII digits
    content  uint64    blake2b-64 of the event's line (what changed at the source, for events ids do not date)
    kind     uint8     the event's type (:data:`KINDS`)

A run is written (fsync'd) after the chunk it describes was appended, so a crash leaves the ledger behind the
streams, never ahead of them: the next import appends the missing events again with the same ids, and compaction
drops the repeats. An import's runs are merged into one at its end, and all runs when there are many.

Why a ledger of our own and not the store: the store may be elsewhere (``--store s3://...``) and lags the streams
until compaction, while an import must know at once what the import before it appended; and a fixed-width sorted
file is looked up vectorised (numpy ``searchsorted``), about a microsecond per record where SQLite's B-tree took
four (measured while choosing).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...workspace import Workspace, fsync_dir, temp_beside

if TYPE_CHECKING:
    import numpy as np

#: Event types as the ledger stores them.
KINDS = {
    "task.opened": 1,
    "task.attempted": 2,
    "task.rated": 3,
    "task.rejected": 4,
    "rating.retracted": 5,
    "task.closed": 6,
    "route.decided": 7,
}
RATED = KINDS["task.rated"]
MERGE_AT = 8  # runs of one namespace kept before they are merged into one (at the end of an import)
MERGE_ROWS = 1 << 16  # records merged at once (about 2.6 MiB, and their sort): a merge's memory, whatever the ledger's


def dtype() -> np.dtype:
    import numpy as np

    return np.dtype([("key", "<u8"), ("id", "S24"), ("content", "<u8"), ("kind", "u1")])


_BLAKE8 = hashlib.blake2b(digest_size=8)  # copied per use: faster than building one (the same digest)


def key64(key: str) -> int:
    """The 64-bit identity of a ledger key: blake2b-64 of its UTF-8, little-endian."""
    h = _BLAKE8.copy()
    h.update(key.encode("utf-8", "surrogatepass"))
    return int.from_bytes(h.digest(), "little")


def content64(line: bytes) -> int:
    h = _BLAKE8.copy()
    h.update(line)
    return int.from_bytes(h.digest(), "little")


def keys64(keys: Iterable[bytes]) -> np.ndarray:
    """:func:`key64` of many keys (their UTF-8 bytes) at once, as a uint64 array."""
    import numpy as np

    out = []
    for key in keys:
        h = _BLAKE8.copy()
        h.update(key)
        out.append(h.digest())
    return np.frombuffer(b"".join(out), dtype="<u8")


_RUN = re.compile(r"(?P<ns>[a-z0-9-]+)\.(?P<n>[0-9]{8})\.npy")


class Ledger:
    """The runs of one namespace (one source format) in one home; read-only when ``writable`` is False."""

    def __init__(self, ws: Workspace, namespace: str, *, writable: bool) -> None:
        self.ws, self.namespace, self.writable = ws, namespace, writable
        self.folder = ws.import_ledger
        self.runs: list[np.ndarray] = [self._load(p) for p in self.paths()]
        self.written: list[Path] = []

    def paths(self) -> list[Path]:
        """The namespace's run files in the home now, in order."""
        if not self.folder.is_dir():
            return []
        found = []
        for path in self.folder.iterdir():
            match = _RUN.fullmatch(path.name)
            if match and match["ns"] == self.namespace:
                found.append((int(match["n"]), path))
        return [path for _, path in sorted(found)]

    @staticmethod
    def _load(path: Path) -> np.ndarray:
        import numpy as np

        run = np.load(path, mmap_mode="r", allow_pickle=False)
        if run.dtype != dtype():
            raise ValueError(f"{path}: not a ledger run of this version (dtype {run.dtype})")
        return run

    @property
    def empty(self) -> bool:
        return not any(len(run) for run in self.runs)

    def ratings_of(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The (keys, id digits) of every earlier rating of these keys, vectorised (for the retractions)."""
        import numpy as np

        found = [run[np.isin(run["key"], keys) & (run["kind"] == RATED)] for run in self.runs if len(run)]
        both = np.concatenate(found) if found else np.empty(0, dtype=dtype())
        return both["key"], both["id"]

    def match(
        self, keys: np.ndarray, ids: np.ndarray, contents: np.ndarray, kinds: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        """Per event (columns): whether an earlier record has its key (``known``), is exactly it (same kind, id
        and content: ``same``), or has its key and kind (``kind``). Vectorised: a few array passes per run."""
        import numpy as np

        known = np.zeros(len(keys), dtype=bool)
        same = np.zeros(len(keys), dtype=bool)
        kind = np.zeros(len(keys), dtype=bool)
        for run in self.runs:
            if not len(run):
                continue
            low = np.searchsorted(run["key"], keys, side="left")
            count = np.searchsorted(run["key"], keys, side="right") - low
            known |= count > 0
            for j in range(int(count.max(initial=0))):
                rows = np.flatnonzero(count > j)
                record = run[low[rows] + j]
                of_kind = record["kind"] == kinds[rows]
                kind[rows] |= of_kind
                same[rows] |= of_kind & (record["id"] == ids[rows]) & (record["content"] == contents[rows])
        return known, same, kind

    def append(self, keys: Any, digits: Any, contents: Any, kinds: Any) -> None:
        """A run of these records (columns, lists or arrays; ``digits`` the closing 24 hex digits of the events'
        ids, as ASCII), sorted, written durably after their events were appended. Runs written by this import are
        not looked up by it (:attr:`runs` is what was before)."""
        if not self.writable or not len(keys):
            return
        import numpy as np

        run = np.empty(len(keys), dtype=dtype())
        run["key"] = np.array(keys, dtype=np.uint64)
        run["id"] = np.asarray(digits, dtype="S24")
        run["content"] = np.array(contents, dtype=np.uint64)
        run["kind"] = np.array(kinds, dtype=np.uint8)
        run = run[np.argsort(run["key"], kind="stable")]  # a structured sort by one field is several times slower
        self.written.append(self._write(iter([run]), len(run)))

    def finish(self, dropped: Iterable[tuple[int, bytes]] = ()) -> None:
        """At the end of an import: its runs merged into one; every run merged when there are more than
        :data:`MERGE_AT` or when ratings were retracted (``dropped``: their records are forgotten)."""
        if not self.writable:
            return
        gone = set(dropped)
        if len(self.written) > 1:
            self._merge(self.written, None)
        if gone or len(self.paths()) > MERGE_AT:
            self._merge(self.paths(), gone)

    def _merge(self, paths: list[Path], gone: set[tuple[int, bytes]] | None) -> None:
        """The runs of ``paths`` merged into one run (stably sorted by key: equal keys in the order of the runs),
        without the records of ``gone``; written range of keys by range of keys, so memory stays bounded by
        :data:`MERGE_ROWS` records whatever the ledger's size."""
        import numpy as np

        loaded = [(path, run) for path, run in ((p, self._load(p)) for p in paths) if len(run)]
        runs = [run for _, run in loaded]
        drop = [self._dropped(run, gone) for run in runs] if gone else [None] * len(runs)
        total = sum(len(run) for run in runs) - sum(len(d) for d in drop if d is not None)
        bounds = self._bounds(runs)
        block = max(MERGE_ROWS // max(len(runs), 1), 256)  # records read from a run at a time
        # Each run is read forward from its file (not from the mapping: pages once mapped stay resident, and count
        # as ours): per run, the records read and not yet merged, and where they start.
        held = [np.empty(0, dtype=dtype()) for _ in loaded]
        starts = [0] * len(loaded)

        def upto(i: int, high: Any) -> np.ndarray:
            """Run ``i``'s next records with keys below ``high`` (None: all), less its dropped ones."""
            path, run = loaded[i]
            taken = []
            while True:
                records, start = held[i], starts[i]
                cut = len(records) if high is None else int(np.searchsorted(records["key"], high, side="left"))
                taken.append((records[:cut], start))
                held[i], starts[i] = records[cut:], start + cut
                done = start + len(records)
                if cut < len(records) or done >= len(run):
                    break
                offset = run.offset + done * dtype().itemsize  # type: ignore[attr-defined]  # a memmap (_load)
                held[i] = np.fromfile(path, dtype=dtype(), count=min(block, len(run) - done), offset=offset)
            dropped = drop[i]
            parts = [
                np.delete(part, dropped[(dropped >= first) & (dropped < first + len(part))] - first)
                if dropped is not None and len(dropped)
                else part
                for part, first in taken
            ]
            return np.concatenate(parts)

        def ranges() -> Iterator[np.ndarray]:
            for high in bounds[1:]:
                merged = np.concatenate([upto(i, high) for i in range(len(loaded))] or [np.empty(0, dtype=dtype())])
                yield merged[np.argsort(merged["key"], kind="stable")]

        merged_path = self._write(ranges(), total)
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        fsync_dir(self.folder)
        self.written = [merged_path]

    @staticmethod
    def _dropped(run: np.ndarray, gone: set[tuple[int, bytes]]) -> np.ndarray:
        """The positions in ``run`` of the records of ``gone`` (key and id)."""
        import numpy as np

        keys = np.fromiter((k for k, _ in gone), np.uint64, len(gone))
        suspects = np.flatnonzero(np.isin(run["key"], keys))
        return np.array([i for i in suspects if (int(run["key"][i]), bytes(run["id"][i])) in gone], dtype=np.int64)

    @staticmethod
    def _bounds(runs: list[np.ndarray]) -> list[Any]:
        """Keys that cut the runs into ranges of about :data:`MERGE_ROWS` records (None: the end), first ``0``:
        keys are 64-bit hashes, spread evenly, so even cuts of the key space (no key need be read for them)."""
        import numpy as np

        ranges = -(-sum(len(run) for run in runs) // MERGE_ROWS)
        return [np.uint64(0), *(np.uint64((i << 64) // ranges) for i in range(1, ranges)), None]

    def _write(self, parts: Iterator[np.ndarray], total: int) -> Path:
        """A new run file of ``total`` records, written from ``parts`` (the bytes ``np.save`` writes)."""
        import numpy as np

        self.ws.folder(self.folder)
        paths = self.paths()
        n = int(_RUN.fullmatch(paths[-1].name)["n"]) + 1 if paths else 0  # type: ignore[index]
        path = self.ws.ledger_run(self.namespace, n)
        tmp = temp_beside(path)
        fd = self.ws.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            with os.fdopen(fd, "wb", closefd=False) as handle:
                header = {"descr": np.lib.format.dtype_to_descr(dtype()), "fortran_order": False, "shape": (total,)}
                np.lib.format.write_array_header_1_0(handle, header)
                written = 0
                for part in parts:
                    handle.write(np.ascontiguousarray(part).tobytes())
                    written += len(part)
                if written != total:
                    raise AssertionError(f"ledger run: {written} records written, {total} announced")
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        fsync_dir(self.folder)
        return path
