"""Upkeep of the events table: removing files no retained version needs (``ratings vacuum``), and sizes.

Delta's vacuum deletes the files that versions older than the retention removed (merged by optimize) and,
in full mode, every file under the table that no version references (runs killed before their commit).
It runs under this home's compaction lock, so it never removes the files of a run of this home that has not
committed yet; on a store shared by other hosts, keep the retention longer than any compaction takes there.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ..errors import PipelineError
from ..workspace import StoreLocation, StrPath, Workspace
from .table import fail, machine_errors, open_table, store_errors

DEFAULT_RETAIN_HOURS = 168  # Delta's default: one week of time travel


class VacuumResult(BaseModel):
    version: int | None
    retain_hours: int
    files_removed: int
    bytes_before: int  # every file under the table (log included)
    bytes_after: int
    live_bytes: int  # the data files of the newest version

    def summary(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def store_bytes(location: StoreLocation) -> int:
    """Bytes of every file under the table (data files of every version, unreferenced ones, the log)."""
    import pyarrow.fs as pafs

    if location.table_path is not None:
        if not location.table_path.exists():
            return 0
        return sum(p.stat().st_size for p in location.table_path.rglob("*") if p.is_file() and not p.is_symlink())
    from deltalake.fs import DeltaStorageHandler

    fs = pafs.PyFileSystem(DeltaStorageHandler(location.table_uri, location.options))
    infos = fs.get_file_info(pafs.FileSelector("", recursive=True, allow_not_found=True))
    return sum(i.size or 0 for i in infos if i.type == pafs.FileType.File)


def vacuum(
    home: Workspace | StrPath | None = None,
    *,
    retain_hours: int = DEFAULT_RETAIN_HOURS,
) -> VacuumResult:
    """Remove files no version within ``retain_hours`` needs, and files no version references."""
    import pyarrow as pa

    if retain_hours < 0:
        raise PipelineError("--retain-hours must be 0 or more")
    ws = Workspace.of(home)
    location = ws.store
    with machine_errors("vacuum"), ws.lock(ws.compact_lock):
        table = open_table(location)
        before = store_bytes(location)
        if table is None:
            empty = {"files_removed": 0, "bytes_before": before, "bytes_after": before, "live_bytes": 0}
            return VacuumResult(version=None, retain_hours=retain_hours, **empty)
        location.check_table()  # vacuum deletes: never through a link that appeared since the table was opened
        try:
            removed = table.vacuum(
                retention_hours=retain_hours,
                dry_run=False,
                enforce_retention_duration=False,
                full=True,
            )
        except store_errors() as exc:
            fail(exc, location, "vacuum")
        live = pa.table(table.get_add_actions(flatten=True))
        return VacuumResult(
            version=table.version(),
            retain_hours=retain_hours,
            files_removed=len(removed),
            bytes_before=before,
            bytes_after=store_bytes(location),
            live_bytes=int(sum(live["size_bytes"].to_pylist())) if live.num_rows else 0,
        )
