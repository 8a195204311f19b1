"""What the codec returns: one small object per frame, plus the protocol header."""

from __future__ import annotations

import msgspec

from amqpcap.protocol.errors import TruncatedFrame
from amqpcap.protocol.spec import Method


class Frame:
    """What every decoded frame has: its channel, its kind, its payload size, and the problems
    found inside a well-framed payload (`warnings`: typed DecodeErrors, not raised)."""

    __slots__ = ("channel", "kind", "size", "warnings")

    def __init__(self, channel: int, kind: str, size: int, warnings: list | None = None) -> None:
        self.channel = channel
        self.kind = kind  # "method", "header", "body", "heartbeat" or "other"
        self.size = size  # payload bytes
        self.warnings = warnings if warnings is not None else []

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and all(getattr(self, name) == getattr(other, name)
                                                 for name in _fields(type(self)))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n in _fields(type(self)))})"


def _fields(cls) -> list[str]:
    return [name for klass in reversed(cls.__mro__) for name in getattr(klass, "__slots__", ())]


class MethodFrame(Frame):
    __slots__ = ("method", "args")

    def __init__(self, channel: int, method: Method, args: dict, size: int, warnings: list | None = None) -> None:
        Frame.__init__(self, channel, "method", size, warnings)
        self.method = method
        self.args = args  # keyed by snake_case spec field name; reserved fields left out

    @property
    def name(self) -> str:
        return self.method.full_name


class ContentHeader(Frame):
    __slots__ = ("class_id", "class_name", "weight", "body_size", "property_flags", "properties")

    def __init__(self, channel: int, class_id: int, class_name: str, weight: int, body_size: int,
                 property_flags: tuple, properties: dict, size: int, warnings: list | None = None) -> None:
        Frame.__init__(self, channel, "header", size, warnings)
        self.class_id = class_id
        self.class_name = class_name
        self.weight = weight
        self.body_size = body_size
        self.property_flags = property_flags  # every flag word as sent, continuation words included
        self.properties = properties  # only the properties present, keyed by snake_case name


class ContentBody(Frame):
    __slots__ = ("payload",)

    def __init__(self, channel: int, payload: bytes, size: int) -> None:
        Frame.__init__(self, channel, "body", size, None)
        self.payload = payload


class Heartbeat(Frame):
    __slots__ = ()

    def __init__(self, channel: int, size: int, warnings: list | None = None) -> None:
        Frame.__init__(self, channel, "heartbeat", size, warnings)


class OtherFrame(Frame):
    """A frame type the spec defines but this decoder does not interpret (0-9 trace, oob-*)."""

    __slots__ = ("frame_type", "type_name")

    def __init__(self, channel: int, frame_type: int, type_name: str, size: int) -> None:
        Frame.__init__(self, channel, "other", size, None)
        self.frame_type = frame_type
        self.type_name = type_name


# The codec's constructors: one per frame kind it makes on every frame, each setting the fields
# directly (compiled, no argument tuple or __init__ chain per frame; the classes' own __init__ stays
# the way everything else makes frames).
def _frame(frame: Frame, channel: int, kind: str, size: int, warnings: list) -> None:
    """The fields every frame has (what Frame.__init__ sets)."""
    frame.channel = channel
    frame.kind = kind
    frame.size = size
    frame.warnings = warnings


def method_frame(channel: int, method: Method, args: dict, size: int, warnings: list) -> MethodFrame:
    frame = MethodFrame.__new__(MethodFrame)
    _frame(frame, channel, "method", size, warnings)
    frame.method = method
    frame.args = args
    return frame


def header_frame(channel: int, class_id: int, class_name: str, weight: int, body_size: int,
                 property_flags: tuple, properties: dict, size: int, warnings: list) -> ContentHeader:
    frame = ContentHeader.__new__(ContentHeader)
    _frame(frame, channel, "header", size, warnings)
    frame.class_id = class_id
    frame.class_name = class_name
    frame.weight = weight
    frame.body_size = body_size
    frame.property_flags = property_flags
    frame.properties = properties
    return frame


def heartbeat_frame(channel: int, size: int) -> Heartbeat:
    frame = Heartbeat.__new__(Heartbeat)
    _frame(frame, channel, "heartbeat", size, [])
    return frame


def body_frame(channel: int, payload: bytes, size: int) -> ContentBody:
    frame = ContentBody.__new__(ContentBody)
    _frame(frame, channel, "body", size, [])
    frame.payload = payload
    return frame


# Protocol header bytes 4..7 -> version, per the seeds' header diagrams (AMQP.md section 1.1).
# 0-9-1 writes 0, major, minor, revision; 0-9 writes class 1, instance 1, major, minor; 0-8 is
# recognised so it can be reported by name. AMQP 1.0 (OASIS, RabbitMQ 4's native protocol on the
# same port) writes a protocol id, then 1 0 0: 0 AMQP, 2 TLS, 3 SASL, each layer announced by a
# header of its own (its frames are walked, not decoded: amqpcap.connection.stream).
_HEADER_VERSIONS = {
    (0, 0, 9, 1): "0-9-1",
    (1, 1, 0, 9): "0-9",
    (1, 1, 8, 0): "0-8",
    (1, 1, 9, 1): "0-8",
    (1, 1, 0, 10): "0-10",
    (0, 1, 0, 0): "1.0",
    (2, 1, 0, 0): "1.0",
    (3, 1, 0, 0): "1.0",
}
AMQP_1_0_LAYERS = {0: "AMQP", 2: "TLS", 3: "SASL"}  # by the protocol id of a 1.0 header
PROTOCOL_HEADER_SIZE = 8


class ProtocolHeader(msgspec.Struct, frozen=True):  # (a Struct: made in C at import, amqpcap.protocol.spec says why)
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
            if self.version == "1.0":
                return f"AMQP {numbers} (1.0, {AMQP_1_0_LAYERS[self.raw[4]]})"
            return f"AMQP {numbers}" + (f" ({self.version})" if self.version else " (unknown version)")
        return "not AMQP: " + self.raw.hex(" ")


# Headers parsed lately, by their bytes, with their description and hex: every connection of a
# capture sends one of a few (a header is frozen, so one object serves them all, and its texts are
# made once); bounded, as a stream of junk gives new ones each time
_PARSED: dict = {}  # raw -> (header, description, hex)
_PARSED_HELD = 64


def parse_protocol_header(data: bytes) -> ProtocolHeader:
    """Interpret 8 bytes that start a stream. Anything not starting with 'AMQP' is kept by value."""
    raw = bytes(data[:PROTOCOL_HEADER_SIZE])
    known = _PARSED.get(raw)
    if known is not None:
        return known[0]
    if len(raw) < PROTOCOL_HEADER_SIZE:
        raise TruncatedFrame(f"protocol header needs {PROTOCOL_HEADER_SIZE} bytes, have {len(raw)}", 0)
    version = _HEADER_VERSIONS.get(tuple(raw[4:8])) if raw[:4] == b"AMQP" else None
    return _remember(ProtocolHeader(raw, version))[0]


def protocol_header_texts(header: ProtocolHeader) -> tuple[str, str]:
    """(description, hex) of a header, made once while parse_protocol_header keeps it."""
    known = _PARSED.get(header.raw)
    if known is None or known[0] != header:
        known = _remember(header)
    return known[1], known[2]


def _remember(header: ProtocolHeader) -> tuple:
    if len(_PARSED) >= _PARSED_HELD:
        _PARSED.clear()
    known = _PARSED[header.raw] = (header, header.description, header.raw.hex())
    return known


def looks_like_protocol_header(data: bytes) -> bool:
    return bytes(data[:4]) == b"AMQP"
