"""Where things are (the checkout, the shared reference material, the samples), the samples' expected
facts and their decoding (each capture decoded once per session), and how a capture is named in the tables."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from amqpcap.capture.inputs import canonical_uri
from amqpcap.connection.decoder import CaptureDecoder
from amqpcap.tls.keylog import KeyLog, read_key_logs

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
SAMPLES = ROOT / "data" / "samples"
EXPECTED = sorted(SAMPLES.rglob("*.expected.json"))


def capture_for(expected: Path) -> Path:
    stem = expected.name.removesuffix(".expected.json")
    matches = [p for p in expected.parent.iterdir() if p.name.startswith(stem + ".")
               and not p.name.endswith((".json", ".keys"))]
    assert len(matches) == 1, f"one capture for {expected.name}, found {matches}"
    return matches[0]


def key_log_for(capture: Path) -> Path | None:
    """A TLS sample's key log (its name with .keys), if it has one."""
    keys = capture.parent / (capture.name.split(".")[0] + ".keys")
    return keys if keys.exists() else None


@functools.lru_cache(maxsize=None)
def keys_for(capture: Path) -> KeyLog:
    """The key log a sample is decoded with (empty for those without one)."""
    found = key_log_for(capture)
    return read_key_logs([str(found)]) if found is not None else KeyLog()


@functools.lru_cache(maxsize=None)
def decoded(expected: Path):
    """(expected facts, records, stats) for one sample (a TLS sample with its key log)."""
    decoder = CaptureDecoder(collect_connections=True, keys=keys_for(capture_for(expected)))
    records = list(decoder.decode([str(capture_for(expected))]))
    return json.loads(expected.read_text()), records, decoder.stats


def uri(path) -> str:
    """How a capture is named in the tables."""
    return canonical_uri(str(path))
