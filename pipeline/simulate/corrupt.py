"""Inject the damage compaction must survive, at a rate, and count it exactly.

After each line, independently with probability ``rate`` each (at most one per
line), one of:

- ``torn``: a prefix of a copy of the line, newline-terminated (a writer that
  crashed mid-line and did not repair): not JSON, a dead letter;
- ``duplicates``: the same line again (same id, same payload): dropped, counted;
- ``conflicts``: the same id with a different payload: a dead letter (the first wins);
- ``invalid``: a new id and a schema violation (bad version, wrong type, missing
  field, bad time, NaN, not an object, not UTF-8): a dead letter.

And ``torn_tail``: each stream ends with a fragment and no newline (a crash
mid-append), which compaction or repair moves to quarantine.

The damage is drawn from its own generator, so the valid lines of a corrupted
backlog are exactly the lines of the clean one with the same seed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

KINDS = ("torn", "duplicates", "conflicts", "invalid")
#: Added to an event id to name injected lines, so they never collide with real ids.
INVALID_SUFFIX = ".bad"
TORN_SUFFIX = ".torn"
N_INVALID_VARIANTS = 7


def _zero() -> dict[str, int]:
    return dict.fromkeys((*KINDS, "torn_tail"), 0)


@dataclass
class Damage:
    """Injected damage per stream; ``counts`` sums the streams."""

    by_stream: dict[str, dict[str, int]] = field(default_factory=lambda: {"tasks": _zero(), "ratings": _zero()})

    @property
    def counts(self) -> dict[str, int]:
        return {k: sum(s[k] for s in self.by_stream.values()) for k in (*KINDS, "torn_tail")}


def _dump(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=True) + "\n"


def conflicting(line: str) -> str:
    """The same event id with a different payload (one field of the type changed)."""
    obj = json.loads(line)
    kind = obj["type"]
    if kind == "task.rated":
        obj["score"] = round(1.0 - obj["score"], 2) if obj["score"] != 0.5 else 0.0
    elif kind == "task.attempted":
        obj["status"] = "failure" if obj["status"] == "success" else "success"
    elif kind == "task.closed":
        obj["outcome"] = "abandoned" if obj["outcome"] == "done" else "done"
    elif kind == "task.rejected":
        obj["weight"] = 0.5
    elif kind == "task.opened":
        obj["title"] = obj.get("title", "") + " (edited)"
    else:
        obj["reason"] = "a conflicting copy"
    return _dump(obj)


def invalid(line: str, variant: int) -> str:
    """A line with a fresh id that no v1 parser accepts; ``variant`` picks the defect."""
    obj = json.loads(line)
    obj["id"] = obj["id"] + INVALID_SUFFIX
    required = "rating" if obj["type"] == "rating.retracted" else "task"
    if variant == 0:
        obj["v"] = 0  # v must be >= 1
    elif variant == 1:
        obj[required] = 12  # wrong type
    elif variant == 2:
        del obj[required]  # missing required field
    elif variant == 3:
        obj["at"] = "yesterday"  # not RFC 3339
    elif variant == 4:
        obj["v"] = float("nan")  # NaN is not JSON
    elif variant == 5:
        return "[" + _dump(obj)[:-1] + "]\n"  # not an object
    else:
        obj["id"] = obj["id"] + "\udcff"  # encoded with surrogateescape: a lone 0xFF byte, not UTF-8
    return _dump(obj)


def torn(line: str, fraction: float) -> str:
    """A strict prefix of the line (at least 10 characters): never a complete JSON object."""
    body = line.rstrip("\n")
    cut = 10 + int(fraction * max(len(body) - 11, 1))
    return body[: min(cut, len(body) - 1)]


def inject(lines: list[str], rate: float, rng: np.random.Generator, counts: dict[str, int]) -> list[str]:
    """Return ``lines`` with damage inserted after some of them; count it in ``counts``."""
    n = len(lines)
    u = rng.random(n)
    variant = rng.integers(0, N_INVALID_VARIANTS, n)
    cut = rng.random(n)
    kind = np.searchsorted(np.array([rate, 2 * rate, 3 * rate, 4 * rate]), u, side="right")
    out: list[str] = []
    for i, line in enumerate(lines):
        out.append(line)
        k = int(kind[i])
        if k == 0:
            out.append(torn(line, float(cut[i])) + "\n")
        elif k == 1:
            out.append(line)
        elif k == 2:
            out.append(conflicting(line))
        elif k == 3:
            out.append(invalid(line, int(variant[i])))
        else:
            continue
        counts[KINDS[k]] += 1
    return out


def torn_tail(last_line: str, fraction: float) -> str:
    """A fragment (no newline) of a new event after the last line, as a crash mid-append leaves."""
    obj = json.loads(last_line)
    obj["id"] = obj["id"] + TORN_SUFFIX
    return torn(_dump(obj), fraction)
