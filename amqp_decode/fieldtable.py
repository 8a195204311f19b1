"""Field tables and field arrays: the one protocol table kept by hand, because the XML defines none.

Tags and their meanings follow RabbitMQ's "AMQP 0-9-1 Errata" (section 3, field types) and what
rabbit_binary_parser.erl really parses; `../shared/reference/AMQP.md` section 3.3 has the full
comparison. Two dialects disagree on three tags:

    tag   rabbitmq (default, also Qpid)   spec (the 0-9-1 PDF)
    's'   signed 16-bit                   short string
    'l'   signed 64-bit                   unsigned 64-bit
    'U'   signed 16-bit                   signed 16-bit

An unknown tag stops its table: a value's length cannot be known without its type, so nothing is
guessed. The table's own length still bounds it, so the enclosing table or method goes on.

Every decoder takes (payload, offset, warnings) and returns (value, next offset). `warnings` is a
list that collects non-fatal issues, or None to raise them instead (strict mode).
"""

from __future__ import annotations

import struct
import time
from decimal import Decimal
from typing import Callable

from amqp_decode.errors import MalformedPayload, UnknownFieldTag

TEXT_ERRORS = "backslashreplace"  # invalid UTF-8 stays visible as \xNN instead of failing the frame
# Nesting no real peer sends; deeper is malformed (and would otherwise exhaust the stack). Below
# orjson's limit of 255 levels (--jsonl, the lake's args_json), with room for the record's own
# levels above a table (record > message > properties > headers).
MAX_DEPTH = 200

# tag -> value kind, per dialect
RABBITMQ_TAGS = {
    "t": "boolean", "b": "int8", "B": "uint8", "s": "int16", "u": "uint16", "U": "int16",
    "I": "int32", "i": "uint32", "l": "int64", "L": "int64", "f": "float32", "d": "float64",
    "D": "decimal", "S": "longstr", "x": "bytes", "T": "timestamp", "F": "table", "A": "array",
    "V": "void",
}
SPEC_TAGS = {**RABBITMQ_TAGS, "s": "shortstr", "l": "uint64"}
DIALECTS = {"rabbitmq": RABBITMQ_TAGS, "spec": SPEC_TAGS}

_FIXED = {"int8": ">b", "uint8": ">B", "int16": ">h", "uint16": ">H", "int32": ">i",
          "uint32": ">I", "int64": ">q", "uint64": ">Q", "float32": ">f", "float64": ">d"}
_U32 = struct.Struct(">I").unpack_from
_U64 = struct.Struct(">Q").unpack_from
_DECIMAL = struct.Struct(">Bi").unpack_from

Decoder = Callable[[bytes, int, "list | None"], tuple[object, int]]


class Timestamp(int):
    """An AMQP timestamp (field-table tag 'T', the `timestamp` property): POSIX seconds, UTC, as on
    the wire. An int everywhere (arithmetic, comparisons, JSON: orjson writes it as a number), but
    its type says it is a time, so views can show it as one (`.isoformat()`)."""

    __slots__ = ()

    def isoformat(self) -> str:
        """'2024-05-01T12:00:00Z'; the plain number where no calendar date fits."""
        try:
            return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self))
        except (OverflowError, OSError, ValueError):
            return str(int(self))


def _timestamp(p, o, w):
    return Timestamp(_U64(p, o)[0]), o + 8


def _fixed(fmt: str) -> Decoder:
    unpack = struct.Struct(fmt).unpack_from
    size = struct.calcsize(fmt)

    def decode(p, o, w):
        return unpack(p, o)[0], o + size
    return decode


def _boolean(p, o, w):
    return p[o] != 0, o + 1


def _decimal(p, o, w):
    # The scale octet is unsigned, the value signed (errata): -1.5 is scale 1, value -15.
    scale, value = _DECIMAL(p, o)
    return Decimal(value).scaleb(-scale), o + 5


def text(data: bytes) -> str:
    """UTF-8, with invalid bytes kept visible. (Strict decoding first: passing an errors handler
    costs more than the rare failure.)"""
    try:
        return data.decode()
    except UnicodeDecodeError:
        return data.decode("utf-8", TEXT_ERRORS)


def _shortstr(p, o, w):
    n = p[o]
    return text(p[o + 1:o + 1 + n]), o + 1 + n


def _longstr(p, o, w):
    n = _U32(p, o)[0]
    return text(p[o + 4:o + 4 + n]), o + 4 + n


def _bytes(p, o, w):
    n = _U32(p, o)[0]
    return bytes(p[o + 4:o + 4 + n]), o + 4 + n


def _void(p, o, w):
    return None, o


class FieldTableCodec:
    """Decoders for tables and arrays in one dialect."""

    def __init__(self, dialect: str = "rabbitmq") -> None:
        if dialect not in DIALECTS:
            raise ValueError(f"unknown field-table dialect {dialect!r}; choose one of {sorted(DIALECTS)}")
        self.dialect = dialect
        self._depth = 0
        kinds: dict[str, Decoder] = {
            "boolean": _boolean, "decimal": _decimal, "shortstr": _shortstr, "longstr": _longstr,
            "bytes": _bytes, "void": _void, "table": self._table, "array": self._array,
            "timestamp": _timestamp,
            **{kind: _fixed(fmt) for kind, fmt in _FIXED.items()},
        }
        # Keyed by the tag's byte value, so the hot loop indexes without decoding a character.
        self._decoders: dict[int, Decoder] = {ord(tag): kinds[kind]
                                               for tag, kind in DIALECTS[dialect].items()}
        # Fixed-width numbers are unpacked inline in the loops (no call per value).
        self._fixed = {ord(tag): (struct.Struct(_FIXED[kind]).unpack_from, struct.calcsize(_FIXED[kind]))
                       for tag, kind in DIALECTS[dialect].items() if kind in _FIXED}

    def decode_table(self, p: bytes, o: int, w: list | None) -> tuple[dict, int]:
        """The table at offset o: (table, offset after it). Tables and arrays nested deeper than
        MAX_DEPTH are malformed (reported, never a crash, interpreted or compiled)."""
        self._depth = 0
        try:
            return self._table(p, o, w)
        except RecursionError:  # (interpreted: Python's own limit may come first)
            raise MalformedPayload("field tables/arrays nested deeper than this decoder's recursion "
                                   "limit", o) from None

    def _table(self, p: bytes, o: int, w: list | None) -> tuple[dict, int]:
        self._depth += 1
        try:
            return self._table_at(p, o, w)
        finally:
            self._depth -= 1

    def _table_at(self, p: bytes, o: int, w: list | None) -> tuple[dict, int]:
        if self._depth > MAX_DEPTH:
            raise MalformedPayload(f"field tables/arrays nested deeper than {MAX_DEPTH} levels", o)
        length = _U32(p, o)[0]
        start = o
        o += 4
        end = o + length
        if end > len(p):
            raise MalformedPayload(f"field table of {length} bytes runs past the payload", start)
        decoders, fixed = self._decoders, self._fixed
        table: dict = {}
        while o < end:
            n = p[o]
            try:
                key = p[o + 1:o + 1 + n].decode()
            except UnicodeDecodeError:
                key = p[o + 1:o + 1 + n].decode("utf-8", TEXT_ERRORS)
            o += 1 + n
            if o >= end:
                raise MalformedPayload(f"field table entry {key!r} has no value", o)
            tag = p[o]
            o += 1
            if tag == 83:  # 'S', by far the most common value: inline
                n = _U32(p, o)[0]
                try:
                    value = p[o + 4:o + 4 + n].decode()
                except UnicodeDecodeError:
                    value = p[o + 4:o + 4 + n].decode("utf-8", TEXT_ERRORS)
                o += 4 + n
            elif tag in fixed:
                unpack, size = fixed[tag]
                value = unpack(p, o)[0]
                o += size
            else:
                decoder = decoders.get(tag)
                if decoder is None:
                    self._unknown_tag(tag, o - 1, f"key {key!r}", w)
                    return table, end
                value, o = decoder(p, o, w)
            if key not in table:  # "A peer MUST handle duplicate fields by using only the first"
                table[key] = value
        if o != end:
            raise MalformedPayload(f"field table entries overrun its {length}-byte length", start)
        return table, end

    def _array(self, p: bytes, o: int, w: list | None) -> tuple[list, int]:
        self._depth += 1
        try:
            return self._array_at(p, o, w)
        finally:
            self._depth -= 1

    def _array_at(self, p: bytes, o: int, w: list | None) -> tuple[list, int]:
        if self._depth > MAX_DEPTH:
            raise MalformedPayload(f"field tables/arrays nested deeper than {MAX_DEPTH} levels", o)
        length = _U32(p, o)[0]
        start = o
        o += 4
        end = o + length
        if end > len(p):
            raise MalformedPayload(f"field array of {length} bytes runs past the payload", start)
        decoders, fixed = self._decoders, self._fixed
        values: list = []
        while o < end:
            tag = p[o]
            o += 1
            if tag in fixed:
                unpack, size = fixed[tag]
                values.append(unpack(p, o)[0])
                o += size
                continue
            decoder = decoders.get(tag)
            if decoder is None:
                self._unknown_tag(tag, o - 1, f"array item {len(values)}", w)
                return values, end
            value, o = decoder(p, o, w)
            values.append(value)
        if o != end:
            raise MalformedPayload(f"field array items overrun its {length}-byte length", start)
        return values, end

    def decode_entries(self, data: bytes, w: list | None) -> dict:
        """Name-value pairs with no length prefix (the AMQPLAIN SASL response)."""
        return self.decode_table(struct.pack(">I", len(data)) + data, 0, w)[0]

    def _unknown_tag(self, tag: int, offset: int, where: str, w: list | None) -> None:
        shown = chr(tag) if 32 < tag < 127 else f"0x{tag:02x}"
        issue = UnknownFieldTag(f"unknown field-table tag {shown!r} at {where} in the "
                                f"{self.dialect} dialect; rest of that table skipped", offset, tag)
        if w is None:
            raise issue
        w.append(issue)
