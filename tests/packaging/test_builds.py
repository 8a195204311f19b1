"""The compiled build against its reference: every sample and crafted capture decoded by the
installed build (the decoder's and the decode views' compiled modules) and by the interpreted modules (AMQPCAP_INTERPRETED=1, the same .py files) gives
byte-identical JSON Lines, readable output and statistics."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import amqpcap
from tests.helpers.samples import EXPECTED, ROOT, SHARED, capture_for

CAPTURES = [capture_for(p) for p in EXPECTED] + sorted((SHARED / "captures" / "public").glob("*.pcap"))


def decode(paths, *options, interpreted: bool) -> bytes:
    env = {**os.environ, "AMQPCAP_INTERPRETED": "1" if interpreted else ""}
    result = subprocess.run([sys.executable, "-m", "amqpcap", "decode", "--quiet", *options, *map(str, paths)],
                            capture_output=True, env=env, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@pytest.mark.skipif(amqpcap.build() != "compiled",
                    reason="no compiled build installed (no C compiler)")
@pytest.mark.parametrize("options", [["--jsonl", "--bodies"], [], ["--stats", "--json"]], ids=["jsonl", "text", "stats"])
def test_compiled_equals_interpreted(options):
    """All captures in one run each way (each has its own addresses and times: they decode as they
    would alone), the TLS samples decrypted with their key logs, compared line by line."""
    keys = ["--tls-keylog", str(ROOT / "data" / "samples" / "tls")]
    compiled = decode(CAPTURES, *options, *keys, interpreted=False).splitlines()
    interpreted = decode(CAPTURES, *options, *keys, interpreted=True).splitlines()
    assert sum(b'"tls":true' in line for line in compiled) > 500 or "--jsonl" not in options
    assert len(compiled) > 1000 or "--stats" in options
    assert compiled == interpreted


def test_the_interpreted_switch_reaches_every_hot_module():
    code = "import amqpcap; print(amqpcap.build())"
    env = {**os.environ, "AMQPCAP_INTERPRETED": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT).stdout
    assert out.split() == ["interpreted"]
