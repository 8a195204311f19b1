#!/usr/bin/env python
"""Coverage-guided fuzzing of the capture reader with atheris (libFuzzer), for as long as you like:

    python tests/fuzz/atheris_reader.py -max_total_time=600
    python tests/fuzz/atheris_reader.py -runs=100000 my_corpus_dir/

Any libFuzzer flag works. Without a corpus directory it starts from the small samples (in a
temporary directory). A failing input is written as crash-*/timeout-*/oom-* (or under
-artifact_prefix); replay it with `python tests/fuzz/atheris_reader.py crash-...`, and keep a
tiny one in tests/fuzz/corpus/.

Input: the first byte picks the mode. Mode 0: the rest is a capture file, read whole and in two
byte ranges cut where the second byte says. Mode 1 and up: the rest drives the suite's capture
mutators (tests/fuzz/mutators.py) on a sample, and what the mutation cannot have touched must
still be read. The property is targets.check_reader: no exception but CaptureError (and that only
before the first record), a clean read is exactly what the file literally holds, the info adds
up, byte ranges read as the whole file.
"""

from __future__ import annotations

import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import atheris  # noqa: E402

with atheris.instrument_imports(include=["amqpcap.capture.readers"]):
    import amqpcap.capture.readers  # noqa: E402,F401

from tests.fuzz import atheris_run, mutators, targets  # noqa: E402

SEEDS = ["heartbeats.pcap", "abrupt_kill.pcap", "crafted/linux_sll.pcap", "ipv6_pcapng.pcapng",
         "crafted/ip_features.pcapng", "kombu_gzip.pcap.gz"]


def test_one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    if data[0] == 0:
        capture = data[2:]
        cut = len(capture) * data[1] // 255
        ranges = [(cut, len(capture))] if 0 < cut < len(capture) else []
        targets.check_reader(capture, ranges=ranges)
        return
    chooser = mutators.ProviderChooser(atheris.FuzzedDataProvider(data[1:]))
    capture = mutators.load(chooser.pick(SEEDS))
    mutant = mutators.mutate_file(capture, chooser)
    targets.check_reader(mutant.data, mutant.keep, mutant.well_formed, f"{capture.name}: {mutant.what}")


def seeds():
    for i, name in enumerate(SEEDS):
        with open(mutators.sample_path(name), "rb") as source:
            yield f"sample-{i}", b"\x00\x80" + source.read()
    for i in range(32):
        yield f"mutated-{i}", b"\x01" + random.Random(i).randbytes(48)


if __name__ == "__main__":
    atheris_run.fuzz(sys.argv, test_one_input, "reader", seeds)
