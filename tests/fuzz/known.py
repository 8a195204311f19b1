"""Findings already reported, recognised so that fuzzing keeps looking for new ones.

Each finding has a reproducer in tests/fuzz/corpus/ and a strict xfail test in test_corpus.py.
When a fix makes that test pass (XPASS, which fails the suite), remove its marker there and its
recogniser here: from then on the fuzz tests treat the input as the bug it was.

A recognised finding does not end the example: the property it breaks is skipped for that input
(the finding counted as a hypothesis event, shown with --hypothesis-show-statistics), and every
other property is still checked.
"""

from __future__ import annotations

import struct

from collections import Counter

from hypothesis import event
from hypothesis.control import currently_in_test_context

from tests.fuzz.oracles import gunzip_prefix

SEEN: Counter = Counter()  # finding -> times met in this process


def tolerate(finding: str) -> None:
    """The current input hits `finding`, already reported."""
    SEEN[finding] += 1
    if currently_in_test_context():
        event(f"known finding: {finding}")


def range_interfaces_after_damage(data: bytes, points: list, info) -> bool:
    """A pcapng read in byte ranges learns the interfaces in force at a range's start by reading
    the blocks from the file's start, and stops at the first damage: an interface described after
    that damage (but before the range) is missed, and the range numbers the interfaces it meets
    from 0, so its packets get another interface's link type and time resolution, silently."""
    if data[:4] == b"\x0a\x0d\x0d\x0a" and any(
            i.kind in ("garbage-between-blocks", "damaged-block") and i.offset < max(points[1:-1], default=0)
            for i in info.issues):
        tolerate("pcapng-range-interfaces-after-damage")
        return True
    return False


def shifted_headers(data: bytes) -> bool:
    """pcap whose first record has origlen < caplen (a writer that does not keep the rule, or
    damage there): the reader stops checking origlen >= caplen for the whole file, and after
    damage its boundary search can accept headers read 4 bytes late (seconds = microseconds,
    caplen = origlen, origlen = the first payload bytes, zero for zeroed MAC addresses): the rest
    of the file is read misaligned, untouched records replaced by garbage ones."""
    if data[:2] == b"\x1f\x8b":
        data = gunzip_prefix(data)
    order = {b"\xd4\xc3\xb2\xa1": "<", b"\xa1\xb2\xc3\xd4": ">", b"\x4d\x3c\xb2\xa1": "<",
             b"\xa1\xb2\x3c\x4d": ">"}.get(data[:4])
    if order is None or len(data) < 40:
        return False
    _, _, caplen, origlen = struct.unpack_from(order + "IIII", data, 24)
    if caplen <= 1 << 18 and (origlen < caplen or origlen == 0):
        tolerate("pcap-shifted-headers-origlen-rule-off")
        return True
    return False
