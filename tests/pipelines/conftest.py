"""One SparkSession for the whole suite (local[2], UI off, few shuffle partitions)."""

from __future__ import annotations

import pytest

from pipelines.config import from_dict


@pytest.fixture(scope="session")
def config():
    return from_dict({"spark": {"master": "local[2]", "conf": {"spark.sql.shuffle.partitions": "4"}}})


@pytest.fixture(scope="session")
def spark(config):
    from pipelines.session import build_session
    session = build_session(config)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def lake(spark, config, tmp_path_factory):
    """data/samples/ run once through the whole job: (lake path, run summary)."""
    from pipelines.inputs import list_inputs
    from pipelines.jobs.nightly import run
    from tests.capture.conftest import SAMPLES
    path = str(tmp_path_factory.mktemp("lake"))
    return path, run(spark, list_inputs([str(SAMPLES)]), config, path, "run-1")
