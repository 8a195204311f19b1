"""Payloads the read stage leaves in the capture file: where the bytes lie, not a copy of them.

Staging a copy of every TCP payload wrote the whole night once more (as much as the captures
themselves) and read it back: on a 2 GB night a fifth to a third of the read stage's time, most of
it the kernel copying into the page cache. For an uncompressed local capture, the read stage
stages each payload's place instead (amqpcap.capture.packets.Segment.at and .size), and names the file
in the staged file's schema metadata; the decode stage maps the capture into memory and copies
each payload out of it as it makes the segment. Segments whose payload is not one stretch of a
record (reassembled IP fragments), records read on the readers' slow paths, and compressed or
remote captures stage their bytes as before. The capture must stay as it was until the run ends:
one replaced since it was read (another file under that name) or cut shorter fails the task with
CaptureChanged rather than decode other bytes; one appended to (tcpdump still writing) is fine.
"""

from __future__ import annotations

import mmap
import os

import pyarrow as pa

PATH_KEY, IDENTITY_KEY = b"amqpcap.capture", b"amqpcap.capture_identity"
RELEASE_BYTES = 4 << 20  # pages already read are released from the task's memory map per this much


class CaptureChanged(RuntimeError):
    """A capture file is not the one the read stage read."""


def placing_schema(schema: pa.Schema, path: str, source) -> pa.Schema:
    """`schema` naming `path` (open as `source`) as where its payloads lie."""
    return schema.with_metadata({PATH_KEY: path.encode(), IDENTITY_KEY: _identity(os.fstat(source.fileno()))})


def _identity(stat: os.stat_result) -> bytes:
    return f"{stat.st_dev}:{stat.st_ino}".encode()


class CaptureBytes:
    """The capture a staged file's payloads lie in, mapped when a batch first needs it: `view` is
    its bytes (a memoryview of the map); `release(offset)` gives back the pages before `offset`,
    which the task has read (segments come in file order), so its memory does not grow with the
    file. Use as a context manager."""

    def __init__(self, metadata: dict | None) -> None:
        metadata = metadata or {}
        self.path = metadata[PATH_KEY].decode() if PATH_KEY in metadata else None
        self.identity = metadata.get(IDENTITY_KEY)
        self.map: mmap.mmap | None = None
        self.view: memoryview | None = None
        self.released = 0

    def open(self) -> memoryview:
        if self.view is not None:
            return self.view
        if self.path is None:
            raise ValueError("a staged batch places payloads in a capture, but its file names none")
        try:
            with open(self.path, "rb") as source:
                stat = os.fstat(source.fileno())
                if _identity(stat) != self.identity or stat.st_size == 0:
                    raise CaptureChanged(f"{self.path}: the capture was replaced after the read stage read it "
                                         "(this run's decode stage reads its payloads from it): run again")
                self.map = mmap.mmap(source.fileno(), 0, access=mmap.ACCESS_READ)
        except FileNotFoundError:
            raise CaptureChanged(f"{self.path}: the capture was removed after the read stage read it (this "
                                 "run's decode stage reads its payloads from it): run again") from None
        self.view = memoryview(self.map)
        return self.view

    def release(self, offset: int) -> None:
        if self.map is None or offset - self.released < RELEASE_BYTES:
            return
        end = offset - offset % mmap.PAGESIZE
        self.map.madvise(mmap.MADV_DONTNEED, self.released, end - self.released)
        self.released = end

    def close(self) -> None:
        if self.view is not None:
            self.view.release()
            self.view = None
        if self.map is not None:
            self.map.close()
            self.map = None

    def __enter__(self) -> "CaptureBytes":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
