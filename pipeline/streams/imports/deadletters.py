"""``deadletter/import-<source>.jsonl``: the source rows an import left out, with the reason (docs/design.md,
Imports). One JSON object a line: ``{source, row, kind, field, reason, problems, raw}``; ``kind`` is ``bad`` (the
row cannot be mapped) or ``changed`` (the source changed a record already imported in a way events cannot
express: the first import stands). Opened inside the home only, on the first record; fsync'd when closed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ...workspace import Workspace


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


class DeadLetters:
    def __init__(self, ws: Workspace, path: Path | None) -> None:
        self.ws, self.path, self.fd = ws, path, -1
        self.buffer: list[bytes] = []
        self.written = 0

    def __enter__(self) -> DeadLetters:
        return self

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=_jsonable, allow_nan=True)
        self.buffer.append(line.encode("utf-8", "surrogatepass") + b"\n")
        self.written += 1
        if len(self.buffer) >= 1024:
            self._drain()

    def _drain(self) -> None:
        if not self.buffer or self.path is None:
            self.buffer = []
            return
        if self.fd < 0:
            self.fd = self.ws.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        view = memoryview(b"".join(self.buffer))
        while view:
            view = view[os.write(self.fd, view) :]
        self.buffer = []

    def __exit__(self, *exc: object) -> None:
        try:
            if exc[0] is None:
                self._drain()
                if self.fd >= 0:
                    os.fsync(self.fd)
        finally:
            if self.fd >= 0:
                os.close(self.fd)
