"""Fuzz target 3, the capture reader: mutated sample files (bit flips and byte runs in record
headers, block lengths and payloads; truncation; dropped, duplicated and swapped records;
garbage; concatenated captures; splices of two captures; garbage pcapng blocks; gzip wrappings cut
short or corrupted), one to three mutations deep.

Properties: no exception but CaptureError escapes, and that one only before the first record
(CaptureDecoder opens a file by reading its first record); a clean read is exactly what the file
literally holds (an independent parser, oracles.parse_capture, says so), so a mutation that
changed the file reads clean only if it was a no-op for the records; a mutation that kept the
file well formed reads clean; every record the mutation cannot have touched is read, in order;
the info's counts and times are the records'; for pcap every byte of the file is in a header, a
record or an issue's bytes_skipped; and reading the file in byte ranges gives the whole read's
records and issues."""

from __future__ import annotations

import pytest

from tests.fuzz import harness, targets
from tests.fuzz.mutators import DrawChooser, load, mutate_file, seeds


def check_reader_mutants(data):
    ch = DrawChooser(data)
    capture = load(ch.pick(seeds()))
    mutant = mutate_file(capture, ch)
    ranges = []
    if ch.chance(3) and len(mutant.data) > 2:
        a = ch.int(1, len(mutant.data) - 1)
        ranges.append((a, ch.int(a, len(mutant.data))))
    suffix = ".pcap.gz" if mutant.data[:2] == b"\x1f\x8b" else ".pcapng" if capture.parsed.kind == "pcapng" else ".pcap"
    with harness.example("reader", mutant.data, suffix):
        targets.check_reader(mutant.data, mutant.keep, mutant.well_formed,
                             f"{capture.name}: {mutant.what}", ranges)


@pytest.mark.parametrize("tier", harness.TIERS)
def test_reader(tier):
    harness.run(check_reader_mutants, tier, examples=3000, share=0.25)


def test_a_packet_block_overwritten_into_an_interface_description_frees_what_follows():
    """The oracle's own rule (found by the atheris reader harness): overwriting a pcapng packet
    block's type can turn it into an interface description, which renumbers the interfaces after
    it, so no later packet is promised; the reader, reading the file as it now is, passes."""
    import struct

    from tests.fuzz.mutators import _untouched
    capture = load("crafted/ip_features.pcapng")
    at = 1400  # a packet block of interface 0, before the file's second interface description
    assert struct.unpack_from("<II", capture.data, at) == (6, 108)
    data = capture.data[:at] + struct.pack("<I", 1) + capture.data[at + 4:]  # now an interface description
    mutant = _untouched(capture, data, list(range(at, at + 4)))
    assert mutant.keep and all(end <= at for end, _ in mutant.keep)
    targets.check_reader(mutant.data, mutant.keep, mutant.well_formed, "type overwritten")
    # the same bytes written into the packet's data promise the packets after it still
    inside = _untouched(capture, capture.data[:at + 40] + b"\x01" + capture.data[at + 41:], [at + 40])
    assert any(end > at + 108 for end, _ in inside.keep)
