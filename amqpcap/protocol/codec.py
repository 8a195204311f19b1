"""The frame codec: one generic engine, configured entirely by a loaded spec.

    codec = Codec.for_version("0-9-1")
    frame, next_offset = codec.decode_frame(buffer, offset)

decode_frame checks framing in this order: a 7-byte header is there, the frame type is one the
spec defines, the size is within the limit, the whole frame is there, the frame-end octet is right.
Framing errors carry no `frame_end` (the caller must resynchronise or wait for more bytes);
errors inside a well-framed payload carry `frame_end`, where the next frame starts, so one bad
frame costs only itself.
"""

from __future__ import annotations

import struct

from amqpcap.protocol.compiler import MethodDecoder, compile_fields, compile_properties, flag_layout
from amqpcap.protocol.errors import (
    BadFrameEnd,
    DecodeError,
    MalformedPayload,
    OversizeFrame,
    TrailingBytes,
    TruncatedFrame,
    UnknownClass,
    UnknownFrameType,
    UnknownMethod,
    UnknownProperty,
)
from amqpcap.protocol.fields import decode_args, decode_properties, plan, property_plan
from amqpcap.protocol.fieldtable import FieldTableCodec, Overrun
from amqpcap.protocol.frames import (
    ContentHeader,
    Frame,
    MethodFrame,
    OtherFrame,
    body_frame,
    header_frame,
    heartbeat_frame,
    method_frame,
)
from amqpcap.protocol.redact import SECRET_FIELDS, redact
from amqpcap.protocol.spec import Method, Spec, load_spec

FRAME_HEADER_SIZE = 7  # type octet, channel short, size long
_HEADER_SIZE = FRAME_HEADER_SIZE  # (the same as a C value when compiled, for every frame: codec.pxd)
_FRAME_HEADER = struct.Struct(">BHI").unpack_from
_IDS = struct.Struct(">HH").unpack_from
_CONTENT_HEADER = struct.Struct(">HHQH").unpack_from  # class, weight, body size, first flag word
_U16 = struct.Struct(">H").unpack_from

# The frame types decode_frame makes a frame of its own kind for (the rest: OtherFrame), by name
_METHOD, _HEADER, _BODY, _HEARTBEAT, _OTHER = range(1, 6)
_FRAME_KINDS = {"method": _METHOD, "header": _HEADER, "body": _BODY, "heartbeat": _HEARTBEAT}

# A frame can never be larger than this unless the caller says otherwise: without it one corrupt
# size field would make a reader wait for 4 GiB. RabbitMQ's own default frame-max is 128 KiB.
DEFAULT_MAX_PAYLOAD = 16 * 1024 * 1024

# Whether this module is the compiled build (a C pointer reads the buffer: codec.pxd).
IN_C = __file__.endswith((".so", ".pyd"))
# The compiled build decodes arguments with the loops of amqpcap.protocol.fields; the interpreted one
# with compiler.py's generated decoders (faster in Python). Same spec, same results. (Tests switch
# this to compare the two ways in either build.)
COMPILED = IN_C


class Codec:
    def __init__(self, spec: Spec, dialect: str = "rabbitmq") -> None:
        self.spec = spec
        self.tables = FieldTableCodec(dialect)
        self.frame_end = spec.constant("frame-end")
        # Frame types by the spec's own constants: frame-method -> "method", frame-oob-body -> ...
        # (frame-error is a reply code and frame-end/frame-min-size are not types).
        self.frame_types = {c.value: c.name.removeprefix("frame-")
                            for c in spec.constants.values()
                            if c.name.startswith("frame-") and c.error_class is None
                            and c.name not in ("frame-end", "frame-min-size")}
        # What decode_frame does with each type octet (0: not a frame type of this spec), read in C
        kinds = bytearray(256)
        for value, name in self.frame_types.items():
            kinds[value] = _FRAME_KINDS.get(name, _OTHER)
        self._frame_kinds = bytes(kinds)
        self._methods: dict[int, tuple[Method, MethodDecoder, bool, tuple]] = {}
        # The wire ids (class, method: 4 bytes) of the methods whose arguments hold credentials,
        # named in amqpcap.protocol.redact and numbered by this spec: what may never be kept raw.
        self.secret_ids = tuple(sorted(struct.pack(">HH", m.class_id, m.method_id) for m in spec.methods()
                                       if m.full_name in SECRET_FIELDS))
        for method in spec.methods():
            self._methods[method.class_id << 16 | method.method_id] = (
                method, None, method.full_name in SECRET_FIELDS, plan(method.fields, _raw_keys(method)))
        self._properties = {}
        for amqp_class in spec.classes.values():
            if amqp_class.properties:
                self._properties[amqp_class.class_id] = (amqp_class.name, None, *flag_layout(
                    list(amqp_class.properties)), property_plan(amqp_class.properties))
        # Only the interpreted build runs compiler.py's generated decoders: the compiled one makes
        # none (generating them cost ~40 ms per process: each Spark worker, each CLI run), except
        # when a test switches COMPILED off to compare the two ways.
        if not COMPILED:
            for key in self._methods:
                self._generated_method(key)
            for class_id in self._properties:
                self._generated_properties(class_id)

    def _generated_method(self, key: int) -> MethodDecoder:
        method, _, secret, fields = self._methods[key]
        decoder = compile_fields(method.fields, method.full_name, self.tables, raw_keys=_raw_keys(method))
        self._methods[key] = (method, decoder, secret, fields)
        return decoder

    def _generated_properties(self, class_id: int):
        name, _, words, known, plan_ = self._properties[class_id]
        decoder = compile_properties(self.spec.classes[class_id].properties, name, self.tables)[0]
        self._properties[class_id] = (name, decoder, words, known, plan_)
        return decoder

    @classmethod
    def for_version(cls, version: str = "0-9-1", dialect: str = "rabbitmq") -> "Codec":
        return cls(load_spec(version), dialect)

    # -- frames ---------------------------------------------------------------------------------

    def decode_frame(self, buf: bytes, offset: int = 0,
                     max_payload: int = DEFAULT_MAX_PAYLOAD) -> tuple[Frame, int]:
        """Decode the frame starting at `offset`; return it and the offset just after it."""
        if type(buf) is not bytes and type(buf) is not bytearray:
            buf = bytes(buf)
        length = len(buf)
        view = buf  # (compiled: a pointer to its bytes, every read below checked against length first)
        if offset < 0 or offset + _HEADER_SIZE > length:
            raise TruncatedFrame(f"frame header needs {FRAME_HEADER_SIZE} bytes, have "
                                 f"{max(0, length - offset)}", offset)
        frame_type = view[offset]
        channel = (view[offset + 1] << 8) | view[offset + 2]
        size = view[offset + 3]
        size = (size << 24) | (view[offset + 4] << 16) | (view[offset + 5] << 8) | view[offset + 6]
        kind = self._frame_kinds[frame_type]
        start = offset + _HEADER_SIZE
        end = start + size
        if kind == 0 or size > max_payload or end >= length:
            type_name = self.frame_types.get(frame_type)
            if kind == 0:
                raise UnknownFrameType(f"frame type {frame_type} is not defined by AMQP "
                                       f"{self.spec.version}", offset)
            if size > max_payload:
                raise OversizeFrame(f"{type_name} frame payload of {size} bytes exceeds the limit "
                                    f"of {max_payload}", offset)
            raise TruncatedFrame(f"{type_name} frame needs {size + 8} bytes, have "
                                 f"{length - offset}", offset)
        if view[end] != self.frame_end:
            raise BadFrameEnd(f"octet after a {size}-byte {self.frame_types[frame_type]} payload is "
                              f"{view[end]:#04x}, not {self.frame_end:#04x}", end)
        try:
            if kind <= _BODY:
                # (compiled: copied out of the buffer in one step, no slice made)
                payload = _frame_bytes(view, start, size) if IN_C else bytes(buf[start:end])  # noqa: F821
                if kind == _METHOD:
                    frame = self.decode_method(payload, channel)
                elif kind == _HEADER:
                    frame = self.decode_header(payload, channel)
                else:
                    frame = body_frame(channel, payload, size)
            elif kind == _HEARTBEAT:
                frame = heartbeat_frame(channel, size)
                if size or channel:
                    frame.warnings = [MalformedPayload(
                        f"heartbeat on channel {channel} with {size} payload bytes", offset)]
            else:
                frame = OtherFrame(channel, frame_type, self.frame_types[frame_type], size)
        except DecodeError as error:
            if error.offset is not None:
                error.offset += start
            error.frame_end = end + 1
            error.channel = channel
            raise
        return frame, end + 1

    def frame_header(self, buf, offset: int):
        """The frame header at `offset` as (type, channel, payload size), however plausible; None
        while its bytes have not all come. (Readers that look ahead of decoding, to stream a large
        body or judge where framing resumes, read headers here: the codec owns their layout.)"""
        if offset + _HEADER_SIZE > len(buf):
            return None
        return _FRAME_HEADER(buf, offset)

    def may_hold_secret(self, frame_head) -> bool:
        """Could the frame that starts with these bytes (all of it, or the first part of it that
        has come) carry credentials? A method frame whose class and method ids, as far as they
        have come, are those of a method redaction exists for. A frame header alone holds none."""
        if len(frame_head) <= FRAME_HEADER_SIZE or self.frame_types.get(frame_head[0]) != "method":
            return False
        ids = bytes(frame_head[FRAME_HEADER_SIZE:FRAME_HEADER_SIZE + 4])
        return any(secret.startswith(ids) for secret in self.secret_ids)

    # -- payloads -------------------------------------------------------------------------------

    def decode_method(self, payload: bytes, channel: int = 0) -> MethodFrame:
        if len(payload) < 4:
            raise MalformedPayload(f"method payload of {len(payload)} bytes has no class and method id", 0)
        class_id = (payload[0] << 8) | payload[1]
        method_id = (payload[2] << 8) | payload[3]
        entry = self._methods.get(class_id << 16 | method_id)
        if entry is None:
            if class_id not in self.spec.classes:
                raise UnknownClass(f"class {class_id} (method {method_id}) is not in AMQP "
                                   f"{self.spec.version}", 0, class_id)
            raise UnknownMethod(f"method {method_id} of class {self.spec.classes[class_id].name} "
                                f"is not in AMQP {self.spec.version}", 0, class_id, method_id)
        method, decoder, secret, fields = entry
        warnings: list[DecodeError] = []
        try:
            if COMPILED:
                args, end = decode_args(fields, payload, 4, warnings, self.tables)
            else:
                args, end = (decoder or self._generated_method(class_id << 16 | method_id))(payload, 4, warnings)
        except (IndexError, struct.error, Overrun):
            raise _overrun(method.full_name, payload, 4) from None
        if end != len(payload):
            _check_end(method.full_name, payload, end, warnings)
        if secret:
            args = redact(method.full_name, args, self.tables)
        return method_frame(channel, method, args, len(payload), warnings)

    def decode_header(self, payload: bytes, channel: int = 0) -> ContentHeader:
        if len(payload) < 14:
            raise MalformedPayload(f"content header payload of {len(payload)} bytes is shorter "
                                   "than class, weight, body size and flags", 0)
        class_id, weight, body_size, word = _CONTENT_HEADER(payload, 0)
        entry = self._properties.get(class_id)
        if entry is None:
            raise UnknownClass(f"content header for class {class_id}, which has no properties in "
                               f"AMQP {self.spec.version}", 0, class_id)
        class_name, decoder, words, known, plan_ = entry
        flags = [word]
        o = 14
        while word & 1:  # bit 0 set: another flag word follows
            if o + 2 > len(payload):
                raise MalformedPayload("property flag words run past the payload", o)
            word = _U16(payload, o)[0]
            flags.append(word)
            o += 2
        sent = tuple(flags)
        if len(flags) < words:
            flags += [0] * (words - len(flags))
        if len(flags) == 1 and not word & ~known[0] & 0xFFFE:
            unknown = None  # the usual case, checked cheaply
        else:
            unknown = [f & ~k & 0xFFFE for f, k in zip(flags, known + [0] * (len(flags) - len(known)))]
        warnings: list[DecodeError] = []
        try:
            if COMPILED:
                properties, end = decode_properties(plan_, payload, o, warnings, flags, self.tables)
            else:
                properties, end = (decoder or self._generated_properties(class_id))(payload, o, warnings, flags)
        except (IndexError, struct.error, Overrun):
            raise _overrun(f"{class_name} properties", payload, o) from None
        if unknown and any(unknown):
            # Undefined properties come after every defined one; their bytes cannot be decoded.
            warnings.append(UnknownProperty(
                f"{class_name} header sets undefined property flags "
                f"{' '.join([f'{u:#06x}' for u in unknown])}; their values were not decoded", 12))
            if end > len(payload):
                raise _overrun(f"{class_name} properties", payload, o)
        elif end != len(payload):
            _check_end(f"{class_name} properties", payload, end, warnings)
        return header_frame(channel, class_id, class_name, weight, body_size, sent, properties, len(payload),
                            warnings)


def _raw_keys(method: Method) -> frozenset:
    """The method's argument kept as bytes (its secret, which redaction consumes), if any."""
    secret = SECRET_FIELDS.get(method.full_name)
    return frozenset({secret}) if secret else frozenset()


def _overrun(what: str, payload: bytes, offset: int) -> MalformedPayload:
    return MalformedPayload(f"{what}: fields run past the {len(payload)}-byte payload", offset)


def _check_end(what: str, payload: bytes, end: int, warnings: list) -> None:
    """A decoder that stopped short of the payload's end leaves trailing bytes (a warning); one
    that ran past it read bytes it did not have (string slices do not raise, so check here)."""
    if end > len(payload):
        raise MalformedPayload(f"{what}: fields run {end - len(payload)} bytes past the payload",
                               len(payload))
    warnings.append(TrailingBytes(f"{what}: {len(payload) - end} bytes after the last field", end))
