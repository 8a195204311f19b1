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
