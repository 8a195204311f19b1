"""Method arguments and content properties decoded by one loop over the spec's field types.

The compiled build decodes with these loops (amqpcap.protocol.fields is a hot module: C reads of the
big-endian integers, no call per field); the interpreted build runs the straight-line decoders
compiler.py generates per method from the same spec, which is faster in Python. Both take their
knowledge only from the spec and give the same results, errors included (tests/protocol holds them
equal on every method, every property set, truncations and corruptions).

A plan is a tuple of (type code, key, raw) per field in wire order; key None for a reserved field
(decoded, left out); raw: keep the string's bytes (secrets, redacted by the codec).
"""

from __future__ import annotations

from amqpcap.protocol.errors import MalformedPayload
from amqpcap.protocol.fieldtable import TEXT_ERRORS, Overrun, Timestamp

OCTET, SHORT, LONG, LONGLONG, SHORTSTR, LONGSTR, TABLE, BIT, CONTENT, TIMESTAMP = range(1, 11)
CODES = {"octet": OCTET, "short": SHORT, "long": LONG, "longlong": LONGLONG, "timestamp": TIMESTAMP,
         "shortstr": SHORTSTR, "longstr": LONGSTR, "table": TABLE, "bit": BIT, "content": CONTENT}


def plan(fields, raw_keys=frozenset()) -> tuple:
    return tuple((CODES[f.type], None if f.reserved else f.key, f.key in raw_keys) for f in fields)


def property_plan(properties) -> tuple:
    """(type code, key, flag word, mask) per content property, in flag order."""
    return tuple((CODES[p.type], p.key, k // 15, 1 << (15 - k % 15)) for k, p in enumerate(properties))


def decode_args(fields: tuple, payload: bytes, o: int, warnings, tables) -> tuple[dict, int]:
    """A method's arguments from offset `o`: (arguments, offset after them)."""
    size = len(payload)
    args = {}
    bit = 0  # position in the current octet of packed bits (0: the next bit starts an octet)
    current = 0
    for code, key, raw in fields:
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
                value = Timestamp(_unsigned(payload, o, 8))
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
                value = payload[o:o + n] if raw else _text(payload, o, n)
                o += n
            elif code == TABLE:
                value, o = tables.decode_table(payload, o, warnings)
            else:  # CONTENT (0-9): octet 0 = body follows, 1 = a reference; not kept, only its size
                if o + 5 > size:
                    raise Overrun()
                n = _unsigned(payload, o + 1, 4)
                value = {"kind": "reference" if payload[o] else "inline", "size": n}
                o += 5 + n
        if key is not None:
            args[key] = value
    return args, o


def decode_properties(properties: tuple, payload: bytes, o: int, warnings, flags: list, tables) -> tuple[dict, int]:
    """A content header's properties from offset `o`, those its flag words say are present."""
    size = len(payload)
    result = {}
    for code, key, word, mask in properties:
        flag = flags[word]  # (compiled: a C long, so the tests below are C's)
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
            result[key] = Timestamp(_unsigned(payload, o, 8))
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
            result[key] = _text(payload, o, n)
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


def _text(payload: bytes, o: int, n: int) -> str:
    """UTF-8 (invalid bytes kept visible as \\xNN), cut at the payload's end as a slice would be."""
    try:
        return payload[o:o + n].decode("utf-8")  # (compiled: decoded in place, no slice made)
    except UnicodeDecodeError:
        return payload[o:o + n].decode("utf-8", TEXT_ERRORS)
