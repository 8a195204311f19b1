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

`decode_table` takes (payload, offset, warnings) and returns (table, next offset). `warnings` is a
list that collects non-fatal issues, or None to raise them instead (strict mode). Compiled (with
fieldtable.pxd), the loops read the payload's octets in C: tables sit in every connection.start and
in the headers of many messages.
"""

from __future__ import annotations

import struct
import time
from decimal import Decimal

from amqpcap.protocol.errors import MalformedPayload, UnknownFieldTag

# The compiled build reads integers octet by octet in C; the interpreted one with int.from_bytes.
COMPILED = __file__.endswith((".so", ".pyd"))
TEXT_ERRORS = "backslashreplace"  # invalid UTF-8 stays visible as \xNN instead of failing the frame
# Strings up to this many bytes are held once seen (compiled): names, not message ids or bodies.
HELD_LONGEST = 64
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

# What a tag means, as a small int the loops branch on (compiled: a C switch, no call or dict
# lookup per value). Fixed-width numbers come first, by width: INT8..UINT8 one octet, INT16..UINT16
# two, INT32..FLOAT32 four, INT64..TIMESTAMP eight.
KINDS = ("boolean", "int8", "uint8", "int16", "uint16", "int32", "uint32", "float32", "int64",
         "uint64", "float64", "timestamp", "decimal", "shortstr", "longstr", "bytes", "table", "array",
         "void")
(BOOLEAN, INT8, UINT8, INT16, UINT16, INT32, UINT32, FLOAT32, INT64, UINT64, FLOAT64, TIMESTAMP,
 DECIMAL, SHORTSTR, LONGSTR, BYTES, TABLE, ARRAY, VOID) = range(1, len(KINDS) + 1)
# Decimals decoded lately, by their 5 bytes: making one costs ten times a lookup, and a price or
# a rate repeats (a Decimal is immutable, so one object serves every table that has it)
_DECIMALS: dict = {}
DECIMALS_HELD = 1024
_F32 = struct.Struct(">f").unpack_from
_F64 = struct.Struct(">d").unpack_from


class Overrun(Exception):
    """A fixed-width value or a length runs past the payload (the codec words the error)."""


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


def timestamp(seconds: int) -> Timestamp:
    """The Timestamp of these seconds: the one made last, when it is the same (messages published
    within a second carry the same one)."""
    global _last_timestamp
    if seconds != _last_timestamp:
        _last_timestamp = Timestamp(seconds)
    return _last_timestamp


_last_timestamp = Timestamp(0)


def text(p: bytes, o: int, n: int, hold: bool = True) -> str:
    """p[o:o + n] (cut at the payload's end, as a slice is) as UTF-8, with invalid bytes kept
    visible: every string of a method, a header or a table. Compiled, decoded in place, and a short
    string seen lately is the same str again (fieldtable.pxd): the names, exchanges, routing keys,
    content types and header keys every frame repeats are not decoded, allocated and freed each
    time; never a secret's (`hold` False: FieldTableCodec.decode_entries). (Strict decoding first:
    an errors handler costs more than the rare failure.)"""
    if COMPILED and hold and n <= HELD_LONGEST:
        known = _held_text(p, o, n)  # noqa: F821 (fieldtable.pxd)
        if known is not None:
            return known
    try:
        return p[o:o + n].decode("utf-8")
    except UnicodeDecodeError:
        return p[o:o + n].decode("utf-8", TEXT_ERRORS)


def held(value: str) -> bool:
    """Whether this text is among the strings held (always False interpreted: none are). For tests:
    what a secret decodes to must never be."""
    if not COMPILED:
        return False
    return _is_held(value)  # noqa: F821 (fieldtable.pxd)


def _uint(p: bytes, o: int, width: int) -> int:
    """The big-endian unsigned integer of `width` octets at o (the caller checked they are there)."""
    if not COMPILED:  # one call in Python; a loop of C reads compiled
        return int.from_bytes(p[o:o + width], "big")
    value = 0
    for i in range(width):
        value = (value << 8) | p[o + i]
    return value


def _length(p: bytes, o: int) -> int:
    """The 32-bit length at o (checked as for _uint); compiled, a C integer (no int object made)."""
    if not COMPILED:
        return int.from_bytes(p[o:o + 4], "big")
    value = p[o]
    value = (value << 8) | p[o + 1]
    value = (value << 8) | p[o + 2]
    return (value << 8) | p[o + 3]


def _sint(p: bytes, o: int, width: int) -> int:
    """The big-endian two's complement integer of `width` octets at o (checked as for _uint)."""
    if not COMPILED:
        return int.from_bytes(p[o:o + width], "big", signed=True)
    value = _uint(p, o, width)
    # (constants, not shifts: compiled, a shift by a C int would overflow at 32 and 64 bits)
    if width == 1:
        return value - 0x100 if value > 0x7F else value
    if width == 2:
        return value - 0x10000 if value > 0x7FFF else value
    if width == 4:
        return value - 0x100000000 if value > 0x7FFFFFFF else value
    return value - 0x10000000000000000 if value > 0x7FFFFFFFFFFFFFFF else value


class FieldTableCodec:
    """Decoders for tables and arrays in one dialect."""

    def __init__(self, dialect: str = "rabbitmq") -> None:
        if dialect not in DIALECTS:
            raise ValueError(f"unknown field-table dialect {dialect!r}; choose one of {sorted(DIALECTS)}")
        self.dialect = dialect
        self._depth = 0
        self._next = 0  # where the value _value just decoded ends
        self._hold = True  # whether the strings decoded may be held (text): not a secret's
        kinds = bytearray(256)  # by the tag's byte value; 0: not a tag in this dialect
        for tag, kind in DIALECTS[dialect].items():
            kinds[ord(tag)] = KINDS.index(kind) + 1
        self._kinds = bytes(kinds)

    def decode_table(self, p: bytes, o: int, w: list | None) -> tuple[dict, int]:
        """The table at offset o: (table, offset after it). Tables and arrays nested deeper than
        MAX_DEPTH are malformed (reported, never a crash, interpreted or compiled). A value running
        past the payload raises Overrun."""
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
        size = len(p)
        if o + 4 > size:
            raise Overrun()
        length = _length(p, o)
        start = o
        o += 4
        end = o + length
        if end > size:
            raise MalformedPayload(f"field table of {length} bytes runs past the payload", start)
        kinds = self._kinds
        table: dict = {}
        while o < end:
            n = p[o]
            key = text(p, o + 1, n, self._hold)
            o += 1 + n
            if o >= end:
                raise MalformedPayload(f"field table entry {key!r} has no value", o)
            tag = p[o]
            kind = kinds[tag]
            o += 1
            if kind == LONGSTR:
                if o + 4 > size:
                    raise Overrun()
                n = _length(p, o)
                o += 4
                value = text(p, o, n, self._hold)  # (the most common value: decoded here, not in _value)
                o += n
            elif kind == 0:
                self._unknown_tag(tag, o - 1, f"key {key!r}", w)
                return table, end
            else:
                value = self._value(p, o, kind, w)
                o = self._next
            table.setdefault(key, value)  # "A peer MUST handle duplicate fields by using only the first"
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
        if o + 4 > len(p):
            raise Overrun()
        length = _length(p, o)
        start = o
        o += 4
        end = o + length
        if end > len(p):
            raise MalformedPayload(f"field array of {length} bytes runs past the payload", start)
        kinds = self._kinds
        values: list = []
        while o < end:
            tag = p[o]
            kind = kinds[tag]
            o += 1
            if kind == 0:
                self._unknown_tag(tag, o - 1, f"array item {len(values)}", w)
                return values, end
            values.append(self._value(p, o, kind, w))
            o = self._next
        if o != end:
            raise MalformedPayload(f"field array items overrun its {length}-byte length", start)
        return values, end

    def _value(self, p: bytes, o: int, kind: int, w: list | None):
        """The value of `kind` at o; where it ends is left in self._next (one C call per value,
        compiled: no tuple made)."""
        size = len(p)
        if kind <= TIMESTAMP:
            if kind == BOOLEAN:
                width = 1
            else:  # a fixed-width number
                width = 1 if kind <= UINT8 else 2 if kind <= UINT16 else 4 if kind <= FLOAT32 else 8
            if o + width > size:
                raise Overrun()
            if kind == BOOLEAN:
                value = p[o] != 0
            elif kind == FLOAT32:
                value = _F32(p, o)[0]
            elif kind == FLOAT64:
                value = _F64(p, o)[0]
            elif kind == INT8 or kind == INT16 or kind == INT32 or kind == INT64:
                value = _sint(p, o, width)
            elif kind == TIMESTAMP:
                value = timestamp(_uint(p, o, 8))
            else:
                value = _uint(p, o, width)
            o += width
        elif kind == LONGSTR or kind == BYTES:
            if o + 4 > size:
                raise Overrun()
            n = _length(p, o)
            value = text(p, o + 4, n, self._hold) if kind == LONGSTR else p[o + 4:o + 4 + n]
            o += 4 + n
        elif kind == SHORTSTR:  # (the spec dialect's 's')
            if o >= size:
                raise Overrun()
            n = p[o]
            value = text(p, o + 1, n, self._hold)
            o += 1 + n
        elif kind == TABLE:
            value, o = self._table(p, o, w)
        elif kind == ARRAY:
            value, o = self._array(p, o, w)
        elif kind == DECIMAL:
            # The scale octet is unsigned, the value signed (errata): -1.5 is scale 1, value -15.
            if o + 5 > size:
                raise Overrun()
            raw = _uint(p, o, 5)  # scale and value, as sent
            value = _DECIMALS.get(raw)
            if value is None:
                if len(_DECIMALS) >= DECIMALS_HELD:
                    _DECIMALS.clear()
                value = _DECIMALS[raw] = Decimal(_sint(p, o + 1, 4)).scaleb(-p[o])
            o += 5
        else:  # VOID
            value = None
        self._next = o
        return value

    def decode_entries(self, data: bytes, w: list | None) -> dict:
        """Name-value pairs with no length prefix (the AMQPLAIN SASL response): a password among
        them, so none of their strings is held (text)."""
        self._hold = False
        try:
            return self.decode_table(struct.pack(">I", len(data)) + data, 0, w)[0]
        finally:
            self._hold = True

    def _unknown_tag(self, tag: int, offset: int, where: str, w: list | None) -> None:
        shown = chr(tag) if 32 < tag < 127 else f"0x{tag:02x}"
        issue = UnknownFieldTag(f"unknown field-table tag {shown!r} at {where} in the "
                                f"{self.dialect} dialect; rest of that table skipped", offset, tag)
        if w is None:
            raise issue
        w.append(issue)
