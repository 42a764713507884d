"""ULIDs: sorted by time, unique across threads and forks, also when taken in bulk."""

from __future__ import annotations

import itertools
import os
import re

from pipeline.streams import ulid
from pipeline.streams.ulid import new_id, new_ids

ULID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")


def test_new_ids_sort_by_time_and_are_unique():
    assert new_id(0).startswith("0" * 10) and new_id((1 << 48) - 1).startswith("7ZZZZZZZZZ")
    assert new_id(1_000) < new_id(2_000)
    ids = {new_id() for _ in range(10_000)}
    assert len(ids) == 10_000 and all(ULID.fullmatch(i) for i in ids)


def test_new_ids_are_unique_across_threads_and_forks(monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(ulid.time, "time", lambda: 1_700_000_000.0)  # one millisecond for every id

    with ThreadPoolExecutor(4) as pool:
        ids = [i for chunk in pool.map(lambda _: [new_id() for _ in range(5_000)], range(4)) for i in chunk]
    reader, writer = os.pipe()
    new_id()  # the parent's sequence is under way when it forks
    child = os.fork()
    if child == 0:
        os.write(writer, "".join(new_id() for _ in range(100)).encode())
        os._exit(0)
    ids += [new_id() for _ in range(100)]
    os.waitpid(child, 0)
    os.close(writer)
    with os.fdopen(reader, "rb") as handle:
        raw = handle.read().decode()
    ids += [raw[i : i + 26] for i in range(0, len(raw), 26)]
    assert len(ids) == len(set(ids)) == 20_200


def test_ids_in_bulk_continue_the_sequence_across_prefix_blocks(monkeypatch):
    monkeypatch.setattr(ulid.time, "time", lambda: 1_700_000_000.0)  # one millisecond: one monotonic sequence
    monkeypatch.setattr(ulid.os, "urandom", lambda n: (1 << 79).to_bytes(n, "big")[:-2] + b"\x03\xf0")
    ulid._ULIDS.reset()
    first = new_id()
    bulk = new_ids(3_000)  # crosses two 1024-id prefix blocks
    after = new_id()
    ids = [first, *bulk, after]
    assert ids == sorted(ids) and len(set(ids)) == len(ids) == 3_002
    assert all(ULID.fullmatch(i) for i in ids) and new_ids(0) == []
    # consecutive values: each id is the previous one plus one
    decoded = [sum(ulid._CROCKFORD.index(c) << (5 * (25 - k)) for k, c in enumerate(i)) for i in ids]
    assert [b - a for a, b in itertools.pairwise(decoded)] == [1] * 3_001
