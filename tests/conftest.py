"""Fixtures every folder shares: the codecs; one SparkSession for the whole suite (local[2], UI off,
few shuffle partitions) and the samples' lake, built once by the whole job."""

from __future__ import annotations

from pathlib import Path

import pytest

from amqpcap.protocol.codec import Codec
from amqpcap.settings import load_settings
from tests.helpers.samples import SAMPLES, SHARED


@pytest.fixture(scope="session")
def codec() -> Codec:
    return Codec.for_version("0-9-1")


@pytest.fixture(scope="session")
def codec09() -> Codec:
    return Codec.for_version("0-9")


@pytest.fixture(scope="session")
def shared() -> Path:
    if not (SHARED / "reference" / "AMQP.md").exists():
        pytest.fail(f"the shared reference material is missing at {SHARED}")
    return SHARED


@pytest.fixture(scope="session")
def settings():
    return load_settings(None, ["spark.master=\"local[2]\"", 'spark.conf={"spark.sql.shuffle.partitions" = "4"}'])


@pytest.fixture(scope="session")
def spark(settings):
    from amqpcap.job.session import build_session
    session = build_session(settings)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def lake(spark, settings, tmp_path_factory):
    """data/samples/ run once through the whole job, with the TLS samples' key logs (as `make run`
    does): (lake path, run summary)."""
    from amqpcap.capture.inputs import list_inputs
    from amqpcap.job.nightly import run
    from amqpcap.tls.keylog import read_key_logs
    path = str(tmp_path_factory.mktemp("lake"))
    keys = read_key_logs([str(SAMPLES / "tls")])
    return path, run(spark, list_inputs([str(SAMPLES)]), settings, path, "run-1", keys=keys)


def pytest_collection_modifyitems(items):
    """Everything that starts Spark is slow: `pytest -m 'not slow'` is the quick inner loop."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()) or "lake" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
