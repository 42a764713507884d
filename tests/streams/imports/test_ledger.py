"""The ledger (pipeline/streams/imports/ledger.py): a merge of runs, range of keys by range of keys in bounded
memory, writes the bytes a merge of the whole runs in memory wrote (``np.save`` of the stably sorted records, less
the dropped ones)."""

from __future__ import annotations

import io

import numpy as np
import pytest

from pipeline.streams.imports import ledger
from pipeline.workspace import Workspace


@pytest.mark.parametrize("seed", range(12))
def test_a_merge_by_ranges_writes_the_bytes_of_a_whole_merge(tmp_path, monkeypatch, seed):
    monkeypatch.setattr(ledger, "MERGE_ROWS", 50)  # many ranges and reads of each run, keys repeated across runs
    rng = np.random.default_rng(seed)
    ws = Workspace.of(tmp_path / "home")
    ws.imports.mkdir(parents=True)
    led = ledger.Ledger(ws, "imp", writable=True)
    pool = rng.integers(0, 2**64, 40, dtype=np.uint64)
    for _ in range(int(rng.integers(1, 6))):
        n = int(rng.integers(1, 300))
        ids = np.array([b"%024d" % rng.integers(0, 10**6) for _ in range(n)], dtype="S24")
        kinds = rng.integers(1, 7, n).astype(np.uint8)
        keys = pool[rng.integers(0, len(pool), n)]  # 64-bit hashes, as ledger keys are, each several times
        led.append(keys, ids, rng.integers(0, 5, n).astype(np.uint64), kinds)
    whole = np.concatenate([ledger.Ledger._load(p) for p in led.paths()])
    gone = {(int(whole["key"][i]), bytes(whole["id"][i])) for i in rng.integers(0, max(len(whole), 1), 5)}
    kept = whole[[(int(r["key"]), bytes(r["id"])) not in gone for r in whole]]
    expected = io.BytesIO()
    np.save(expected, kept[np.argsort(kept["key"], kind="stable")], allow_pickle=False)
    led._merge(led.paths(), gone)
    [path] = led.paths()
    assert path.read_bytes() == expected.getvalue()
