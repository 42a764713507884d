"""Compaction: the JSONL streams -> one Delta commit of the events table per run (docs/design.md, Storage).

See :mod:`pipeline.compact.run`.
"""

from .run import CompactResult, compact

__all__ = ["CompactResult", "compact"]
