"""Compaction: JSONL streams -> Parquet store with manifests (DESIGN 4). See :mod:`pipeline.compact.run`."""

from .run import CompactResult, compact

__all__ = ["CompactResult", "compact"]
