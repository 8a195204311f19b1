"""Where a frame may start, for a reader resynchronising inside bytes it cannot frame (a capture that
began mid-stream, bytes lost to a gap, a corrupt frame): a cheap filter over every offset, which
FrameReader._judge then decides on.

A candidate is a frame type octet the spec defines, any channel, and a size whose high octets allow it
to be at most the limit. Every offset is a candidate in its own right, including one inside the bytes
of a candidate just rejected: a real frame often starts there (garbage `01 xx` then a frame `01 00 01
00 00 ...` matches at the garbage first).

    starts = frame_start_for(codec, limit)
    i = starts.find(buf, i)   # the first candidate at or after i whose bytes have all arrived; -1: none

Compiled, `find` is a loop over the bytes (a few instructions each); interpreted, a regular expression
search does the same test, faster in Python than a loop.
"""

from __future__ import annotations

import functools
import re

from amqpcap.protocol.codec import Codec

FRAME_START_BYTES = 5  # what a candidate's test looks at, at most
COMPILED = __file__.endswith((".so", ".pyd"))


class FrameStart:
    def __init__(self, frame_types, limit: int) -> None:
        """`frame_types`: the type octets the spec defines; `limit`: the largest frame size believed."""
        types = bytearray(256)
        for frame_type in frame_types:
            types[frame_type] = 1
        self.types = bytes(types)
        self.high, self.second = limit >> 24, (limit >> 16) & 0xFF
        # the bytes a candidate's test needs: the type, the channel, and the size octets it bounds
        self.needed = 3 if self.high >= 0xFF else 4 if self.high else FRAME_START_BYTES
        allowed = b"[" + re.escape(bytes(sorted(frame_types))) + b"]"
        if self.high >= 0xFF:
            size = b""
        elif self.high:
            size = b"[\\x00-" + re.escape(bytes([self.high])) + b"]"
        else:
            size = b"\\x00[\\x00-" + re.escape(bytes([self.second])) + b"]"
        self.pattern = re.compile(allowed + b"[\\x00-\\xff]{2}" + size)

    def find(self, buf, start: int) -> int:
        if not COMPILED:
            match = self.pattern.search(buf, start)
            return match.start() if match is not None else -1
        return self.scan(buf, start)

    def scan(self, buf, start: int) -> int:
        """`find` as a loop over the bytes (what the compiled build runs)."""
        view = buf  # (compiled: a typed view of bytes or bytearray)
        types = self.types  # (compiled: a typed view)
        high, second, last = self.high, self.second, len(buf) - self.needed
        i = start if start > 0 else 0
        while i <= last:
            if types[view[i]]:
                if high >= 0xFF:
                    return i
                if high:
                    if view[i + 3] <= high:
                        return i
                elif view[i + 3] == 0 and view[i + 4] <= second:
                    return i
            i += 1
        return -1


@functools.lru_cache(maxsize=16)
def frame_start_for(codec: Codec, limit: int) -> FrameStart:
    """One per spec and limit, shared by every connection decoded with them."""
    return FrameStart(codec.frame_types, limit)
