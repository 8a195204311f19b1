"""Shared fixtures. Codec tests need no Spark; Spark fixtures arrive with the pipeline."""

from __future__ import annotations

from pathlib import Path

import pytest

from amqp_decode.codec import Codec

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"


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
