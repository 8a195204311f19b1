"""Decoded samples, shared by the capture tests: each capture is decoded once per session."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from amqp_decode.decoder import CaptureDecoder
from tests.conftest import ROOT

SAMPLES = ROOT / "data" / "samples"
EXPECTED = sorted(SAMPLES.rglob("*.expected.json"))


def capture_for(expected: Path) -> Path:
    stem = expected.name.removesuffix(".expected.json")
    matches = [p for p in expected.parent.iterdir() if p.name.startswith(stem + ".")
               and not p.name.endswith(".json")]
    assert len(matches) == 1, f"one capture for {expected.name}, found {matches}"
    return matches[0]


@functools.lru_cache(maxsize=None)
def decoded(expected: Path):
    """(expected facts, records, stats) for one sample."""
    decoder = CaptureDecoder(collect_connections=True)
    records = list(decoder.decode([str(capture_for(expected))]))
    return json.loads(expected.read_text()), records, decoder.stats
