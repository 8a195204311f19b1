"""The decoder's typed errors. Each carries the offset where it was detected and a short detail.

Offsets are relative to the buffer the caller handed in (a frame, a payload or a stream); the
stream layer turns them into absolute stream offsets. Details never quote payload bytes, so an
error about a start-ok frame cannot leak a credential.
"""

from __future__ import annotations


class DecodeError(Exception):
    """Base class: something in the input does not decode."""

    kind = "decode-error"
    # Set by Codec.decode_frame when the error sits inside a well-framed payload: where the next
    # frame starts and which channel the bad frame was on. None for framing errors.
    frame_end: int | None = None
    channel: int | None = None

    def __init__(self, detail: str, offset: int | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.offset = offset

    def __str__(self) -> str:
        where = "" if self.offset is None else f" at offset {self.offset}"
        return f"{self.kind}{where}: {self.detail}"


class TruncatedFrame(DecodeError):
    """The input ends before the frame does (more bytes may still arrive)."""

    kind = "truncated"


class BadFrameEnd(DecodeError):
    """The octet after the payload is not the frame-end constant."""

    kind = "bad-frame-end"


class UnknownFrameType(DecodeError):
    kind = "unknown-frame-type"


class OversizeFrame(DecodeError):
    """The frame is larger than the limit in force (negotiated frame-max, or a safety cap)."""

    kind = "oversize-frame"


class UnknownClass(DecodeError):
    kind = "unknown-class"

    def __init__(self, detail: str, offset: int | None = None, class_id: int | None = None) -> None:
        super().__init__(detail, offset)
        self.class_id = class_id


class UnknownMethod(DecodeError):
    kind = "unknown-method"

    def __init__(self, detail: str, offset: int | None = None, class_id: int | None = None,
                 method_id: int | None = None) -> None:
        super().__init__(detail, offset)
        self.class_id = class_id
        self.method_id = method_id


class MalformedPayload(DecodeError):
    """A complete frame whose payload does not hold what the spec says it holds."""

    kind = "malformed-payload"


class UnknownFieldTag(DecodeError):
    """A field-table value tag nobody defines: the table stops there (its length is unknowable)."""

    kind = "unknown-field-tag"

    def __init__(self, detail: str, offset: int | None = None, tag: int | None = None) -> None:
        super().__init__(detail, offset)
        self.tag = tag


class UnknownProperty(DecodeError):
    """A content header sets a property flag its class does not define."""

    kind = "unknown-property"


class TrailingBytes(DecodeError):
    """A payload holds bytes after the last field the spec defines (kept as a warning)."""

    kind = "trailing-bytes"


class SpecError(Exception):
    """A spec file that cannot drive the decoder (bad XML, unknown type, duplicate id...)."""
