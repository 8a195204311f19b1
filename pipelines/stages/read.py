"""Stage 1: read units -> TCP segments staged per connection bucket.

A unit is a whole capture file or, for a big uncompressed one, a byte range of it (several tasks
read one file). Each record's link/IP/TCP headers are parsed; the segment goes to the bucket of its
connection (a stable hash of the 4-tuple, the same from either direction), into an Arrow IPC file
per (unit, bucket) in capture order. The decode stage then reads, for its bucket, every unit's
file: all segments of its connections, from every file of the run, and nothing else. What reading
found (records, link types, damage) comes back as the unit's facts, and its local TCP streams are
staged beside its segments: from both the driver numbers records and TCP streams as Wireshark does
in each file (pipelines.stages.numbering).
"""

from __future__ import annotations

import dataclasses
import zlib
from typing import Iterator

import pyarrow as pa

from amqp_decode.capture import CaptureError, CaptureInfo, CaptureIssue, read_records
from amqp_decode.gc_policy import fewer_collections
from amqp_decode.packets import PacketParser
from amqp_decode.stream_index import RangeStreams
from pipelines.inputs import fingerprint, open_input
from pipelines.progress import TaskProgress
from pipelines.stages.numbering import stage_streams
from pipelines.stages.staged import StagedFiles
from pipelines.tablefiles import filesystem_of

SEGMENTS = pa.schema([
    ("ts_ns", pa.int64()), ("record", pa.int64()),  # record: index of the packet record in its unit
    ("stream", pa.int32()),  # the unit's local TCP stream (amqp_decode.stream_index)
    ("src", pa.binary()), ("sport", pa.int32()), ("dst", pa.binary()), ("dport", pa.int32()),
    ("seq", pa.int64()), ("ack", pa.int64()), ("flags", pa.int32()), ("payload", pa.binary()),
])
UNIT_FIELDS = ("unit", "file_index", "uri", "start", "end", "size")  # pipelines.plan.Unit, as a tuple
FLUSH_ROWS = 8192
REPORT_EVERY = 4096  # records between two progress reports


def bucket_of(src: bytes, sport: int, dst: bytes, dport: int, buckets: int) -> int:
    """The connection's bucket: stable across processes and runs, and the same from either side."""
    a, b = src + sport.to_bytes(2, "big"), dst + dport.to_bytes(2, "big")
    return zlib.crc32(a + b if a <= b else b + a) % buckets


def staged_path(staging: str, unit: int, bucket: int) -> str:
    return f"{staging}/u{unit:06d}-b{bucket:05d}.arrow"


def read_task(units: Iterator[tuple], staging: str, buckets: int) -> Iterator[tuple[int, dict, dict]]:
    """Units (UNIT_FIELDS tuples) -> (unit, {bucket: segments staged}, facts)."""
    for values in units:
        unit = dict(zip(UNIT_FIELDS, values))
        progress = TaskProgress(staging, f"read-{unit['unit']}")
        with fewer_collections():
            staged, facts = read_unit(unit, staging, buckets, progress)
        progress.close()
        yield unit["unit"], staged, facts


def read_unit(unit: dict, staging: str, buckets: int,
              progress: TaskProgress | None = None) -> tuple[dict[int, int], dict]:
    """Stage one unit; returns ({bucket: segments staged}, facts). The facts' `spans`: {bucket:
    [earliest, latest] packet time of its segments}."""
    uri, start, end = unit["uri"], unit["start"], unit["end"]
    info = CaptureInfo(uri, unit["size"])
    parser = PacketParser()
    writer = _BucketWriter(staging, unit["unit"], buckets)
    streams = RangeStreams()
    status, error, records = "ok", None, 0
    try:
        with open_input(uri) as source:
            read = 0
            for records, (ts_ns, link_type, data) in enumerate(_records(uri, info, source, start, end), 1):
                read += len(data) + 16
                segment = parser.parse(ts_ns, link_type, data)
                if segment is not None:
                    writer.add(segment, records - 1, streams.segment(segment.src, segment.sport, segment.dst,
                                                                     segment.dport, segment.flags, segment.seq, ts_ns))
                if records % REPORT_EVERY == 0 and progress is not None:
                    progress.add(bytes=read, packets=REPORT_EVERY)
                    read = 0
            if progress is not None:
                progress.add(bytes=read, packets=records % REPORT_EVERY)
    except CaptureError as failure:
        status, error = "failed", failure.reason
    except FileNotFoundError:
        status, error = "failed", "no such file"
    except OSError as failure:
        status, error = "failed", f"cannot read: {failure}"
    parser.finish()
    staged = writer.close()
    stage_streams(staging, unit["unit"], streams.streams)
    facts = {"info": info_to_json(info), "status": status, "error": error, "segments": sum(staged.values()),
             "spans": writer.spans,
             "records": records, "tcp_streams": streams.count,
             "skipped_packets": dict(parser.skipped),
             "fingerprint": fingerprint(uri, unit["size"]) if start == 0 and status != "failed" else None}
    return staged, facts


def info_to_json(info: CaptureInfo) -> dict:
    """What reading found, as plain data (it travels back to the driver, which merges a file's ranges)."""
    data = dataclasses.asdict(info)
    data["link_types"], data["resolutions"] = sorted(info.link_types), sorted(info.resolutions)
    return data


def info_from_json(data: dict) -> CaptureInfo:
    fields = dict(data)
    fields["link_types"], fields["resolutions"] = set(fields["link_types"]), set(fields["resolutions"])
    fields["issues"] = [CaptureIssue(**issue) for issue in fields["issues"]]
    for key in ("start_header", "end_header"):
        fields[key] = _tuples(fields[key])
    return CaptureInfo(**fields)


def _tuples(value):
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _records(uri, info, source, start, end):
    if start == 0 and end is None:
        return read_records(uri, info, source)
    return read_records(uri, info, source, start=start, end=end)


class _BucketWriter:
    """Segments into one staged IPC file per bucket of connections."""

    def __init__(self, staging: str, unit: int, buckets: int) -> None:
        filesystem, root = filesystem_of(staging)
        self.buckets = buckets
        self.files = StagedFiles(filesystem, SEGMENTS, lambda bucket: staged_path(root, unit, bucket), FLUSH_ROWS)
        self.keys: dict[tuple, int] = {}  # 4-tuple -> bucket (one hash per connection, not per packet)
        self.spans: dict[int, list[int]] = {}  # bucket -> [earliest, latest] time (a file's may go back)

    def add(self, s, record: int, stream: int) -> None:
        key = (s.src, s.sport, s.dst, s.dport)
        bucket = self.keys.get(key)
        if bucket is None:
            if len(self.keys) > 100_000:
                self.keys.clear()
            bucket = self.keys[key] = bucket_of(s.src, s.sport, s.dst, s.dport, self.buckets)
        span = self.spans.get(bucket)
        if span is None:
            self.spans[bucket] = [s.ts_ns, s.ts_ns]
        elif s.ts_ns < span[0]:
            span[0] = s.ts_ns
        elif s.ts_ns > span[1]:
            span[1] = s.ts_ns
        self.files.add(bucket, (s.ts_ns, record, stream, s.src, s.sport, s.dst, s.dport, s.seq, s.ack, s.flags,
                                s.payload))

    def close(self) -> dict[int, int]:
        return self.files.close()
