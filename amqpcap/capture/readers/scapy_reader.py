"""Capture files to link-layer records through Scapy's raw readers (no dissection): the reference
the fast reader is tested against, and the reader of whatever the fast path does not know.

pcap (micro- and nanosecond, either byte order), pcapng (any number of interfaces, each with its
own link type and timestamp resolution) and gzip-compressed files of either. A damaged tail (a
rotated capture cut mid-record) ends the file with what was read plus a `CaptureIssue`; a file that
is not a capture at all raises `CaptureError` naming it.
"""

from __future__ import annotations

import logging
import os
from typing import Iterator

from scapy.error import Scapy_Exception
from scapy.utils import RawPcapNgReader, RawPcapReader

from amqpcap.capture.readers.info import CaptureError, CaptureInfo, CaptureIssue

# Read records whole: Scapy's default cut is 65535 bytes, shorter than a loopback TCP segment.
MAX_RECORD = 1 << 18


def _quiet_scapy() -> None:
    # Scapy logs damaged records as warnings; they are reported as CaptureIssues instead.
    logging.getLogger("scapy.runtime").setLevel(logging.ERROR)


def open_capture(path: str, source=None):
    """A Scapy raw reader for `path`, or for the already open binary file `source` (any seekable
    file object, e.g. a pyarrow NativeFile on s3:// or hdfs://; `path` then only names it)."""
    _quiet_scapy()
    try:
        return RawPcapReader(source if source is not None else path)
    except FileNotFoundError:
        raise CaptureError(path, "no such file") from None
    except IsADirectoryError:
        raise CaptureError(path, "is a directory") from None
    except PermissionError:
        raise CaptureError(path, "permission denied") from None
    except (Scapy_Exception, EOFError, OSError) as error:
        raise CaptureError(path, f"not a pcap or pcapng capture ({error})") from None


def read_records(path: str, info: CaptureInfo | None = None,
                 source=None) -> Iterator[tuple[int, int, bytes]]:
    """(timestamp in ns, link type, record bytes) for each packet record of the file.

    `info`, when given, is filled in (format, link types, counts, issues); a classic pcap's
    counts are added when reading ends, which keeps its per-record loop lean.
    `source`, when given, is the open file to read instead of opening `path`.
    Raises CaptureError at once for a file Scapy cannot open.
    """
    info = info if info is not None else CaptureInfo(path, _size(path))
    return _records(open_capture(path, source), info)


def _records(reader, info: CaptureInfo) -> Iterator[tuple[int, int, bytes]]:
    compressed = type(reader.f).__name__ == "GzipFile"
    try:
        if isinstance(reader, RawPcapNgReader):
            info.format = "pcapng"
            records = _pcapng(reader, info)
        else:
            info.format = "pcap-ns" if reader.nano else "pcap"
            info.resolutions.add(10**9 if reader.nano else 10**6)
            records = _pcap(reader, info)
        if compressed:
            info.format += "+gzip"
        yield from records
    finally:
        reader.close()


def _pcap(reader, info: CaptureInfo) -> Iterator[tuple[int, int, bytes]]:
    """Classic pcap, the bulk of real captures: the per-record loop kept lean. Every record is a
    16-byte header plus `caplen` bytes (Scapy skips what it does not return), so the position of
    the last whole record is known without asking the file."""
    scale = 1 if reader.nano else 1000
    link_type = reader.linktype
    info.link_types.add(link_type)
    read = reader._read_packet  # Scapy's raw API for unparsed records
    position = _tell(reader)
    index = records_bytes = 0
    ts_ns = None
    try:
        while True:
            try:
                data, meta = read(size=MAX_RECORD)
            except EOFError:
                _truncated_tail(info, index, _tell(reader) - position)
                return
            except (OSError, Scapy_Exception) as error:
                info.issues.append(CaptureIssue("truncated-file", f"reading stopped: {error}", index, 0))
                return
            caplen = meta.caplen
            position += 16 + caplen
            ts_ns = meta.sec * 1_000_000_000 + meta.usec * scale
            if index == 0:
                info.first_ts_ns = ts_ns
            if len(data) < caplen:
                info.issues.append(_cut_record(index, data, caplen))
            index += 1
            records_bytes += len(data)
            yield ts_ns, link_type, data
    finally:
        info.records += index
        info.bytes += records_bytes
        if ts_ns is not None:
            info.last_ts_ns = ts_ns


def _pcapng(reader, info: CaptureInfo) -> Iterator[tuple[int, int, bytes]]:
    """pcapng: blocks of several kinds interleave with packets, so positions come from the file."""
    records = _pcapng_packets(reader, info.resolutions)
    index = 0
    while True:
        position = _tell(reader)
        try:
            ts_ns, link_type, data, caplen = next(records)
        except StopIteration:
            _truncated_tail(info, index, _tell(reader) - position)
            return
        except (EOFError, OSError, Scapy_Exception) as error:
            info.issues.append(CaptureIssue("truncated-file", f"reading stopped: {error}", index, 0))
            return
        _account(info, index, ts_ns, link_type, data, caplen)
        index += 1
        yield ts_ns, link_type, data


def _account(info: CaptureInfo, index: int, ts_ns: int, link_type: int, data: bytes, caplen: int) -> None:
    if len(data) < caplen:
        info.issues.append(_cut_record(index, data, caplen))
    info.records += 1
    info.bytes += len(data)
    info.link_types.add(link_type)
    if info.first_ts_ns is None:
        info.first_ts_ns = ts_ns
    info.last_ts_ns = ts_ns


def _cut_record(index: int, data: bytes, caplen: int) -> CaptureIssue:
    return CaptureIssue("truncated-record", f"record {index} holds {len(data)} of its {caplen} bytes",
                        index, 0)


def _truncated_tail(info: CaptureInfo, index: int, leftover: int) -> None:
    if leftover > 0:
        info.issues.append(CaptureIssue(
            "truncated-file", f"{leftover} bytes at the end do not form a complete record (a "
            "capture cut while being written?)", index, leftover))


def _pcapng_packets(reader, resolutions: set[int]) -> Iterator[tuple[int, int, bytes, int]]:
    while True:
        try:
            data, meta = reader._read_packet(size=MAX_RECORD)
        except EOFError:
            return
        ticks = (meta.tshigh << 32) | meta.tslow
        resolution = meta.tsresol or 1_000_000
        resolutions.add(resolution)
        yield ticks * 1_000_000_000 // resolution, meta.linktype, data, len(data)


def _tell(reader) -> int:
    try:
        return reader.f.tell()
    except (OSError, ValueError):
        return 0


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
