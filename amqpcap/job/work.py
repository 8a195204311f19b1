"""What crosses the line between the driver and the executors, typed: msgspec Structs, like the
settings (amqpcap.settings), pickled by Spark once each way. No positional tuple, no field
order to zip, no JSON inside JSON.

    driver                          executors
    ReadUnit (amqpcap.job.plan)  ->   read task: ReadResult (what it staged, ReadFacts)
    BucketWork, RunContext     ->   decode task: the table files it wrote (amqpcap.lake.tablefiles.TableFile)
"""

from __future__ import annotations

import msgspec

from amqpcap.capture.readers import CaptureInfo


class ReadUnit(msgspec.Struct, frozen=True):
    """A capture file whole, or a byte range of it, for one read task (amqpcap.job.plan)."""

    unit: int
    file_index: int
    uri: str
    start: int
    end: int | None  # None: to the end of the file
    size: int  # the file's

    @property
    def length(self) -> int:
        return (self.end if self.end is not None else self.size) - self.start


class ReadFacts(msgspec.Struct):
    """What reading a unit found."""

    info: CaptureInfo  # records, link types, damage (merged into the file's by the driver)
    status: str  # ok, failed
    error: str | None
    segments: int  # TCP segments staged
    spans: dict[int, tuple[int, int]]  # bucket -> (earliest, latest) packet time of its segments
    records: int  # packet records read
    tcp_streams: int  # the unit's local TCP streams
    skipped_packets: dict[str, int]  # why a record made no segment -> how many
    fingerprint: str | None  # of the file's first bytes (a unit starting at 0 only)


class ReadResult(msgspec.Struct):
    unit: int
    staged: dict[int, int]  # bucket -> segments staged
    facts: ReadFacts


class BucketFile(msgspec.Struct):
    """One file's units that staged segments of a bucket, in byte order, and the time they span."""

    file_index: int
    units: list[int]
    earliest: int | None = None  # (None: not known, the files are then merged by time whole)
    latest: int | None = None


class BucketWork(msgspec.Struct):
    """A decode task's bucket: its files, in file order."""

    bucket: int
    files: list[BucketFile]


class RunContext(msgspec.Struct):
    """What every decode task needs to end its connections as the run's captures end."""

    capture_end_ns: int | None = None
    closing_source: str | None = None  # the file that ends them: the `source` of what ending makes
