"""Stage 1: read units -> TCP segments staged per connection bucket.

A unit is a whole capture file or, for a big uncompressed one, a byte range of it (several tasks
read one file). Each record's link/IP/TCP headers are parsed; the segment goes to the bucket of its
connection (a stable hash of the 4-tuple, the same from either direction), into an Arrow IPC file
per (unit, bucket) in capture order: the per-packet work is one compiled loop
(amqpcap.capture.bucketing). The decode stage then reads, for its bucket, every unit's file: all
segments of its connections, from every file of the run, and nothing else. What reading
found (records, link types, damage) comes back as the unit's facts, and its local TCP streams are
staged beside its segments: from both the driver numbers records and TCP streams as Wireshark does
in each file (amqpcap.job.stages.numbering). With `place_payloads`, the payloads of an uncompressed
local capture stay where they are: the segments say where (amqpcap.job.stages.placed).
"""

from __future__ import annotations

import os
from typing import Iterator

import pyarrow as pa

from amqpcap.capture.bucketing import HeldSegments, SegmentBuckets
from amqpcap.capture.inputs import fingerprint, local_path, open_input
from amqpcap.capture.readers import CaptureError, CaptureInfo, read_records
from amqpcap.job.progress import TaskProgress
from amqpcap.job.stages.numbering import stage_streams
from amqpcap.job.stages.placed import placing_schema
from amqpcap.job.stages.staged import StagedFiles
from amqpcap.job.work import ReadFacts, ReadResult, ReadUnit
from amqpcap.lake.tablefiles import filesystem_of
from amqpcap.process import fewer_collections, prepare_worker

# The rows amqpcap.capture.bucketing makes (its SEGMENT_COLUMNS; a test keeps the two equal)
SEGMENTS = pa.schema([
    ("ts_ns", pa.int64()), ("record", pa.int64()),  # record: index of the packet record in its unit
    ("stream", pa.int32()),  # the unit's local TCP stream (amqpcap.capture.stream_index)
    ("src", pa.binary()), ("sport", pa.int32()), ("dst", pa.binary()), ("dport", pa.int32()),
    ("seq", pa.int64()), ("ack", pa.int64()), ("flags", pa.int32()), ("payload", pa.binary()),
    ("at", pa.int64()), ("size", pa.int32()),  # where the payload lies in the capture (-1: in `payload`)
])
FLUSH_ROWS = 8192
# Payload bytes a task holds before writing, all buckets together: 8192 rows per bucket alone held
# 56 MB of Python objects with 4 buckets (a loopback packet is up to 64 KiB), and more for more buckets.
HELD_BYTES = 16 << 20


def staged_path(staging: str, unit: int, bucket: int) -> str:
    return f"{staging}/u{unit:06d}-b{bucket:05d}.arrow"


def read_task(units: Iterator[ReadUnit], staging: str, buckets: int,
              place_payloads: bool = False) -> Iterator[ReadResult]:
    """Units -> what each staged, and what reading it found."""
    prepare_worker()
    for unit in units:
        progress = TaskProgress(staging, f"read-{unit.unit}")
        with fewer_collections():
            staged, facts = read_unit(unit, staging, buckets, progress, place_payloads)
        progress.close()
        yield ReadResult(unit.unit, staged, facts)


def read_unit(unit: ReadUnit, staging: str, buckets: int, progress: TaskProgress | None = None,
              place_payloads: bool = False) -> tuple[dict[int, int], ReadFacts]:
    """Stage one unit; returns ({bucket: segments staged}, what reading found). `place_payloads`:
    see the module docstring."""
    uri, start, end = unit.uri, unit.start, unit.end
    info = CaptureInfo(uri, unit.size)
    filesystem, root = filesystem_of(staging)
    files = StagedFiles(filesystem, SEGMENTS, lambda bucket: staged_path(root, unit.unit, bucket), FLUSH_ROWS,
                        held_bytes=HELD_BYTES, buffer=HeldSegments)
    sorter = SegmentBuckets(buckets, files.parts)
    status, error = "ok", None
    share = FileShare(progress, unit.length) if progress is not None else None
    report = share.add if share is not None else None
    local = local_path(uri) if place_payloads else None
    try:
        with open_input(uri) as source:
            if local is not None:
                files.schema = placing_schema(SEGMENTS, os.path.abspath(local), source)
            sorter.read(_records(uri, info, source, start, end, local is not None), report, info)
    except CaptureError as failure:
        status, error = "failed", failure.reason
    except FileNotFoundError:
        status, error = "failed", "no such file"
    except OSError as failure:
        status, error = "failed", f"cannot read: {failure}"
    sorter.parser.finish()
    if share is not None:
        share.close()
    staged = files.close()
    stage_streams(staging, unit.unit, sorter.streams.streams)
    facts = ReadFacts(info, status, error, sum(staged.values()),
                      {bucket: tuple(span) for bucket, span in sorter.spans.items()}, sorter.records,
                      sorter.streams.count, dict(sorter.parser.skipped),
                      fingerprint(uri, unit.size) if start == 0 and status != "failed" else None)
    return staged, facts


class FileShare:
    """A unit's reading told as it goes: `bytes`, the packets' bytes read (with their record
    headers); `file_bytes`, how much of the unit's share of the file that is, which the driver
    compares with the files' sizes. The two differ (a file's own headers, pcapng's block framing,
    gzip), so the share is estimated by the packets' bytes, never past the unit's size, and made
    whole when the unit is done: once every unit is, the files are read to 100%."""

    def __init__(self, progress: TaskProgress, size: int) -> None:
        self.progress = progress
        self.size = max(size, 0)
        self.told = 0

    def add(self, read: int, packets: int) -> None:
        share = min(read, self.size - self.told)
        self.told += share
        self.progress.add(bytes=read, packets=packets, file_bytes=share)

    def close(self) -> None:
        if self.told < self.size:
            self.progress.add(file_bytes=self.size - self.told)
            self.told = self.size


def _records(uri, info, source, start, end, offsets):
    if start == 0 and end is None:
        return read_records(uri, info, source, offsets=offsets)
    return read_records(uri, info, source, start=start, end=end, offsets=offsets)
