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


def contract(record: dict) -> bool:
    """A record that breaks the contract in a known way (the caller skips that check)."""
    message = record.get("message") or {}
    if "body_b64" in message and not message["complete"]:
        # A body frame of 64 KiB or more is hashed and kept as it streams in; when it then turns
        # out lost (the stream ends inside it, or its frame-end octet is wrong) its bytes stay in
        # the message's body although body_received never counts them.
        tolerate("streamed-body-kept-when-frame-lost")
        return True
    return False


def first_record_after_garbage(data: bytes, kept: tuple, info) -> bool:
    """A pcap record lost although untouched: garbage shorter than a record header just before it
    made a plausible header (easily: the start of another record's header, as a torn write leaves;
    or any bytes before the file's first record, which has no neighbour to compare times with).
    The reader takes it for a record; when the header after that one is implausible it searches
    for the next boundary from 16 bytes after the bogus header's start, past the real record: the
    real record is lost, and the bogus one (garbage + the real record's bytes) is sometimes handed
    out."""
    end, record = kept
    if data[:2] == b"\x1f\x8b":
        data = gunzip_prefix(data)
    order = {b"\xd4\xc3\xb2\xa1": "<", b"\xa1\xb2\xc3\xd4": ">", b"\x4d\x3c\xb2\xa1": "<",
             b"\xa1\xb2\x3c\x4d": ">"}.get(data[:4])
    if order is None:
        return False
    start = end - 16 - len(record[2])
    if 24 < start <= 24 + 64 and any(issue.kind == "damaged-record-header" for issue in info.issues):
        tolerate("pcap-garbage-before-first-record")  # no time check there: the bogus header passes
        return True
    for garbage in range(1, 16):
        p = start - garbage
        if p < 24:
            break
        caplen = struct.unpack_from(order + "I", data, p + 8)[0]
        if any(issue.kind == "damaged-record-header" and (issue.offset == p or issue.offset == p + 16 + caplen)
               for issue in info.issues):
            tolerate("pcap-garbage-before-a-record")
            return True
    return False


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


def classified_by_first_segment(segments: list, records: list, amqp_ports=(5672,)) -> bool:
    """A connection on ports that are no AMQP port is classified once, by the first four bytes of
    the first payload segment seen in either direction: when that is not the whole "AMQP" of the
    client's protocol header (the header split over segments, or the server's first segment
    captured before it), the connection is taken for another protocol and none of it is decoded."""
    decoded = {frozenset((r["client"], r["server"])) for r in records if r["kind"] != "issue"}
    firsts = {}
    for s in segments:
        pair = frozenset((s.src, s.dst))
        if s.payload and pair not in firsts:
            firsts[pair] = s
    for pair, first in firsts.items():
        if any(port in amqp_ports for _, port in pair):
            continue
        if first.payload[:4] != b"AMQP" and frozenset(_endpoint(a) for a in pair) not in decoded:
            tolerate("classified-by-first-segment")
            return True
    return False


def _endpoint(address) -> str:
    from amqp_decode.packets import format_endpoint
    return format_endpoint(*address)
