"""What the codec returns: one small object per frame, plus the protocol header."""

from __future__ import annotations

from dataclasses import dataclass, field

from amqp_decode.errors import DecodeError, TruncatedFrame
from amqp_decode.spec import Method


@dataclass(slots=True)
class MethodFrame:
    channel: int
    method: Method
    args: dict  # keyed by snake_case spec field name; reserved fields left out
    size: int  # payload bytes
    warnings: list[DecodeError] = field(default_factory=list)
    kind = "method"

    @property
    def name(self) -> str:
        return self.method.full_name


@dataclass(slots=True)
class ContentHeader:
    channel: int
    class_id: int
    class_name: str
    weight: int
    body_size: int
    property_flags: tuple[int, ...]  # every flag word as sent, continuation words included
    properties: dict  # only the properties present, keyed by snake_case name
    size: int
    warnings: list[DecodeError] = field(default_factory=list)
    kind = "header"


@dataclass(slots=True)
class ContentBody:
    channel: int
    payload: bytes
    size: int
    kind = "body"


@dataclass(slots=True)
class Heartbeat:
    channel: int
    size: int
    warnings: list[DecodeError] = field(default_factory=list)
    kind = "heartbeat"


@dataclass(slots=True)
class OtherFrame:
    """A frame type the spec defines but this decoder does not interpret (0-9 trace, oob-*)."""

    channel: int
    frame_type: int
    type_name: str
    size: int
    kind = "other"


Frame = MethodFrame | ContentHeader | ContentBody | Heartbeat | OtherFrame


# Protocol header bytes 4..7 -> version, per the seeds' header diagrams (AMQP.md section 1.1).
# 0-9-1 writes 0, major, minor, revision; 0-9 writes class 1, instance 1, major, minor; 0-8 is
# recognised so it can be reported by name.
_HEADER_VERSIONS = {
    (0, 0, 9, 1): "0-9-1",
    (1, 1, 0, 9): "0-9",
    (1, 1, 8, 0): "0-8",
    (1, 1, 9, 1): "0-8",
}
PROTOCOL_HEADER_SIZE = 8


@dataclass(frozen=True, slots=True)
class ProtocolHeader:
    raw: bytes  # the 8 bytes as sent
    version: str | None  # "0-9-1", "0-9", "0-8"; None when not a known AMQP header
    kind = "protocol-header"

    @property
    def is_amqp(self) -> bool:
        return self.raw[:4] == b"AMQP"

    @property
    def description(self) -> str:
        if self.is_amqp:
            numbers = " ".join(str(b) for b in self.raw[4:8])
            return f"AMQP {numbers}" + (f" ({self.version})" if self.version else " (unknown version)")
        return "not AMQP: " + self.raw.hex(" ")


def parse_protocol_header(data: bytes) -> ProtocolHeader:
    """Interpret 8 bytes that start a stream. Anything not starting with 'AMQP' is kept by value."""
    raw = bytes(data[:PROTOCOL_HEADER_SIZE])
    if len(raw) < PROTOCOL_HEADER_SIZE:
        raise TruncatedFrame(f"protocol header needs {PROTOCOL_HEADER_SIZE} bytes, have {len(raw)}", 0)
    version = _HEADER_VERSIONS.get(tuple(raw[4:8])) if raw[:4] == b"AMQP" else None
    return ProtocolHeader(raw, version)


def looks_like_protocol_header(data: bytes) -> bool:
    return bytes(data[:4]) == b"AMQP"
