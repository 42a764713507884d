"""Events as columns: what a source's bulk lane gives and what the run compares, spools and appends
(docs/design.md, Imports). One event is its line (UTF-8 JSON with its newline), its id, its ledger identity
(``key``), the digest that tells a changed record (``content``, 0 where the id tells) and its ledger kind
(pipeline/streams/imports/ledger.py, KINDS). Kept as columns, a chunk of events costs a few list and array
operations instead of a Python tuple per event (the run's share of an import's time was a third).
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..events import stream_of
from .ledger import KINDS

if TYPE_CHECKING:
    import numpy as np

_STREAMS = {kind: stream_of(name) for name, kind in KINDS.items()}
_RATINGS = sorted(kind for kind, stream in _STREAMS.items() if stream == "ratings")


def _arrays(keys: Any, contents: Any, kinds: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    import numpy as np

    return (
        np.asarray(keys, dtype=np.uint64),
        np.asarray(contents, dtype=np.uint64),
        np.asarray(kinds, dtype=np.uint8),
    )


def pick(values: Sequence[Any], order: Any) -> list[Any]:
    """``[values[i] for i in order]``, in C (``order``: integers; none is fine)."""
    if len(order) == 0:
        return []
    if len(order) == 1:
        return [values[int(order[0])]]
    return list(operator.itemgetter(*order.tolist() if hasattr(order, "tolist") else order)(values))


def insertion(n: int, positions: Sequence[int]) -> np.ndarray:
    """The order that puts ``len(positions)`` new items (numbered ``n, n+1, ...``) each before item ``positions[i]``
    of ``n`` items (at the end for ``n``); equal positions keep their order."""
    import numpy as np

    at = np.asarray(positions, dtype=np.int64)
    order = np.argsort(at, kind="stable")
    slots = at[order] + np.arange(len(at))  # where each new item lands
    placed = np.zeros(n + len(at), dtype=bool)
    placed[slots] = True
    source = np.empty(len(placed), dtype=np.int64)
    source[~placed] = np.arange(n)
    source[slots] = n + order
    return source


class Block:
    """Events as columns: ``lines`` and ``ids`` (lists), ``keys``, ``contents`` (uint64) and ``kinds`` (uint8)."""

    __slots__ = ("contents", "ids", "keys", "kinds", "lines")

    def __init__(
        self,
        lines: list[bytes] | None = None,
        ids: list[str] | None = None,
        keys: Any = (),
        contents: Any = (),
        kinds: Any = (),
    ) -> None:
        self.lines = lines if lines is not None else []
        self.ids = ids if ids is not None else []
        self.keys, self.contents, self.kinds = _arrays(keys, contents, kinds)

    @classmethod
    def of(cls, items: Sequence[tuple[Any, ...]]) -> Block:
        """From events as tuples ``(stream, line, id, key, content, kind)`` (the generic lane's form)."""
        if not items:
            return cls()
        _, lines, ids, keys, contents, kinds = (list(column) for column in zip(*items, strict=True))
        return cls(lines, ids, keys, contents, kinds)

    @classmethod
    def cat(cls, blocks: Sequence[Block]) -> Block:
        blocks = [b for b in blocks if len(b)]
        if len(blocks) <= 1:
            return blocks[0] if blocks else cls()
        import numpy as np

        return cls(
            [line for b in blocks for line in b.lines],
            [i for b in blocks for i in b.ids],
            np.concatenate([b.keys for b in blocks]),
            np.concatenate([b.contents for b in blocks]),
            np.concatenate([b.kinds for b in blocks]),
        )

    def __len__(self) -> int:
        return len(self.lines)

    def __iter__(self) -> Iterator[tuple[str, bytes, str, int, int, int]]:
        """The events as tuples ``(stream, line, id, key, content, kind)``."""
        for line, event_id, key, content, kind in zip(
            self.lines, self.ids, self.keys.tolist(), self.contents.tolist(), self.kinds.tolist(), strict=True
        ):
            yield _STREAMS[kind], line, event_id, key, content, kind

    def take(self, order: Any) -> Block:
        """The events at positions ``order`` (integers), in that order."""
        return Block(
            pick(self.lines, order), pick(self.ids, order), self.keys[order], self.contents[order], self.kinds[order]
        )

    def with_inserted(self, positions: Sequence[int], other: Block) -> tuple[Block, np.ndarray]:
        """``other``'s events inserted, each before the event at its position (``positions``: one per event of
        ``other``, positions of this block; equal positions keep ``other``'s order), and where each event of the
        result comes from (positions of this block, then of ``other`` after them)."""
        order = insertion(len(self), positions)
        return Block.cat([self, other]).take(order), order

    def ratings(self) -> np.ndarray:
        """Per event: True when it goes to the ratings stream (else the tasks stream)."""
        import numpy as np

        return np.isin(self.kinds, _RATINGS)

    def digits(self) -> np.ndarray:
        """The ids' closing 24 hex digits (the ledger's form of an id), as an S24 array."""
        import numpy as np

        widths = set(map(len, self.ids))
        if len(widths) == 1 and (width := widths.pop()) >= 24:  # one prefix: cut the joined ids, vectorised
            joined = "".join(self.ids).encode("utf-8", "surrogatepass")
            if len(joined) == width * len(self.ids):  # ASCII, as ids are
                rows = np.frombuffer(joined, dtype=np.uint8).reshape(-1, width)[:, width - 24 :]
                return np.ascontiguousarray(rows).view("S24").ravel()
        return np.array([i[-24:] for i in self.ids], dtype="S24")
