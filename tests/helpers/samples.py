"""Where things are (the checkout, the shared reference material, the samples), the samples' expected
facts and their decoding (each capture decoded once per session), and how a capture is named in the tables."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from amqpcap.capture.inputs import canonical_uri
from amqpcap.connection.decoder import CaptureDecoder

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
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


def uri(path) -> str:
    """How a capture is named in the tables."""
    return canonical_uri(str(path))
