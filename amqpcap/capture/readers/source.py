"""Bytes in: opening a path, an open binary file or stdin; gzip found by its magic bytes (not the
file name) and decompressed as a stream; the `Window` the format readers parse from.

Everything here reads forward with `read(n)` only, so a pipe works (`tcpdump -w - | amqpcap
decode -`); seeking is needed only to read a byte range.
"""

from __future__ import annotations

import sys
import zlib

from amqpcap.capture.readers.info import GZIP_DAMAGED, CaptureError, CaptureIssue

CHUNK = 1 << 20  # bytes per read: large reads keep the per-record cost to slicing
GZIP_MAGIC = b"\x1f\x8b"
GZIP_INPUT = 1 << 16  # compressed bytes per decompress call: damage loses at most this call's output


class Window:
    """A stretch of the (decompressed) stream: `buf` holds the bytes from absolute offset `base`.

    The readers keep `buf` and their position in locals and call `extend` when a record runs past
    its end; `eof` says that `buf` ends where the stream ends.
    """

    __slots__ = ("stream", "buf", "base", "eof", "seekable", "origin")

    def __init__(self, stream, buf: bytes = b"") -> None:
        """`buf`: the first bytes of the stream, already read from it."""
        self.stream = stream
        self.buf = buf
        self.base = 0
        self.eof = False
        # A file that can seek rereads the few bytes of a record cut by the end of a read instead
        # of gluing them to the next read: that glue would copy every byte of the file once more.
        self.seekable = is_seekable(stream)
        # where the capture starts in that file (offsets are counted from there)
        self.origin = stream.tell() - len(buf) if self.seekable else 0

    def extend(self, p: int, need: int) -> None:
        """Drop `buf[:p]` and read until `buf` holds at least `need` bytes or the stream ends.
        The caller's position `p` becomes 0."""
        buf = self.buf
        self.base += p
        kept = len(buf) - p
        if kept >= need or self.eof:
            self.buf = buf[p:] if p else buf
            return
        if self.seekable and kept < CHUNK // 4:
            self.stream.seek(self.origin + self.base)
            self.buf = read_exactly(self.stream, max(CHUNK, need))
            self.eof = len(self.buf) < max(CHUNK, need)
            return
        parts = [buf[p:] if p else buf]
        while kept < need:
            data = self.stream.read(max(CHUNK, need - kept))
            if not data:
                self.eof = True
                break
            parts.append(data)
            kept += len(data)
        self.buf = parts[0] if len(parts) == 1 else b"".join(parts)

    def seek(self, offset: int) -> None:
        """Restart at `offset` (seekable uncompressed files only)."""
        self.stream.seek(self.origin + offset)
        self.buf, self.base, self.eof = b"", offset, False


class GzipStream:
    """The decompressed bytes of a gzip stream (any number of members), with `read(n)` like a file.

    Damage never raises: a corrupt or truncated stream ends the decompressed bytes where they stop
    being trustworthy, keeps everything before, and leaves a `gzip-damaged` issue in `issues` for
    the reader to report (its offset is in the decompressed stream).
    """

    def __init__(self, raw, prefix: bytes) -> None:
        self.raw = raw
        self.pending = prefix  # compressed bytes read but not yet given to the decompressor
        self.inflate = zlib.decompressobj(31)
        self.ready = b""  # decompressed bytes salvaged before damage, not yet handed out
        self.offset = 0  # decompressed bytes produced
        self.read_in = len(prefix)  # compressed bytes read
        self.consumed = 0  # compressed bytes decompressed
        self.done = False
        self.issues: list[CaptureIssue] = []

    def read(self, n: int) -> bytes:
        while True:
            if self.ready:
                out, self.ready = self.ready[:n], self.ready[n:]
                return out
            if self.done:
                return b""
            data = self.inflate.unconsumed_tail or self._input()
            if not data:
                if not self.inflate.eof:
                    self._damage("the compressed stream ends inside a gzip member (a truncated file)")
                self.done = True
                continue
            before = self.inflate.copy()
            try:
                out = self.inflate.decompress(data, n)
            except zlib.error as error:
                self._salvage(before, data)
                self._damage(f"corrupt compressed data ({error})")
                continue
            # (bytes after a member's end are the next member's: consumed when it is decompressed)
            self.consumed += len(data) - len(self.inflate.unconsumed_tail) - len(self.inflate.unused_data)
            self.offset += len(out)
            if self.inflate.eof:
                self._next_member()
            if out:
                return out

    def _input(self) -> bytes:
        if self.pending:
            data, self.pending = self.pending[:GZIP_INPUT], self.pending[GZIP_INPUT:]
            return data
        data = self.raw.read(GZIP_INPUT)
        self.read_in += len(data)
        return data

    def _salvage(self, inflate, data: bytes) -> None:
        """A decompressor that raises loses the output of its whole call: decompress `data` again
        one byte at a time, from the state before the call, to keep everything before the damage."""
        parts = []
        for i in range(len(data)):
            try:
                parts.append(inflate.decompress(data[i:i + 1]))
            except zlib.error:
                break
            self.consumed += 1
        self.ready = b"".join(parts)
        self.offset += len(self.ready)

    def _next_member(self) -> None:
        """A member ended: go on with the next one. Zero padding after the last member ends the
        stream quietly (as gzip does); other bytes there are reported."""
        rest = self.inflate.unused_data + self.pending
        self.pending = b""
        while len(rest) < 2:
            more = self.raw.read(GZIP_INPUT)
            if not more:
                break
            self.read_in += len(more)
            rest += more
        if rest.startswith(GZIP_MAGIC):
            self.inflate = zlib.decompressobj(31)
            self.pending = rest
            return
        self.done = True
        if not rest.strip(b"\x00") and self._only_zeros_follow():
            self.consumed = self.read_in  # padding, as gzip allows
            return
        self._damage("bytes after the last gzip member are not gzip")

    def _only_zeros_follow(self) -> bool:
        zeros = True
        while data := self.raw.read(CHUNK):
            self.read_in += len(data)
            zeros = zeros and not data.strip(b"\x00")
        return zeros

    def _damage(self, what: str) -> None:
        while data := self.raw.read(CHUNK):  # counted, so the issue can say how much was lost
            self.read_in += len(data)
        skipped = self.read_in - self.consumed
        self.done = True
        self.issues.append(CaptureIssue(
            GZIP_DAMAGED, f"{what}: the decompressed bytes end at offset {self.offset}; {skipped} of "
            f"{self.read_in} compressed bytes are not decoded", 0, skipped, self.offset, self.offset))


def open_stream(path: str, source=None):
    """(binary file object, whether this call opened it) for a path, "-" (stdin) or a given file."""
    if source is not None:
        return source, False
    if path == "-":
        return sys.stdin.buffer, False
    try:
        if "://" in path:  # object storage (amqpcap.capture.inputs opens any filesystem pyarrow does)
            from amqpcap.capture.inputs import open_input
            return open_input(path), True
        return open(path, "rb"), True
    except FileNotFoundError:
        raise CaptureError(path, "no such file") from None
    except IsADirectoryError:
        raise CaptureError(path, "is a directory") from None
    except PermissionError:
        raise CaptureError(path, "permission denied") from None
    except OSError as error:
        raise CaptureError(path, f"cannot open: {error}") from None


def read_exactly(stream, n: int) -> bytes:
    """Up to n bytes; fewer only at the end of the stream (a pipe may return short reads)."""
    data = stream.read(n)
    if len(data) >= n or not data:
        return data
    parts = [data]
    have = len(data)
    while have < n:
        more = stream.read(n - have)
        if not more:
            break
        parts.append(more)
        have += len(more)
    return b"".join(parts)


def is_seekable(stream) -> bool:
    try:
        return bool(stream.seekable())
    except (AttributeError, OSError, ValueError):
        return False
