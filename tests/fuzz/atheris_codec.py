#!/usr/bin/env python
"""Coverage-guided fuzzing of the frame codec with atheris (libFuzzer), for as long as you like:

    python tests/fuzz/atheris_codec.py -max_total_time=600          # ten minutes
    python tests/fuzz/atheris_codec.py -runs=100000 my_corpus_dir/   # keep what it learns

Any libFuzzer flag works (-jobs, -workers, -dict, -timeout, -rss_limit_mb...). Without a corpus
directory it starts from the samples' real frames (in a temporary directory). A failing input is
written as crash-*/timeout-*/oom-* (or under -artifact_prefix); replay it with
`python tests/fuzz/atheris_codec.py crash-...`, and keep a tiny one in tests/fuzz/corpus/.

Input: the first byte picks the mode. Modes 0-2: the rest of the input is the buffer, decoded by
the 0-9-1 codec, the 0-9-1 codec in the spec's field-table dialect, or the 0-9 codec. Mode 3 and
up: the rest drives the suite's structure-aware mutators (tests/fuzz/mutators.py: real frames
mutated, generated field tables). The property is targets.check_codec: only DecodeErrors escape,
an accepted frame re-checks, and it renders as `amqpcap decode` renders it.

The harness instruments amqpcap as installed (pure Python or compiled: compiled modules
just give libFuzzer less coverage to go on).
"""

from __future__ import annotations

import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import atheris  # noqa: E402

with atheris.instrument_imports(include=["amqpcap"]):
    import amqpcap.protocol.codec  # noqa: E402,F401
    import amqpcap.protocol.fieldtable  # noqa: E402,F401
    import amqpcap.protocol.redact  # noqa: E402,F401

from tests.fuzz import atheris_run, mutators, targets  # noqa: E402


def test_one_input(data: bytes) -> None:
    if not data:
        return
    mode = data[0]
    if mode < 3:
        targets.check_codec(targets.codec(targets.CODEC_NAMES[mode]), data[1:], 0)
        return
    provider = atheris.FuzzedDataProvider(data[1:])
    chooser = mutators.ProviderChooser(provider)
    buf = mutators.codec_input(chooser)
    targets.check_codec(targets.codec(chooser.pick(targets.CODEC_NAMES)), buf, 0)


def seeds():
    for i, frame in enumerate(mutators.real_frames()):
        yield f"frame-{i}", bytes([i % 3]) + frame
    for i in range(32):
        yield f"mutated-{i}", bytes([3]) + random.Random(i).randbytes(64)


if __name__ == "__main__":
    atheris_run.fuzz(sys.argv, test_one_input, "codec", seeds)
