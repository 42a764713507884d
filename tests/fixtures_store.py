"""Fixtures of the store area: event factories and a snapshot of a whole store's content."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

#: Why a read-only store test skips: the error it checks is a read-only file system (EROFS), which chmod cannot
#: produce (a permission error is another message, and root ignores modes); a read-only bind mount can, but only
#: root may mount. CI runs the suite as root, so these tests run there.
READ_ONLY_SKIP = "needs a read-only file system (EROFS): a read-only bind mount, which only root may make"


def mount_read_only(path: Path) -> bool:
    """Bind-mount ``path`` read-only onto itself (unmount with ``umount -l``); False when this process may not."""
    if os.geteuid() != 0:
        return False
    if subprocess.run(["mount", "--bind", str(path), str(path)], capture_output=True, check=False).returncode:
        return False
    if subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], capture_output=True, check=False).returncode:
        subprocess.run(["umount", str(path)], check=False)
        return False
    return True


CONFIG = {"cli": "claude-code", "route": "anthropic", "model": "opus", "effort": "high"}


def rating(i: int, *, task: str | None = None, score: float = 1.0, day: int = 1, **extra: Any) -> dict[str, Any]:
    """A valid ``task.rated`` event with id ``R-<i>``."""
    return {
        "id": f"R-{i}",
        "type": "task.rated",
        "at": f"2026-01-{day:02d}T10:00:{i % 60:02d}Z",
        "task": task or f"T-{i}",
        "config": CONFIG,
        "rater": {"kind": "gate", "name": "pytest"},
        "score": score,
        **extra,
    }


def opened(i: int, *, day: int = 1, **extra: Any) -> dict[str, Any]:
    return {
        "id": f"O-{i}",
        "type": "task.opened",
        "at": f"2026-01-{day:02d}T09:00:00Z",
        "task": f"T-{i}",
        "region": "implement",
        **extra,
    }


def store_snapshot(home: Path) -> dict[str, Any]:
    """Every view's rows ordered by id, the event counts and the dead letters: equal snapshots, equal stores."""
    from pipeline.store import open_store
    from pipeline.store.families import VIEWS

    with open_store(home) as store:
        views = {v: store.con.execute(f'SELECT * FROM "{v}" ORDER BY id').fetchall() for v in VIEWS}
        counts = store.event_counts()
    letters = {p.name: p.read_bytes() for p in sorted((home / "deadletter").glob("*.jsonl"))}
    return {"views": views, "counts": counts, "deadletter": letters}


@pytest.fixture
def snapshot():
    return store_snapshot


def table_version(home: Path) -> int | None:
    """The newest version of the home's events table (None when there is none)."""
    from pipeline.store.table import open_table
    from pipeline.workspace import Workspace

    table = open_table(Workspace.of(home).store)
    return table.version() if table is not None else None


def live_files(home: Path, family: str | None = None) -> list[Path]:
    """The data files the newest version lists (of one family, or all)."""
    from pipeline.store import open_store

    with open_store(home) as store:
        return [Path(f) for f in store.files(family)]


# --------------------------------------------------------------------------- a local S3 server (moto)
def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3 server on 127.0.0.1, in its own process (delta-rs holds the GIL while it waits for a reply,
    so a server thread in this process would never answer); yields the environment a client needs."""
    import subprocess
    import sys
    import time
    import urllib.request

    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    import socket

    metadata = socket.socket()  # bound, never listening: a refused connection no other server can take over
    metadata.bind(("127.0.0.1", 0))
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1)
                break
            except OSError:
                time.sleep(0.05)
        yield {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
            # where the SDK looks for instance credentials when none are set: a closed loopback port, never the
            # link-local metadata address of a cloud machine
            "AWS_METADATA_ENDPOINT": f"http://127.0.0.1:{metadata.getsockname()[1]}",
        }
    finally:
        metadata.close()
        server.kill()
        server.wait()


@pytest.fixture
def bucket(s3_server, monkeypatch, request):
    """A new bucket on the local S3 server, its environment set; returns ``s3://<bucket>``."""
    import re

    import boto3

    for key in [k for k in __import__("os").environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    for key, value in s3_server.items():
        monkeypatch.setenv(key, value)
    name = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:50].strip("-") + "-b"
    boto3.client("s3", endpoint_url=s3_server["AWS_ENDPOINT_URL"]).create_bucket(Bucket=name)
    return f"s3://{name}"
