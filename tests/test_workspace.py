"""The workspace, resolved once: the home, the store (path or URI), the writer and version asked for."""

from __future__ import annotations

import pytest

from pipeline.errors import OutsideHome, PipelineError
from pipeline.workspace import Workspace

# --------------------------------------------------------------------------- resolved once: home, store, writer, as-of


def test_the_home_and_the_store_come_from_the_arguments_then_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("RATINGS_HOME", str(tmp_path / "env-home"))
    monkeypatch.delenv("RATINGS_STORE", raising=False)
    ws = Workspace.resolve()
    assert ws.root == tmp_path / "env-home" and ws.store.local == tmp_path / "env-home" / "store"
    monkeypatch.setenv("RATINGS_STORE", "s3://bucket/prefix/")
    ws = Workspace.resolve(tmp_path / "given", storage_options={"AWS_REGION": "x"}, writer="w", as_of="3")
    assert ws.root == tmp_path / "given" and (ws.writer, ws.as_of) == ("w", "3")
    assert ws.store.local is None and ws.store.table_uri == "s3://bucket/prefix/events"
    assert ws.store.options == {"AWS_REGION": "x"} and "AWS_REGION" not in repr(ws)
    assert Workspace.of(ws) is ws  # a workspace passed down is never resolved again


@pytest.mark.parametrize(
    ("uri", "local"),
    [("shared", "shared"), ("file://{tmp}/shared", "shared"), ("{tmp}/shared", "shared")],
)
def test_a_local_store_is_an_absolute_path(tmp_path, monkeypatch, uri, local):
    monkeypatch.chdir(tmp_path)
    ws = Workspace.resolve(tmp_path / "home", store=uri.format(tmp=tmp_path))
    assert ws.store.local == tmp_path / local and ws.store.table_path == tmp_path / local / "events"
    assert not ws.store_in_home and ws.store.options is None


def test_the_store_is_resolved_on_first_use_only(tmp_path):
    """A command that never reads the store (append) is not stopped by a store URI it cannot use."""
    ws = Workspace.resolve(tmp_path, store="ftp://host/x")
    ws.write(ws.shipped, b"{}")
    with pytest.raises(PipelineError, match="unknown scheme 'ftp'"):
        _ = ws.store


def test_a_local_store_outside_the_home_confines_its_own_files(tmp_path):
    store, elsewhere = tmp_path / "shared", tmp_path / "elsewhere"
    elsewhere.mkdir()
    ws = Workspace.resolve(tmp_path / "home", store=str(store))
    ws.write(store / "events" / "part" / "f.parquet", b"x")  # inside the store: fine
    (store / "events" / "linked").symlink_to(elsewhere)
    with pytest.raises(OutsideHome, match=r"is a symbolic link to .*elsewhere"):
        ws.write(store / "events" / "linked" / "f.parquet", b"x")
    with pytest.raises(OutsideHome, match="not inside the home"):
        ws.write(tmp_path / "neither" / "f", b"x")
    assert list(elsewhere.iterdir()) == []


def test_a_busy_lock_without_waiting_is_a_conflict(tmp_path):
    from pipeline.errors import StoreConflict

    ws = Workspace.resolve(tmp_path)
    with ws.lock(ws.fit_lock), pytest.raises(StoreConflict, match="busy"):  # noqa: SIM117
        with ws.lock(ws.fit_lock, busy="busy"):
            pass
    with ws.lock(ws.fit_lock, busy="busy"):  # released: taken at once
        pass
