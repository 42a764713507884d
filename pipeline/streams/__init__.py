"""The stream layer: the v1 events, the append-only streams and their framing, backfills of long tables.

``pipeline.streams.append(home, events)`` is the public way to write events from Python (docs/design.md, Streams).
"""

from .log import append, read_lines, repair

__all__ = ["append", "read_lines", "repair"]
