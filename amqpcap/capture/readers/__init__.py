"""Capture files to link-layer records: pcap (micro- and nanosecond, either byte order), pcapng
(sections, interfaces each with its own link type and timestamp resolution and offset) and
gzip-compressed files of either, from a path, an open file (local, pyarrow) or a pipe ("-" is
stdin). The format is found from the first bytes, never from the file name.

    for ts_ns, link_type, data in read_records("a.pcap", info):
        ...
    # a big uncompressed file, in parallel: every record exactly once
    points = split_points(size, 256 << 20)
    parts = [read_records(path, CaptureInfo(path, size), start=a, end=b) for a, b in zip(points, points[1:])]

Damage is never silent: the records it did not touch are still read, and `CaptureInfo.issues`
says what was lost, where (file offsets; for gzip, offsets in the decompressed stream) and how
many bytes were skipped. A file that is no capture at all raises `CaptureError` naming it.

Issue kinds:
- `truncated-record`: the last record holds fewer bytes than its caplen (the file ends inside it):
  it is read with what there is.
- `truncated-file`: bytes at the end that are not a whole record header or block.
- `damaged-record-header` (pcap): a record header that cannot be right (caplen, origlen,
  sub-second field, a time more than a day from its neighbours that the records after it do not
  confirm, or a caplen that does not end at a record): the bytes up to the next accepted record
  boundary are skipped. The record before it is kept unless its own caplen proves to be the
  damaged field (then it is skipped too, never handed out with the wrong bytes). A time is judged
  by its neighbours, so a damaged time in the first or last record looks like the gap of a quiet
  capture, and a low bit flipped in a time or origlen cannot be seen at all.
- `garbage-between-blocks` (pcapng): bytes that are not a block (lengths disagree, impossible
  type or length): skipped up to the next accepted block boundary.
- `damaged-block` (pcapng): a block whose lengths agree but whose content cannot be read.
- `unknown-interface` (pcapng): a packet naming an interface no IDB of its section describes:
  skipped (as Scapy does, but reported), one issue per packet.
- `unreadable-time` (pcapng): a packet whose time (its timestamp at its interface's resolution,
  plus its offset) is beyond what 64-bit nanoseconds since 1970 hold (before 1677 or after 2262):
  the packet is kept with the previous packet's time, one issue per packet.
- `gzip-damaged`: the compressed stream is corrupt, truncated, or followed by bytes that are not
  gzip: everything decompressed before the damage is kept, the rest is not read.
- `concatenated-capture`: a second pcap global header or pcapng section header mid-file (`cat
  a.pcap b.pcap`): reading goes on with its parameters (nothing is lost).
- `inconsistent-ranges`: `CaptureInfo.merge` found that ranges read apart do not join, or a
  range was read with header parameters a later header changed, or (pcapng) a range's first
  packet has no time of its own and so cannot take the previous packet's: read the file whole.

A byte range [start, end) of an uncompressed, seekable file yields the records whose record
header (pcapng: block) starts in [B(start), B(end)), B(x) being the first accepted record
boundary at or after x (boundaries.py); reading ranges that cut a file anywhere yields exactly
the records and issues of one whole read, and their infos merge into its info.

Where the fast reader and Scapy's RawPcapNgReader differ, on purpose: a Simple Packet Block has
no time, and gets the previous packet's (Scapy: None); an interface snaplen of 0 means no limit
(Scapy cuts SPBs to nothing); if_tsoffset is added (Scapy ignores it); a new section forgets the
interfaces of the one before (Scapy keeps them).

The readers are Python written for speed (records sliced out of large reads; compiled, the pcap
reader's run of sound records is a typed loop, `pcap.scan_records`); Scapy's raw readers remain as
the reference (scapy_reader.py) and read whatever the fast path does not know.
"""

from __future__ import annotations

import os
from typing import Iterator

from amqpcap.capture.readers.boundaries import (
    LEARN_BYTES,
    PCAP_HEADER,
    PCAP_MAGICS,
    PCAPNG_MAGIC,
    block_length,
    pcap_rules,
)
from amqpcap.capture.readers.info import LINK_TYPE_NAMES, CaptureError, CaptureInfo, CaptureIssue
from amqpcap.capture.readers.pcap import PcapReader
from amqpcap.capture.readers.pcapng import PcapngReader
from amqpcap.capture.readers.source import GZIP_MAGIC, GzipStream, Window, is_seekable, open_stream, read_exactly

__all__ = ["CaptureError", "CaptureInfo", "CaptureIssue", "LINK_TYPE_NAMES", "read_records", "split_points",
           "rangeable"]


def read_records(path: str, info: CaptureInfo | None = None, source=None, *, start: int = 0,
                 end: int | None = None, offsets: bool = False) -> Iterator[tuple]:
    """(timestamp in ns, link type, captured bytes) for each packet record of the file.

    `info`, when given, is filled in: format, link types and snaplen at once; counts, issues
    and offsets as reading goes and ends. `source`: an open binary file to read instead of
    opening `path` (any object with `read`; `path` then only names it); path "-" is stdin.
    `start`/`end`: read only the records of that byte range (see the module docstring); needs
    an uncompressed file that can seek (`rangeable`).
    `offsets`: a record of an uncompressed pcap or pcapng file read on the fast path also says
    where its bytes lie in the file: (timestamp, link type, bytes, offset). Records found on the
    slow paths (around damage, at the file's end) and those of other files have no offset.
    Raises CaptureError at once for a file that cannot be read as a capture.
    """
    info = info if info is not None else CaptureInfo(path, _size(path))
    ranged = start > 0 or end is not None
    stream, opened = open_stream(path, source)
    close = stream.close if opened else None
    try:
        origin = stream.tell() if is_seekable(stream) else 0
        head = read_exactly(stream, 4)
        compressed = head.startswith(GZIP_MAGIC)
        if compressed:
            if ranged:
                raise CaptureError(path, "a gzip-compressed capture cannot be read in byte ranges")
            stream = GzipStream(stream, head)
            head = read_exactly(stream, 4)
        if ranged and start > 0 and not is_seekable(stream):
            raise CaptureError(path, "byte ranges need a file that can seek")
        window = Window(stream, head)
        offsets = offsets and not compressed and window.seekable
        if head in PCAP_MAGICS:
            reader = _pcap(path, window, info, start, end, close, offsets)
        elif head == PCAPNG_MAGIC:
            reader = _pcapng(path, window, info, start, end, close, offsets)
        else:
            return _fallback(path, info, source, head, close, compressed, origin)
        if compressed:
            info.format += "+gzip"
        return reader.records()
    except BaseException:
        if close is not None:
            close()
        raise


def _pcap(path: str, window: Window, info: CaptureInfo, start: int, end: int | None, close,
          offsets: bool = False) -> PcapReader:
    window.extend(0, PCAP_HEADER + LEARN_BYTES)  # the first records teach the origlen rule
    rules = pcap_rules(window.buf, 0)
    if rules is None:
        raise CaptureError(path, "not a pcap or pcapng capture (the pcap header is cut short)")
    rules.learn_origlen(window.buf, PCAP_HEADER)
    info.format = "pcap-ns" if rules.nano else "pcap"
    return PcapReader(window, info, rules, start, end, close, offsets)


def _pcapng(path: str, window: Window, info: CaptureInfo, start: int, end: int | None, close,
            offsets: bool = False) -> PcapngReader:
    window.extend(0, 28)
    length, order = block_length(window.buf, 0, "<")
    if length:
        window.extend(0, length)
        length, order = block_length(window.buf, 0, "<")
    if not length or len(window.buf) < length:
        raise CaptureError(path, "not a pcap or pcapng capture (its section header is damaged or cut short)")
    info.format = "pcapng"
    return PcapngReader(window, info, start, end, close, order, offsets)


def _fallback(path: str, info: CaptureInfo, source, head: bytes, close, compressed: bool, origin: int):
    """A file the fast path does not know: Scapy's readers try it. They start over from the
    beginning, so a pipe already read from cannot be given to them."""
    from amqpcap.capture.readers import scapy_reader  # Scapy (and numpy) loaded only here: ~0.1 s of every start
    if not head:
        raise CaptureError(path, "not a pcap or pcapng capture (empty" + (" after decompression)" if compressed
                                                                           else " file)"))
    if source is None and path != "-":
        if close is not None:
            close()
        return scapy_reader.read_records(path, info)
    if is_seekable(source):
        source.seek(origin)
        return scapy_reader.read_records(path, info, source)
    raise CaptureError(path, f"not a pcap or pcapng capture (it starts with {head.hex()})")


def split_points(size: int, target_bytes: int) -> list[int]:
    """Cut points 0 = x0 < x1 < ... < xn = size for ranges of about `target_bytes` each: read
    [x_i, x_i+1) with read_records(..., start=x_i, end=x_i+1)."""
    parts = max(1, round(size / max(1, target_bytes)))
    return sorted({size * i // parts for i in range(parts + 1)})


def rangeable(path: str, source=None) -> bool:
    """Whether the capture can be read in byte ranges: uncompressed pcap or pcapng, seekable."""
    try:
        stream, opened = open_stream(path, source)
    except CaptureError:
        return False
    try:
        if not is_seekable(stream):
            return False
        position = stream.tell()
        head = read_exactly(stream, 4)
        stream.seek(position)
        return head in PCAP_MAGICS or head == PCAPNG_MAGIC
    finally:
        if opened:
            stream.close()


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
