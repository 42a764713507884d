"""One local Spark session (local[2]) per test module that asks for it; the module's Spark tests skip, with the
reason, only where pyspark or a Java runtime is missing (CI installs both: .ci/run)."""

from __future__ import annotations

import shutil

import pytest


def spark_missing() -> str | None:
    """Why Spark cannot run here, or None."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark is not installed (pip install '.[spark]')"
    if shutil.which("java") is None:
        return "no Java runtime on the PATH (apt-get install default-jre-headless)"
    return None


@pytest.fixture(scope="module")
def spark():
    reason = spark_missing()
    if reason is not None:
        pytest.skip(reason)
    from pipeline.store.spark import session

    active = session("local[2]")
    yield active
    active.stop()
