"""One local Spark session (local[2]) for the whole test run (per xdist worker), made for tiny stores; every Spark
test skips, with the reason, only where pyspark or a Java runtime is missing (CI installs both: .ci/run)."""

from __future__ import annotations

import os
import shutil

import pytest

#: A tiny store's settings: two shuffle partitions (one task per core, not eight per stage), no whole-stage code
#: generation (compiling each statement's code costs more than running it on a few rows), no adaptive re-planning,
#: no broadcast joins (each broadcast is a job of its own: the pairs statement ran 18 jobs, now one). The results
#: are the same in any setting.
TINY = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.autoBroadcastJoinThreshold": "-1",
}


def spark_missing() -> str | None:
    """Why Spark cannot run here, or None."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark is not installed (pip install '.[spark]')"
    if shutil.which("java") is None:
        return "no Java runtime on the PATH (apt-get install default-jre-headless)"
    return None


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    reason = spark_missing()
    if reason is not None:
        pytest.skip(reason)
    from pipeline.store.spark import session
    from pipeline.workspace import SparkScratch

    # The tests' driver JVM lives a minute on tiny stores: the quick JIT tier alone (C1) spares the optimizing
    # compiler's warm-up, most of the CPU such a short run spends (a JVM option, not a setting of the session).
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", "--driver-java-options -XX:TieredStopAtLevel=1 pyspark-shell")
    active = session(SparkScratch.under(tmp_path_factory.mktemp("spark-scratch")), "local[2]")
    for key, value in TINY.items():
        active.conf.set(key, value)
    yield active
    active.stop()
