"""Field tables: one golden value per tag in both dialects, nesting, duplicates, unknown tags."""

from __future__ import annotations

import struct
from decimal import Decimal

import pytest

from amqpcap.protocol.errors import MalformedPayload, UnknownFieldTag
from amqpcap.protocol.fieldtable import MAX_DEPTH, FieldTableCodec, Timestamp

RABBITMQ = FieldTableCodec("rabbitmq")
SPEC = FieldTableCodec("spec")

# tag, value bytes (hex), value in RabbitMQ's dialect, value in the 0-9-1 spec's dialect
TAGS = [
    ("t", "01", True, True),
    ("t", "00", False, False),
    ("b", "ff", -1, -1),
    ("B", "ff", 255, 255),
    ("s", "fffe", -2, None),  # spec dialect: a short string; see test_spec_dialect_short_string
    ("u", "fffe", 65534, 65534),
    ("U", "fffe", -2, -2),
    ("I", "fffffffe", -2, -2),
    ("i", "fffffffe", 4294967294, 4294967294),
    ("l", "fffffffffffffffe", -2, 2**64 - 2),
    ("L", "fffffffffffffffe", -2, -2),
    ("f", "3fc00000", 1.5, 1.5),
    ("d", "bff8000000000000", -1.5, -1.5),
    ("D", "02fffff9c7", Decimal("-15.93"), Decimal("-15.93")),  # decimals are signed
    ("D", "000000002a", Decimal("42"), Decimal("42")),
    ("S", "00000005" + "68c3a96c6c", "héll", "héll"),
    ("S", "00000002" + "ff41", "\\xffA", "\\xffA"),  # invalid UTF-8 stays visible, never fails
    ("x", "00000003000102", b"\x00\x01\x02", b"\x00\x01\x02"),
    ("T", "000000006553f100", Timestamp(1700000000), Timestamp(1700000000)),  # typed: test_timestamps
    ("V", "", None, None),
    ("F", "00000007" + "0161" + "49" + "00000005", {"a": 5}, {"a": 5}),
    ("A", "00000009" + "6201" + "53" + "00000002" + "6f6b", [1, "ok"], [1, "ok"]),
]


def table(tag: str, value_hex: str, key: bytes = b"k") -> bytes:
    entry = bytes([len(key)]) + key + tag.encode() + bytes.fromhex(value_hex)
    return struct.pack(">I", len(entry)) + entry


@pytest.mark.parametrize("tag, value_hex, rabbitmq, spec", TAGS, ids=[f"{t[0]}={t[1] or '-'}" for t in TAGS])
def test_every_tag(tag, value_hex, rabbitmq, spec):
    data = table(tag, value_hex)
    value, end = RABBITMQ.decode_table(data, 0, None)
    assert value == {"k": rabbitmq} and end == len(data)
    assert type(value["k"]) is type(rabbitmq)
    if spec is not None:
        assert SPEC.decode_table(data, 0, None) == ({"k": spec}, len(data))


# Each width's edges, signed and unsigned (the compiled build reads integers in C, where a shift by
# 32 or 64 bits overflows: two's complement must still come out right at every width).
EXTREMES = [
    ("b", "80", -128), ("b", "7f", 127), ("B", "ff", 255), ("s", "8000", -32768), ("s", "7fff", 32767),
    ("u", "ffff", 65535), ("U", "8000", -32768), ("I", "80000000", -2**31), ("I", "7fffffff", 2**31 - 1),
    ("i", "ffffffff", 2**32 - 1), ("l", "8000000000000000", -2**63), ("l", "7fffffffffffffff", 2**63 - 1),
    ("L", "ffffffffffffffff", -1), ("T", "ffffffffffffffff", 2**64 - 1),
    ("D", "0080000000", Decimal(-2**31)), ("D", "ff7fffffff", Decimal(2**31 - 1).scaleb(-255)),
]


@pytest.mark.parametrize("tag, value_hex, value", EXTREMES, ids=[f"{t}={h}" for t, h, _ in EXTREMES])
def test_integers_at_the_edges_of_every_width(tag, value_hex, value):
    data = table(tag, value_hex)
    assert RABBITMQ.decode_table(data, 0, None) == ({"k": value}, len(data))
    array = table("A", (struct.pack(">I", 1 + len(value_hex) // 2) + tag.encode() + bytes.fromhex(value_hex)).hex())
    assert RABBITMQ.decode_table(array, 0, None)[0] == {"k": [value]}
    if tag == "l":  # the spec dialect's 'l' is unsigned
        assert SPEC.decode_table(data, 0, None)[0] == {"k": int(value_hex, 16)}


def test_timestamps_are_typed_ints_shown_as_utc_times():
    """Tag T keeps its type: an int (arithmetic, comparisons, JSON as the wire's seconds) whose
    type says it is a time; arrays too."""
    import orjson
    data = table("A", "00000012" + "54" + "000000006553f100" + "6c" + "000000006553f100")
    values = RABBITMQ.decode_table(data, 0, None)[0]["k"]
    assert [type(v) for v in values] == [Timestamp, int] and values[0] == values[1] == 1700000000
    assert values[0].isoformat() == "2023-11-14T22:13:20Z" and values[0] + 1 == 1700000001
    assert orjson.dumps({"t": values[0]}) == b'{"t":1700000000}'
    assert str(values[0]) == "1700000000"
    assert Timestamp(2**64 - 1).isoformat() == str(2**64 - 1)  # beyond any calendar: the number


def test_spec_dialect_short_string():
    data = table("s", "03616263")
    assert SPEC.decode_table(data, 0, None) == ({"k": "abc"}, len(data))


def test_nested_tables_and_arrays_to_depth():
    inner = table("S", "00000003" + "656e64")
    wrappers = 132  # 199 levels: the innermost table, 66 tables, 66 arrays each holding a table
    for depth in range(wrappers):
        inner = table("F", inner.hex()) if depth % 2 else table("A", (struct.pack(">I", len(inner) + 1) + b"F" + inner).hex())
    value, _ = RABBITMQ.decode_table(inner, 0, None)
    value_at_top = value
    for depth in reversed(range(wrappers)):
        value = value["k"] if depth % 2 else value["k"][0]
    assert value == {"k": "end"}
    assert RABBITMQ.decode_table(table("F", inner.hex()), 0, None)[0]["k"] == value_at_top
    with pytest.raises(MalformedPayload, match=f"nested deeper than {MAX_DEPTH} levels"):
        RABBITMQ.decode_table(table("F", table("F", inner.hex()).hex()), 0, None)


def test_absurd_nesting_is_an_error_not_a_crash():
    inner = table("V", "")
    for _ in range(5000):
        inner = table("F", inner.hex())
    with pytest.raises(MalformedPayload, match="nested"):
        RABBITMQ.decode_table(inner, 0, None)


def test_first_duplicate_wins():
    entries = b"\x01aI\x00\x00\x00\x01" + b"\x01aI\x00\x00\x00\x02" + b"\x01bt\x01"
    data = struct.pack(">I", len(entries)) + entries
    assert RABBITMQ.decode_table(data, 0, None)[0] == {"a": 1, "b": True}


def test_unknown_tag_stops_that_table_only():
    # {"x": {"a": 1, "q": <tag 'Q'> ...}, "y": 2}: the nested table stops at Q, the outer goes on
    nested = b"\x01aI\x00\x00\x00\x01" + b"\x01qQ\x00\x00"
    entries = (b"\x01xF" + struct.pack(">I", len(nested)) + nested) + b"\x01yI\x00\x00\x00\x02"
    data = struct.pack(">I", len(entries)) + entries
    warnings: list = []
    value, end = RABBITMQ.decode_table(data, 0, warnings)
    assert value == {"x": {"a": 1}, "y": 2} and end == len(data)
    assert [(w.kind, w.tag, w.offset) for w in warnings] == [("unknown-field-tag", ord("Q"), 20)]


def test_unknown_tag_raises_in_strict_mode():
    with pytest.raises(UnknownFieldTag) as caught:
        RABBITMQ.decode_table(table("Z", "00"), 0, None)
    assert caught.value.tag == ord("Z")


def test_unknown_tag_in_array_keeps_earlier_items():
    items = b"b\x05" + b"?"
    data = table("A", (struct.pack(">I", len(items)) + items).hex())
    warnings: list = []
    assert RABBITMQ.decode_table(data, 0, warnings)[0] == {"k": [5]}
    assert [w.kind for w in warnings] == ["unknown-field-tag"]


@pytest.mark.parametrize("data, match", [
    (struct.pack(">I", 50) + b"\x01kt\x01", "runs past the payload"),
    (struct.pack(">I", 2) + b"\x01kt\x01", "no value"),
    (struct.pack(">I", 4) + b"\x01kI\x00\x00\x00\x01", "overrun"),
])
def test_malformed_tables(data, match):
    with pytest.raises(MalformedPayload, match=match):
        RABBITMQ.decode_table(data, 0, [])


def test_unknown_dialect_is_refused():
    with pytest.raises(ValueError, match="dialect"):
        FieldTableCodec("qpid-0-10")
