"""Shared fixtures. Areas keep their own shared fixtures in ``tests/fixtures_<area>.py``, listed here."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins: list[str] = ["fixtures_routing", "fixtures_store", "fixtures_nightly", "fixtures_spark"]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty home directory."""
    root = tmp_path / "home"
    root.mkdir()
    return root
