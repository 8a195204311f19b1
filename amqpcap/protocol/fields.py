"""Method arguments and content properties decoded by one loop over the spec's field types.

The compiled build decodes with these loops (amqpcap.protocol.fields is a hot module: C reads of the
big-endian integers, no call per field); the interpreted build runs the straight-line decoders
compiler.py generates per method from the same spec, which is faster in Python. Both take their
knowledge only from the spec and give the same results, errors included (tests/protocol holds them
equal on every method, every property set, truncations and corruptions).

A plan is a method's fields (or a class's properties) in wire order, as parallel columns: their
type codes and, for arguments, whether a string stays bytes, each one octet in a bytes object (read
in C, compiled), and their keys in a tuple (None for a reserved field: decoded, left out). Raw
strings are the secrets the codec redacts. Property k is flag word k // 15, bit 15 - k % 15.
"""

from __future__ import annotations

from amqpcap.protocol.errors import MalformedPayload
from amqpcap.protocol.fieldtable import Overrun, text, timestamp

COMPILED = __file__.endswith((".so", ".pyd"))  # (compiled: fields.pxd's C helpers)
OCTET, SHORT, LONG, LONGLONG, SHORTSTR, LONGSTR, TABLE, BIT, CONTENT, TIMESTAMP = range(1, 11)
CODES = {"octet": OCTET, "short": SHORT, "long": LONG, "longlong": LONGLONG, "timestamp": TIMESTAMP,
         "shortstr": SHORTSTR, "longstr": LONGSTR, "table": TABLE, "bit": BIT, "content": CONTENT}


def plan(fields, raw_keys=frozenset()) -> tuple:
    """(type codes, keys, raw flags) of a method's fields."""
    return (bytes(CODES[f.type] for f in fields), tuple(None if f.reserved else f.key for f in fields),
            bytes(f.key in raw_keys for f in fields))


def property_plan(properties) -> tuple:
    """(type codes, keys) of a class's content properties, in flag order."""
    return bytes(CODES[p.type] for p in properties), tuple(p.key for p in properties)


def decode_args(fields: tuple, payload: bytes, o: int, warnings, tables) -> tuple[dict, int]:
    """A method's arguments from offset `o`: (arguments, offset after them)."""
    size = len(payload)
    codes, keys, raws = fields
    args = {}
    bit = 0  # position in the current octet of packed bits (0: the next bit starts an octet)
    current = 0
    for i in range(len(codes)):
        code = codes[i]
        if code == BIT:
            if bit == 0:
                if o >= size:
                    raise Overrun()
                current = payload[o]
                o += 1
            value = (current >> bit) & 1 != 0
            bit = (bit + 1) & 7
        else:
            bit = 0
            if code <= LONGLONG:
                width = _width(code)
                if o + width > size:
                    raise Overrun()
                value = _unsigned(payload, o, width)
                o += width
            elif code == TIMESTAMP:
                if o + 8 > size:
                    raise Overrun()
                value = timestamp(_unsigned(payload, o, 8))
                o += 8
            elif code == SHORTSTR or code == LONGSTR:
                if code == SHORTSTR:
                    if o >= size:
                        raise Overrun()
                    n = payload[o]
                    o += 1
                else:
                    if o + 4 > size:
                        raise Overrun()
                    n = _unsigned(payload, o, 4)
                    o += 4
                value = payload[o:o + n] if raws[i] else text(payload, o, n)
                o += n
            elif code == TABLE:
                value, o = tables.decode_table(payload, o, warnings)
            else:  # CONTENT (0-9): octet 0 = body follows, 1 = a reference; not kept, only its size
                if o + 5 > size:
                    raise Overrun()
                n = _unsigned(payload, o + 1, 4)
                value = {"kind": "reference" if payload[o] else "inline", "size": n}
                o += 5 + n
        key = keys[i]
        if key is not None:
            args[key] = value
    return args, o


def decode_properties(properties: tuple, payload: bytes, o: int, warnings, flags: list, tables) -> tuple[dict, int]:
    """A content header's properties from offset `o`, those its flag words say are present."""
    size = len(payload)
    codes, keys = properties
    # (compiled: made for as many entries as the first flag word sets, so it never grows)
    result = _presized(_present(flags[0])) if COMPILED else {}  # noqa: F821 (fields.pxd)
    for k in range(len(codes)):
        code = codes[k]
        key = keys[k]
        flag = flags[k // 15]  # (compiled: a C long, so the tests below are C's)
        mask = 1 << (15 - k % 15)
        if code == BIT:
            result[key] = flag & mask != 0
            continue
        if not flag & mask:
            continue
        if code <= LONGLONG:
            width = _width(code)
            if o + width > size:
                raise Overrun()
            result[key] = _unsigned(payload, o, width)
            o += width
        elif code == TIMESTAMP:
            if o + 8 > size:
                raise Overrun()
            result[key] = timestamp(_unsigned(payload, o, 8))
            o += 8
        elif code == SHORTSTR or code == LONGSTR:
            if code == SHORTSTR:
                if o >= size:
                    raise Overrun()
                n = payload[o]
                o += 1
            else:
                if o + 4 > size:
                    raise Overrun()
                n = _unsigned(payload, o, 4)
                o += 4
            result[key] = text(payload, o, n)
            o += n
        elif code == TABLE:
            result[key], o = tables.decode_table(payload, o, warnings)
        else:
            raise MalformedPayload(f"property {key} has a type a content header cannot carry", o)
    return result, o


def _width(code: int) -> int:
    return 1 if code == OCTET else 2 if code == SHORT else 4 if code == LONG else 8


def _unsigned(payload: bytes, o: int, width: int) -> int:
    value = 0
    for i in range(width):
        value = (value << 8) | payload[o + i]
    return value

