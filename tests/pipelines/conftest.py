"""One SparkSession for the whole suite (local[2], UI off, few shuffle partitions), and the samples'
lake, built once by the whole job."""

from __future__ import annotations

import pytest

from amqp_decode.settings import load_settings
from pipelines.inputs import canonical_uri


def uri(path) -> str:
    """How a capture is named in the tables."""
    return canonical_uri(str(path))


@pytest.fixture(scope="session")
def settings():
    return load_settings(None, ["spark.master=\"local[2]\"", 'spark.conf={"spark.sql.shuffle.partitions" = "4"}'])


@pytest.fixture(scope="session")
def spark(settings):
    from pipelines.session import build_session
    session = build_session(settings)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def lake(spark, settings, tmp_path_factory):
    """data/samples/ run once through the whole job: (lake path, run summary)."""
    from pipelines.inputs import list_inputs
    from pipelines.jobs.nightly import run
    from tests.capture.conftest import SAMPLES
    path = str(tmp_path_factory.mktemp("lake"))
    return path, run(spark, list_inputs([str(SAMPLES)]), settings, path, "run-1")


def pytest_collection_modifyitems(items):
    """Everything that starts Spark is slow: `pytest -m 'not slow'` is the quick inner loop."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()) or "lake" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
